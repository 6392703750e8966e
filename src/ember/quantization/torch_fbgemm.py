"""PyTorch's x86 quantized engine (fbgemm) in NumPy: the arithmetic its quantized Linear and
Conv2d layers (static and dynamic) run, so ember's outputs are PyTorch's integers.

* Dynamic activations (`choose_qparams`): quant_utils' ChooseQuantizationParams over the
  tensor's min and max (widened to hold 0), quint8 with ``reduce_range`` halving [0, 255] to
  [0, 127] as fbgemm's dynamic linear does; the scale and zero point in double, the scale
  then used as a float.
* Quantizing (`quantize`): ``nearbyint(fma(x, 1 / scale, zero_point))`` in float32, clamped.
* Products: exact integer sums of ``(x_q - x_zp) * w_q`` (int64 here, fbgemm's int32 sums
  with row/column offsets give the same integers while they do not overflow).
* `to_float` (dynamic Linear's output): ``sum * (x_scale * w_scale) + bias`` in float32,
  fbgemm's vectorized ReQuantizeForFloat (the scales' product first).
* `requantize` (static layers' output): fbgemm's ReQuantizeOutput with a float bias:
  ``nearbyint((sum + bias / (x_scale w_scale)) * (x_scale w_scale / y_scale)) + y_zp``, every
  step in float32, clamped to [0, 255] (at ``y_zp`` with a fused ReLU).
"""

from __future__ import annotations

import numpy as np

_F = np.float32


def choose_qparams(x: np.ndarray, reduce_range: bool) -> tuple[float, int]:
    """fbgemm's dynamic input parameters for float32 ``x`` (uint8, [0, 127] with reduce_range)."""
    lo = float(x.min()) if x.size else 0.0
    hi = float(x.max()) if x.size else 0.0
    qmin, qmax = (0, 127) if reduce_range else (0, 255)
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = (hi - lo) / (qmax - qmin)
    if _F(scale) == 0 or np.isinf(_F(1) / _F(scale)):
        scale = 0.1
    if scale < 6.1e-5:  # (quant_utils' SMALL_SCALE_THRESHOLD: the range widened to keep it)
        scale = 6.1e-5
        if lo == 0:
            hi = scale * (qmax - qmin)
        elif hi == 0:
            lo = -scale * (qmax - qmin)
        else:
            amplifier = 6.1e-5 / ((hi - lo) / (qmax - qmin))
            lo, hi = lo * amplifier, hi * amplifier
    from_min, from_max = qmin - lo / scale, qmax - hi / scale
    err_min = abs(qmin) - abs(lo / scale)
    err_max = abs(qmax) - abs(hi / scale)
    initial = from_min if err_min < err_max else from_max
    zero_point = qmin if initial < qmin else qmax if initial > qmax else int(np.rint(initial))
    return scale, zero_point


def quantize(x: np.ndarray, scale: float, zero_point: int, lo: int = 0, hi: int = 255):
    """fbgemm's Quantize: ``nearbyint(fma(x, 1 / scale, zero_point))`` (``1 / scale`` in
    float32; the fused float32 multiply-add by float64, where the product is exact), clamped;
    int64."""
    inv = np.float64(_F(1) / _F(scale))
    with np.errstate(all="ignore"):
        q = np.rint((x.astype(np.float64) * inv + zero_point).astype(_F))
    return np.clip(np.nan_to_num(q, nan=hi), lo, hi).astype(np.int64)


def to_float(sums: np.ndarray, x_scale: float, w_scales: np.ndarray, bias):
    """Dynamic Linear's float output from the integer sums (last axis: output channels)."""
    out = sums.astype(_F) * (_F(x_scale) * w_scales.astype(_F))
    return out if bias is None else out + bias.astype(_F)


def requantize(sums, x_scale, w_scales, bias, y_scale, y_zero_point, relu, channel_axis):
    """A static layer's quint8 output integers from its integer sums (int64)."""
    shape = [1] * sums.ndim
    shape[channel_axis] = -1
    act_w = (_F(x_scale) * w_scales.astype(_F)).reshape(shape)
    multiplier = act_w / _F(y_scale)
    raw = sums.astype(_F)
    if bias is not None:
        raw = raw + bias.astype(_F).reshape(shape) / act_w
    q = np.rint(raw * multiplier) + y_zero_point
    return np.clip(q, y_zero_point if relu else 0, 255).astype(np.int64)


def linear_sums(xq: np.ndarray, x_zero_point: int, wq: np.ndarray) -> np.ndarray:
    """``(xq - x_zp) @ wq.T`` exactly (int64)."""
    return (xq - x_zero_point) @ wq.astype(np.int64).T


def conv2d_sums(xq, x_zero_point, wq, stride, padding, dilation, groups):
    """The integer sums of a 2-d convolution (NCHW, weight (O, C / groups, kh, kw)), exact;
    the padding holds the zero point (the integer of 0.0)."""
    n, c, h, w = xq.shape
    o, cg, kh, kw = wq.shape
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    x = np.pad(xq - x_zero_point, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, o, oh, ow), np.int64)
    og = o // groups
    wq = wq.astype(np.int64)
    for g in range(groups):
        xs = x[:, g * cg : (g + 1) * cg]
        for i in range(kh):
            for j in range(kw):
                patch = xs[:, :, i * dh : i * dh + sh * (oh - 1) + 1 : sh,
                           j * dw : j * dw + sw * (ow - 1) + 1 : sw]  # fmt: skip
                out[:, g * og : (g + 1) * og] += np.einsum(
                    "nchw,oc->nohw", patch, wq[g * og : (g + 1) * og, :, i, j]
                )
    return out


class DynamicWeights:
    """A dynamic Linear's qint8 weights (symmetric), scales and float bias; called on a float32
    array it quantizes it over its own range (reduce_range) and returns the float32 output."""

    def __init__(self, ints: np.ndarray, scales: np.ndarray, bias, reduce_range: bool = True):
        self.ints, self.scales = ints.astype(np.int64), scales.astype(_F)
        self.bias = None if bias is None else np.asarray(bias, _F)
        self.reduce_range = reduce_range

    def __call__(self, a: np.ndarray) -> np.ndarray:
        scale, zp = choose_qparams(a, self.reduce_range)
        sums = linear_sums(quantize(a, scale, zp), zp, self.ints)
        return to_float(sums, scale, self.scales, self.bias)
