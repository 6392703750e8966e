"""The running sum ``cumsum`` and product ``cumprod``, accumulated as PyTorch's CPU scans do.

Its gradient is exact where the input holds zeros, as PyTorch's is: the plain formula
``reversed_cumsum(g * y) / x`` divides by zero there. Along the scanned axis, with ``z`` the
first zero of a row,

* before ``z`` no divisor is zero and the plain formula holds (every output from ``z`` on is 0);
* at ``z`` the gradient is ``sum_{j >= z} g[j] * prod_{k <= j, k != z} x[k]``: the product
  before ``z`` times the sum, up to the second zero (every later product holds it), of ``g``
  times the running product of the values after ``z``;
* after ``z`` every product that holds ``x[i]`` also holds the zero ``x[z]``: 0.

The VJP is written in ember ops (cumprod, cumsum, where), so it is differentiable again.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..errors import ArgumentTypeError, DTypeError
from ..types import TensorType
from . import _onnx_reduce as oxr
from . import api as E
from ._registry import INPLACE, OpDef, apply, building_graph, export, register
from ._rules import Complex
from ._util import elementwise_cost, normalize_axis, pick_axis, value_bytes
from .cast import accumulated_as
from .promotion import to_tensor


def _out_dtype(d):
    return dt.int64 if d.is_bool or d.is_integer else d


# the accumulator PyTorch's CPU scans carry from element to element (each output rounded)
_ACC = {
    np.dtype(np.float32): np.float64,
    dt.float16.np: np.float32,
    dt.bfloat16.np: np.float32,
}


def _scan_infer(name: str):
    """The shape rule of the scan ``name``: the input's shape along a valid ``axis`` (a graph
    file's attribute is checked here: the C scan's extents come from it)."""

    def infer(x, *, axis):
        normalize_axis(name, axis, x.ndim)
        return TensorType(tuple(x.shape), _out_dtype(x.dtype))

    return infer


def _cumsum_vjp(c, g):
    axis = c.attrs["axis"]
    return (E.flip(E.cumsum(E.flip(g, axis), axis), axis),)


def _cumsum_kernel(x, *, axis):
    """Running sums accumulated as PyTorch does: float32 in double, float16 and bfloat16 in
    float32 (a float16 running sum stops growing at 2048 when adding ones), each output rounded
    once; integers and bools in int64."""
    out = _out_dtype(dt.from_numpy_dtype(x.dtype)).np
    acc = _ACC.get(x.dtype)
    if acc is None:
        return np.cumsum(x, axis=axis, dtype=out).reshape(x.shape)  # (0-d: NumPy gives (1,))
    return np.cumsum(x, axis=axis, dtype=acc).astype(out).reshape(x.shape)


def _scan_fast(name: str):
    """kernels/cscan.py's C scan of ``name`` (NumPy's bits: the same sequential sums or
    products, each rounded once) for float and half-precision inputs; None otherwise
    (integers, bools: NumPy's)."""

    def fast(x, *, axis):
        from ..kernels import cscan

        if x.dtype not in _ACC and x.dtype != np.float64:
            return None
        return getattr(cscan, name)(x, axis)

    fast.__name__ = f"_{name}_fast"
    return fast


def _scan_workspace(node, layouts) -> int:
    """The NumPy kernel's running values in the accumulation type before rounding: a float64
    array for float32, a float32 one for half precision; none where the C scan runs (its
    running values are registers)."""
    from ..kernels import cscan

    x = node.inputs[0]
    acc = _ACC.get(x.dtype.np)
    if acc is not None and cscan.available(x.dtype.np):
        return 0
    return 0 if acc is None else value_bytes(x) // x.dtype.itemsize * np.dtype(acc).itemsize


_CUMSUM = register(
    OpDef(
        name="cumsum",
        complex=Complex.GRADIENT,
        onnx=oxr.onnx_cumsum,
        kind="reduce",
        infer=_scan_infer("cumsum"),
        kernel=_cumsum_kernel,
        fast=_scan_fast("cumsum"),
        workspace=_scan_workspace,
        vjp=_cumsum_vjp,
        cost=elementwise_cost(1),
        save_inputs=(),
        doc="cumsum(x, axis): running sum along axis",
    )
)


def _scan(op, x, dim, axis, dtype):
    """``op`` along ``dim`` (or NumPy's ``axis``), the input cast to ``dtype`` first."""
    x = to_tensor(x)
    a = pick_axis(dim, axis)
    if a is None:
        raise ArgumentTypeError(f"{op.name} needs a dim")
    a = normalize_axis(op.name, a, x.ndim)
    return accumulated_as(op.name, x, dtype, lambda v: apply(op, v, axis=a), scan=True)


@export(method=True)
def cumsum(x, dim=None, *, axis=None, dtype=None):
    """Cumulative sum along ``dim``; ``dtype`` casts the input first (PyTorch's argument)."""
    return _scan(_CUMSUM, x, dim, axis, dtype)


# (PyTorch's out= refuses an operand partly overlapping out: ops/_out.py, ops/_overlap.py)
cumsum.out_overlap_refused = True


def _cumprod_kernel(x, *, axis):
    """Running products accumulated as PyTorch does: float32 in double, half precision in
    float32, each output rounded once; integers and bools in int64."""
    out = _out_dtype(dt.from_numpy_dtype(x.dtype)).np
    acc = _ACC.get(x.dtype, out)
    return np.cumprod(x, axis=axis, dtype=acc).astype(out, copy=False).reshape(x.shape)


def _reversed_cumsum(v, axis):
    return E.flip(E.cumsum(E.flip(v, axis), axis), axis)


def _zero_part(v):
    """``v`` where it is zero, 0 elsewhere: a sum of products that hold a zero of x is 0 (NaN
    where they also hold an infinity, which PyTorch's masked sums never read), but its
    derivative is not, and second derivatives need it."""
    return E.where(v == 0, v, 0)


def _cumprod_vjp(c, g):
    x, y = c.inputs[0], c.outputs[0]
    axis = c.attrs["axis"]
    if x.ndim == 0 or x.shape[axis] == 1:  # y is x: the gradient passes (NaN and inf too)
        return (g,)
    if x.dtype.is_complex:
        # the products are holomorphic: PyTorch's gradient, sum_k g_k conj(dy_k/dx_i), is the
        # conjugate of the real formula's sum_k conj(g_k) dy_k/dx_i
        return (E.conj(_cumprod_grad(x, y, E.conj(g), axis)),)
    return (_cumprod_grad(x, y, g, axis),)


def _cumprod_grad(x, y, g, axis):
    """sum over k >= i of g[k] * dy[k]/dx[i], exact where x holds zeros."""
    if not building_graph() and hasattr(x, "_data") and np.all(x._data):
        # eagerly, an input without zeros (PyTorch's shortcut, its bits): the plain formula
        # alone, where the selections below would each pass it through (their derivatives
        # too); only a zero gradient's sign may differ, which their + 0 would make +0.0
        return _reversed_cumsum(g * y, axis) / x
    is_zero = x == 0
    zeros_so_far = E.cumsum(is_zero, axis)
    before = zeros_so_far == 0  # no zero at or before this position
    first_zero = E.logical_and(is_zero, zeros_so_far == 1)
    gy = g * y
    # before the first zero: the sums of g * y from each position on, as PyTorch's only over
    # the positions before the zero (the later products are zero, or NaN past an infinity)
    beyond = _zero_part(E.sum(E.where(before, 0, gy), axis, keepdim=True))
    plain = (_reversed_cumsum(E.where(before, gy, 0), axis) + beyond) / E.where(before, x, 1)
    # at the first zero: the product before it times the sum, up to the second zero, of g[j]
    # times the running product of the values after the zero up to j
    segment = zeros_so_far == 1  # from the first zero up to the second
    after = E.cumprod(E.where(E.logical_and(segment, E.logical_not(is_zero)), x, 1), axis)
    at_zero = E.sum(after * E.where(segment, g, 0), axis, keepdim=True)
    at_zero = at_zero * E.cumprod(E.where(before, x, 1), axis)
    # and the products through the second zero
    through = E.cumprod(E.where(first_zero, 1, x), axis) * E.where(zeros_so_far > 1, g, 0)
    at_zero = at_zero + _zero_part(E.sum(through, axis, keepdim=True))
    return E.where(before, plain, E.where(first_zero, at_zero, 0))


def _onnx_cumprod(e):
    """A Scan along the axis carrying the running product, in the kernel's accumulator dtype
    (ONNX has CumSum only; a product through logarithms would be wrong for signs and zeros)."""
    x, t = e.inputs[0], e.in_types[0]
    out_type = e.out_types[0]
    if not t.shape:
        return e.cast(x, out_type.dtype)
    axis = e.attrs["axis"]
    acc = dt.from_numpy_dtype(np.dtype(_ACC.get(t.dtype.np, out_type.dtype.np)))
    if t.shape[axis] == 0:
        return e.cast(x, out_type.dtype)
    x = e.cast(x, acc)
    nd = len(t.shape)
    perm = [axis] + [d for d in range(nd) if d != axis]
    moved = e.node("Transpose", [x], perm=perm) if axis else x
    row = TensorType(tuple(t.shape[d] for d in perm[1:]), acc)

    def step(running, value):
        product = e.node("Mul", [running, value])
        return product, e.node("Identity", [product])

    ones = e.node("ConstantOfShape", [e.shape(row.shape)], value=np.ones(1, acc.np))
    body = e.body([row, row], step, "cumprod_step", [row, row])
    _, stacked = e.node("Scan", [ones, moved], outputs=2, body=body, num_scan_inputs=1)
    back = [perm.index(d) for d in range(nd)]
    out = e.node("Transpose", [stacked], perm=back) if axis else stacked
    return e.cast(out, out_type.dtype)


_CUMPROD = register(
    OpDef(
        name="cumprod",
        onnx=_onnx_cumprod,
        kind="reduce",
        infer=_scan_infer("cumprod"),
        kernel=_cumprod_kernel,
        vjp=_cumprod_vjp,
        cost=elementwise_cost(1),
        fast=_scan_fast("cumprod"),
        save_outputs=(0,),
        workspace=_scan_workspace,
        batch=None,
        complex=Complex.GRADIENT,
        doc="cumprod(x, axis): running product along axis",
    )
)


@export(method=True)
def cumprod(x, dim=None, *, axis=None, dtype=None):
    """Cumulative product along ``dim``; ``dtype`` casts the input first (PyTorch's argument).
    Integers and bools give int64. The gradient is exact at zeros (see the module)."""
    return _scan(_CUMPROD, x, dim, axis, dtype)


def _cumprod_in_place(x, dim=None, *, axis=None, dtype=None):
    """``x.cumprod_(dim)``: a ``dtype`` other than x's is refused, as PyTorch refuses it."""
    if dtype is not None and dt.as_dtype(dtype) is not x.dtype:
        raise DTypeError(
            f"the in-place result has x's dtype {x.dtype}; dtype={dt.as_dtype(dtype)} differs",
            op="cumprod_",
        )
    return cumprod(x, dim, axis=axis)


INPLACE["cumprod_"] = _cumprod_in_place
