"""Observers: what calibration data says about a tensor's range, and the quantization
parameters that range gives (PyTorch's names: `MinMaxObserver`, `PerChannelMinMaxObserver`,
`HistogramObserver`).

Activations are quantized per tensor, affine, to uint8: the range ``[lo, hi]`` is widened to
hold 0 (so 0.0, a ReLU's output and a convolution's padding, is exact), ``scale = (hi - lo) /
255`` and ``zero_point = rint(-lo / scale)``. Weights are quantized symmetrically to int8 in
``[-127, 127]`` (zero point 0, ``scale = max|w| / 127``), per output channel or per tensor.

How the range is chosen (`HistogramObserver`'s ``method``):

* ``"minmax"``: the smallest and largest value seen;
* ``"percentile"``: the ``percentile``-th and ``(100 - percentile)``-th percentiles of the
  values seen (default 99.99), read from a 2048-bin histogram, so rare outliers do not stretch
  the step of every other value;
* ``"entropy"``: TensorRT's calibration: the upper bound whose clipped, 255-level quantized
  histogram is closest to the observed one in Kullback-Leibler divergence (the lower bound
  stays at the smallest value seen: for ReLU outputs, 0). Exact zeros are left out of its
  histogram: 0 is always exact, and a ReLU's spike of zeros would otherwise dominate the
  divergence and clip far too much.

Calibration data must be finite: a NaN or infinity raises `QuantizationError` naming the
observer, and an observer that saw nothing cannot give parameters.
"""

from __future__ import annotations

import numpy as np

from ..errors import QuantizationError

__all__ = [
    "HistogramObserver",
    "MinMaxObserver",
    "PerChannelMinMaxObserver",
    "METHODS",
    "affine_params",
    "make_observer",
    "symmetric_scales",
]

METHODS = ("minmax", "percentile", "entropy")
_EPS = float(np.finfo(np.float32).eps)
_QMAX_W = 127


def affine_params(lo: float, hi: float, qmin: int = 0, qmax: int = 255) -> tuple[float, int]:
    """(scale, zero_point) mapping ``[min(lo, 0), max(hi, 0)]`` onto ``[qmin, qmax]``."""
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    scale = max((hi - lo) / (qmax - qmin), _EPS)
    zero_point = int(np.clip(qmin + np.rint(-lo / scale), qmin, qmax))
    return float(np.float32(scale)), zero_point


def symmetric_scales(w: np.ndarray, per_channel: bool) -> np.ndarray:
    """float32 scales ``max|w| / 127`` per output channel (axis 0) or, repeated, per tensor."""
    flat = np.abs(w.reshape(w.shape[0], -1).astype(np.float64))
    amax = flat.max(axis=1) if per_channel else np.full(w.shape[0], flat.max(initial=0.0))
    return np.maximum(amax / _QMAX_W, _EPS).astype(np.float32)


