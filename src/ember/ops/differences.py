"""PyTorch's distances and differences, composites of ember's ops: dist, equal, diff,
trapezoid (trapz), cumulative_trapezoid and gradient (numpy.gradient's differences)."""

from __future__ import annotations

from .. import dtypes as dt
from ..errors import ArgumentError, ArgumentTypeError, DTypeError, ShapeError
from . import _item_scalars as _items
from . import api as E
from . import qtensor_ops
from ._node_names import renames
from ._registry import TensorBase, export
from ._util import normalize_axis
from .promotion import to_tensor

# ------------------------------------------------------------------------------ dist, equal


@export(method=True)
@renames("DistBackward0")
def dist(input, other, p: float = 2):
    """The p-norm of ``input - other`` (broadcast; complex: of the moduli, a real result), a
    0-d tensor: p = inf the largest
    |difference|, p = 0 the number of non-zero differences. The gradient at a zero distance is
    0, as in PyTorch."""
    a, b = to_tensor(input), to_tensor(other)
    if not all(t.dtype.is_floating_point or t.dtype.is_complex for t in (a, b)):
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
    if qtensor_ops.held(a) or qtensor_ops.held(
        b
    ):  # (PyTorch compares their integers and parameters)
        return qtensor_ops.equal(a, b)
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
    if n == 0:  # (PyTorch's: a copy of the input, prepend and append left out)
        return E.clone(x)
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
        raise ArgumentTypeError(f"{op}: give x or dx, not both")
    x = to_tensor(x)
    if x.ndim == 1:
        widths = diff(x)
        shape = [1] * y.ndim
        shape[axis] = widths.shape[0]
        return E.reshape(widths, tuple(shape))
    return diff(x, dim=axis)


def _check_trapezoid_input(y, op):
    if y.dtype is dt.bool_:
        raise DTypeError(f"{op}: bool y is not supported (as in PyTorch)", op=op)


def _trapezoid_terms(y, x, dx, dim, op):
    y = to_tensor(y)
    _check_trapezoid_input(y, op)
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
    if x is None:  # a constant spacing: PyTorch's one-pass form, its bits and its NaN at +-inf ends
        y = to_tensor(y)
        _check_trapezoid_input(y, "trapezoid")
        axis = normalize_axis("trapezoid", dim, y.ndim)
        if y.shape[axis] > 0:
            ends = E.select(y, axis, 0) + E.select(y, axis, -1)
            return (E.sum(y, axis) - ends * 0.5) * (1.0 if dx is None else dx)
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


# ------------------------------------------------------------------------------- gradient


def _along(coefficient, ndim, axis):
    """A 1-d coefficient (or a number) shaped to broadcast along ``axis`` of an ndim array."""
    if not isinstance(coefficient, TensorBase):
        return coefficient
    return E.reshape(coefficient, (-1,) + (1,) * (ndim - 1 - axis))


def _gradient_one(f, axis, h, edge_order):
    """numpy.gradient's second-order central differences along ``axis`` (PyTorch's): h a
    number (uniform spacing) or a 1-d coordinate tensor."""
    n = f.shape[axis]

    def part(start, length):
        return E.narrow(f, axis, start, length)

    nd = f.ndim
    if isinstance(h, TensorBase):
        dx = E.diff(h)
        dx1, dx2 = E.narrow(dx, 0, 0, n - 2), E.narrow(dx, 0, 1, n - 2)
        a = -dx2 / (dx1 * (dx1 + dx2))
        b = (dx2 - dx1) / (dx1 * dx2)
        c = dx1 / (dx2 * (dx1 + dx2))
        interior = (
            _along(a, nd, axis) * part(0, n - 2)
            + _along(b, nd, axis) * part(1, n - 2)
            + _along(c, nd, axis) * part(2, n - 2)
        )
        first, last = dx[0], dx[n - 2]
    else:
        interior = (part(2, n - 2) - part(0, n - 2)) / (2.0 * h)
        first = last = h
    if edge_order == 1:
        start = (part(1, 1) - part(0, 1)) / first
        end = (part(n - 1, 1) - part(n - 2, 1)) / last
    elif isinstance(h, TensorBase):
        d1, d2 = dx[0], dx[1]
        start = (
            -(2.0 * d1 + d2) / (d1 * (d1 + d2)) * part(0, 1)
            + (d1 + d2) / (d1 * d2) * part(1, 1)
            - d1 / (d2 * (d1 + d2)) * part(2, 1)
        )
        d1, d2 = dx[n - 3], dx[n - 2]
        end = (
            d2 / (d1 * (d1 + d2)) * part(n - 3, 1)
            - (d2 + d1) / (d1 * d2) * part(n - 2, 1)
            + (2.0 * d2 + d1) / (d2 * (d1 + d2)) * part(n - 1, 1)
        )
    else:
        start = (-1.5 * part(0, 1) + 2.0 * part(1, 1) - 0.5 * part(2, 1)) / h
        end = (0.5 * part(n - 3, 1) - 2.0 * part(n - 2, 1) + 1.5 * part(n - 1, 1)) / h
    return E.cat([start, interior, end], axis)


