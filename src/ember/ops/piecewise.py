"""leaky_relu, hardswish and hardsigmoid (the GANs' and MobileNetV3's activations) as one op
each way, eagerly and in graphs.

Built of ``where``, comparisons and arithmetic, eager ``F.leaky_relu`` ran three NumPy ops
forward and more backward, ``F.hardswish`` about nine, each with its own dispatch and
temporaries: 4x and 17x PyTorch's time on an activation-sized tensor (``F.hardsigmoid``,
seven ops, 14x). These run two to four
vectorized passes (selections on the values' bits, ops/_select.py), and in a graph their C
expressions (the slope an attribute, written into the loop as a constant) fuse with their
neighbours as the composites' did.

Gradients are PyTorch's: leaky_relu's is ``g`` where ``x > 0``, else ``g * slope`` (the slope at
0 and for NaN); hardswish's is 0 where ``x <= -3``, ``g * (x / 3 + 0.5)`` where ``-3 < x < 3``,
``g`` elsewhere (at 3, +inf and NaN: a NaN input stays NaN), read off the input, which each op
saves; hardsigmoid's is ``g / 6`` (``g`` times the dtype's 1/6, PyTorch's float32 product)
strictly between -3 and 3, else 0 (NaN inputs included), and its value PyTorch's
``clamp(x + 3, 0, 6) / 6``, bit for bit.
"""

from __future__ import annotations

import numpy as np

from ..errors import EmberError
from ..types import TensorType
from . import _attr_rules as R
from ._registry import OpDef, apply, register
from ._select import select_bits
from ._util import elementwise_cost, require_float, same_type, zero_input_grad


def _on_arrays(kernel):
    """``kernel`` run on 0-d operands as 1-element arrays (NumPy's ufuncs return scalars for
    0-d ones, which the in-place steps cannot write into), its result reshaped back; half
    precision computed in float32 and rounded once, as PyTorch's kernels and the C loops do."""

    def run(*arrays, **attrs):
        dtype = arrays[0].dtype
        if dtype.itemsize == 2:  # (float16, bfloat16)
            wide = [a.astype(np.float32) for a in arrays]
            return run(*wide, **attrs).astype(dtype)
        if arrays[0].ndim:
            return kernel(*arrays, **attrs)
        return kernel(*(np.reshape(a, (1,)) for a in arrays), **attrs).reshape(())

    run.__name__ = kernel.__name__
    return run


def _check_slope(op: str, slope) -> None:
    # the slope becomes a C constant in fused loops (a graph file's attributes included)
    if not isinstance(slope, (int, float)) or isinstance(slope, bool) or slope != slope:
        raise EmberError(f"negative_slope must be a real number, got {slope!r}", op=op)
    if abs(slope) == float("inf"):
        raise EmberError(f"negative_slope must be finite, got {slope!r}", op=op)


def _same_types(op: str, g, x) -> TensorType:
    require_float(op, g, x)
    if tuple(g.shape) != tuple(x.shape) or g.dtype != x.dtype:
        from ..errors import ShapeError

        raise ShapeError(f"the gradient {g} must have the input's type {x}", op=op)
    return TensorType(tuple(x.shape), x.dtype)


# ------------------------------------------------------------------------------- leaky_relu


def _leaky_infer(x, *, slope):
    require_float("leaky_relu", x)
    _check_slope("leaky_relu", slope)
    return same_type(x)


@_on_arrays
def _leaky_kernel(x, *, slope):
    scaled = np.multiply(x, x.dtype.type(slope))
    if 0 <= slope <= 1:  # max(x, slope x) is x for x > 0, slope x below (NaN propagates)
        return np.maximum(x, scaled, out=scaled)
    return select_bits(np.greater(x, 0), x, scaled)


def _leaky_vjp(c, g):
    return (apply(LEAKY_RELU_BACKWARD, g, c.inputs[0], **c.attrs),)


def _leaky_grad_infer(g, x, *, slope):
    _check_slope("leaky_relu_backward", slope)
    return _same_types("leaky_relu_backward", g, x)


@_on_arrays
def _leaky_grad_kernel(g, x, *, slope):
    scaled = np.multiply(g, g.dtype.type(slope))
    return select_bits(np.greater(x, 0), np.array(g, copy=True), scaled, overwrite=True)


def _leaky_grad_vjp(c, a):
    # linear in the gradient (the same factors); piecewise constant in x: zeros, as PyTorch's
    return apply(LEAKY_RELU_BACKWARD, a, c.inputs[1], **c.attrs), zero_input_grad(c, 1)


