"""The Huber and smooth L1 losses' elementwise terms as one op each way, eagerly and in graphs:
``huber(d; delta)``, ``smooth_l1(d; beta)`` of the difference ``d = input - target``, and
their gradients ``huber_backward(g, d; delta)``, ``smooth_l1_backward(g, d; beta)``.

As composites of ``abs``, a comparison, products and a selection, eager ``F.huber_loss`` ran
eight NumPy ops forward and more backward: 9x PyTorch's time forward, 5x with the gradient, on
a (512, 1024) pair (``F.smooth_l1_loss`` 6x and 4.6x). Each op here has a C expression, one
eager C loop where measured faster (ops/_half.py) and fused in graphs.

Values are PyTorch's CPU kernels' formulas, in their order of operations (``z = |d|``):

- ``huber``: ``z < delta ? 0.5 * z * z : delta * (z - 0.5 * delta)``; its gradient
  ``d <= -delta ? -(g * delta) : d >= delta ? g * delta : d * g``;
- ``smooth_l1`` (``beta > 0``): ``z < beta ? 0.5 * z * z / beta : z - 0.5 * beta``; its
  gradient ``d <= -beta ? -g : d >= beta ? g : d * g / beta``

(PyTorch multiplies its mean's ``1 / n`` in first; here the incoming gradient holds it). The
backward ops' VJPs are the second derivatives: linear in g, and ``a g`` (``a g / beta``)
strictly inside the quadratic part, 0 outside, as PyTorch's double backward.
"""

from __future__ import annotations

import numpy as np

from . import _attr_rules as R
from ._registry import OpDef, apply, register
from ._select import select_bits
from ._util import elementwise_cost
from .piecewise import _on_arrays
from .smooth_activations import _backward_infer, _unary_infer

# ----------------------------------------------------------------------------------- huber


@_on_arrays
def _huber_kernel(d, *, delta):
    t = d.dtype.type
    z = np.abs(d)
    quadratic = np.multiply(np.multiply(t(0.5), z), z)
    linear = np.multiply(t(delta), np.subtract(z, t(0.5) * t(delta)))
    return select_bits(np.less(z, t(delta)), quadratic, linear, overwrite=True)


@_on_arrays
def _huber_grad_kernel(g, d, *, delta):
    t = d.dtype.type
    scaled = np.multiply(g, t(delta))
    below = np.negative(scaled)  # (before the selection below writes into scaled)
    out = select_bits(np.greater_equal(d, t(delta)), scaled, np.multiply(d, g), overwrite=True)
    return select_bits(np.less_equal(d, -t(delta)), below, out, overwrite=True)


def _huber_vjp(c, g):
    return (apply(HUBER_BACKWARD, g, c.inputs[0], **c.attrs),)


def _huber_grad_vjp(c, a):
    from . import api as E

    g, d = c.inputs
    inside = E.abs(d) < c.attrs["delta"]
    return apply(HUBER_BACKWARD, a, d, **c.attrs), E.where(inside, a * g, 0)


def _onnx_huber(e):
    d = e.inputs[0]
    dtype = e.in_types[0].dtype
    delta, half = e.scalar(e.attrs["delta"], dtype), e.scalar(0.5, dtype)
    z = e.node("Abs", [d])
    quadratic = e.node("Mul", [e.node("Mul", [half, z]), z])
    shifted = e.node("Sub", [z, e.scalar(0.5 * e.attrs["delta"], dtype)])
    linear = e.node("Mul", [delta, shifted])
    return e.node("Where", [e.node("Less", [z, delta]), quadratic, linear])


def _onnx_clipped_grad(e, bound, inner):
    """``d <= -bound ? -outer : d >= bound ? outer : inner`` with ``outer = g * bound`` (huber)
    or ``g`` (smooth_l1)."""
    g, d = e.inputs
    dtype = e.in_types[1].dtype
    top = e.scalar(bound, dtype)
    outer = e.node("Mul", [g, top]) if inner == "huber" else g
    middle = e.node("Mul", [d, g])
    if inner == "smooth_l1":
        middle = e.node("Div", [middle, top])
    high = e.node("Where", [e.node("GreaterOrEqual", [d, top]), outer, middle])
    low = e.node("LessOrEqual", [d, e.scalar(-bound, dtype)])
    return e.node("Where", [low, e.node("Neg", [outer]), high])


# attribute rules (ops/_attr_rules.py): what a graph file may hold
HUBER_ATTRS = {"delta": R.Float(nan=True)}
SMOOTH_L1_ATTRS = {"beta": R.Float(nan=True)}


