"""Spectral operators: DFT (opset 17's axis attribute, opset 20's axis input), STFT, the Hann,
Hamming and Blackman windows and MelWeightMatrix.

ember has no complex tensors and no FFT; ONNX writes a complex value as a trailing dimension of
2 (real, imaginary), a real one as a trailing dimension of 1. A DFT of length n is therefore
matmuls of the real and imaginary parts with the cosine and sine matrices of that length (built
in NumPy from the static length; the sums in float64): O(n^2) per transform, but written in
ember's ops, so it captures and differentiates. The windows and the mel filter bank depend only
on static sizes: they are computed in NumPy, as constants.
"""

from __future__ import annotations

import numpy as np

from .._convert import converter, ember_dtype
from ._common import E, given, np_dtype
from ._common import axis as norm_axis


def _basis(n_in: int, n_out: int, n: int, inverse_sign: float):
    """cos and sign*sin of 2 pi t k / n for t < n_in (rows), k < n_out (columns), in float64
    (t k reduced mod n first, so large lengths keep their accuracy)."""
    t = np.arange(n_in, dtype=np.int64)[:, None]
    k = np.arange(n_out, dtype=np.int64)[None, :]
    angle = 2.0 * np.pi * ((t * k) % max(n, 1)) / max(n, 1)
    return np.cos(angle), inverse_sign * np.sin(angle)


def _fit(x, length: int, axis: int):
    """x cut or zero-padded to ``length`` along ``axis``."""
    have = int(x.shape[axis])
    if have == length:
        return x
    if have > length:
        return E.narrow(x, axis, 0, length)
    shape = list(x.shape)
    shape[axis] = length - have
    return E.cat([x, E.zeros(tuple(shape), dtype=x.dtype)], axis)


def dft(ctx, x, n: int | None, axis: int, inverse: bool, onesided: bool):
    """ONNX's DFT of ember tensor ``x`` ([..., 1 or 2]) along ``axis`` (not the last)."""
    rank = len(x.shape)
    if rank < 2 or int(x.shape[-1]) not in (1, 2):
        raise ctx.error(f"DFT's input must end in a dim of 1 (real) or 2 (complex), got {x.shape}")
    axis = norm_axis(axis, rank, ctx)
    if axis == rank - 1:
        raise ctx.error("DFT's axis cannot be the last dim (the real / imaginary one)")
    length = int(x.shape[axis])
    irfft = inverse and onesided
    if n is None:
        n = 2 * (length - 1) if irfft else length
    if n < 1:
        raise ctx.error(f"dft_length must be positive, got {n}")
    out_dtype = x.dtype
    # float64 sums: a direct DFT adds n rounded products, which float32 leaves ~n * 1e-7 off
    # where the FFT onnxruntime runs stays near 1e-7
    compute = ember_dtype(np.float64, ctx.label)
    x = E.movedim(E.cast(x, compute), axis, -2)  # [..., L, C]
    real = x[..., 0]
    imag = x[..., 1] if int(x.shape[-1]) == 2 else None
    if irfft:
        # numpy's irfft: n // 2 + 1 bins in, n real values out; each bin but DC (and the
        # Nyquist bin of an even n) stands for itself and its conjugate
        bins = n // 2 + 1
        real = _fit(real, bins, -1)
        cos, sin = _basis(bins, n, n, 1.0)
        weights = np.full((bins, 1), 2.0)
        weights[0] = 1.0
        if n % 2 == 0:
            weights[-1] = 1.0
        cos, sin = cos * weights / n, sin * weights / n
        out = E.matmul(real, E.cast(E.tensor(cos), compute))
        if imag is not None:
            out = out - E.matmul(_fit(imag, bins, -1), E.cast(E.tensor(sin), compute))
        out = E.unsqueeze(out, -1)
    else:
        k = n // 2 + 1 if onesided else n
        # forward: e^{-i theta}; inverse: e^{+i theta} / n
        cos, sin = _basis(n, k, n, 1.0 if inverse else -1.0)
        if inverse:
            cos, sin = cos / n, sin / n
        c = E.cast(E.tensor(cos), compute)
        s = E.cast(E.tensor(sin), compute)
        real = _fit(real, n, -1)
        out_r, out_i = E.matmul(real, c), E.matmul(real, s)
        if imag is not None:
            imag = _fit(imag, n, -1)
            out_r = out_r - E.matmul(imag, s)
            out_i = out_i + E.matmul(imag, c)
        out = E.stack([out_r, out_i], -1)
    out = E.movedim(out, -2, axis)
    return E.cast(out, out_dtype) if out.dtype != out_dtype else out


def _length(ctx, value, what):
    if not given(value):
        return None
    values = ctx.ints(value, what)
    if len(values) != 1:
        raise ctx.error(f"{what} must be a scalar, got {len(values)} values")
    return values[0]


@converter("DFT", 17)
def _dft17(ctx, x, dft_length=None):
    x = ctx.tensor(x)
    return dft(
        ctx,
        x,
        _length(ctx, dft_length, "dft_length"),
        int(ctx.attr("axis", 1)),
        bool(ctx.attr("inverse", 0)),
        bool(ctx.attr("onesided", 0)),
    )


