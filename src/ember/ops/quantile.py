"""Order statistics with PyTorch's names, as composites of sort and gather (so they
differentiate and capture through those ops): quantile, nanquantile (Tensor methods too), msort,
and unravel_index.

quantile follows PyTorch's algorithm step for step (aten's quantile_compute): sort along the
dimension (NaN last), a rank per quantile (``q * (n - 1)``, or the count of non-NaN values for
nanquantile; a row holding a NaN gets the last rank, so its quantile is NaN), the rank rounded
by the interpolation mode, and the two neighbours gathered and blended with lerp. The gradient
is therefore torch's: the lerp weights routed back through gather and sort, and a tensor q's
through the weights (``rank - floor(rank)``).
"""

from __future__ import annotations

import itertools
import operator

from .. import dtypes as dt
from ..errors import ArgumentError, DTypeError, EmberError, ShapeError
from . import api as E
from ._registry import _state, export
from ._util import normalize_axis, refuse_complex
from .promotion import to_tensor

_MODES = ("linear", "lower", "higher", "midpoint", "nearest")


def _check(name, x, q, interpolation):
    if x.dtype not in (dt.float32, dt.float64):
        raise DTypeError(
            f"{name}() input tensor must be either float or double dtype, got {x.dtype}", op=name
        )
    if interpolation not in _MODES:
        raise ArgumentError(
            f"{name}() interpolation must be one of linear, lower, higher, midpoint or "
            f"nearest, but got {interpolation!r}"
        )
    if x.numel() == 0:
        raise ShapeError(f"{name}() input tensor must be non-empty", op=name)
    if isinstance(q, (int, float)) and not isinstance(q, bool):
        if not 0.0 <= q <= 1.0:
            raise ArgumentError(f"{name}() q must be in the range [0, 1] but got {q}")
        return E.tensor(float(q), dtype=x.dtype), True
    q = to_tensor(q)
    if q.ndim > 1:
        raise ShapeError(f"{name}() q must be a scalar or 1D tensor, got {q.ndim} dims", op=name)
    if q.dtype != x.dtype:
        raise DTypeError(
            f"{name}() q tensor must be same dtype as the input tensor ({q.dtype} vs {x.dtype})",
            op=name,
        )
    # (PyTorch checks the values it is given; a graph being built has none to check)
    if not q.requires_grad and q.numel() and not _state.modes:
        values = q.detach().numpy()
        if not ((values >= 0) & (values <= 1)).all():
            raise ArgumentError(f"{name}() q values must be in the range [0, 1]")
    return q, q.ndim == 0


def _quantile(name, ignore_nan, x, q, dim, keepdim, interpolation):
    x = to_tensor(x)
    q, scalar_q = _check(name, x, q, interpolation)
    if dim is None:
        rows = E.reshape(x, (-1,))
        out_shape = (1,) * x.ndim if keepdim else ()
    else:
        axis = normalize_axis(name, dim, x.ndim)
        rows = E.reshape(x, (1,)) if x.ndim == 0 else E.movedim(x, axis, -1)
        shape = list(x.shape)
        if x.ndim:
            if keepdim:
                shape[axis] = 1
            else:
                del shape[axis]
        out_shape = tuple(shape)
    sorted_ = E.sort(rows, dim=-1).values  # (*, n), NaN last
    n = sorted_.shape[-1]
    qs = E.reshape(q, (-1,))  # (Q,)
    if ignore_nan:
        count = E.sum(E.logical_not(E.isnan(sorted_)), dim=-1, keepdim=True)
        ranks = qs * (count - 1).to(x.dtype)  # (*, Q)
        ranks = E.where(ranks < 0, E.zeros((), dtype=x.dtype), ranks)
    else:
        has_nan = E.any(E.isnan(sorted_), dim=-1, keepdim=True)
        ranks = E.where(has_nan, E.tensor(float(n - 1), dtype=x.dtype), qs * float(n - 1))
    # (ranks keep q's gradient, as PyTorch's: through the linear weights; the rounded modes'
    # and midpoint's results are constant in q)
    if interpolation == "lower":
        ranks = E.floor(ranks)
    elif interpolation == "higher":
        ranks = E.ceil(ranks)
    elif interpolation == "nearest":
        ranks = E.round(ranks)
    below = ranks.detach().to(dt.int64)
    values = E.gather(sorted_, -1, below)
    if interpolation in ("linear", "midpoint"):
        weights = (
            E.full_like(ranks, 0.5) if interpolation == "midpoint" else ranks - below.to(x.dtype)
        )
        above = E.gather(sorted_, -1, E.ceil(ranks.detach()).to(dt.int64))
        values = E.lerp(values, above, weights)
    # values: (*rows, Q) -> (Q, *out_shape) or out_shape
    if scalar_q:
        return E.reshape(values, out_shape)
    return E.reshape(E.movedim(values, -1, 0), (qs.shape[0], *out_shape))


@export(method=True)
def quantile(input, q, dim: int | None = None, keepdim: bool = False, *, interpolation="linear"):
    """The ``q``-th quantiles (a float or a 1-d tensor of the input's dtype, in [0, 1]) of the
    input's values, or of each row along ``dim``; with a 1-d ``q`` the quantiles are the result's
    first dimension. A row holding a NaN has NaN quantiles. ``interpolation`` between the two
    nearest values: "linear", "lower", "higher", "midpoint" or "nearest" (half to even)."""
    return _quantile("quantile", False, input, q, dim, keepdim, interpolation)


@export(method=True)
def nanquantile(input, q, dim: int | None = None, keepdim: bool = False, *, interpolation="linear"):
    """quantile ignoring NaN values (a row of NaNs only gives NaN)."""
    return _quantile("nanquantile", True, input, q, dim, keepdim, interpolation)


@export(method=True)
def msort(input):
    """The input sorted along its first dimension (``sort(input, dim=0).values``)."""
    x = to_tensor(input)
    refuse_complex("msort", x, reason="Sort does not support complex dtypes on CPU (as PyTorch)")
    return E.sort(x, dim=0).values


@export
def unravel_index(indices, shape):
    """The coordinates of flat ``indices`` (an integer tensor) into a tensor of ``shape``: a
    tuple of int64 tensors, one per dimension, each of the indices' shape. Negative and out of
    range indices wrap, as in PyTorch (floor division, then remainder)."""
    indices = to_tensor(indices)
    if indices.dtype.is_floating_point or indices.dtype is dt.bool_:
        raise DTypeError(
            f"unravel_index: expected 'indices' to be integer dtype, but got {indices.dtype}",
            op="unravel_index",
        )
    if isinstance(shape, int) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)) or not all(
        isinstance(d, int) and not isinstance(d, bool) for d in shape
    ):
        raise EmberError(
            f"unravel_index: expected 'shape' to be an int or a sequence of ints, got {shape!r}",
            op="unravel_index",
        )
    shape = tuple(int(d) for d in shape)
    if not shape:
        return ()
    if any(d < 0 for d in shape):
        raise ArgumentError(f"unravel_index: 'shape' cannot have negative values, but got {shape}")
    coefs = list(reversed(list(itertools.accumulate(reversed(shape[1:] + (1,)), operator.mul))))
    flat = E.unsqueeze(indices.to(dt.int64), -1)
    coords = E.remainder(
        E.floor_divide(flat, E.tensor(coefs, dtype=dt.int64)), E.tensor(shape, dtype=dt.int64)
    )
    return tuple(E.unbind(coords, -1))
