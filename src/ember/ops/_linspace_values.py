"""PyTorch's CPU ``linspace`` values, bit for bit.

ATen's kernel computes element ``i`` of ``steps`` as ``start + step * i`` for the first half
(``i < steps // 2``) and ``end - step * (steps - 1 - i)`` for the rest, with ``step = (end -
start) / (steps - 1)`` in the result's type. For float32 and float64 (and integer results,
computed in double and truncated) the compiler contracts that into one fused multiply-add:
the exact ``step * i + start``, rounded once. NumPy has no fused multiply-add, so it is
computed here exactly by error-free transformations (Dekker's product, Knuth's sum) and
rounded once. The 16-bit dtypes compute in their own arithmetic (c10::Half, c10::BFloat16):
each operation rounded to the dtype, the index too.
"""

from __future__ import annotations

import numpy as np

_SPLIT = 134217729.0  # 2**27 + 1: Dekker's splitter for doubles


def _split(x: np.ndarray):
    c = _SPLIT * x
    hi = c - (c - x)
    return hi, x - hi


def _two_product(a: np.ndarray, b: np.ndarray):
    """(p, e) with p = fl(a * b) and a * b = p + e exactly."""
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, e


def _two_sum(a: np.ndarray, b: np.ndarray):
    """(s, t) with s = fl(a + b) and a + b = s + t exactly."""
    s = a + b
    bb = s - a
    t = (a - (s - bb)) + (b - bb)
    return s, t


def _fused(a: np.ndarray, b: np.ndarray, c: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``a * b + c`` (doubles) rounded once to ``dtype`` (float32 or float64)."""
    p, e = _two_product(a, b)
    s, t = _two_sum(p, c)
    if dtype == np.float64:
        return s + (t + e)
    low = t + e  # (the exact value is s + low, |low| far below an ulp of float32's s)
    r = s.astype(np.float32)
    rd = r.astype(np.float64)
    # s on a float32 midpoint (the float32 rounding a tie): the remainder decides the side
    other = np.where(
        rd < s, np.nextafter(r, np.float32(np.inf)), np.nextafter(r, np.float32(-np.inf))
    )
    tie = (rd + other.astype(np.float64)) / 2 == s
    return np.where(tie & (low != 0) & ((other > r) == (low > 0)), other, r)


def _half_values(start: float, end: float, steps: int, np_dtype) -> np.ndarray:
    f = np.dtype(np_dtype).type
    step = f(f(f(end) - f(start)) / f(steps - 1))
    index = np.arange(steps)
    halfway = steps // 2
    low = (f(start) + (step * index.astype(np_dtype)).astype(np_dtype)).astype(np_dtype)
    back = (steps - 1 - index).astype(np_dtype)
    high = (f(end) - (step * back).astype(np_dtype)).astype(np_dtype)
    return np.where(index < halfway, low, high).astype(np_dtype)


def linspace_values(start: float, end: float, steps: int, np_dtype) -> np.ndarray:
    """``torch.linspace(start, end, steps, dtype=...)``'s values for a real ``np_dtype``."""
    d = np.dtype(np_dtype)
    floating = d.kind == "f" or d.name == "bfloat16"  # (ml_dtypes' bfloat16 is kind "V")
    if steps <= 0:
        return np.empty(0, d)
    if steps == 1:
        return np.array([start], dtype=np.float64).astype(d)
    if floating and d.itemsize < 4:
        return _half_values(start, end, steps, d)
    if floating:  # (the ends rounded to the dtype first, the step computed in it)
        a, b = (np.asarray(v, dtype=d).astype(np.float64) for v in (start, end))
        step = np.asarray((np.asarray(end, d) - np.asarray(start, d)) / d.type(steps - 1), d)
        step = step.astype(np.float64)
        out_type = d
    else:  # integers: the ends converted to the dtype, then in double, truncated
        a, b = (np.float64(np.asarray(v).astype(d)) for v in (start, end))
        step = (b - a) / (steps - 1)
        out_type = np.dtype(np.float64)
    index = np.arange(steps, dtype=np.float64)
    halfway = steps // 2
    first = _fused(np.full(halfway, step), index[:halfway], np.full(halfway, a), out_type)
    rest = steps - halfway
    back = np.float64(steps - 1) - index[halfway:]
    second = _fused(np.full(rest, -step), back, np.full(rest, b), out_type)
    values = np.concatenate([first, second])
    return values.astype(d) if floating else np.trunc(values).astype(d)
