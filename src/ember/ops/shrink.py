"""threshold, hardshrink and softshrink as one op each way, with PyTorch's backward ops.

As composites of ``where``, their gradients were ``where(mask, 0, g)``: correct values, but
built of the incoming gradient alone, so a second-order gradient (``create_graph=True``) of a
loss linear in their result said the input was unused, where PyTorch's ``threshold_backward``
and ``hardshrink_backward`` (softshrink's too) differentiate to zeros in their input. Here the
backward ops take the input and their VJPs return those zeros (``zero_input_grad``): linear in
the gradient under the same mask, piecewise constant in the input.

Values and gradients are PyTorch's: ``threshold`` is ``value`` where ``x <= threshold``, else
``x``; its gradient ``g`` where ``x > threshold`` or NaN. ``hardshrink`` is 0 where
``-lambd <= x <= lambd``, else ``x``; ``softshrink`` is 0 there, ``x - lambd`` above,
``x + lambd`` below (NaN stays NaN); their gradient is ``g`` outside the band (NaN included).
The attributes are rounded to the tensor's dtype (as the composites compared them), in the
kernels and in the C expressions alike (cfuse's ``{name}`` constants), so the ops fuse in graphs.
"""

from __future__ import annotations

import numpy as np

from ..errors import EmberError, ShapeError
from ..types import TensorType
from ._registry import OpDef, apply, register
from ._util import elementwise_cost, require_float, same_type, zero_input_grad


def _check_real(op: str, name: str, value) -> None:
    # attributes become C constants in fused loops (a graph file's attributes included)
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise EmberError(f"{name} must be a real number, got {value!r}", op=op)


def _const(x, value):
    """``value`` rounded to ``x``'s dtype (a 0-d array of it)."""
    return np.asarray(value, dtype=x.dtype)


def _grad_infer(op: str, g, x) -> TensorType:
    require_float(op, g, x)
    if tuple(g.shape) != tuple(x.shape) or g.dtype != x.dtype:
        raise ShapeError(f"the gradient {g} must have the input's type {x}", op=op)
    return TensorType(tuple(x.shape), x.dtype)


# -------------------------------------------------------------------------------- threshold


def _threshold_infer(x, *, threshold, value):
    if not x.dtype.is_integer:  # (integers, not bool: PyTorch's CPU kernel's)
        require_float("threshold", x)
    _check_real("threshold", "threshold", threshold)
    _check_real("threshold", "value", value)
    return same_type(x)


def _threshold_kernel(x, *, threshold, value):
    return np.where(x <= _const(x, threshold), _const(x, value), x)


def _threshold_vjp(c, g):
    return (apply(THRESHOLD_BACKWARD, g, c.inputs[0], threshold=c.attrs["threshold"]),)


def _threshold_grad_infer(g, x, *, threshold):
    _check_real("threshold_backward", "threshold", threshold)
    return _grad_infer("threshold_backward", g, x)


def _threshold_grad_kernel(g, x, *, threshold):
    return np.where(x <= _const(x, threshold), np.zeros((), g.dtype), g)


def _threshold_grad_vjp(c, a):
    # linear in the gradient (the same mask); piecewise constant in x: zeros, as PyTorch's
    return apply(THRESHOLD_BACKWARD, a, c.inputs[1], **c.attrs), zero_input_grad(c, 1)


def _onnx_threshold(e):
    (x,) = e.inputs
    dtype = e.in_types[0].dtype
    below = e.node("LessOrEqual", [x, e.scalar(e.attrs["threshold"], dtype)])
    return e.node("Where", [below, e.scalar(e.attrs["value"], dtype), x])


def _onnx_threshold_backward(e):
    g, x = e.inputs
    dtype = e.in_types[1].dtype
    below = e.node("LessOrEqual", [x, e.scalar(e.attrs["threshold"], dtype)])
    return e.node("Where", [below, e.scalar(0, e.in_types[0].dtype), g])


THRESHOLD_BACKWARD = register(
    OpDef(
        name="threshold_backward",
        onnx=_onnx_threshold_backward,
        kind="elementwise",
        infer=_threshold_grad_infer,
        kernel=_threshold_grad_kernel,
        vjp=_threshold_grad_vjp,
        cost=elementwise_cost(2),
        # NaN x compares false: the gradient passes, as the kernel's and PyTorch's
        c="({1} <= {threshold} ? ({T})0 : {0})",
        doc="threshold_backward(g, x; threshold): 0 where x <= threshold, else g (NaN x: g)",
    )
)

THRESHOLD = register(
    OpDef(
        name="threshold",
        onnx=_onnx_threshold,
        kind="elementwise",
        infer=_threshold_infer,
        kernel=_threshold_kernel,
        vjp=_threshold_vjp,
        save_inputs=(0,),
        cost=elementwise_cost(2),
        c="({0} <= {threshold} ? ({T}){value} : {0})",
        doc="threshold(x; threshold, value): value where x <= threshold, else x",
    )
)


# ------------------------------------------------------------------- hardshrink, softshrink


