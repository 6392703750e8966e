"""PyTorch's observers (``torch.ao.quantization.observer``) with its arithmetic, in NumPy float32
as its float32 tensors compute: `MinMaxObserver`, `PerChannelMinMaxObserver` and
`HistogramObserver` (its 2048-bin histogram, merged across batches by upsampling the old one
into the widened range, and the L2 search for the range to keep), each a Module that records
what passes through it and gives ``calculate_qparams()``. ``with_args`` makes the factories a
`QConfig` holds. (ember's own calibration observers, with other methods, are
ember.quantization.observers.)"""

from __future__ import annotations

import functools

import numpy as np

from .. import dtypes as dt
from ..errors import QuantizationError
from ..nn import Module
from ..ops import qtensor as Q

_F = np.float32
_EPS = np.finfo(np.float32).eps
_RANGES = {"quint8": (0, 255), "qint8": (-128, 127), "qint32": (-(2**31), 2**31 - 1)}


def _array(x) -> np.ndarray:
    return np.asarray(x.detach().numpy() if hasattr(x, "detach") else x, _F)


class _Observer(Module):
    def __init__(self, dtype=dt.quint8, qscheme=None, reduce_range=False, quant_min=None,
                 quant_max=None, eps=_EPS, ch_axis=0):  # fmt: skip
        super().__init__()
        self.dtype = dtype
        self.qscheme = qscheme if qscheme is not None else Q.QSCHEMES["per_tensor_affine"]
        self.reduce_range = bool(reduce_range)
        self.eps = _F(eps)
        self.ch_axis = ch_axis
        name = getattr(dtype, "name", str(dtype))
        if name not in _RANGES:
            raise QuantizationError(f"observers take quint8, qint8 or qint32, got {dtype}")
        if quant_min is not None and quant_max is not None:
            self.quant_min, self.quant_max, self._custom = int(quant_min), int(quant_max), True
        else:
            lo, hi = _RANGES[name]
            if self.reduce_range and name in ("quint8", "qint8"):
                lo, hi = lo // 2, hi // 2  # ([0, 127], [-64, 63])
            self.quant_min, self.quant_max, self._custom = lo, hi, False

    @classmethod
    def with_args(cls, **kwargs):
        return functools.partial(cls, **kwargs)

    def _symmetric(self) -> bool:
        return self.qscheme.name in ("per_tensor_symmetric", "per_channel_symmetric")

    def _calculate_qparams(self, lo: np.ndarray, hi: np.ndarray):
        """UniformQuantizationObserverBase._calculate_qparams: (scale float32, zero_point int64)."""
        lo_neg = np.minimum(lo, _F(0))
        hi_pos = np.maximum(hi, _F(0))
        span = _F(self.quant_max - self.quant_min)
        if self._symmetric():
            hi_pos = np.maximum(-lo_neg, hi_pos)
            scale = np.maximum(hi_pos / _F(span / 2), self.eps)
            zp = (self.quant_min + self.quant_max) // 2 if self._custom else 128
            zero = np.full(scale.shape, zp if self.dtype.name == "quint8" else 0, np.int64)
            return scale.astype(_F), zero
        scale = np.maximum((hi_pos - lo_neg) / span, self.eps).astype(_F)
        zero = self.quant_min - np.rint(lo_neg / scale).astype(np.int64)
        return scale, np.clip(zero, self.quant_min, self.quant_max)


class MinMaxObserver(_Observer):
    """PyTorch's MinMaxObserver: the running min and max of every tensor seen."""

    def __init__(self, dtype=dt.quint8, qscheme=None, reduce_range=False, quant_min=None,
                 quant_max=None, eps=_EPS, **kwargs):  # fmt: skip
        super().__init__(dtype, qscheme, reduce_range, quant_min, quant_max, eps)
        self.min_val, self.max_val = _F(np.inf), _F(-np.inf)

    def forward(self, x):
        a = _array(x)
        if a.size:
            self.min_val = min(self.min_val, a.min())
            self.max_val = max(self.max_val, a.max())
        return x

    def calculate_qparams(self):
        scale, zero = self._calculate_qparams(np.asarray(self.min_val), np.asarray(self.max_val))
        return scale.reshape(1), zero.reshape(1)


