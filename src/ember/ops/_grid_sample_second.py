"""The VJP of grid_sample_backward (ops/grid_sample.py): grid_sample's second derivative, in
ember ops, so gradients of gradients (a gradient penalty through a spatial transformer) work
eagerly and in graphs, and differentiate again.

Write the forward as ``y[c, p] = sum_k W_k(u_p) x[c, i_k(p)]`` over the taps k of each point
p (ops/_grid_taps.py), with ``D^a_k = dW_k/du_a``. The backward gives
``dx = sum_p sum_k [i_k = j] W_k g`` (linear in g) and ``du_a = sum_c g sum_k D^a_k x[c, i_k]``
(bilinear in g and x). For cotangents A (of dx) and B (of du):

* towards g: ``grid_sample(A, u) + T``, ``T[c, p] = sum_k (sum_a B_a D^a_k) x[c, i_k]``;
* towards x: T's transpose applied to g, a scatter-add of ``(sum_a B_a D^a_k) g``;
* towards u: grid_sample_backward(A, u, g)'s grid gradient, plus
  ``sum_c g sum_k (sum_a B_a d2W_k/du_e du_a) x[c, i_k]`` for each axis e.

The A terms are the two ops themselves (their C kernels); the B terms are written per tap here
with gathers and scatter-adds over the same tap rules the kernels follow, their weights
polynomials in the grid (so they differentiate once more). Nearest's grid gradient is 0: its
B terms vanish.
"""

from __future__ import annotations

import math

from .. import dtypes
from . import api as E
from ._grid_taps import axis_taps
from ._registry import apply


class EmberOps:
    """The array operations of ops/_grid_taps.py on ember tensors."""

    where, floor, trunc, abs, rint = E.where, E.floor, E.trunc, E.abs, E.round

    @staticmethod
    def fill(like, value):
        return E.full_like(like, value)


def backward_vjp(c, a, b, forward_op, backward_op):
    x, grid, g = c.inputs
    mask = c.attrs["output_mask"]
    sampling = {k: c.attrs[k] for k in ("mode", "padding_mode", "align_corners")}
    need_x, need_grid, need_g = c.needs_input_grad
    a = a if mask[0] else None
    b = b if mask[1] and sampling["mode"] != "nearest" else None
    dx = dgrid = dg = None
    if a is not None:
        if need_g:
            dg = apply(forward_op, a, grid, **sampling)
        if need_grid and sampling["mode"] != "nearest":
            dgrid = apply(backward_op, a, grid, g, output_mask=(False, True), **sampling)[1]
    if b is not None and (need_x or need_grid or need_g):
        t_x, t_grid, t_g = _b_terms(x, grid, g, b, sampling, (need_x, need_grid, need_g))
        dx = t_x
        dgrid = t_grid if dgrid is None else (dgrid if t_grid is None else dgrid + t_grid)
        dg = t_g if dg is None else (dg if t_g is None else dg + t_g)
    return dx, dgrid, dg


def _product(factors):
    out = None
    for f in factors:
        out = f if out is None else out * f
    return out


def _combos(parts, axis: int, dims: int):
    """One axis's per-tap values (N, P) stacked on a tap axis placed so the axes' taps
    broadcast to every combination: (N, P, k0, 1[, 1]), (N, P, 1, k1[, 1]), ..."""
    stacked = E.stack(list(parts), -1)
    for _ in range(dims - 1 - axis):
        stacked = E.unsqueeze(stacked, -1)
    for _ in range(axis):
        stacked = E.unsqueeze(stacked, 2)
    return stacked


def _b_terms(x, grid, g, b, sampling, need):
    """The B terms (module docstring) towards x, the grid and g, each None where not wanted:
    every tap combination at once on a trailing axis of K = taps ** dims."""
    need_x, need_grid, need_g = need
    n, ch = x.shape[0], x.shape[1]
    spatial = tuple(x.shape[2:])
    dims = len(spatial)
    points = math.prod(grid.shape[1:-1])
    length = math.prod(spatial)
    strides = [math.prod(spatial[i + 1 :]) for i in range(dims)]
    flat_grid = E.reshape(grid, (n, points, dims))
    flat_b = E.reshape(b, (n, points, dims))
    taps = [
        axis_taps(
            EmberOps,
            E.select(flat_grid, 2, dims - 1 - i),
            spatial[i],
            sampling["mode"],
            sampling["padding_mode"],
            sampling["align_corners"],
            second=need_grid,
        )
        for i in range(dims)
    ]
    k = math.prod(len(t.pos) for t in taps)
    ones = (1,) * dims
    combos = (n, points * k)

    def flat(v):
        return E.reshape(E.broadcast_to(v, (n, points, *[len(t.pos) for t in taps])), combos)

    valid = None
    for i, t in enumerate(taps):
        v = _combos(t.valid, i, dims)
        valid = v if valid is None else valid & v
    valid = flat(valid)
    index = None
    for i, t in enumerate(taps):
        term = E.cast(E.where(valid, flat(_combos(t.pos, i, dims)), 0.0), dtypes.int64)
        index = term * strides[i] if index is None else index + term * strides[i]
    w = [_combos(t.w, i, dims) for i, t in enumerate(taps)]
    dw = [_combos(t.dw, i, dims) for i, t in enumerate(taps)]
    # B_a * d(coordinate_a)/du_a: the cotangent in each axis's pixel coordinate
    bm = []
    for i in range(dims):
        cotangent = E.select(flat_b, 2, dims - 1 - i) * taps[i].mult
        bm.append(flat(E.reshape(cotangent, (n, points, *ones))))
    # sum_a B_a dW/du_a, each combination's weight in T
    direction = None
    for i in range(dims):
        term = bm[i] * flat(_product(dw[j] if j == i else w[j] for j in range(dims)))
        direction = term if direction is None else direction + term
    planes = E.reshape(x, (n, ch, length))
    g_rep = E.reshape(
        E.broadcast_to(E.unsqueeze(E.reshape(g, (n, ch, points)), -1), (n, ch, points, k)),
        (n, ch, points * k),
    )
    index3 = E.broadcast_to(E.unsqueeze(index, 1), (n, ch, points * k))
    keep = E.unsqueeze(valid, 1)
    dx = dg = dgrid = None
    if need_x:
        src = E.where(keep, E.unsqueeze(direction, 1) * g_rep, 0.0)
        dx = E.reshape(E.scatter_add(E.zeros_like(planes), 2, index3, src), tuple(x.shape))
    if need_g or need_grid:
        values = E.where(keep, E.gather(planes, 2, index3), 0.0)
    if need_g:
        t = E.reshape(E.unsqueeze(direction, 1) * values, (n, ch, points, k))
        dg = E.reshape(E.sum(t, -1), tuple(g.shape))
    if need_grid:
        gv = E.sum(g_rep * values, 1)
        d2w = [_combos(t.d2w, i, dims) for i, t in enumerate(taps)]
        du = []
        for e in range(dims):
            curvature = None
            for i in range(dims):
                if i == e:
                    f = [d2w[j] if j == e else w[j] for j in range(dims)]
                else:
                    f = [dw[j] if j in (i, e) else w[j] for j in range(dims)]
                term = bm[i] * flat(_product(f))
                curvature = term if curvature is None else curvature + term
            total = E.sum(E.reshape(gv * curvature, (n, points, k)), -1)
            du.append(total * taps[e].mult)
        dgrid = E.reshape(E.stack(du[::-1], -1), tuple(grid.shape))
    return dx, dgrid, dg