def _lambd_infer(op: str, lambd) -> None:
    _check_real(op, "lambd", lambd)


def _hardshrink_infer(x, *, lambd):
    require_float("hardshrink", x)
    _lambd_infer("hardshrink", lambd)
    return same_type(x)


def _band(x, lambd):
    """Where ``-lambd <= x <= lambd`` (never for NaN)."""
    lam = _const(x, lambd)
    inside = np.asarray(x >= -lam)
    inside &= x <= lam
    return inside


def _hardshrink_kernel(x, *, lambd):
    return np.where(_band(x, lambd), np.zeros((), x.dtype), x)


def _softshrink_infer(x, *, lambd):
    require_float("softshrink", x)
    _lambd_infer("softshrink", lambd)
    if not lambd >= 0:
        raise EmberError(f"lambd must be non-negative, got {lambd!r}", op="softshrink")
    return same_type(x)


def _softshrink_kernel(x, *, lambd):
    # x - lambd above the band, x + lambd below it; NaN (neither) stays NaN
    lam = _const(x, lambd)
    shifted = np.where(x > 0, x - lam, x + lam)
    return np.where(_band(x, lambd), np.zeros((), x.dtype), shifted).astype(x.dtype, copy=False)


def _shrink_vjp(c, g):
    return (apply(SHRINK_BACKWARD, g, c.inputs[0], lambd=c.attrs["lambd"]),)


def _shrink_grad_infer(g, x, *, lambd):
    _lambd_infer("shrink_backward", lambd)
    return _grad_infer("shrink_backward", g, x)


def _shrink_grad_kernel(g, x, *, lambd):
    return np.where(_band(x, lambd), np.zeros((), g.dtype), g)


def _shrink_grad_vjp(c, a):
    # linear in the gradient (the same band); piecewise constant in x: zeros, as PyTorch's
    return apply(SHRINK_BACKWARD, a, c.inputs[1], **c.attrs), zero_input_grad(c, 1)


def _onnx_band(e, x, dtype):
    lam = e.attrs["lambd"]
    above = e.node("GreaterOrEqual", [x, e.scalar(-lam, dtype)])
    return e.node("And", [above, e.node("LessOrEqual", [x, e.scalar(lam, dtype)])])


def _onnx_hardshrink(e):
    # (not ONNX's Shrink: it makes NaN 0, where PyTorch's and this op keep it)
    (x,) = e.inputs
    dtype = e.in_types[0].dtype
    return e.node("Where", [_onnx_band(e, x, dtype), e.scalar(0, dtype), x])


def _onnx_softshrink(e):
    (x,) = e.inputs
    dtype = e.in_types[0].dtype
    lam = e.scalar(e.attrs["lambd"], dtype)
    positive = e.node("Greater", [x, e.scalar(0, dtype)])
    shifted = e.node("Where", [positive, e.node("Sub", [x, lam]), e.node("Add", [x, lam])])
    return e.node("Where", [_onnx_band(e, x, dtype), e.scalar(0, dtype), shifted])


def _onnx_shrink_backward(e):
    g, x = e.inputs
    band = _onnx_band(e, x, e.in_types[1].dtype)
    return e.node("Where", [band, e.scalar(0, e.in_types[0].dtype), g])


SHRINK_BACKWARD = register(
    OpDef(
        name="shrink_backward",
        onnx=_onnx_shrink_backward,
        kind="elementwise",
        infer=_shrink_grad_infer,
        kernel=_shrink_grad_kernel,
        vjp=_shrink_grad_vjp,
        cost=elementwise_cost(3),
        c="(({1} >= -{lambd} && {1} <= {lambd}) ? ({T})0 : {0})",
        doc="shrink_backward(g, x; lambd): 0 where -lambd <= x <= lambd, else g (NaN x: g); "
        "hardshrink's and softshrink's gradient",
    )
)

HARDSHRINK = register(
    OpDef(
        name="hardshrink",
        onnx=_onnx_hardshrink,
        kind="elementwise",
        infer=_hardshrink_infer,
        kernel=_hardshrink_kernel,
        vjp=_shrink_vjp,
        save_inputs=(0,),
        cost=elementwise_cost(2),
        c="(({0} >= -{lambd} && {0} <= {lambd}) ? ({T})0 : {0})",
        doc="hardshrink(x; lambd): 0 where -lambd <= x <= lambd, else x",
    )
)

SOFTSHRINK = register(
    OpDef(
        name="softshrink",
        onnx=_onnx_softshrink,
        kind="elementwise",
        infer=_softshrink_infer,
        kernel=_softshrink_kernel,
        vjp=_shrink_vjp,
        save_inputs=(0,),
        cost=elementwise_cost(3),
        c="(({0} >= -{lambd} && {0} <= {lambd}) ? ({T})0 : "
        "({0} > 0 ? {0} - {lambd} : {0} + {lambd}))",
        doc="softshrink(x; lambd >= 0): 0 where -lambd <= x <= lambd, x - lambd above, "
        "x + lambd below",
    )
)