def _onnx_leaky(e):
    return e.node("LeakyRelu", e.inputs, alpha=float(e.attrs["slope"]))


def _onnx_leaky_backward(e):
    g, x = e.inputs
    dtype = e.in_types[0].dtype
    positive = e.node("Greater", [x, e.scalar(0, dtype)])
    scaled = e.node("Mul", [g, e.scalar(e.attrs["slope"], dtype)])
    return e.node("Where", [positive, g, scaled])


LEAKY_RELU_ATTRS = {"slope": R.Float(nan=True)}  # (ops/_attr_rules.py)
NO_ATTRS = R.NO_ATTRS


LEAKY_RELU_BACKWARD = register(
    OpDef(
        name="leaky_relu_backward",
        attrs=LEAKY_RELU_ATTRS,
        onnx=_onnx_leaky_backward,
        kind="elementwise",
        infer=_leaky_grad_infer,
        kernel=_leaky_grad_kernel,
        vjp=_leaky_grad_vjp,
        cost=elementwise_cost(2),
        c="({1} > 0 ? {0} : {0} * {slope:compute})",
        doc="leaky_relu_backward(g, x; slope): g where x > 0, else g * slope",
    )
)

LEAKY_RELU = register(
    OpDef(
        name="leaky_relu",
        attrs=LEAKY_RELU_ATTRS,
        onnx=_onnx_leaky,
        kind="elementwise",
        infer=_leaky_infer,
        kernel=_leaky_kernel,
        vjp=_leaky_vjp,
        save_inputs=(0,),
        cost=elementwise_cost(2),
        c="({0} > 0 ? {0} : {0} * {slope:compute})",
        doc="leaky_relu(x; slope): x where x > 0, else slope * x",
    )
)


# -------------------------------------------------------------------------------- hardswish


def _hardswish_infer(x):
    require_float("hardswish", x)
    return same_type(x)


@_on_arrays
def _hardswish_kernel(x):
    # x (x + 3) / 6 in the middle, 0 at and below -3, x at and above 3 (and for NaN), as the
    # C expression computes it; the middle piece over clipped values so that its products
    # never overflow where the outer pieces are taken
    m = np.clip(x, x.dtype.type(-3), x.dtype.type(3))
    mid = m + x.dtype.type(3)
    np.multiply(m, mid, out=mid)
    np.divide(mid, x.dtype.type(6), out=mid)
    inner = select_bits(np.less(x, 3), mid, np.array(x, copy=True), overwrite=True)
    return select_bits(np.less_equal(x, -3), np.zeros((), x.dtype), inner)


def _hardswish_vjp(c, g):
    return (apply(HARDSWISH_BACKWARD, g, c.inputs[0]),)


def _hardswish_grad_infer(g, x):
    return _same_types("hardswish_backward", g, x)


@_on_arrays
def _hardswish_grad_kernel(g, x):
    slope = np.divide(x, x.dtype.type(3))
    slope += x.dtype.type(0.5)
    np.multiply(slope, g, out=slope)
    inner = select_bits(np.less(x, 3), slope, np.array(g, copy=True), overwrite=True)
    return select_bits(np.less_equal(x, -3), np.zeros((), g.dtype), inner)


def _hardswish_grad_vjp(c, a):
    # linear in g; in x, the middle piece's slope changes at a rate 1 / 3: d/dx = g a / 3 there
    g, x = c.inputs
    from . import api as E

    middle = E.logical_and(E.logical_not(x <= -3), x < 3)
    return apply(HARDSWISH_BACKWARD, a, x), E.where(middle, a * g / 3, 0)


def _onnx_hardswish_backward(e):
    g, x = e.inputs
    dtype = e.in_types[1].dtype
    slope = e.node("Add", [e.node("Div", [x, e.scalar(3, dtype)]), e.scalar(0.5, dtype)])
    inner = e.node("Where", [e.node("Less", [x, e.scalar(3, dtype)]), e.node("Mul", [slope, g]), g])
    below = e.node("LessOrEqual", [x, e.scalar(-3, dtype)])
    return e.node("Where", [below, e.scalar(0, dtype), inner])


def _onnx_hardswish(e):
    if e.opset >= 14:
        return e.node("HardSwish", e.inputs)
    x = e.inputs[0]  # (HardSwish is opset 14: x * HardSigmoid(x) with its constants before)
    return e.node("Mul", [x, e.node("HardSigmoid", [x], alpha=1.0 / 6.0, beta=0.5)])


