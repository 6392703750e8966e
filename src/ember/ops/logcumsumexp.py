"""``logcumsumexp``: the running ``log(cumsum(exp(x)))`` along one axis, one op each way, as
PyTorch's CPU kernel and its backward compute it.

Forward: each running value log-added to the next element (NumPy's ``logaddexp.accumulate``,
the same ``max + log1p(exp(min - max))`` step as PyTorch's), carried as PyTorch carries it:
float32 in double, 16-bit floats in float32, each output rounded once. One pass, O(n).

Backward: PyTorch's formula (TensorFlow's), in ember ops, so it differentiates again: with
``r(v)`` the logcumsumexp of v read from the end,

    dx = exp(r(log g+ - y) + x) - exp(r(log g- - y) + x)

where ``log g+`` is log|g| where g > 0 and the dtype's lowest value elsewhere (``g-`` the same
for g < 0). Its values are PyTorch's, including where the exact derivative is not: an infinite
result gives 0 (a NaN where x is infinite too), and in float32 a result far from 0 (1e30)
swallows log|g|, as PyTorch's does.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from .. import dtypes as dt
from ..errors import KernelDTypeError
from . import _onnx
from . import api as E
from ._registry import OpDef, apply, export, register
from ._util import elementwise_cost, normalize_axis, same_type
from .promotion import to_tensor

# the accumulator PyTorch's CPU kernel carries (at::acc_type): wider than the stored dtype
_ACC = {
    np.dtype(np.float32): np.float64,
    dt.float16.np: np.float32,
    dt.bfloat16.np: np.float32,
}


def _infer(x, *, axis):
    if not x.dtype.is_floating_point:
        raise KernelDTypeError(
            f"logcumsumexp is defined for float tensors, got {x.dtype}", op="logcumsumexp"
        )
    return same_type(x)


def _kernel(x, *, axis):
    acc = _ACC.get(x.dtype, x.dtype)
    with np.errstate(all="ignore"):  # (inf - inf of two infinities: the infinity, silently)
        out = np.logaddexp.accumulate(x.astype(acc, copy=False), axis=axis)
    return out.astype(x.dtype, copy=False)


def _reversed(v, axis):
    return E.flip(apply(_LOGCUMSUMEXP, E.flip(v, axis), axis=axis), axis)


def _vjp(c, g):
    x, y, axis = c.inputs[0], c.outputs[0], c.attrs["axis"]
    lowest = float(ml_dtypes.finfo(g.dtype.np).min)
    # (lowest - y overflows to -inf where y > 0, as intended: silently, as in PyTorch, for
    # the eager kernels run inside)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        log_abs = E.log(E.abs(g))
        positive = E.where(g > 0, log_abs, lowest)
        negative = E.where(g < 0, log_abs, lowest)
        pos = E.exp(_reversed(positive - y, axis) + x)
        return (pos - E.exp(_reversed(negative - y, axis) + x),)


def _onnx_rule(e, x):
    """One log-sum-exp per prefix over a masked square (ONNX has no running log-add): the
    elements j <= i of prefix i kept, the others -inf; shifted by each prefix's finite
    maximum."""
    axis = e.attrs["axis"]
    shape, dtype = e.in_types[0].shape, e.in_types[0].dtype
    n = shape[axis]
    rows = _onnx.unsqueeze(e, x, (axis,))  # prefix i along axis, element j along axis + 1
    trailing = tuple(range(2, 2 + len(shape) - axis - 1))
    keep = _onnx.unsqueeze(e, _onnx.tri_mask(e, n, n), trailing)
    masked = e.node("Where", [keep, rows, _onnx.scalar(e, -np.inf, dtype)])
    shift = _onnx.reduce(e, "ReduceMax", masked, (axis + 1,), True)
    shift = e.node("Where", [e.node("IsInf", [shift]), _onnx.scalar(e, 0, dtype), shift])
    total = _onnx.reduce(
        e, "ReduceSum", e.node("Exp", [e.node("Sub", [masked, shift])]), (axis + 1,), True
    )
    out = e.node("Add", [e.node("Log", [total]), shift])
    return _onnx.squeeze(e, out, (axis + 1,))


_LOGCUMSUMEXP = register(
    OpDef(
        name="logcumsumexp",
        kind="reduce",
        infer=_infer,
        kernel=_kernel,
        vjp=_vjp,
        cost=elementwise_cost(4),
        save_inputs=(0,),
        save_outputs=(0,),
        onnx=_onnx.composite(_onnx_rule),
        doc="logcumsumexp(x, axis): running log(cumsum(exp(x))) along axis",
    )
)


@export(method=True)
def logcumsumexp(input, dim: int):
    """``log(cumsum(exp(x)))`` along ``dim`` without overflow or underflow: each running value
    is the previous one log-added to the next element. Float tensors only, as in PyTorch."""
    x = to_tensor(input)
    axis = normalize_axis("logcumsumexp", dim, max(x.ndim, 1))  # (PyTorch checks it first)
    if x.dtype.is_complex:
        return E.clone(x) if x.ndim == 0 else _complex_scan(x, axis)
    if not x.dtype.is_floating_point:
        raise KernelDTypeError(
            f"logcumsumexp is defined for float tensors, got {x.dtype}", op="logcumsumexp"
        )
    if x.ndim == 0:
        return E.clone(x)
    return apply(_LOGCUMSUMEXP, x, axis=axis)


def _complex_scan(x, axis: int):
    """PyTorch's complex running log-add-exp, step by step in ember ops (so it differentiates
    and captures): the first element as it is, then ``hi + log(1 + exp(lo - hi))`` with ``hi``
    whichever of the running value and the next element has the larger real part (the first
    on a tie), so imaginary parts add up as PyTorch's do rather than wrapping to the
    principal logarithm. (Its special cases of infinite real parts are not reproduced.)"""
    pieces = E.unbind(x, axis)
    if not pieces:
        return E.clone(x)
    running = pieces[0]
    out = [running]
    for piece in pieces[1:]:
        first = E.real(running) >= E.real(piece)
        hi, lo = E.where(first, running, piece), E.where(first, piece, running)
        running = hi + E.log(1 + E.exp(lo - hi))
        out.append(running)
    return E.stack(out, axis)