@converter("DFT", 20)
def _dft20(ctx, x, dft_length=None, axis=None):
    x = ctx.tensor(x)
    a = _length(ctx, axis, "axis")
    return dft(
        ctx,
        x,
        _length(ctx, dft_length, "dft_length"),
        -2 if a is None else a,
        bool(ctx.attr("inverse", 0)),
        bool(ctx.attr("onesided", 0)),
    )


@converter("STFT", 17)
def _stft(ctx, signal, frame_step, window=None, frame_length=None):
    x = ctx.tensor(signal)
    if len(x.shape) == 2:  # [batch, length]: a real signal without its trailing dim
        x = E.unsqueeze(x, -1)
    if len(x.shape) != 3 or int(x.shape[-1]) not in (1, 2):
        raise ctx.error(f"STFT's signal must be [batch, length, 1 or 2], got {x.shape}")
    step = _length(ctx, frame_step, "frame_step")
    size = _length(ctx, frame_length, "frame_length")
    w = ctx.tensor(window) if given(window) else None
    if size is None:
        if w is None:
            raise ctx.error("STFT needs a window or a frame_length")
        size = int(w.shape[0])
    if w is not None and int(w.shape[0]) != size:
        raise ctx.error(f"the window has {int(w.shape[0])} values, frame_length is {size}")
    if step < 1 or size < 1:
        raise ctx.error(f"frame_step and frame_length must be positive, got {step}, {size}")
    length = int(x.shape[1])
    frames = 1 + (length - size) // step
    if frames < 1:
        raise ctx.error(f"the signal ({length} samples) is shorter than one frame ({size})")
    index = (np.arange(frames)[:, None] * step + np.arange(size)[None, :]).reshape(-1)
    framed = E.index_select(x, 1, E.tensor(index))
    framed = E.reshape(framed, (int(x.shape[0]), frames, size, int(x.shape[-1])))
    if w is not None:
        framed = framed * E.reshape(E.cast(w, framed.dtype), (size, 1))
    onesided = bool(ctx.attr("onesided", 1))
    if onesided and int(x.shape[-1]) == 2:
        raise ctx.error("a one-sided STFT needs a real signal")
    return dft(ctx, framed, size, 2, False, onesided)


# ---------------------------------------------------------------------------------------------
# windows and the mel filter bank: constants from static sizes


def _window(terms):
    def convert(ctx, size):
        n = _length(ctx, size, "size")
        if n is None or n < 0:
            raise ctx.error(f"the window size must be a non-negative scalar, got {n}")
        periodic = bool(ctx.attr("periodic", 1))
        dtype = np_dtype(ctx.attr("output_datatype", 1), ctx.label)
        denominator = n if periodic else n - 1
        i = np.arange(n, dtype=np.float64)
        with np.errstate(all="ignore"):
            phase = 2.0 * np.pi * i / denominator
            out = sum(c * np.cos(m * phase) for m, c in enumerate(terms))
        if n == 1:  # (a one-point window is 1, where N - 1 = 0 would divide by zero)
            out = np.ones(1)
        return out.astype(dtype)

    return convert


converter("HannWindow", 17)(_window((0.5, -0.5)))
converter("HammingWindow", 17)(_window((25.0 / 46.0, -21.0 / 46.0)))
converter("BlackmanWindow", 17)(_window((0.42, -0.5, 0.08)))


@converter("MelWeightMatrix", 17)
def _mel_weight_matrix(ctx, num_mel_bins, dft_length, sample_rate, lower_hz, upper_hz):
    bins = _length(ctx, num_mel_bins, "num_mel_bins")
    n = _length(ctx, dft_length, "dft_length")
    rate = _length(ctx, sample_rate, "sample_rate")
    low = float(np.asarray(ctx.static(lower_hz, "lower_edge_hertz")).reshape(()))
    high = float(np.asarray(ctx.static(upper_hz, "upper_edge_hertz")).reshape(()))
    if bins < 1 or n < 1 or rate < 1:
        raise ctx.error("num_mel_bins, dft_length and sample_rate must be positive")
    spectrogram_bins = n // 2 + 1

    def to_mel(hz):
        return 2595.0 * np.log10(1.0 + hz / 700.0)

    # num_mel_bins + 2 points evenly spaced on the mel scale (ONNX divides the range by the
    # point count), mapped back to Hz, then to FFT bins
    points = np.arange(bins + 2, dtype=np.float64)
    mel = points * ((to_mel(high) - to_mel(low)) / (bins + 2)) + to_mel(low)
    hz = 700.0 * (10.0 ** (mel / 2595.0) - 1.0)
    edges = (((n + 1) * hz) // rate).astype(np.int64)
    out = np.zeros((spectrogram_bins, bins))
    for i in range(bins):
        left, center, right = int(edges[i]), int(edges[i + 1]), int(edges[i + 2])
        if center == left:
            if 0 <= center < spectrogram_bins:
                out[center, i] = 1.0
        else:
            for j in range(max(left, 0), min(center, spectrogram_bins - 1) + 1):
                out[j, i] = (j - left) / (center - left)
        if right > center:
            for j in range(max(center, 0), min(right, spectrogram_bins)):
                out[j, i] = (right - j) / (right - center)
    return out.astype(np_dtype(ctx.attr("output_datatype", 1), ctx.label))


__all__ = ["dft"]