class PerChannelMinMaxObserver(_Observer):
    """PyTorch's PerChannelMinMaxObserver: the running min and max along ``ch_axis``."""

    def __init__(self, ch_axis=0, dtype=dt.quint8, qscheme=None, reduce_range=False,
                 quant_min=None, quant_max=None, eps=_EPS, **kwargs):  # fmt: skip
        qscheme = qscheme if qscheme is not None else Q.QSCHEMES["per_channel_affine"]
        super().__init__(dtype, qscheme, reduce_range, quant_min, quant_max, eps, ch_axis)
        self.min_val = self.max_val = None

    def forward(self, x):
        a = np.moveaxis(_array(x), self.ch_axis, 0).reshape(_array(x).shape[self.ch_axis], -1)
        lo, hi = a.min(axis=1), a.max(axis=1)
        if self.min_val is not None:
            lo, hi = np.minimum(lo, self.min_val), np.maximum(hi, self.max_val)
        self.min_val, self.max_val = lo, hi
        return x

    def calculate_qparams(self):
        return self._calculate_qparams(self.min_val, self.max_val)


def _histc(x: np.ndarray, bins: int, lo, hi) -> np.ndarray:
    """torch.histc over float32 ``x`` in [lo, hi]: bin ``int((v - lo) * bins / (hi - lo))`` in
    float32, the top edge in the last bin, values outside left out."""
    lo, hi = _F(lo), _F(hi)
    if lo == hi:  # (torch.histc widens an empty range by one on each side)
        lo, hi = _F(lo - 1), _F(hi + 1)
    v = x[(x >= lo) & (x <= hi)]
    with np.errstate(all="ignore"):
        pos = ((v - lo) * _F(bins) / (hi - lo)).astype(np.int64)
    pos[pos == bins] = bins - 1
    return np.bincount(pos, minlength=bins).astype(_F)


