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

import itertools
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


def _b_terms(x, grid, g, b, sampling, need):
    """The B terms (module docstring) towards x, the grid and g, each None where not wanted."""
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
    # B_a * d(coordinate_a)/du_a: the cotangent in each axis's pixel coordinate
    bm = [E.select(flat_b, 2, dims - 1 - i) * taps[i].mult for i in range(dims)]
    planes = E.reshape(x, (n, ch, length))
    gp = E.reshape(g, (n, ch, points))
    t = dx = None
    du = [None] * dims
    for combo in itertools.product(*[range(len(tp.pos)) for tp in taps]):
        valid = _product([taps[i].valid[k] for i, k in enumerate(combo)])
        index = None
        for i, k in enumerate(combo):
            p = E.cast(E.where(valid, taps[i].pos[k], 0.0), dtypes.int64)
            p = p * strides[i] if strides[i] != 1 else p
            index = p if index is None else index + p
        w = [taps[i].w[k] for i, k in enumerate(combo)]
        dw = [taps[i].dw[k] for i, k in enumerate(combo)]
        # sum_a B_a dW/du_a, the tap's weight in T
        direction = None
        for i in range(dims):
            term = bm[i] * _product(dw[j] if j == i else w[j] for j in range(dims))
            direction = term if direction is None else direction + term
        index3 = E.broadcast_to(E.unsqueeze(index, 1), (n, ch, points))
        keep = E.unsqueeze(valid, 1)
        if need_x:
            src = E.where(keep, E.unsqueeze(direction, 1) * gp, 0.0)
            dx = _add(dx, E.scatter_add(E.zeros_like(planes), 2, index3, src))
        if not (need_g or need_grid):
            continue
        values = E.where(keep, E.gather(planes, 2, index3), 0.0)
        if need_g:
            t = _add(t, E.unsqueeze(direction, 1) * values)
        if need_grid:
            gv = E.sum(gp * values, 1)
            d2w = [taps[i].d2w[k] for i, k in enumerate(combo)]
            for e in range(dims):
                curvature = None
                for i in range(dims):
                    if i == e:
                        f = [d2w[j] if j == e else w[j] for j in range(dims)]
                    else:
                        f = [dw[j] if j in (i, e) else w[j] for j in range(dims)]
                    term = bm[i] * _product(f)
                    curvature = term if curvature is None else curvature + term
                du[e] = _add(du[e], gv * curvature * taps[e].mult)
    dx = E.reshape(dx, tuple(x.shape)) if dx is not None else None
    dg = E.reshape(t, tuple(g.shape)) if t is not None else None
    dgrid = None
    if need_grid:
        dgrid = E.reshape(E.stack(du[::-1], -1), tuple(grid.shape))
    return dx, dgrid, dg


def _add(total, term):
    return term if total is None else total + term
