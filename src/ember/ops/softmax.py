"""softmax and log_softmax along one axis as primitives (the public functions, with PyTorch's
arguments, live in ember.functional.softmax).

They are primitives rather than composites because they are measurably better: one kernel
instead of six recorded ops forward and about as many backward (a cross-entropy step on a small
batch took about a third of the time). Both kernels shift by the maximum along the axis, so
large logits neither overflow nor lose precision; half-precision inputs are computed in float32
and rounded once, as PyTorch does. The VJPs are written in ember ops and are differentiable again:

* softmax:      ``dx = y * (g - sum(g * y))``
* log_softmax:  ``dx = g - exp(y) * sum(g)``  (never divides, so it stays exact for large logits)
"""

from __future__ import annotations

import functools

import numpy as np

from .. import dtypes as dt
from ..errors import DTypeError, ShapeError
from ..types import TensorType
from . import _batching, _onnx
from . import api as E
from ._half import c_runs
from ._registry import REGISTRY, OpDef, apply, building_graph, register
from ._rules import RowStatistics
from ._unrecorded import apply_direct
from ._util import (
    elementwise_cost,
    fmt_shape,
    half_precision,
    require_float,
    require_same_dtype,
    value_bytes,
)

_HALF = (np.dtype(np.float16), np.dtype("bfloat16"))
_NARROW = (dt.bfloat16, dt.float16)  # what log_softmax's ``dtype`` widens (to float32)
_C_TYPES = (np.dtype(np.float32), np.dtype(np.float64), *_HALF)  # kernels/csoftmax.py's


def _infer(name):
    def infer(x, *, axis, **_):
        require_float(name, x)
        return TensorType(tuple(x.shape), x.dtype)

    return infer


def _shifted_exp(x, axis, safe=False):
    """``(x - max, exp(x - max))`` along ``axis``, in float32 for half-precision input. ``safe``
    shifts a slice whose maximum is not finite (all -inf: fully masked) by 0 instead."""
    if x.dtype in _HALF:
        x = x.astype(np.float32)
    if x.size == 0:  # (no maximum to take; the result is as empty)
        return x.copy(), x.copy()
    shift = x.max(axis=axis, keepdims=True)
    if safe:
        shift[~np.isfinite(shift)] = 0
    shifted = x - shift
    return shifted, np.exp(shifted)


def _last_axis(x, axis) -> bool:
    """Whether the C kernels (kernels/csoftmax.py: the last axis, float32/float64) apply."""
    return x.ndim > 0 and axis in (-1, x.ndim - 1)


@functools.cache
def _csoftmax():
    """kernels/csoftmax.py, imported at the first call (an import statement in a fast rule
    costs each small call half a microsecond)."""
    from ..kernels import csoftmax

    return csoftmax


@functools.cache
def _csoftmax_grad():
    """kernels/csoftmax_grad.py, as `_csoftmax`."""
    from ..kernels import csoftmax_grad

    return csoftmax_grad


def _softmax_fast(x, *, axis, safe):  # (any axis, half precision too: kernels/csoftmax.py)
    return _csoftmax().softmax(x, safe=safe, axis=axis) if x.ndim else None


def _log_softmax_fast(x, *, axis, dtype=None):
    csoftmax = _csoftmax()
    if dtype is not None and dtype.np != x.dtype:  # (16 bits read as float32: widened)
        return csoftmax.log_softmax(x, axis=axis, dtype=dtype.np) if x.ndim else None
    return csoftmax.log_softmax(x, axis=axis) if x.ndim else None


def _softmax_kernel(x, *, axis, safe):
    if x.ndim == 0:
        return np.ones_like(x)
    _, e = _shifted_exp(x, axis, safe)
    total = e.sum(axis=axis, keepdims=True)
    if safe:
        total[total == 0] = 1  # a fully masked slice gives zeros, as PyTorch's attention does
    e /= total
    # (row-major whatever the input's layout, as PyTorch's softmax allocates its result and as
    # the C kernel writes it; NumPy's ufuncs would keep a channels-last input's order)
    return np.ascontiguousarray(e.astype(x.dtype, copy=False))


def _log_softmax_kernel(x, *, axis, dtype=None):
    if dtype is not None:
        x = x.astype(dtype.np, copy=False)
    if x.ndim == 0:
        return np.zeros_like(x)
    if x.size == 0:
        return x.copy()
    shifted, e = _shifted_exp(x, axis)
    shifted -= np.log(e.sum(axis=axis, keepdims=True))
    return np.ascontiguousarray(shifted.astype(x.dtype, copy=False))  # (as softmax's)


