"""PyTorch's CPU layer-norm statistics and input gradient, operation for operation.

PyTorch's backward of layer_norm writes ``dx = a dy w + b x + c`` per row, with ``a = rstd``,
``b = (db mean - ds) rstd^3 / n``, ``c = -b mean - db rstd / n``, ``ds = sum(dy x w)`` and
``db = sum(dy w)`` (ATen's layer_norm_kernel.cpp). On a row whose values nearly cancel (its
spread near eps) ``b x + c`` is the difference of two large terms, and the gradient PyTorch
returns carries their rounding, which a programme compared against it must share: so the
row's mean and variance follow its ``RowwiseMoments`` (moments_utils.h: Welford's update per
vector lane in chunks of 16 vectors, the chunks merged pairwise, the lanes and the scalar tail
merged last) and the sums its vector reductions, in the compute dtype, with the fused
multiply-adds its build makes. The lanes are the AVX2 kernels' (8 floats, 4 doubles: PyTorch
runs its layer norm there even on AVX512 machines). A float32 fused multiply-add is the exact
product and sum in double rounded once; a float64 one the error-free transformations' sum.

Half precision (``half``: float16, bfloat16, computed in float32) follows the kernels of
the reduced types: a vector of 16 stored values is loaded at a time and widened into two
float vectors, each with its own Welford accumulators, both merged into the same lanes; the
sums likewise; and the saved mean and rstd the backward reads are rounded to the stored dtype
(PyTorch saves them in the parameters' dtype).

`row_moments` and `gradients` work on (rows, n) arrays, a few rows side by side;
kernels/cnorm_act.py's C loops are the same steps, one row at a time.
"""

from __future__ import annotations

import numpy as np

# PyTorch's AVX2 vector width per itemsize (float32, float64)
LANES = {4: 8, 8: 4}
CHUNK = 16  # vectors per Welford chunk (moments_utils.h kChunkSize)


_SPLIT = 134217729.0  # 2**27 + 1: Veltkamp's split of a double into two 26-bit halves


def _halves(a):
    t = _SPLIT * a
    high = t - (t - a)
    return high, a - high


@np.errstate(invalid="ignore", over="ignore")
def fma(a, b, c):
    """a * b + c rounded once: float32 through double (exact there, then rounded); float64 by
    error-free transformations (the product's and the sum's rounding errors added back: the
    fused result but for rare double roundings; where a split overflows, the plain one)."""
    if np.result_type(a, b, c) == np.float32:
        wide = np.asarray(a, np.float64) * np.asarray(b, np.float64) + np.asarray(c, np.float64)
        return wide.astype(np.float32)
    p = a * b
    a_hi, a_lo = _halves(a)
    b_hi, b_lo = _halves(b)
    p_err = ((a_hi * b_hi - p) + a_hi * b_lo + a_lo * b_hi) + a_lo * b_lo
    s = p + c
    back = s - p
    s_err = (p - (s - back)) + (c - back)
    fused = s + (s_err + p_err)
    return np.where(np.isfinite(fused), fused, s)


def _merge(count_add, m1_add, m2_add, count, m1, m2):
    """AddMomentsVec: the moments of ``count_add`` values per lane merged into ``count``'s."""
    t = m1.dtype.type
    total = count + count_add
    c = t(0) if total == 0 else t(count_add) / t(total)
    delta = m1_add - m1
    m2_tmp = m2 + m2_add
    c_delta = c * delta
    count_delta = delta * t(count)
    return total, m1 + c_delta, fma(count_delta, c_delta, m2_tmp)


def _ceil_log2(m: int) -> int:
    return 1 if m <= 2 else (m - 1).bit_length()


