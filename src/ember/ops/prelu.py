"""prelu as one op, with PyTorch's two backward ops (``_prelu_kernel_backward``'s halves).

As a composite ``where(x > 0, x, w * x)`` its gradients had the right values, but the input's
(``where(x > 0, g, w * g)``) was built without the input and the weight's (``x * g`` below 0,
summed to the weight's shape) without the weight, so a second-order gradient of a loss linear
in the result said x, or the weight, was unused where PyTorch differentiates to zeros there.
Here each backward op takes the gradient, the input and the weight, and its VJP returns the
mixed second derivatives (d/dweight of the input's gradient, d/dx of the weight's) and zeros
for the operand it is piecewise constant or constant in.

``weight`` broadcasts to the input (prelu's public function reshapes a per-channel weight to
``(C, 1, ...)``); the weight's gradient is computed at the input's shape, then summed to the
weight's. PyTorch's convention at 0: the gradient there is the negative side's.
"""

from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from ..types import TensorType
from . import api as E
from ._registry import OpDef, apply, register
from ._util import broadcast_shapes, elementwise_cost, require_float, zero_input_grad


def _reduce_to(g, t):
    return g if tuple(g.shape) == tuple(t.shape) else E.sum_to(g, tuple(t.shape))


def _check(op: str, x, w, g=None) -> TensorType:
    operands = (x, w) if g is None else (g, x, w)
    require_float(op, *operands)
    if any(t.dtype != x.dtype for t in operands):
        raise ShapeError(f"the operands {', '.join(map(str, operands))} must share a dtype", op=op)
    if g is not None and tuple(g.shape) != tuple(x.shape):
        raise ShapeError(f"the gradient {g} must have the input's type {x}", op=op)
    if broadcast_shapes(op, tuple(x.shape), tuple(w.shape)) != tuple(x.shape):
        raise ShapeError(f"the weight {w} must broadcast to the input {x}", op=op)
    return TensorType(tuple(x.shape), x.dtype)


def _prelu_infer(x, w):
    return _check("prelu", x, w)


def _prelu_kernel(x, w):
    return np.asarray(np.where(x > 0, x, w * x), dtype=x.dtype)


def _prelu_vjp(c, g):
    x, w = c.inputs
    nx, nw = c.needs_input_grad
    return (
        apply(PRELU_BACKWARD, g, x, w) if nx else None,
        _reduce_to(apply(PRELU_WEIGHT_BACKWARD, g, x, w), c.in_types[1]) if nw else None,
    )


def _grad_infer(g, x, w):
    return _check("prelu_backward", x, w, g)


def _grad_kernel(g, x, w):
    return np.asarray(np.where(x > 0, g, w * g), dtype=g.dtype)


def _grad_vjp(c, a):
    # linear in g (the same factors); in w, a * g below 0 (summed to w's shape); piecewise
    # constant in x: zeros, as PyTorch's
    g, x, w = c.inputs
    ng, _, nw = c.needs_input_grad
    return (
        apply(PRELU_BACKWARD, a, x, w) if ng else None,
        zero_input_grad(c, 1),
        _reduce_to(E.where(x > 0, 0, a * g), c.in_types[2]) if nw else None,
    )


def _weight_grad_infer(g, x, w):
    return _check("prelu_weight_backward", x, w, g)


def _weight_grad_kernel(g, x, w):
    return np.asarray(np.where(x > 0, np.zeros((), g.dtype), x * g), dtype=g.dtype)


def _weight_grad_vjp(c, a):
    # linear in g; in x, a * g below 0; the weight does not enter: zeros, as PyTorch's
    g, x, w = c.inputs
    ng, nx, _ = c.needs_input_grad
    return (
        apply(PRELU_WEIGHT_BACKWARD, a, x, w) if ng else None,
        E.where(x > 0, 0, a * g) if nx else None,
        zero_input_grad(c, 2),
    )


def _onnx_prelu(e):
    return e.node("PRelu", e.inputs)


def _onnx_grad(e):
    g, x, w = e.inputs
    positive = e.node("Greater", [x, e.scalar(0, e.in_types[1].dtype)])
    return e.node("Where", [positive, g, e.node("Mul", [w, g])])


def _onnx_weight_grad(e):
    g, x, _ = e.inputs
    positive = e.node("Greater", [x, e.scalar(0, e.in_types[1].dtype)])
    return e.node("Where", [positive, e.scalar(0, e.in_types[0].dtype), e.node("Mul", [x, g])])


PRELU_BACKWARD = register(
    OpDef(
        name="prelu_backward",
        onnx=_onnx_grad,
        kind="elementwise",
        infer=_grad_infer,
        kernel=_grad_kernel,
        vjp=_grad_vjp,
        cost=elementwise_cost(2),
        c="({1} > 0 ? {0} : {2} * {0})",
        doc="prelu_backward(g, x, w): g where x > 0, else w * g (w broadcast to x)",
    )
)

PRELU_WEIGHT_BACKWARD = register(
    OpDef(
        name="prelu_weight_backward",
        onnx=_onnx_weight_grad,
        kind="elementwise",
        infer=_weight_grad_infer,
        kernel=_weight_grad_kernel,
        vjp=_weight_grad_vjp,
        cost=elementwise_cost(2),
        c="({1} > 0 ? ({T})0 : {1} * {0})",
        doc="prelu_weight_backward(g, x, w): 0 where x > 0, else x * g, at x's shape (the "
        "weight's gradient before its sum to w's shape; w only for its zero gradient)",
    )
)

PRELU = register(
    OpDef(
        name="prelu",
        grad_fn="PreluKernelBackward0",
        onnx=_onnx_prelu,
        kind="elementwise",
        infer=_prelu_infer,
        kernel=_prelu_kernel,
        vjp=_prelu_vjp,
        cost=elementwise_cost(2),
        c="({0} > 0 ? {0} : {1} * {0})",
        doc="prelu(x, w): x where x > 0, else w * x (w broadcast to x)",
    )
)
