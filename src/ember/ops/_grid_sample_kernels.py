"""The NumPy reference kernels of grid_sample and its backward (ops/grid_sample.py): the
specification the C kernels (kernels/cgrid_sample.py) follow operation for operation.

An input (N, C, *spatial) is read as (N, C, L) planes, a grid (N, *out, dims) as (N, P, dims)
points (the last value of a point is the first spatial axis's, as PyTorch's: x, y[, z]). Each
point has one tap per axis per combination (ops/_grid_taps.py), the combinations in
lexicographic order, the first spatial axis slowest; a combination's weight is the product of
its axes' weights in axis order, its pixel ``sum(pos[a] * stride[a])``.

* forward: ``out = 0; out += W_k * v_k`` over the combinations, ``v_k`` the pixel's value or 0
  where the tap is outside; nearest copies its one tap.
* backward, the input's gradient: ``dx[pixel_k] += W_k * g`` in the order (n, c, point, k),
  the valid taps only (np.add.at keeps that order, so C's sequential sums are these bits);
* backward, the grid's: for each axis a, ``S_a = sum_k D_ak v_k`` (``D_ak`` the weight product
  with axis a's weight replaced by its derivative), ``acc_a = sum_c g * S_a`` channel after
  channel, ``dgrid_a = acc_a * mult_a``; nearest's is 0.

Half precision (bfloat16, float16) is computed in float32 and rounded once. (PyTorch's CPU
kernel computes 16-bit inputs in 16-bit vectors, rounding its coordinates and weights as it
goes: a few ulps from these values.)
"""

from __future__ import annotations

import itertools

import numpy as np

from ._grid_taps import NumpyOps, axis_taps


def compute_dtype(dtype) -> np.dtype:
    return np.dtype(np.float64) if np.dtype(dtype) == np.float64 else np.dtype(np.float32)


def axes_taps(grid, spatial, mode, padding, align, second=False):
    """Each input axis's taps (first spatial axis first) for the grid's points (N, P)."""
    dims = len(spatial)
    points = grid.reshape(grid.shape[0], -1, dims)
    return [
        axis_taps(NumpyOps, points[..., dims - 1 - a], spatial[a], mode, padding, align, second)
        for a in range(dims)
    ]


def strides(spatial) -> list[int]:
    return [int(np.prod(spatial[a + 1 :], dtype=np.int64)) for a in range(len(spatial))]


def combinations(taps):
    """(combination, its validity (N, P)), lexicographic, the first axis slowest."""
    sizes = [len(t.pos) for t in taps]
    for combo in itertools.product(*[range(s) for s in sizes]):
        valid = None
        for a, k in enumerate(combo):
            v = taps[a].valid[k]
            valid = v if valid is None else valid & v
        yield combo, valid


def flat_index(taps, combo, valid, spatial):
    index = None
    for a, (k, stride) in enumerate(zip(combo, strides(spatial))):
        p = np.where(valid, taps[a].pos[k], 0).astype(np.int64)
        term = p * stride if stride != 1 else p
        index = term if index is None else index + term
    return index


def weight(taps, combo, derivative_axis=None):
    """The combination's weight product (axis ``derivative_axis``'s weight replaced by its
    derivative), or None for nearest."""
    if taps[0].w is None:
        return None
    w = None
    for a, k in enumerate(combo):
        f = taps[a].dw[k] if a == derivative_axis else taps[a].w[k]
        w = f if w is None else w * f
    return w


def _planes(x, dtype):
    n, c = x.shape[:2]
    return np.ascontiguousarray(x, dtype=dtype).reshape(n, c, -1)


def _gather(planes, index, valid):
    values = np.take_along_axis(planes, index[:, None, :], axis=2)
    return np.where(valid[:, None, :], values, 0)


@np.errstate(invalid="ignore", over="ignore")
def grid_sample(x, grid, *, mode, padding_mode, align_corners):
    n, c = x.shape[:2]
    spatial = x.shape[2:]
    out_spatial = grid.shape[1:-1]
    ct = compute_dtype(x.dtype)
    out = np.zeros((n, c, int(np.prod(out_spatial, dtype=np.int64))), dtype=ct)
    if out.size == 0:
        return out.reshape(n, c, *out_spatial).astype(x.dtype)
    planes = _planes(x, ct)
    taps = axes_taps(grid.astype(ct), spatial, mode, padding_mode, align_corners)
    for combo, valid in combinations(taps):
        values = _gather(planes, flat_index(taps, combo, valid, spatial), valid)
        w = weight(taps, combo)
        out = values if w is None else out + w[:, None, :] * values
    return out.reshape(n, c, *out_spatial).astype(x.dtype, copy=False)


@np.errstate(invalid="ignore", over="ignore")
def grid_sample_backward(x, grid, g, *, mode, padding_mode, align_corners, output_mask):
    n, c = x.shape[:2]
    spatial = x.shape[2:]
    dims = len(spatial)
    ct = compute_dtype(x.dtype)
    dx = np.zeros((n, c, int(np.prod(spatial, dtype=np.int64))), dtype=ct)
    dgrid = np.zeros(grid.shape, dtype=ct)
    p = dgrid.size // max(dims * n, 1) if n else 0
    if x.size == 0 or dgrid.size == 0:
        return dx.reshape(x.shape).astype(x.dtype), dgrid.astype(x.dtype)
    planes = _planes(x, ct)
    gp = _planes(g, ct)
    taps = axes_taps(grid.astype(ct), spatial, mode, padding_mode, align_corners)
    combos = list(combinations(taps))
    if output_mask[0]:
        _input_gradient(dx, gp, taps, combos, spatial)
    if output_mask[1] and mode != "nearest":
        sums = [np.zeros((n, c, p), dtype=ct) for _ in range(dims)]
        for combo, valid in combos:
            values = _gather(planes, flat_index(taps, combo, valid, spatial), valid)
            for a in range(dims):
                sums[a] = sums[a] + weight(taps, combo, a)[:, None, :] * values
        flat = dgrid.reshape(n, p, dims)
        for a in range(dims):
            acc = np.zeros((n, p), dtype=ct)
            for ch in range(c):
                acc = acc + gp[:, ch] * sums[a][:, ch]
            flat[..., dims - 1 - a] = acc * taps[a].mult
    return dx.reshape(x.shape).astype(x.dtype, copy=False), dgrid.astype(x.dtype, copy=False)


def _input_gradient(dx, gp, taps, combos, spatial):
    """``dx[pixel_k] += W_k * g`` over (n, c, point, k) in that order, valid taps only."""
    n, c, length = dx.shape
    p = gp.shape[2]
    contributions, indices = [], []
    base = (np.arange(n * c, dtype=np.int64) * length).reshape(n, c, 1)
    for combo, valid in combos:
        w = weight(taps, combo)
        term = gp if w is None else w[:, None, :] * gp
        index = flat_index(taps, combo, valid, spatial)[:, None, :] + base
        # invalid taps add nothing: their index points past the planes, dropped below
        index = np.where(valid[:, None, :], index, n * c * length)
        contributions.append(np.broadcast_to(term, (n, c, p)))
        indices.append(np.broadcast_to(index, (n, c, p)))
    terms = np.stack(contributions, axis=-1).reshape(-1)
    where = np.stack(indices, axis=-1).reshape(-1)
    keep = where < n * c * length
    np.add.at(dx.reshape(-1), where[keep], terms[keep])