@export
def gradient(input, *, spacing=1, dim=None, edge_order: int = 1):
    """``torch.gradient``: a tuple of the estimated derivatives of ``input`` along each of
    ``dim`` (an int, a sequence of ints, or every dimension), by second-order central
    differences inside and one-sided differences of order ``edge_order`` (1 or 2) at the
    edges, numpy.gradient's formulas. ``spacing``: a number (every dimension's step), a
    sequence of numbers (one per dim) or of 1-d coordinate tensors (one per dim, each as long
    as its dimension: unevenly spaced samples). Integer input gives the default float dtype.
    Differentiable in the input (and in coordinate tensors)."""
    name = "gradient"
    f = to_tensor(input)
    if dim is None:
        dims = list(range(f.ndim))
    elif isinstance(dim, int):
        dims = [dim]
    else:
        dims = list(dim)
    dims = [normalize_axis(name, d, f.ndim) for d in dims]
    if len(set(dims)) != len(dims):
        raise ShapeError(f"dim {dim} contains a dimension twice", op=name)
    if edge_order not in (1, 2):
        raise ArgumentError(
            f"torch.gradient only supports edge_order=1 and edge_order=2, got {edge_order}"
        )
    if spacing is None:  # (PyTorch's "unspecified": unit steps)
        spacing = 1
    if isinstance(spacing, TensorBase):
        raise ArgumentTypeError(
            "gradient: spacing must be a number or a sequence of numbers or of 1-d tensors, "
            "not one tensor"
        )
    if isinstance(spacing, (list, tuple)):
        steps = list(spacing)
        if len(steps) != len(dims):
            raise ShapeError(
                f"torch.gradient expected spacing to be unspecified, a scalar or it's spacing "
                f"and dim arguments to have the same length, but got a spacing argument of "
                f"length {len(steps)} and a dim argument of length {len(dims)}.",
                op=name,
            )
    else:
        steps = [spacing] * len(dims)
    for d in dims:
        if f.shape[d] < edge_order + 1:
            raise ShapeError(
                f"torch.gradient expected each dimension size to be at least edge_order+1 "
                f"(dimension {d} of shape {tuple(f.shape)} with edge_order={edge_order})",
                op=name,
            )
    if not (f.dtype.is_floating_point or f.dtype.is_complex):
        f = E.cast(f, dt.get_default_dtype())
    results = []
    for d, h in zip(dims, steps):
        if isinstance(h, TensorBase):
            if h.ndim != 1 or h.shape[0] != f.shape[d]:
                raise ShapeError(
                    f"torch.gradient expected each tensor to be on the same device and to have "
                    f"as many elements as its dimension: coordinates of shape {tuple(h.shape)} "
                    f"for dimension {d} of size {f.shape[d]}",
                    op=name,
                )
            if not (h.dtype.is_floating_point or h.dtype.is_complex):
                h = E.cast(h, f.dtype)
        elif _items.is_item(h):  # (a traced .item(): a weak scalar in the arithmetic)
            pass
        elif isinstance(h, bool) or not isinstance(h, (int, float, complex)):
            raise ArgumentTypeError(
                f"gradient: spacing must hold numbers or 1-d tensors, got {h!r}"
            )
        results.append(_gradient_one(f, d, h, edge_order))
    return tuple(results)