def _workspace(node, layouts) -> int:
    """Both kernels' temporaries beyond the result. In float32/float64 one array beside the one
    that becomes the result (softmax: the shifted input; log_softmax: the exponentials). In half
    precision `_shifted_exp` holds three float32 arrays of the input's size at once (the float32
    copy of the input, the shifted input, the exponentials), six result sizes; later two of them
    sit beside the rounded result, fewer. So 5 result sizes beyond the result. Where the C
    kernels run on half precision (the last axis): none (they read and write the 16-bit
    values, a float row per thread aside)."""
    out_bytes = value_bytes(node.outputs[0])
    if not half_precision(node.outputs[0]):
        return out_bytes
    if c_runs() and _last_axis(node.outputs[0].type, node.attrs["axis"]):
        return 0
    return 5 * out_bytes


def _forward_workspace(node, layouts) -> int:
    """softmax's and log_softmax's temporaries beyond the result. Where kernels/csoftmax.py
    runs (a compiler; float32, float64 and half precision; any axis) it writes the result
    only, reading a contiguous input in place and a strided one through a contiguous copy;
    elsewhere the NumPy kernels' (`_workspace`)."""
    x = node.inputs[0]
    native = x.dtype.np in _C_TYPES and x.ndim and all(isinstance(d, int) for d in x.shape)
    widened = node.outputs[0].dtype != x.dtype  # (log_softmax's ``dtype``)
    if not (native and c_runs()):
        return _workspace(node, layouts) + (value_bytes(node.outputs[0]) if widened else 0)
    return 0 if layouts.contiguous(x) else value_bytes(x)


def _softmax_vjp(c, g):
    y = c.outputs[0]
    if y.ndim == 0:  # the softmax of one value is the constant 1
        return (E.zeros_like(g),)
    axis = c.attrs["axis"]
    if not building_graph():  # eagerly one row pass (a graph fuses the composite's loops)
        return (apply_direct(SOFTMAX_BACKWARD, y, g, axis=axis),)
    return (y * (g - E.sum(g * y, axis, keepdim=True)),)


def _log_softmax_vjp(c, g):
    y = c.outputs[0]
    if y.ndim == 0:  # the log_softmax of one value is the constant 0
        return (E.zeros_like(g),)
    axis = c.attrs["axis"]
    if not building_graph():
        dx = apply_direct(LOG_SOFTMAX_BACKWARD, y, g, axis=axis)
    else:
        dx = g - E.exp(y) * E.sum(g, axis, keepdim=True)
    if dx.dtype != c.in_types[0].dtype:  # (widened: the input's gradient, as cast's)
        dx = E.cast(dx, c.in_types[0].dtype)
    return (dx,)


def _log_softmax_infer(x, *, axis, dtype=None):
    require_float("log_softmax", x)
    if dtype is not None and not (x.dtype in _NARROW and dtype is dt.float32):
        raise DTypeError(
            f"log_softmax's dtype widens a bfloat16 or float16 input to float32, got {dtype} "
            f"for a {x.dtype} input",
            op="log_softmax",
        )
    return TensorType(tuple(x.shape), dtype or x.dtype)


def _reads_widened(attrs, source, widened):
    """log_softmax of a half-precision value (``source``, a TensorType) cast to float32 reads
    the 16-bit value itself (``dtype``: kernels/csoftmax.py widens each element as it reads
    it; the same bits)."""
    if attrs.get("dtype") is not None or widened is not dt.float32 or not source.shape:
        return None
    return {**attrs, "dtype": widened} if source.dtype in _NARROW else None


def _widened(add, x, attrs):
    wide = attrs.get("dtype")
    return add(REGISTRY["cast"], [x], {"dtype": wide}) if wide is not None else x


def _shifted(add, x, top, attrs):
    """``x - max`` as graph nodes, the widening cast made again for each reader (so fused loops
    read the 16-bit operand themselves rather than share a float32 copy of it)."""
    return add(REGISTRY["sub"], [_widened(add, x, attrs), top])


def _row_max(add, x, attrs):
    """The row maximum (`_shifted_exp`'s shift), or None where there are no rows."""
    shape = x.type.shape
    if not shape or any(d == 0 for d in shape):
        return None
    axis = attrs["axis"] % len(shape)
    return add(REGISTRY["max"], [_widened(add, x, attrs)], {"axes": (axis,), "keepdims": True})


