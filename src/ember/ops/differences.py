"""PyTorch's distances and differences, composites of ember's ops: dist, equal, diff,
trapezoid (trapz) and cumulative_trapezoid."""

from __future__ import annotations

from .. import dtypes as dt
from ..errors import DTypeError, ShapeError
from . import api as E
from ._registry import TensorBase, export
from ._util import normalize_axis
from .elementwise import to_tensor

# ------------------------------------------------------------------------------ dist, equal


@export(method=True)
def dist(input, other, p: float = 2):
    """The p-norm of ``input - other`` (broadcast), a 0-d tensor: p = inf the largest
    |difference|, p = 0 the number of non-zero differences. The gradient at a zero distance is
    0, as in PyTorch."""
    a, b = to_tensor(input), to_tensor(other)
    if not (a.dtype.is_floating_point and b.dtype.is_floating_point):
        raise DTypeError(
            f"dist is defined for float tensors, got {a.dtype} and {b.dtype}", op="dist"
        )
    d = E.abs(a - b)
    p = float(p)
    if p == float("inf"):
        return E.amax(d) if d.numel() else E.sum(d)
    if p == float("-inf"):
        return E.amin(d) if d.numel() else E.sum(d)
    if p == 0:  # (d * 0 links the count to the inputs: its gradient is 0, as PyTorch's)
        return E.sum(E.where(d != 0, 1.0, d * 0))
    if p == 1:
        return E.sum(d)
    total = E.sum(d * d if p == 2 else d**p)
    zero = total == 0
    safe = E.where(zero, 1.0, total)
    return E.where(zero, 0.0, E.sqrt(safe) if p == 2 else safe ** (1.0 / p))


@export(method=True)
def equal(input, other) -> bool:
    """True if both tensors have the same shape and elements (a Python bool; NaN is unequal
    to itself, as in PyTorch)."""
    a, b = to_tensor(input), to_tensor(other)
    if tuple(a.shape) != tuple(b.shape):
        return False
    return bool(E.all(a == b))


# --------------------------------------------------------------------- differences and areas


@export(method=True)
def diff(input, n: int = 1, dim: int = -1, prepend=None, append=None):
    """The ``n``-th forward difference along ``dim``, with ``prepend`` / ``append`` joined to
    the input first. Bool tensors give ``!=`` of neighbours, as in PyTorch."""
    x = to_tensor(input)
    if x.ndim == 0:
        raise ShapeError("diff needs a tensor of at least one dimension", op="diff")
    axis = normalize_axis("diff", dim, x.ndim)
    parts = [x]
    if prepend is not None:
        parts.insert(0, _edge(prepend, x, axis))
    if append is not None:
        parts.append(_edge(append, x, axis))
    if len(parts) > 1:
        x = E.cat(parts, axis)
    for _ in range(n):
        size = x.shape[axis]
        if size == 0:
            break
        hi = E.narrow(x, axis, 1, size - 1)
        lo = E.narrow(x, axis, 0, size - 1)
        x = E.logical_xor(hi, lo) if x.dtype is dt.bool_ else hi - lo
    return x


def _edge(value, x, axis):
    t = to_tensor(value, None if isinstance(value, TensorBase) else x.dtype)
    if t.ndim == 0:  # a scalar is one slice along dim
        shape = list(x.shape)
        shape[axis] = 1
        t = E.broadcast_to(t, tuple(shape))
    return t


def _spacing(y, x, dx, axis, op):
    """The widths of trapezoid's intervals along axis: x's differences, or dx."""
    if x is None:
        return 1.0 if dx is None else dx
    if dx is not None:
        raise TypeError(f"{op}: give x or dx, not both")
    x = to_tensor(x)
    if x.ndim == 1:
        widths = diff(x)
        shape = [1] * y.ndim
        shape[axis] = widths.shape[0]
        return E.reshape(widths, tuple(shape))
    return diff(x, dim=axis)


def _trapezoid_terms(y, x, dx, dim, op):
    y = to_tensor(y)
    if y.dtype is dt.bool_:
        raise DTypeError(f"{op}: bool y is not supported (as in PyTorch)", op=op)
    axis = normalize_axis(op, dim, y.ndim)
    size = y.shape[axis]
    if size == 0:
        return None, axis, y
    width = _spacing(y, x, dx, axis, op)
    left = E.narrow(y, axis, 0, size - 1)
    right = E.narrow(y, axis, 1, size - 1)
    if isinstance(width, (int, float)):
        return (left + right) * (0.5 * width), axis, y
    return (left + right) * width * 0.5, axis, y


@export
def trapezoid(y, x=None, *, dx=None, dim: int = -1):
    """The trapezoid rule along ``dim``: sample points ``x`` (a tensor) or a constant spacing
    ``dx`` (default 1)."""
    terms, axis, y = _trapezoid_terms(y, x, dx, dim, "trapezoid")
    if terms is None:  # no intervals: zeros, unconnected to y (as PyTorch's)
        return E.zeros_like(E.sum(E.stop_gradient(y), axis))
    return E.sum(terms, axis)


@export
def trapz(y, x=None, *, dx=None, dim: int = -1):
    """PyTorch's older name of trapezoid."""
    return trapezoid(y, x, dx=dx, dim=dim)


@export
def cumulative_trapezoid(y, x=None, *, dx=None, dim: int = -1):
    """The running trapezoid rule along ``dim`` (one element fewer than y along it)."""
    terms, axis, y = _trapezoid_terms(y, x, dx, dim, "cumulative_trapezoid")
    if terms is None:
        return y
    return E.cumsum(terms, axis)