HARDSWISH_BACKWARD = register(
    OpDef(
        name="hardswish_backward",
        attrs=NO_ATTRS,
        onnx=_onnx_hardswish_backward,
        kind="elementwise",
        infer=_hardswish_grad_infer,
        kernel=_hardswish_grad_kernel,
        vjp=_hardswish_grad_vjp,
        cost=elementwise_cost(3),
        c="({1} <= -3 ? ({T})0 : ({1} < 3 ? ({1} / ({T})3 + ({T})0.5) * {0} : {0}))",
        doc="hardswish_backward(g, x): 0 where x <= -3, g (x / 3 + 1/2) below 3, else g",
    )
)

HARDSWISH = register(
    OpDef(
        name="hardswish",
        attrs=NO_ATTRS,
        onnx=_onnx_hardswish,
        kind="elementwise",
        infer=_hardswish_infer,
        kernel=_hardswish_kernel,
        vjp=_hardswish_vjp,
        save_inputs=(0,),
        cost=elementwise_cost(4),
        c="({0} <= -3 ? ({T})0 : ({0} < 3 ? {0} * ({0} + ({T})3) / ({T})6 : {0}))",
        doc="hardswish(x): 0 at and below -3, x (x + 3) / 6 below 3, x above",
    )
)


# ------------------------------------------------------------------------------ hardsigmoid


def _hardsigmoid_infer(x):
    require_float("hardsigmoid", x)
    return same_type(x)


@_on_arrays
def _hardsigmoid_kernel(x):
    # PyTorch's clamp(x + 3, 0, 6) / 6 (a NaN stays NaN: np.clip propagates it), as the C
    # expression computes it piece by piece
    t = x.dtype.type
    y = np.add(x, t(3))
    np.clip(y, t(0), t(6), out=y)
    np.divide(y, t(6), out=y)
    return y


def _hardsigmoid_vjp(c, g):
    return (apply(HARDSIGMOID_BACKWARD, g, c.inputs[0]),)


def _hardsigmoid_grad_infer(g, x):
    return _same_types("hardsigmoid_backward", g, x)


@_on_arrays
def _hardsigmoid_grad_kernel(g, x):
    t = x.dtype.type
    inside = np.logical_and(np.greater(x, t(-3)), np.less(x, t(3)))
    scaled = np.multiply(g, t(1) / t(6))  # (the dtype's 1/6: float32's in float32, as PyTorch)
    return select_bits(inside, scaled, np.zeros((), g.dtype), overwrite=True)


def _hardsigmoid_grad_vjp(c, a):
    # linear in g; piecewise constant in x (its derivative 0 almost everywhere)
    return apply(HARDSIGMOID_BACKWARD, a, c.inputs[1]), zero_input_grad(c, 1)


def _onnx_hardsigmoid(e):
    return e.node("HardSigmoid", e.inputs, alpha=1.0 / 6.0, beta=0.5)


def _onnx_hardsigmoid_backward(e):
    g, x = e.inputs
    dtype = e.in_types[1].dtype
    inside = e.node(
        "And",
        [e.node("Greater", [x, e.scalar(-3, dtype)]), e.node("Less", [x, e.scalar(3, dtype)])],
    )
    scaled = e.node("Mul", [g, e.scalar(float(np.dtype(dtype.np).type(1) / 6), dtype)])
    return e.node("Where", [inside, scaled, e.scalar(0, dtype)])


HARDSIGMOID_BACKWARD = register(
    OpDef(
        name="hardsigmoid_backward",
        attrs=NO_ATTRS,
        onnx=_onnx_hardsigmoid_backward,
        kind="elementwise",
        infer=_hardsigmoid_grad_infer,
        kernel=_hardsigmoid_grad_kernel,
        vjp=_hardsigmoid_grad_vjp,
        cost=elementwise_cost(3),
        c="(({1} > -3 && {1} < 3) ? {0} * (({T})1 / ({T})6) : ({T})0)",
        doc="hardsigmoid_backward(g, x): g / 6 strictly between -3 and 3, else 0",
    )
)

HARDSIGMOID = register(
    OpDef(
        name="hardsigmoid",
        attrs=NO_ATTRS,
        onnx=_onnx_hardsigmoid,
        kind="elementwise",
        infer=_hardsigmoid_infer,
        kernel=_hardsigmoid_kernel,
        vjp=_hardsigmoid_vjp,
        save_inputs=(0,),
        cost=elementwise_cost(3),
        c="({0} <= -3 ? ({T})0 : ({0} >= 3 ? ({T})1 : ({0} + ({T})3) / ({T})6))",
        doc="hardsigmoid(x): clamp(x + 3, 0, 6) / 6",
    )
)