def row_moments(v: np.ndarray, half: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Each row's mean and biased variance, (rows,) each, as PyTorch's RowwiseMoments."""
    t = v.dtype.type
    rows, size = v.shape
    lanes = LANES[v.itemsize]
    width = 2 * lanes if half else lanes  # (values per loaded vector)
    n = size // width
    m = -(-n // CHUNK)
    depth = _ceil_log2(m)
    counts = [0] * depth
    m1s = [np.zeros((rows, lanes), v.dtype) for _ in range(depth)]
    m2s = [np.zeros((rows, lanes), v.dtype) for _ in range(depth)]
    for i in range(m):
        base = i * CHUNK * width
        m1 = np.zeros((rows, width), v.dtype)  # (half: two float vectors side by side)
        m2 = np.zeros((rows, width), v.dtype)
        count = min(CHUNK, n - i * CHUNK)
        for j in range(count):
            x = v[:, base + j * width : base + (j + 1) * width]
            delta = x - m1
            m1 = fma(delta, t(1) / t(j + 1), m1)
            m2 = fma(delta, x - m1, m2)
        for k in range(0, width, lanes):
            part = slice(k, k + lanes)
            counts[0], m1s[0], m2s[0] = _merge(
                count, m1[:, part], m2[:, part], counts[0], m1s[0], m2s[0]
            )
        mask, j = i + 1, 1
        while j < depth and not mask & 1:  # (pairwise: a full level merges into the next)
            counts[j], m1s[j], m2s[j] = _merge(
                counts[j - 1], m1s[j - 1], m2s[j - 1], counts[j], m1s[j], m2s[j]
            )
            counts[j - 1] = 0
            m1s[j - 1] = np.zeros((rows, lanes), v.dtype)
            m2s[j - 1] = np.zeros((rows, lanes), v.dtype)
            mask >>= 1
            j += 1
    for i in range(1, depth):
        counts[0], m1s[0], m2s[0] = _merge(counts[i], m1s[i], m2s[i], counts[0], m1s[0], m2s[0])
    # the values past the last whole vector, one at a time, then each lane merged in
    count, m1, m2 = 0, np.zeros(rows, v.dtype), np.zeros(rows, v.dtype)
    for i in range(n * width, size):
        x = v[:, i]
        delta = x - m1
        count += 1
        m1 = m1 + delta / t(count)
        m2 = fma(delta, x - m1, m2)
    per_lane = n * width // lanes  # (half: each lane merged two vectors' values per load)
    for lane in range(lanes):
        total = count + per_lane
        c = t(0) if total == 0 else t(per_lane) / t(total)
        delta = m1s[0][:, lane] - m1
        m1 = fma(c, delta, m1)
        m2 = m2 + fma(delta * delta * c, t(count), m2s[0][:, lane])
        count = total
    return m1, m2 / t(size)


def _in_order(prod, size: int) -> np.ndarray:
    total = prod(0, 1)[:, 0].copy()
    for k in range(1, size):
        total += prod(k, k + 1)[:, 0]
    return total


def _halving(acc: np.ndarray) -> np.ndarray:
    lanes = acc.shape[1]
    step = lanes // 2
    while step:
        acc = acc + acc[:, np.arange(lanes) ^ step]
        step //= 2
    return acc[:, 0]


def row_sums(prod, size: int, lanes: int, half: bool = False) -> np.ndarray:
    """Each row's sum of the products ``prod(start, stop)`` gives for a range of columns
    ((rows, stop - start), computed a vector at a time so no row-sized temporary is made), in
    the order of PyTorch's vectorized reductions (reduce_all): one accumulator per lane over
    whole vectors, the remainder added to the first lanes, the lanes then summed by halving; a
    row shorter than a vector is summed in order."""
    if half:
        return _half_row_sums(prod, size, lanes)
    if size < lanes:
        return _in_order(prod, size)
    acc = prod(0, lanes).copy()
    whole = size - size % lanes
    for d in range(lanes, whole, lanes):
        acc += prod(d, d + lanes)
    if size > whole:
        acc[:, : size - whole] += prod(whole, size)
    return _halving(acc)


def _half_row_sums(prod, size: int, lanes: int) -> np.ndarray:
    """`row_sums` of the reduced types' reductions: loads of 16 values as two float vectors,
    each its own accumulator, added together before the lanes are."""
    width = 2 * lanes
    if size <= lanes:
        return _in_order(prod, size)
    if size < width:  # (the two vectors of one partial load added, then 8 lanes in order)
        acc = prod(0, lanes).copy()
        acc[:, : size - lanes] += prod(lanes, size)
        return _in_order(lambda a, b: acc[:, a:b], lanes)
    acc0, acc1 = prod(0, lanes).copy(), prod(lanes, width).copy()
    whole = size - size % width
    for d in range(width, whole, width):
        acc0 += prod(d, d + lanes)
        acc1 += prod(d + lanes, d + width)
    rest = size - whole
    if rest > lanes:
        acc0 += prod(whole, whole + lanes)
        acc1[:, : rest - lanes] += prod(whole + lanes, size)
    elif rest:
        acc0[:, :rest] += prod(whole, size)
    return _halving(acc0 + acc1)


def stats(v: np.ndarray, eps: float, stored=None) -> tuple[np.ndarray, np.ndarray]:
    """(mean, rstd), (rows, 1) each: PyTorch's saved statistics of the forward (``stored``:
    the 16-bit dtype they are saved in, whose moments `row_moments` takes as half's)."""
    t = v.dtype.type
    mean, var = row_moments(v, stored is not None)
    rstd = t(1) / np.sqrt(var + t(eps))
    if stored is not None:
        mean, rstd = (a.astype(stored).astype(v.dtype) for a in (mean, rstd))
    return mean[:, None], rstd[:, None]


# rows and columns per step of `gradients`: its temporaries (a step's lanes, moments and
# products) stay a few kilobytes, whatever the rows' count and length (the workspace rule of
# ops/layer_norm.py counts only the row-sized arrays around it)
ROW_BLOCK = 4
COLUMN_BLOCK = 8


def gradients(v, g, w, eps: float, out: np.ndarray, dw: np.ndarray, db: np.ndarray, stored=None):
    """dx of rows ``v`` (rows, n) for the output gradient ``g`` and the weight ``w`` (n,),
    written into ``out``: ``a dy w + b x + c`` (the module docstring) with the statistics of
    `stats` (``stored``: the 16-bit dtype, or None); and added into ``dw`` and ``db`` (n,),
    float64: the rows' ``g (a x - a mean)`` and ``g``, PyTorch's dgamma and dbeta terms. Rows
    are taken a few at a time."""
    for start in range(0, v.shape[0], ROW_BLOCK):
        rows = slice(start, start + ROW_BLOCK)
        _block_gradients(v[rows], g[rows], w, eps, out[rows], dw, db, stored)


def _block_gradients(v, g, w, eps, out, dw, db_sum, stored) -> None:
    t = v.dtype.type
    size = v.shape[1]
    half = stored is not None
    lanes = LANES[v.itemsize]
    mean, a = stats(v, eps, stored)
    ds = row_sums(lambda i, j: g[:, i:j] * v[:, i:j] * w[i:j], size, lanes, half)[:, None]
    db = row_sums(lambda i, j: g[:, i:j] * w[i:j], size, lanes, half)[:, None]
    scale = t(1) / t(size)
    b = fma(db, mean, -ds) * a * a * a * scale
    c = fma(-b, mean, -(db * a * scale))
    shift = -a * mean
    for i in range(0, size, COLUMN_BLOCK):
        cols = slice(i, i + COLUMN_BLOCK)
        gc, vc = g[:, cols], v[:, cols]
        out[:, cols] = fma(b, vc, a * gc * w[cols]) + c
        dw[cols] += (gc * fma(a, vc, shift)).sum(axis=0, dtype=np.float64)
        db_sum[cols] += gc.sum(axis=0, dtype=np.float64)