class HistogramObserver(MinMaxObserver):
    """PyTorch's HistogramObserver (bins=2048, upsample_rate=16): a histogram of the values
    seen; ``calculate_qparams`` keeps the range whose quantization error (in L2, over the
    histogram) stops decreasing as it narrows (`_non_linear_param_search`)."""

    def __init__(self, bins=2048, dtype=dt.quint8, qscheme=None, reduce_range=False,
                 quant_min=None, quant_max=None, eps=_EPS, **kwargs):  # fmt: skip
        super().__init__(dtype, qscheme, reduce_range, quant_min, quant_max, eps)
        self.bins, self.upsample_rate = int(bins), 16
        self.dst_nbins = 256  # (PyTorch's: 2 ** 8 for 8-bit dtypes, reduce_range or not)
        self.histogram = np.zeros(self.bins, _F)

    def forward(self, x):
        a = _array(x)
        a = a[np.abs(a) != np.inf]
        if not a.size:
            return x
        lo, hi = _F(a.min()), _F(a.max())
        if self.min_val == np.inf or self.max_val == -np.inf:
            self.min_val, self.max_val = lo, hi
            self.histogram = _histc(a, self.bins, lo, hi)
            return x
        new_lo, new_hi = min(self.min_val, lo), max(self.max_val, hi)
        update = _histc(a, self.bins, new_lo, new_hi)
        if new_lo == self.min_val and new_hi == self.max_val:
            self.histogram = self.histogram + update
        elif self.min_val == self.max_val:
            self.histogram = _histc(np.asarray([self.min_val], _F), self.bins, new_lo, new_hi) * \
                self.histogram.sum(dtype=_F) + update  # fmt: skip
            self.min_val, self.max_val = new_lo, new_hi
        else:
            self.histogram = update + self._upscale(new_lo, new_hi)
            self.min_val, self.max_val = new_lo, new_hi
        return x

    def _upscale(self, new_lo, new_hi) -> np.ndarray:
        rate, bins = self.upsample_rate, self.bins
        hist = np.repeat(self.histogram, rate) / _F(rate)
        size = (self.max_val - self.min_val) / _F(bins * rate)
        mids = _linspace(self.min_val, self.max_val, bins * rate + 1)[:-1] + _F(0.5) * size
        edges = _linspace(new_lo, new_hi, bins + 1)
        where = np.searchsorted(edges, mids, side="right") - 1
        where = np.clip(where, 0, bins - 1)
        # (torch.bincount with float32 weights sums in double, then rounds to float32)
        return np.bincount(where, weights=hist.astype(np.float64), minlength=bins).astype(_F)

    def _error(self, start: int, end: int) -> float:
        bin_width = (float(self.max_val) - float(self.min_val)) / self.bins
        dst_width = bin_width * (end - start + 1) / self.dst_nbins
        if dst_width == 0.0:
            return 0.0
        src = np.arange(self.bins)
        begin = (src - start).astype(_F) * _F(bin_width)
        stop = begin + _F(bin_width)
        last = _F(self.dst_nbins - 1)
        of_begin = np.clip(np.floor(begin / _F(dst_width)), 0, last).astype(_F)
        of_end = np.clip(np.floor(stop / _F(dst_width)), 0, last).astype(_F)
        density = self.histogram / _F(bin_width)
        half = _F(dst_width / 2)

        def norm(b, e):
            return density * ((e * e * e - b * b * b) / _F(3))

        total = np.zeros(self.bins, _F)
        total += norm(begin - (of_begin + _F(0.5)) * _F(dst_width), np.full(self.bins, half, _F))
        total += (of_end - of_begin - _F(1)) * norm(-half, half)
        end_center = of_end * _F(dst_width) + half
        total += norm(-half, stop - end_center)
        return float(total.sum(dtype=_F))

    def _search(self):
        total = float(self.histogram.sum(dtype=_F))
        csum = np.cumsum(self.histogram, dtype=_F)
        alpha, beta, start, end = 0.0, 1.0, 0, self.bins - 1
        norm_min = float("inf")
        while alpha < beta:
            next_alpha, next_beta = alpha + 1e-5, beta - 1e-5
            lo, hi = start, end
            while lo < end and csum[lo] < next_alpha * total:
                lo += 1
            while hi > start and csum[hi] > next_beta * total:
                hi -= 1
            next_start, next_end = start, end
            if (lo - start) > (end - hi):
                next_start, alpha = lo, next_alpha
            else:
                next_end, beta = hi, next_beta
            if next_start == start and next_end == end:
                continue
            norm = self._error(next_start, next_end)
            if norm > norm_min:
                break
            norm_min, start, end = norm, next_start, next_end
        width = (self.max_val - self.min_val) / _F(self.bins)
        return self.min_val + width * _F(start), self.min_val + width * _F(end + 1)

    def calculate_qparams(self):
        if self.min_val == np.inf:
            return np.ones(1, _F), np.zeros(1, np.int64)
        lo, hi = self._search()
        scale, zero = self._calculate_qparams(np.asarray(lo, _F), np.asarray(hi, _F))
        return scale.reshape(1), zero.reshape(1)


def _linspace(lo, hi, n: int) -> np.ndarray:
    """torch.linspace in float32: the first half from ``lo`` up, the second from ``hi`` down
    (its CPU kernel's two-sided steps)."""
    lo, hi = _F(lo), _F(hi)
    step = (hi - lo) / _F(n - 1)
    i = np.arange(n)
    half = n // 2
    return np.where(i < half, lo + step * i.astype(_F), hi - step * (n - 1 - i).astype(_F)).astype(
        _F
    )


class PlaceholderObserver(Module):
    """PyTorch's PlaceholderObserver: records nothing; dynamic quantization's activations."""

    def __init__(self, dtype=dt.float32, **kwargs):
        super().__init__()
        self.dtype = dtype
        self.is_dynamic = bool(kwargs.get("is_dynamic", False))

    @classmethod
    def with_args(cls, **kwargs):
        return functools.partial(cls, **kwargs)

    def forward(self, x):
        return x