def _exp_total(add, x, top, attrs):
    exps = add(REGISTRY["exp"], [_shifted(add, x, top, attrs)])
    axis = attrs["axis"] % len(x.type.shape)
    return add(REGISTRY["sum"], [exps], {"axes": (axis,), "keepdims": True})


def _log_softmax_statistics(add, x, attrs):
    """`_log_softmax_kernel`'s row maximum m and ``log(sum(exp(x - m)))``."""
    top = _row_max(add, x, attrs)
    if top is None:
        return None
    return top, add(REGISTRY["log"], [_exp_total(add, x, top, attrs)])


def _log_softmax_result(add, x, stats, attrs):
    top, log_total = stats
    return add(REGISTRY["sub"], [_shifted(add, x, top, attrs), log_total])


# ---- the backward ops: (y, g) -> dx, eagerly one C row pass (kernels/csoftmax_grad.py)


def _grad_infer(name):
    def infer(y, g, *, axis):
        require_float(name, y, g)
        require_same_dtype(name, y, g)
        if tuple(y.shape) != tuple(g.shape):
            raise ShapeError(
                f"the result {fmt_shape(y.shape)} and its gradient {fmt_shape(g.shape)} must "
                "have one shape",
                op=name,
            )
        return TensorType(tuple(y.shape), y.dtype)

    return infer


def _wide_sum(a, axis):
    """A row sum accumulated in double and rounded once (the C kernel's), in a's dtype."""
    return a.sum(axis=axis, keepdims=True, dtype=np.float64).astype(a.dtype)


def _softmax_grad_kernel(y, g, *, axis):
    if y.dtype in _HALF:
        return _softmax_grad_kernel(y.astype(np.float32), g.astype(np.float32), axis=axis).astype(
            y.dtype
        )
    return y * (g - _wide_sum(g * y, axis))


def _log_softmax_grad_kernel(y, g, *, axis):
    if y.dtype in _HALF:
        return _log_softmax_grad_kernel(
            y.astype(np.float32), g.astype(np.float32), axis=axis
        ).astype(y.dtype)
    return g - np.exp(y) * _wide_sum(g, axis)


def _softmax_grad_fast(y, g, *, axis):  # (half precision too: kernels/csoftmax_grad.py)
    return _csoftmax_grad().softmax_backward(y, g) if _last_axis(y, axis) else None


def _log_softmax_grad_fast(y, g, *, axis):
    return _csoftmax_grad().log_softmax_backward(y, g) if _last_axis(y, axis) else None


def _grad_batch(in_types, axes, attrs, k):
    """The result and its gradient carry the batch along one axis, not the softmax's."""
    rank = len(in_types[0].shape)
    if axes[0] != axes[1] or axes[0] is None:
        raise _batching.NotBatchable("the result and its gradient carry the batch differently")
    if axes[0] == attrs["axis"] % rank:
        raise _batching.NotBatchable(f"it works along the batch axis {axes[0]}")
    return _batching.Batched((axes[0],), attrs)


def _softmax_grad_vjp(c, a):
    """dx = y (g - s), s = sum(g y): d/dg = y (a - sum(a y)) (the same op on a), and
    d/dy = a (g - s) - g sum(a y)."""
    y, g = c.inputs
    axis = c.attrs["axis"]
    return (
        a * (g - E.sum(g * y, axis, keepdim=True)) - g * E.sum(a * y, axis, keepdim=True),
        apply(SOFTMAX_BACKWARD, y, a, axis=axis),
    )


def _log_softmax_grad_vjp(c, a):
    """dx = g - exp(y) S, S = sum(g): d/dg = a - sum(a exp(y)), d/dy = -a exp(y) S."""
    y, g = c.inputs
    axis = c.attrs["axis"]
    e = E.exp(y)
    return (
        -a * e * E.sum(g, axis, keepdim=True),
        a - E.sum(a * e, axis, keepdim=True),
    )


def _onnx_softmax_backward(e):
    y, g = e.inputs
    total = _onnx.reduce(e, "ReduceSum", e.node("Mul", [g, y]), _onnx_axes(e), True)
    return e.node("Mul", [y, e.node("Sub", [g, total])])


