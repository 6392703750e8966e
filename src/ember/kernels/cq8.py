"""ember's 8-bit integer convolution and linear layer (and per-tensor quantization of float32
to 8 bits, their inputs): uint8 or int8 activations (per-tensor
zero point), int8 weights, int32 accumulation, and an epilogue that writes the int32 sums,
dequantized float32 (per-output-channel scale, bias, optional ReLU) or requantized 8-bit values.

The C source and its layout are in kernels/cq8_source.py (AVX512-VNNI ``vpdpbusd`` where the
compiler targets it, portable int32 loops otherwise). `conv2d` and `linear` return None where
they do not apply (no compiler, an input that is not 8-bit); the ops' NumPy kernels
(ops/quantized.py) are the reference they equal bit for bit. ``portable=True`` builds the
portable loops even on a VNNI machine, so the tests check both.
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np

from .cq8_source import SOURCE
from .cstep import data_address

__all__ = ["MAX_K", "conv2d", "has_vnni", "linear", "quantize"]

# every int32 sum is exact: K products of |u| <= 255 (a flipped int8 is a + 128) and |w| <= 128
MAX_K = (2**31 - 1) // (255 * 128)
_MODES = {"int32": 0, "float32": 1, "uint8": 2, "int8": 2}


@functools.cache
def _functions(portable: bool):
    from . import ccompile, cpool

    if not ccompile.compiler_available():
        return None
    source = ("#define EMBER_Q8_PORTABLE 1\n" if portable else "") + SOURCE
    p = ctypes.c_void_p
    f, n, i = ctypes.c_float, ctypes.c_long, ctypes.c_int
    try:
        conv = ccompile.load(source, "q8_conv", [p] * 10)
        vnni = ccompile.load(source, "q8_has_vnni", [])
        quant = ccompile.load(source, "q8_quantize", [p, p, n, f, f, i, p])
    except ccompile.CompileError:
        return None
    vnni.restype = ctypes.c_int
    return conv, bool(vnni()), cpool.parallel_for(), quant


def has_vnni(portable: bool = False) -> bool:
    """Whether the compiled kernel multiplies with AVX512-VNNI on this machine."""
    found = _functions(bool(portable))
    return bool(found and found[1])


def _run(x, w, scale, bias, out, geo, out_scale, out_zp, portable):
    found = _functions(bool(portable))
    if found is None:
        return None
    fn, _, pool, _ = found
    rows_total, k = w.shape[0], int(np.prod(w.shape[1:]))
    kq = (k + 3) // 4
    wp = np.empty((rows_total, kq * 4), np.int8)
    off = np.empty(rows_total, np.int32)
    geo = np.asarray(geo, np.int64)
    fq = np.asarray([out_scale, out_zp], np.float32)
    fn(data_address(x), data_address(w), data_address(scale), data_address(bias), data_address(out),
       data_address(geo), data_address(fq), data_address(wp), data_address(off), pool)  # fmt: skip
    return out


def _prepare(x, w, scale, bias, out_dtype):
    if x.dtype not in (np.uint8, np.int8) or w.dtype != np.int8 or out_dtype not in _MODES:
        return None
    x = np.ascontiguousarray(x)
    w = np.ascontiguousarray(w)
    c_out = w.shape[0]
    scale = np.ascontiguousarray(np.broadcast_to(np.asarray(scale, np.float32), (c_out,)))
    bias = np.zeros(c_out, np.float32) if bias is None else bias
    bias = np.ascontiguousarray(np.broadcast_to(np.asarray(bias, np.float32), (c_out,)))
    return x, w, scale, bias


def conv2d(x, w, scale, bias, *, x_zero_point=0, stride=(1, 1), padding=(0, 0),
           dilation=(1, 1), groups=1, out_dtype="float32", relu=False, out_scale=1.0,
           out_zero_point=0, portable=False):  # fmt: skip
    """``x`` (N, C, H, W) uint8/int8 with zero point ``x_zero_point``, ``w`` (O, C/groups, kh,
    kw) int8: the int32 sums ``sum (x - zp) w`` written as ``out_dtype`` (see the module), or
    None where the kernel does not apply."""
    ready = _prepare(x, w, scale, bias, out_dtype)
    if ready is None or x.ndim != 4 or w.ndim != 4:
        return None
    x, w, scale, bias = ready
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    if c != cg * groups or o % groups or cg * kh * kw > MAX_K:
        return None
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    out = np.empty((n, o, max(oh, 0), max(ow, 0)), np.dtype(out_dtype))
    if out.size == 0:
        return out
    p = oh * ow
    if ph or pw:  # padded with the zero point (the value 0), so packing checks no bounds
        padded = np.full((n, c, h + 2 * ph, wd + 2 * pw), x_zero_point, x.dtype)
        padded[:, :, ph : ph + h, pw : pw + wd] = x
        x, h, wd = padded, h + 2 * ph, wd + 2 * pw
    geo = [n, groups, cg, h, wd, o // groups, kh, kw, sh, sw, 0, 0, dh, dw, oh, ow, 0]
    geo += [c * h * wd, h * wd, wd, 1, o * p, p, 1]
    geo += [x_zero_point, int(x.dtype == np.int8), _MODES[out_dtype], int(relu)]
    geo += [int(out_dtype == "int8")]
    return _run(x, w, scale, bias, out, geo, out_scale, out_zero_point, portable)


def linear(x, w, scale, bias, *, x_zero_point=0, out_dtype="float32", relu=False,
           out_scale=1.0, out_zero_point=0, portable=False):  # fmt: skip
    """``x`` (M, K) uint8/int8 with zero point ``x_zero_point``, ``w`` (N, K) int8: the int32
    sums ``(x - zp) @ w.T`` (M, N) written as ``out_dtype``, or None where it does not apply."""
    ready = _prepare(x, w, scale, bias, out_dtype)
    if ready is None or x.ndim != 2 or w.ndim != 2 or x.shape[1] != w.shape[1]:
        return None
    x, w, scale, bias = ready
    m, k = x.shape
    nout = w.shape[0]
    if k > MAX_K:
        return None
    out = np.empty((m, nout), np.dtype(out_dtype))
    if out.size == 0:
        return out
    if k == 0:
        return None
    # a linear layer is a 1x1 convolution over one "image" of K channels and M positions,
    # position j being row j of x (packed 4 bytes at a time: geo[16] = 1)
    geo = [1, 1, k, 1, m, nout, 1, 1, 1, 1, 0, 0, 1, 1, 1, m, 1]
    geo += [0, 1, 0, k, 0, 1, nout]
    geo += [x_zero_point, int(x.dtype == np.int8), _MODES[out_dtype], int(relu)]
    geo += [int(out_dtype == "int8")]
    return _run(x, w, scale, bias, out, geo, out_scale, out_zero_point, portable)


def quantize(x, scale: float, zero_point: int, out_dtype: str, portable: bool = False):
    """``clamp(rint(x / scale) + zero_point)`` of a float32 array (NaN: the zero point) as
    uint8 or int8, or None where it does not apply (another dtype, no compiler)."""
    if x.dtype != np.float32 or out_dtype not in ("uint8", "int8"):
        return None
    found = _functions(bool(portable))
    if found is None:
        return None
    x = np.ascontiguousarray(x)
    q = np.empty(x.shape, np.dtype(out_dtype))
    found[3](data_address(x), data_address(q), x.size, float(np.float32(scale)),
             float(zero_point), int(out_dtype == "int8"), found[2])  # fmt: skip
    return q