HUBER_BACKWARD = register(
    OpDef(
        name="huber_backward",
        attrs=HUBER_ATTRS,
        onnx=lambda e: _onnx_clipped_grad(e, e.attrs["delta"], "huber"),
        kind="elementwise",
        infer=_backward_infer("huber_backward"),
        kernel=_huber_grad_kernel,
        vjp=_huber_grad_vjp,
        cost=elementwise_cost(4),
        c=(
            "({1} <= -{delta:compute} ? -({0} * {delta:compute}) : "
            "({1} >= {delta:compute} ? {0} * {delta:compute} : {1} * {0}))"
        ),
        doc="huber_backward(g, d; delta): g times d clipped to [-delta, delta]",
    )
)

HUBER = register(
    OpDef(
        name="huber",
        attrs=HUBER_ATTRS,
        onnx=_onnx_huber,
        kind="elementwise",
        infer=_unary_infer("huber"),
        kernel=_huber_kernel,
        vjp=_huber_vjp,
        save_inputs=(0,),
        cost=elementwise_cost(5),
        c=(
            "({{ {T} z_ = fabs{f}({0}); z_ < {delta:compute} ? ({T})0.5 * z_ * z_ : "
            "{delta:compute} * (z_ - ({T})0.5 * {delta:compute}); }})"
        ),
        doc="huber(d; delta): 0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta)",
    )
)


# ------------------------------------------------------------------------------- smooth_l1


@_on_arrays
def _smooth_l1_kernel(d, *, beta):
    t = d.dtype.type
    z = np.abs(d)
    quadratic = np.divide(np.multiply(np.multiply(t(0.5), z), z), t(beta))
    linear = np.subtract(z, t(0.5) * t(beta))
    return select_bits(np.less(z, t(beta)), quadratic, linear, overwrite=True)


@_on_arrays
def _smooth_l1_grad_kernel(g, d, *, beta):
    t = d.dtype.type
    out = np.divide(np.multiply(d, g), t(beta))
    out = select_bits(np.greater_equal(d, t(beta)), np.array(g, copy=True), out, overwrite=True)
    return select_bits(np.less_equal(d, -t(beta)), np.negative(g), out, overwrite=True)


def _smooth_l1_vjp(c, g):
    return (apply(SMOOTH_L1_BACKWARD, g, c.inputs[0], **c.attrs),)


def _smooth_l1_grad_vjp(c, a):
    from . import api as E

    g, d = c.inputs
    beta = c.attrs["beta"]
    return apply(SMOOTH_L1_BACKWARD, a, d, **c.attrs), E.where(E.abs(d) < beta, a * g / beta, 0)


def _onnx_smooth_l1(e):
    d = e.inputs[0]
    dtype = e.in_types[0].dtype
    beta, half = e.scalar(e.attrs["beta"], dtype), e.scalar(0.5, dtype)
    z = e.node("Abs", [d])
    quadratic = e.node("Div", [e.node("Mul", [e.node("Mul", [half, z]), z]), beta])
    linear = e.node("Sub", [z, e.scalar(0.5 * e.attrs["beta"], dtype)])
    return e.node("Where", [e.node("Less", [z, beta]), quadratic, linear])


def _check_beta(op: str, beta) -> None:
    if not beta > 0:  # (beta = 0 is l1_loss: the callers take it there)
        from ..errors import EmberError

        raise EmberError(f"beta must be positive, got {beta!r}", op=op)


def _smooth_l1_infer(x, *, beta):
    _check_beta("smooth_l1", beta)
    return _unary_infer("smooth_l1")(x, beta=beta)


def _smooth_l1_grad_infer(g, x, *, beta):
    _check_beta("smooth_l1_backward", beta)
    return _backward_infer("smooth_l1_backward")(g, x, beta=beta)


SMOOTH_L1_BACKWARD = register(
    OpDef(
        name="smooth_l1_backward",
        attrs=SMOOTH_L1_ATTRS,
        onnx=lambda e: _onnx_clipped_grad(e, e.attrs["beta"], "smooth_l1"),
        kind="elementwise",
        infer=_smooth_l1_grad_infer,
        kernel=_smooth_l1_grad_kernel,
        vjp=_smooth_l1_grad_vjp,
        cost=elementwise_cost(4),
        c=(
            "({1} <= -{beta:compute} ? -{0} : "
            "({1} >= {beta:compute} ? {0} : {1} * {0} / {beta:compute}))"
        ),
        doc="smooth_l1_backward(g, d; beta): g times d / beta clipped to [-1, 1]",
    )
)

SMOOTH_L1 = register(
    OpDef(
        name="smooth_l1",
        attrs=SMOOTH_L1_ATTRS,
        onnx=_onnx_smooth_l1,
        kind="elementwise",
        infer=_smooth_l1_infer,
        kernel=_smooth_l1_kernel,
        vjp=_smooth_l1_vjp,
        save_inputs=(0,),
        cost=elementwise_cost(5),
        c=(
            "({{ {T} z_ = fabs{f}({0}); z_ < {beta:compute} ? "
            "({T})0.5 * z_ * z_ / {beta:compute} : z_ - ({T})0.5 * {beta:compute}; }})"
        ),
        doc="smooth_l1(d; beta): 0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta",
    )
)