def _finite(name: str, x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    if x.size and not np.isfinite(x).all():
        raise QuantizationError(
            "calibration data holds NaN or infinite values (quantization ranges must be "
            "finite); clean the data or leave those batches out",
            op=name,
        )
    return x


class MinMaxObserver:
    """The running minimum and maximum of the values seen."""

    def __init__(self) -> None:
        self.min = np.inf
        self.max = -np.inf
        self.count = 0

    def __call__(self, x) -> None:
        x = _finite(type(self).__name__, x)
        if x.size:
            self.min = min(self.min, float(x.min()))
            self.max = max(self.max, float(x.max()))
            self.count += x.size

    def _require(self) -> None:
        if not self.count:
            raise QuantizationError(
                "no calibration values were observed (an empty calibration set, or a layer "
                "the data never reaches)",
                op=type(self).__name__,
            )

    def bounds(self) -> tuple[float, float]:
        self._require()
        return self.min, self.max

    def calculate_qparams(self) -> tuple[float, int]:
        """(scale, zero_point) for uint8."""
        return affine_params(*self.bounds())


class PerChannelMinMaxObserver:
    """Minimum and maximum per channel (``ch_axis``), for per-channel parameters."""

    def __init__(self, ch_axis: int = 0) -> None:
        self.ch_axis = ch_axis
        self.min = None
        self.max = None

    def __call__(self, x) -> None:
        x = _finite(type(self).__name__, x)
        moved = np.moveaxis(x, self.ch_axis, 0).reshape(x.shape[self.ch_axis], -1)
        if moved.shape[1] == 0:
            return
        lo, hi = moved.min(axis=1), moved.max(axis=1)
        self.min = lo if self.min is None else np.minimum(self.min, lo)
        self.max = hi if self.max is None else np.maximum(self.max, hi)

    def calculate_qparams(self) -> tuple[np.ndarray, np.ndarray]:
        """(scales, zero_points) per channel, uint8 affine."""
        if self.min is None:
            raise QuantizationError("no calibration values were observed", op="observer")
        pairs = [affine_params(lo, hi) for lo, hi in zip(self.min, self.max)]
        return (np.array([p[0] for p in pairs], np.float32),
                np.array([p[1] for p in pairs], np.int64))  # fmt: skip


class HistogramObserver(MinMaxObserver):
    """A histogram of the values seen (``bins`` bins over the range seen so far; a batch that
    widens the range re-bins what came before), read by ``method``: see the module."""

    def __init__(self, method: str = "percentile", bins: int = 2048,
                 percentile: float = 99.99) -> None:  # fmt: skip
        super().__init__()
        if method not in METHODS:
            raise QuantizationError(
                f"unknown calibration method {method!r}; expected one of {METHODS}",
                op="HistogramObserver",
            )
        self.method = method
        self.bins = int(bins)
        self.percentile = float(percentile)
        self.hist = np.zeros(self.bins)
        self.lo = self.hi = 0.0

    def __call__(self, x) -> None:
        x = _finite(type(self).__name__, x)
        if not x.size:
            return
        super().__call__(x)
        lo, hi = self.min, self.max
        if hi <= lo:
            hi = lo + 1e-12
        if (lo, hi) != (self.lo, self.hi):
            if self.hist.sum():  # move the old counts to the new range, at their bin centres
                width = (self.hi - self.lo) / self.bins
                centres = self.lo + (np.arange(self.bins) + 0.5) * width
                self.hist = np.histogram(centres, self.bins, (lo, hi), weights=self.hist)[0]
            self.lo, self.hi = lo, hi
        values = x.astype(np.float64).ravel()
        if self.method == "entropy":
            # exact zeros (a ReLU's output is mostly zeros) quantize exactly whatever the
            # range: left in, their spike dominates the divergence and clips too much
            values = values[values != 0]
        self.hist += np.histogram(values, self.bins, (lo, hi))[0]

    def bounds(self) -> tuple[float, float]:
        self._require()
        if self.method == "minmax":
            return self.min, self.max
        edges = np.linspace(self.lo, self.hi, self.bins + 1)
        if not self.hist.sum():  # (entropy: nothing but zeros seen)
            return self.min, self.max
        if self.method == "percentile":
            cdf = np.cumsum(self.hist) / self.hist.sum()
            tail = (100.0 - self.percentile) / 100.0
            lo_bin = int(np.searchsorted(cdf, tail, side="right"))
            hi_bin = int(np.searchsorted(cdf, 1.0 - tail, side="left"))
            lo = max(self.min, float(edges[lo_bin])) if lo_bin > 0 else self.min
            hi = min(self.max, float(edges[hi_bin + 1]))
            return lo, max(hi, lo)
        return self.min, float(edges[_entropy_bin(self.hist)])


def _entropy_bin(hist: np.ndarray, levels: int = 255) -> int:
    """The bin count ``i`` whose clipped histogram (``hist[:i]``, the rest added to its last
    bin), quantized to ``levels`` levels, has the least KL divergence from itself unquantized
    (TensorRT's entropy calibration)."""
    n = hist.size
    if n <= levels:
        return n
    best, best_i = np.inf, n
    total = hist.sum()
    for i in range(levels, n + 1, max(1, (n - levels) // 256)):
        p = hist[:i].copy()
        p[-1] += hist[i:].sum()
        # Q: the first i bins merged into `levels` groups, each group's count spread evenly
        # over the group's non-empty bins
        groups = np.minimum((np.arange(i) * levels) // i, levels - 1)
        nonzero = (hist[:i] > 0).astype(np.float64)
        sums = np.bincount(groups, weights=hist[:i], minlength=levels)
        counts = np.bincount(groups, weights=nonzero, minlength=levels)
        q = np.where(nonzero > 0, sums[groups] / np.maximum(counts[groups], 1), 0.0)
        p, q = p / total, q / max(q.sum(), 1e-300)
        mask = p > 0
        kl = float(np.sum(p[mask] * np.log(p[mask] / np.maximum(q[mask], 1e-12))))
        if kl < best:
            best, best_i = kl, i
    return best_i


def make_observer(method: str):
    """The activation observer for a calibration method."""
    if method not in METHODS:
        raise QuantizationError(
            f"unknown calibration method {method!r}; expected one of {METHODS}", op="quantize"
        )
    return MinMaxObserver() if method == "minmax" else HistogramObserver(method)
