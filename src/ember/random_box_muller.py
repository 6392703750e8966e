"""PyTorch's float32 Box-Muller step, bit for bit: ``normal_fill_16_AVX2`` with avx_mathfun's
``log256_ps`` and ``sincos256_ps`` (the Cephes single-precision polynomials), as PyTorch's x86
builds (AVX2 and AVX512) compile them.

Each row of 16 uniforms ``u`` becomes ``radius * cos(theta) * std + mean`` in its first 8
places and the sine's value in its last 8, with ``radius = sqrt(-2 log(1 - u[:8]))`` and
``theta = 2 pi u[8:]``. NumPy's float32 log, sin and cos round otherwise than those
polynomials (about one value in seven an ulp away), so the polynomials are evaluated here
step by step in float32, in the C source's order. The compiler contracts a product whose only
use is a sum into one fused multiply-add (GCC's default ``-ffp-contract=fast``); which pairs it
fuses was settled against PyTorch 2.13's draws (every value of 10,000 blocks equal): the
polynomials' Horner steps, the range reduction's three steps, the logarithm's ``y * z + e *
q1`` and ``x + y + e * q2``, the cosine's ``y * z - z / 2`` and the sine's ``y2 * x + x``.
A fused multiply-add is computed in double (the float product is exact there) and rounded to
float once more; that double rounding differs from one rounding when the double sum falls on
a float halfway point, about once in 2^29 operations.

Rows are worked in slices of `ROWS`, in buffers made once per call, so the temporaries stay
well under the uniform draws' (ops/random.py's workspace rule counts those).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["BYTES_PER_ROW", "ROWS", "box_muller_16_float32"]

_f32 = np.float32
ROWS = 2048  # rows of 16 worked at once: 16,384 values a half, buffers of 64 KiB
# the buffers per row: 8 values a half, each in 8 float32 buffers, two doubles, an int32, a bool
BYTES_PER_ROW = 8 * (8 * 4 + 2 * 8 + 4 + 1)

_TWO_PI = _f32(2.0 * math.pi)
_SQRT_HALF = _f32(0.707106781186547524)
_LOG_P = [_f32(v) for v in (7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1,
                            -1.2420140846e-1, 1.4249322787e-1, -1.6668057665e-1,
                            2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1)]  # fmt: skip
_LOG_Q1, _LOG_Q2 = _f32(-2.12194440e-4), _f32(0.693359375)
_FOUR_OVER_PI = _f32(1.27323954473516)
_MINUS_DP = (_f32(-0.78515625), _f32(-2.4187564849853515625e-4), _f32(-3.77489497744594108e-8))
_SIN_P = (_f32(-1.9515295891e-4), _f32(8.3321608736e-3), _f32(-1.6666654611e-1))
_COS_P = (_f32(2.443315711809948e-005), _f32(-1.388731625493765e-003), _f32(4.166664568298827e-002))
_MANTISSA_BITS = np.int32(~0x7F800000)
_HALF_BITS = np.int32(0x3F000000)  # 0.5's exponent


class _Buffers:
    """A slice's temporaries, (rows, 8) each: float32 ones, and the two doubles the fused
    multiply-adds are computed in (their operands copied in, never cast by a ufunc, which
    would allocate buffers of its own)."""

    def __init__(self, rows: int):
        shape = (rows, 8)
        self.x, self.y, self.z, self.e, self.t = (np.empty(shape, _f32) for _ in range(5))
        self.radius, self.sin, self.cos = (np.empty(shape, _f32) for _ in range(3))
        self.wide, self.wide2 = np.empty(shape, np.float64), np.empty(shape, np.float64)
        self.j = np.empty(shape, np.int32)
        self.mask = np.empty(shape, np.bool_)

    def cut(self, rows: int) -> _Buffers:
        cut = object.__new__(_Buffers)
        for name, array in vars(self).items():
            setattr(cut, name, array[:rows])
        return cut


def _fma(a: np.ndarray, b, c, out: np.ndarray, buffers: _Buffers) -> np.ndarray:
    """``out = a * b + c`` rounded once (through double: see the module's docstring); ``b``
    and ``c`` float32 arrays or numbers."""
    wide, wide2 = buffers.wide, buffers.wide2
    np.copyto(wide, a)
    if isinstance(b, np.ndarray):
        np.copyto(wide2, b)
        np.multiply(wide, wide2, out=wide)  # (exact: two floats' product fits a double)
    else:
        np.multiply(wide, float(b), out=wide)
    if isinstance(c, np.ndarray):
        np.copyto(wide2, c)
        np.add(wide, wide2, out=wide)
    else:
        np.add(wide, float(c), out=wide)
    np.copyto(out, wide, casting="same_kind")
    return out


def _log(u1: np.ndarray, out: np.ndarray, b: _Buffers) -> None:
    """``log256_ps`` of values in [2^-24, 1] (no zeros, negatives or subnormals to cut)."""
    bits = u1.view(np.int32)
    e, x, z, y, t, j = b.e, b.x, b.z, b.y, b.t, b.j
    np.right_shift(bits, 23, out=j)
    np.subtract(j, 126, out=j)  # (the exponent minus 127, plus one)
    np.copyto(e, j, casting="unsafe")
    np.bitwise_and(bits, _MANTISSA_BITS, out=j)
    np.bitwise_or(j, _HALF_BITS, out=j)
    m = j.view(_f32)  # the mantissa in [0.5, 1)
    np.less(m, _SQRT_HALF, out=b.mask)
    np.subtract(m, _f32(1), out=x)
    np.add(x, m, out=x, where=b.mask)  # x + x - 1 below sqrt(1/2), as x - 1 + x
    np.subtract(e, _f32(1), out=e, where=b.mask)
    np.multiply(x, x, out=z)
    y.fill(_LOG_P[0])
    for p in _LOG_P[1:]:
        _fma(y, x, p, y, b)
    np.multiply(y, x, out=y)
    np.multiply(e, _LOG_Q1, out=t)
    _fma(y, z, t, y, b)  # y * z + e * q1
    np.multiply(z, _f32(0.5), out=t)  # (exact: y - z / 2 fused or not rounds the same)
    np.subtract(y, t, out=y)
    np.add(x, y, out=x)
    _fma(e, _LOG_Q2, x, out, b)


def _sincos(theta: np.ndarray, sin_out: np.ndarray, cos_out: np.ndarray, b: _Buffers) -> None:
    """``sincos256_ps`` of non-negative angles (2 pi times a uniform draw); ``theta`` is read
    before either output is written, so it may be one of them."""
    x, y, z, t, j, flags = b.x, b.y, b.z, b.t, b.j, b.e.view(np.int32)
    np.multiply(theta, _FOUR_OVER_PI, out=y)
    np.copyto(x, theta)
    np.copyto(j, y, casting="unsafe")  # (truncation, as cvttps)
    np.add(j, 1, out=j)
    np.bitwise_and(j, ~1, out=j)
    np.copyto(y, j, casting="unsafe")
    for dp in _MINUS_DP:  # x - y * (DP1 + DP2 + DP3) in three fused steps
        _fma(y, dp, x, x, b)
    np.multiply(x, x, out=z)
    # the cosine's polynomial (for |x| <= pi/4) into cos_out
    cos_out.fill(_COS_P[0])
    for p in _COS_P[1:]:
        _fma(cos_out, z, p, cos_out, b)
    np.multiply(cos_out, z, out=cos_out)
    np.multiply(z, _f32(-0.5), out=t)
    _fma(cos_out, z, t, cos_out, b)
    np.add(cos_out, _f32(1), out=cos_out)
    # the sine's into sin_out
    sin_out.fill(_SIN_P[0])
    for p in _SIN_P[1:]:
        _fma(sin_out, z, p, sin_out, b)
    np.multiply(sin_out, z, out=sin_out)
    _fma(sin_out, x, x, sin_out, b)
    # octants 1, 2, 5, 6 (j & 2) swap the polynomials
    swap = b.mask
    np.bitwise_and(j, 2, out=flags)
    np.not_equal(flags, 0, out=swap)
    np.copyto(t, sin_out)
    np.copyto(sin_out, cos_out, where=swap)
    np.copyto(cos_out, t, where=swap)
    # the sine is negative in octants 4-7, the cosine in 2-5 (j - 2 & 4 clear)
    np.bitwise_and(j, 4, out=flags)
    np.not_equal(flags, 0, out=swap)
    np.negative(sin_out, out=sin_out, where=swap)
    np.subtract(j, 2, out=j)
    np.bitwise_and(j, 4, out=j)
    np.equal(j, 0, out=swap)
    np.negative(cos_out, out=cos_out, where=swap)


def box_muller_16_float32(block: np.ndarray, mean: float, std: float) -> None:
    """PyTorch's ``normal_fill_16_AVX2`` on each row of the (rows, 16) float32 uniforms
    ``block``, in place."""
    mean, std = _f32(mean), _f32(std)
    rows = block.shape[0]
    full = _Buffers(min(rows, ROWS))
    for first in range(0, rows, ROWS):
        piece = block[first : first + ROWS]
        b = full if piece.shape[0] == full.x.shape[0] else full.cut(piece.shape[0])
        r, s, c = b.radius, b.sin, b.cos
        np.copyto(c, piece[:, :8])
        np.subtract(_f32(1), c, out=c)  # u1 = 1 - u, in (0, 1]
        _log(c, r, b)
        np.multiply(r, _f32(-2), out=r)
        np.sqrt(r, out=r)
        np.copyto(s, piece[:, 8:])  # (a ufunc on the strided half would take a buffer)
        np.multiply(s, _TWO_PI, out=s)  # theta
        _sincos(s, s, c, b)
        for part, wave in ((piece[:, :8], c), (piece[:, 8:], s)):
            np.multiply(r, wave, out=wave)
            _fma(wave, std, mean, wave, b)
            np.copyto(part, wave)  # (a cast into the strided rows would take a buffer)
