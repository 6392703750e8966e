"""Linear interpolation along one axis as one op each way: ``interpolate``'s linear, bilinear
and trilinear modes (functional/resample.py) resample one spatial axis at a time with it.

``linear_resample(x, i0, i1, w0, w1; axis)``: ``take(x, i0, axis) * w0 + take(x, i1, axis) *
w1``, the weights (n_out,) in x's dtype broadcast along ``axis``: each product rounded to x's
dtype, then their sum, as the composite of ``index_select``, ``mul`` and ``add`` it replaces
computes (so the results are that composite's, bit for bit). Its gradient with respect to x is
``linear_resample_backward(g, i0, i1, w0, w1; axis, size)``: zeros of x's shape with ``g * w0``'s
slices added at ``i0`` along the axis, and separately ``g * w1``'s at ``i1``, the two sums then
added (``index_select``'s gradient, ``index_backward``'s sums in its order, for each tap, summed
as the tape sums the two). Each is linear in its first operand and the other's adjoint, so
each one's VJP is the other; the weights' gradients (the interpolation's weights are
constants, but a caller may differentiate them) are the sums of the products over every
dimension but the axis.

The composite ran five full-size NumPy passes each way with their temporaries (two gathers, two
products, a sum; forward: a U-Net's (8, 32, 64, 64) upsampling took about 6 ms forward and 7
backward); the fast rules (kernels/cresample.py) run one C pass each, the NumPy kernels' bits.
"""

from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from ..types import TensorType
from . import api as E
from ._index_plan import FULL
from ._registry import OpDef, apply, register
from ._rules import Layout
from ._scatter_kernels import add_slices
from ._util import elementwise_cost, fmt_shape, require_float

__all__ = ["LINEAR_RESAMPLE", "LINEAR_RESAMPLE_BACKWARD"]


def _check_taps(op: str, x, i0, i1, w0, w1, axis) -> int:
    """The number of taps (outputs along the axis), after checking the operands."""
    require_float(op, x, w0, w1)
    if not isinstance(axis, int) or isinstance(axis, bool) or not 0 <= axis < len(x.shape):
        raise ShapeError(f"axis {axis!r} is not a dimension of {fmt_shape(x.shape)}", op=op)
    if len(i0.shape) != 1:
        raise ShapeError(f"the indices must be 1-D, got shape {fmt_shape(i0.shape)}", op=op)
    m = i0.shape[0]
    for t in (i1, w0, w1):
        if tuple(t.shape) != (m,):
            raise ShapeError(
                f"indices and weights must share one (n,) shape, got {fmt_shape(i0.shape)} "
                f"and {fmt_shape(t.shape)}",
                op=op,
            )
    for t in (i0, i1):
        if not t.dtype.is_integer:
            raise ShapeError(f"the indices must be integers, got {t.dtype}", op=op)
    if w0.dtype != x.dtype or w1.dtype != x.dtype:
        raise ShapeError(
            f"the weights ({w0.dtype}, {w1.dtype}) must have the values' dtype {x.dtype}", op=op
        )
    return m


def _along(w: np.ndarray, axis: int, ndim: int) -> np.ndarray:
    shape = [1] * ndim
    shape[axis] = w.shape[0]
    return w.reshape(shape)


# ----------------------------------------------------------------------------- forward


def _infer(x, i0, i1, w0, w1, *, axis):
    m = _check_taps("linear_resample", x, i0, i1, w0, w1, axis)
    shape = list(x.shape)
    shape[axis] = m
    return TensorType(tuple(shape), x.dtype)


def _kernel(x, i0, i1, w0, w1, *, axis):
    lo = np.take(x, i0, axis=axis) * _along(w0, axis, x.ndim)
    hi = np.take(x, i1, axis=axis) * _along(w1, axis, x.ndim)
    return lo + hi


def _fast(x, i0, i1, w0, w1, *, axis):
    from ..kernels import cresample

    return cresample.resample(x, i0, i1, w0, w1, axis)


def _weight_grads(c, g, values):
    """The weights' gradients: sum of ``g * take(values, i)`` over every dimension but the
    axis, for each weight whose gradient is needed."""
    axis, need = c.attrs["axis"], c.needs_input_grad
    _, i0, i1, _, _ = c.inputs
    rest = tuple(d for d in range(g.ndim) if d != axis)
    grads = []
    for k, i in ((3, i0), (4, i1)):
        grads.append(E.sum(g * E.index_select(values, axis, i), rest) if need[k] else None)
    return grads