SOFTMAX_BACKWARD = register(
    OpDef(
        name="softmax_backward",
        onnx=_onnx_softmax_backward,
        kind="nn",
        infer=_grad_infer("softmax_backward"),
        cached_infer=True,
        kernel=_softmax_grad_kernel,
        fast=_softmax_grad_fast,
        vjp=_softmax_grad_vjp,
        cost=elementwise_cost(4),
        batch=_grad_batch,
        workspace=_workspace,
        doc="softmax_backward(y, g, axis): y * (g - sum(g * y)) along axis",
    )
)


def _onnx_log_softmax_backward(e):
    y, g = e.inputs
    total = _onnx.reduce(e, "ReduceSum", g, _onnx_axes(e), True)
    return e.node("Sub", [g, e.node("Mul", [e.node("Exp", [y]), total])])


LOG_SOFTMAX_BACKWARD = register(
    OpDef(
        name="log_softmax_backward",
        onnx=_onnx_log_softmax_backward,
        kind="nn",
        infer=_grad_infer("log_softmax_backward"),
        cached_infer=True,
        kernel=_log_softmax_grad_kernel,
        fast=_log_softmax_grad_fast,
        vjp=_log_softmax_grad_vjp,
        cost=elementwise_cost(4),
        batch=_grad_batch,
        workspace=_workspace,
        doc="log_softmax_backward(y, g, axis): g - exp(y) * sum(g) along axis",
    )
)


def _onnx_axes(e):
    """The axis a softmax rule reduces over: none for a 0-d tensor (a softmax over itself)."""
    return (e.attrs["axis"],) if e.in_types[0].shape else ()


def _onnx_scalar_softmax(e, value):
    """A 0-d softmax (1) or log-softmax (0), NaN kept as the kernel keeps it."""
    x = e.inputs[0]
    fill = _onnx.scalar(e, value, e.in_types[0].dtype)
    return e.node("Where", [e.node("IsNaN", [x]), x, fill])


def _onnx_softmax(e):
    x, axis = e.inputs[0], e.attrs["axis"]
    if not e.in_types[0].shape:
        return _onnx_scalar_softmax(e, 1)
    out = e.node("Softmax", [x], axis=axis)
    if not e.attrs.get("safe"):
        return out
    # safe: a slice that is all -inf gives zeros (ONNX's Softmax gives NaN there)
    dtype = e.in_types[0].dtype
    top = _onnx.reduce(e, "ReduceMax", x, (axis,), True)
    empty = e.node("Equal", [top, _onnx.scalar(e, -np.inf, dtype)])
    return e.node("Where", [empty, _onnx.scalar(e, 0, dtype), out])


SOFTMAX = register(
    OpDef(
        name="softmax",
        onnx=_onnx_softmax,
        kind="nn",
        infer=_infer("softmax"),
        cached_infer=True,
        kernel=_softmax_kernel,
        fast=_softmax_fast,
        vjp=_softmax_vjp,
        cost=elementwise_cost(5),  # max, subtract, exp, sum, divide
        save_inputs=(),
        save_outputs=(0,),
        batch=_batching.axis_rule("axis"),
        workspace=_forward_workspace,
        doc="softmax(x, axis, safe): exp(x) / sum(exp(x)) along axis, shifted by the maximum; "
        "safe: an all -inf slice gives zeros, not NaN",
    )
)


def _onnx_log_softmax(e):
    if not e.in_types[0].shape:
        return _onnx_scalar_softmax(e, 0)
    x = e.inputs[0]
    if e.attrs.get("dtype") is not None:  # (widened first, as the kernel computes)
        x = e.cast(x, e.attrs["dtype"])
    return e.node("LogSoftmax", [x], axis=e.attrs["axis"])


LOG_SOFTMAX = register(
    OpDef(
        name="log_softmax",
        onnx=_onnx_log_softmax,
        kind="nn",
        infer=_log_softmax_infer,
        cached_infer=True,
        kernel=_log_softmax_kernel,
        fast=_log_softmax_fast,
        vjp=_log_softmax_vjp,
        cost=elementwise_cost(5),  # max, subtract, exp, sum, log-subtract
        save_inputs=(),
        save_outputs=(0,),
        batch=_batching.axis_rule("axis"),
        workspace=_forward_workspace,
        reads_widened=_reads_widened,
        row_statistics=RowStatistics(_log_softmax_statistics, _log_softmax_result),
        doc="log_softmax(x, axis[, dtype]): x - max - log(sum(exp(x - max))) along axis, of x "
        "widened to dtype first when given",
    )
)