def _vjp(c, g):
    x, i0, i1, w0, w1 = c.inputs
    axis = c.attrs["axis"]
    need = c.needs_input_grad
    gx = None
    if need[0]:
        size = c.in_types[0].shape[axis]
        gx = apply(LINEAR_RESAMPLE_BACKWARD, g, i0, i1, w0, w1, axis=axis, size=size)
    return (gx, None, None, *_weight_grads(c, g, x))


def _onnx(e):
    x, i0, i1, w0, w1 = e.inputs
    axis, ndim = e.attrs["axis"], len(e.in_types[0].shape)
    shape = [1] * ndim
    shape[axis] = -1
    terms = [
        e.node("Mul", [e.node("Gather", [x, i], axis=axis), e.node("Reshape", [w, e.ints(shape)])])
        for i, w in ((i0, w0), (i1, w1))
    ]
    return e.node("Add", terms)


LINEAR_RESAMPLE = register(
    OpDef(
        name="linear_resample",
        layout=Layout((0,)),  # (channels-last in, out: PyTorch's)
        kind="index",
        infer=_infer,
        kernel=_kernel,
        fast=_fast,
        vjp=_vjp,
        cost=elementwise_cost(3),
        onnx=_onnx,
        doc="linear_resample(x, i0, i1, w0, w1; axis): take(x, i0) * w0 + take(x, i1) * w1 "
        "along axis (interpolate's linear modes, one axis at a time)",
    )
)


# ----------------------------------------------------------------------------- backward


def _grad_infer(g, i0, i1, w0, w1, *, axis, size):
    m = _check_taps("linear_resample_backward", g, i0, i1, w0, w1, axis)
    if g.shape[axis] != m:
        raise ShapeError(
            f"the gradient of shape {fmt_shape(g.shape)} has {g.shape[axis]} entries along axis "
            f"{axis}, not the {m} taps",
            op="linear_resample_backward",
        )
    shape = list(g.shape)
    shape[axis] = size
    return TensorType(tuple(shape), g.dtype)


def _grad_kernel(g, i0, i1, w0, w1, *, axis, size):
    shape = list(g.shape)
    shape[axis] = size
    shape = tuple(shape)
    lo = add_slices(shape, axis, i0, g * _along(w0, axis, g.ndim))
    hi = add_slices(shape, axis, i1, g * _along(w1, axis, g.ndim))
    return lo + hi


def _grad_fast(g, i0, i1, w0, w1, *, axis, size):
    from ..kernels import cresample

    return cresample.resample_backward(g, i0, i1, w0, w1, axis, size)


def _grad_vjp(c, a):
    _, i0, i1, w0, w1 = c.inputs
    need = c.needs_input_grad
    ga = apply(LINEAR_RESAMPLE, a, i0, i1, w0, w1, axis=c.attrs["axis"]) if need[0] else None
    # d/dw0 of sum(a * scatter(g * w0)) = sum over the rest of g * take(a, i0)
    return (ga, None, None, *_weight_grads(c, c.inputs[0], a))


def _onnx_grad(e):
    from .indexing import _INDEX_BACKWARD

    g, i0, i1, w0, w1 = e.inputs
    axis, size = e.attrs["axis"], e.attrs["size"]
    g_type = e.in_types[0]
    ndim = len(g_type.shape)
    shape = [1] * ndim
    shape[axis] = -1
    spec = (FULL,) * axis + (("tensor",),)
    in_shape = list(g_type.shape)
    in_shape[axis] = size
    sums = []
    for i, w, t in ((i0, w0, e.in_types[1]), (i1, w1, e.in_types[2])):
        term = e.node("Mul", [g, e.node("Reshape", [w, e.ints(shape)])])
        (summed,) = e.call(
            _INDEX_BACKWARD,
            [term, i],
            {"spec": spec, "in_shape": tuple(in_shape)},
            in_types=[g_type, t],
        )
        sums.append(summed)
    return e.node("Add", sums)


LINEAR_RESAMPLE_BACKWARD = register(
    OpDef(
        name="linear_resample_backward",
        layout=Layout((0,)),  # (channels-last in, out: PyTorch's)
        kind="index",
        infer=_grad_infer,
        kernel=_grad_kernel,
        fast=_grad_fast,
        vjp=_grad_vjp,
        cost=elementwise_cost(4),
        onnx=_onnx_grad,
        doc="linear_resample_backward(g, i0, i1, w0, w1; axis, size): linear_resample's "
        "gradient with respect to x (its adjoint): g * w0 added at i0 plus g * w1 added at i1",
    )
)
