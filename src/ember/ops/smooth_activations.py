"""SiLU, softplus and ELU (with SELU and CELU, its scaled forms) as one op each way, eagerly
and in graphs.

As composites of ``sigmoid``, ``exp``, ``where`` and arithmetic, eager ``F.silu`` ran two NumPy
ops forward and five backward, ``F.softplus`` and ``F.elu`` five and about ten, each with its
own dispatch and temporaries: 2-4x PyTorch's time on an activation-sized tensor. These ops each
have a C expression (the coefficients attributes, written into the loop as constants), which
runs them eagerly as one C loop (ops/_half.py) and fuses them with their neighbours in graphs.

Values and gradients are PyTorch's, read off the input, which each op saves:

- ``silu(x) = x sigmoid(x)``; its gradient ``g s (1 + x (1 - s))``, ``s = sigmoid(x)``.
- ``softplus(x; beta, threshold) = log1p(exp(beta x)) / beta``, and ``x`` itself where
  ``beta x > threshold``; its gradient ``g sigmoid(beta x)`` there (PyTorch's
  ``g z / (z + 1)``, ``z = exp(beta x)``, without its overflow to NaN for a large threshold),
  ``g`` beyond.
- ``elu(x; alpha, scale, input_scale) = scale x`` where ``x > 0``, else
  ``expm1(input_scale x) alpha scale``; its gradient ``g scale``, else
  ``g input_scale (alpha scale) exp(input_scale x)`` (at 0 the negative side's, as PyTorch's).
  ``F.selu`` is PyTorch's constants, ``F.celu`` ``input_scale = 1 / alpha``.

The backward ops' own VJPs are second derivatives in ember ops (PyTorch has double backward
for all three).
"""

from __future__ import annotations

import numpy as np

from ..errors import EmberError
from . import _attr_rules as R
from ._registry import OpDef, apply, register
from ._select import select_bits
from ._util import elementwise_cost, require_float, same_type
from .piecewise import _on_arrays, _same_types


def _check_coefficients(op: str, attrs: dict) -> None:
    # the coefficients become C constants in fused loops (a graph file's attributes included)
    for name, value in attrs.items():
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not np.isfinite(value):
            raise EmberError(f"{name} must be a finite real number, got {value!r}", op=op)


def _unary_infer(op: str):
    def infer(x, **attrs):
        require_float(op, x)
        _check_coefficients(op, attrs)
        return same_type(x)

    return infer


def _backward_infer(op: str):
    def infer(g, x, **attrs):
        _check_coefficients(op, attrs)
        return _same_types(op, g, x)

    return infer


# ------------------------------------------------------------------------------------- silu


def _sigmoid(v):
    """1 / (1 + exp(-v)) in four passes (PyTorch's formula for these ops; the C expressions'
    too): at -inf, exp's inf gives 0."""
    e = np.negative(v)
    with np.errstate(over="ignore"):  # (exp's inf there is the formula's, as in PyTorch)
        np.exp(e, out=e)
    e += v.dtype.type(1)
    return np.reciprocal(e, out=e)


@_on_arrays
def _silu_kernel(x):
    # PyTorch's x / (1 + exp(-x)), as the C expression
    e = np.negative(x)
    with np.errstate(over="ignore", invalid="ignore"):  # (exp's inf: -0; -inf / inf: NaN)
        np.exp(e, out=e)
        e += x.dtype.type(1)
        return np.divide(x, e, out=e)


def _silu_vjp(c, g):
    return (apply(SILU_BACKWARD, g, c.inputs[0]),)


@_on_arrays
def _silu_grad_kernel(g, x):
    # g (s (1 + x (1 - s))), s = 1 / (1 + exp(-x)), as the C expression (PyTorch multiplies
    # g s first, which a tiny g takes below the normal range)
    s = _sigmoid(x)
    t = np.subtract(x.dtype.type(1), s)
    np.multiply(t, x, out=t)
    t += x.dtype.type(1)
    np.multiply(s, t, out=s)
    return np.multiply(g, s, out=s)


def _silu_grad_vjp(c, a):
    # linear in g; in x: d/dx [s (1 + x (1 - s))] = s (1 - s) (2 + x (1 - 2 s))
    from . import api as E

    g, x = c.inputs
    s = E.sigmoid(x)
    return apply(SILU_BACKWARD, a, x), a * g * (s * (1 - s)) * (2 + x * (1 - 2 * s))


def _onnx_silu(e):
    return e.node("Mul", [e.inputs[0], e.node("Sigmoid", [e.inputs[0]])])


def _onnx_silu_backward(e):
    g, x = e.inputs
    dtype = e.in_types[1].dtype
    one = e.scalar(1, dtype)
    s = e.node("Sigmoid", [x])
    slope = e.node("Add", [one, e.node("Mul", [x, e.node("Sub", [one, s])])])
    return e.node("Mul", [g, e.node("Mul", [s, slope])])


# attribute rules (ops/_attr_rules.py): what a graph file may hold
ELU_ATTRS = {k: R.Float(nan=True) for k in ("alpha", "scale", "input_scale")}
SOFTPLUS_ATTRS = {"beta": R.Float(nan=True), "threshold": R.Float(nan=True)}
NO_ATTRS = R.NO_ATTRS


SILU_BACKWARD = register(
    OpDef(
        name="silu_backward",
        attrs=NO_ATTRS,
        onnx=_onnx_silu_backward,
        kind="elementwise",
        infer=_backward_infer("silu_backward"),
        cached_infer=True,
        kernel=_silu_grad_kernel,
        vjp=_silu_grad_vjp,
        cost=elementwise_cost(8),
        c=(
            "({{ {T} s_ = ({T})1 / (({T})1 + exp{f}(-{1})); "
            "{0} * (s_ * (({T})1 + {1} * (({T})1 - s_))); }})"
        ),
        doc="silu_backward(g, x): g s (1 + x (1 - s)), s = sigmoid(x)",
    )
)

SILU = register(
    OpDef(
        name="silu",
        attrs=NO_ATTRS,
        onnx=_onnx_silu,
        kind="elementwise",
        infer=_unary_infer("silu"),
        cached_infer=True,
        kernel=_silu_kernel,
        vjp=_silu_vjp,
        save_inputs=(0,),
        cost=elementwise_cost(5),
        c="({0} / (({T})1 + exp{f}(-{0})))",
        doc="silu(x): x sigmoid(x)",
    )
)


# --------------------------------------------------------------------------------- softplus


@_on_arrays
def _softplus_kernel(x, *, beta, threshold):
    t = x.dtype.type
    bx = np.multiply(x, t(beta))
    linear = np.greater(bx, t(threshold))
    np.minimum(bx, t(threshold), out=bx)  # (the linear side's exp never overflows)
    with np.errstate(over="ignore"):  # (a threshold past exp's range: inf, as PyTorch's)
        np.exp(bx, out=bx)
    np.log1p(bx, out=bx)
    if beta != 1:
        np.divide(bx, t(beta), out=bx)
    return select_bits(linear, np.array(x, copy=True), bx, overwrite=True)


def _softplus_vjp(c, g):
    return (apply(SOFTPLUS_BACKWARD, g, c.inputs[0], **c.attrs),)


@_on_arrays
def _softplus_grad_kernel(g, x, *, beta, threshold):
    t = x.dtype.type
    bx = np.multiply(x, t(beta))
    linear = np.greater(bx, t(threshold))
    s = _sigmoid(bx)
    np.multiply(g, s, out=s)
    return select_bits(linear, np.array(g, copy=True), s, overwrite=True)


def _softplus_grad_vjp(c, a):
    # linear in g; in x: d/dx [g sigmoid(beta x)] = g beta s (1 - s) below the threshold
    from . import api as E

    g, x = c.inputs
    beta, threshold = c.attrs["beta"], c.attrs["threshold"]
    bx = x * beta
    s = E.sigmoid(bx)
    # (PyTorch's: zero from the threshold itself on, where the first derivative is still s)
    curve = E.where(bx < threshold, a * g * (s * (1 - s)) * beta, 0)
    return apply(SOFTPLUS_BACKWARD, a, x, **c.attrs), curve


def _onnx_softplus(e):
    x = e.inputs[0]
    dtype = e.in_types[0].dtype
    beta = e.scalar(e.attrs["beta"], dtype)
    bx = e.node("Mul", [x, beta])
    linear = e.node("Greater", [bx, e.scalar(e.attrs["threshold"], dtype)])
    soft = e.node("Div", [e.node("Softplus", [bx]), beta])
    return e.node("Where", [linear, x, soft])


def _onnx_softplus_backward(e):
    g, x = e.inputs
    dtype = e.in_types[1].dtype
    bx = e.node("Mul", [x, e.scalar(e.attrs["beta"], dtype)])
    linear = e.node("Greater", [bx, e.scalar(e.attrs["threshold"], dtype)])
    return e.node("Where", [linear, g, e.node("Mul", [g, e.node("Sigmoid", [bx])])])


SOFTPLUS_BACKWARD = register(
    OpDef(
        name="softplus_backward",
        attrs=SOFTPLUS_ATTRS,
        onnx=_onnx_softplus_backward,
        kind="elementwise",
        infer=_backward_infer("softplus_backward"),
        cached_infer=True,
        kernel=_softplus_grad_kernel,
        vjp=_softplus_grad_vjp,
        cost=elementwise_cost(6),
        c=(
            "({{ {T} b_ = {1} * {beta:compute}; "
            "b_ > {threshold:compute} ? {0} : {0} * (({T})1 / (({T})1 + exp{f}(-b_))); }})"
        ),
        doc="softplus_backward(g, x; beta, threshold): g sigmoid(beta x), g above threshold",
    )
)

SOFTPLUS = register(
    OpDef(
        name="softplus",
        attrs=SOFTPLUS_ATTRS,
        onnx=_onnx_softplus,
        kind="elementwise",
        infer=_unary_infer("softplus"),
        cached_infer=True,
        kernel=_softplus_kernel,
        vjp=_softplus_vjp,
        save_inputs=(0,),
        cost=elementwise_cost(5),
        c=(
            "({{ {T} b_ = {0} * {beta:compute}; b_ > {threshold:compute} ? {0} : "
            "log1p{f}(exp{f}(b_ > {threshold:compute} ? {threshold:compute} : b_)) / "
            "{beta:compute}; }})"
        ),
        doc="softplus(x; beta, threshold): log1p(exp(beta x)) / beta, x where beta x > threshold",
    )
)


# -------------------------------------------------------------------------------------- elu


@_on_arrays
def _elu_kernel(x, *, alpha, scale, input_scale):
    t = x.dtype.type
    positive = np.greater(x, 0)
    negative = np.minimum(x, t(0))  # (the positive side's exp never overflows)
    if input_scale != 1:
        np.multiply(negative, t(input_scale), out=negative)
    with np.errstate(over="ignore"):  # (a negative input_scale: PyTorch's inf too)
        np.expm1(negative, out=negative)
    np.multiply(negative, t(alpha) * t(scale), out=negative)
    kept = np.multiply(x, t(scale)) if scale != 1 else np.array(x, copy=True)
    return select_bits(positive, kept, negative, overwrite=True)


def _elu_vjp(c, g):
    return (apply(ELU_BACKWARD, g, c.inputs[0], **c.attrs),)


@_on_arrays
def _elu_grad_kernel(g, x, *, alpha, scale, input_scale):
    t = x.dtype.type
    negative = np.minimum(x, t(0))
    if input_scale != 1:
        np.multiply(negative, t(input_scale), out=negative)
    with np.errstate(over="ignore"):
        np.exp(negative, out=negative)
    slope = np.multiply(g, t(input_scale))
    np.multiply(slope, t(alpha) * t(scale), out=slope)
    np.multiply(slope, negative, out=slope)
    kept = np.multiply(g, t(scale)) if scale != 1 else np.array(g, copy=True)
    return select_bits(np.greater(x, 0), kept, slope, overwrite=True)


def _elu_grad_vjp(c, a):
    # linear in g; in x: the negative side's slope grows as input_scale times itself
    from . import api as E

    g, x = c.inputs
    alpha, scale, k = c.attrs["alpha"], c.attrs["scale"], c.attrs["input_scale"]
    # (PyTorch: zero at 0 itself, where the first derivative is already the negative side's)
    curve = E.where(x < 0, a * g * (k * k * alpha * scale) * E.exp(E.minimum(x, 0) * k), 0)
    return apply(ELU_BACKWARD, a, x, **c.attrs), curve


def _onnx_elu(e):
    x = e.inputs[0]
    dtype = e.in_types[0].dtype
    alpha, scale, k = (e.attrs[n] for n in ("alpha", "scale", "input_scale"))
    zero = e.scalar(0, dtype)
    inside = e.node("Mul", [e.node("Min", [x, zero]), e.scalar(k, dtype)])
    negative = e.node("Sub", [e.node("Exp", [inside]), e.scalar(1, dtype)])
    negative = e.node("Mul", [negative, e.scalar(alpha * scale, dtype)])
    kept = e.node("Mul", [x, e.scalar(scale, dtype)])
    return e.node("Where", [e.node("Greater", [x, zero]), kept, negative])


def _onnx_elu_backward(e):
    g, x = e.inputs
    dtype = e.in_types[1].dtype
    alpha, scale, k = (e.attrs[n] for n in ("alpha", "scale", "input_scale"))
    zero = e.scalar(0, dtype)
    grows = e.node("Exp", [e.node("Mul", [e.node("Min", [x, zero]), e.scalar(k, dtype)])])
    slope = e.node("Mul", [g, e.node("Mul", [grows, e.scalar(k * alpha * scale, dtype)])])
    kept = e.node("Mul", [g, e.scalar(scale, dtype)])
    return e.node("Where", [e.node("Greater", [x, zero]), kept, slope])


ELU_BACKWARD = register(
    OpDef(
        name="elu_backward",
        attrs=ELU_ATTRS,
        onnx=_onnx_elu_backward,
        kind="elementwise",
        infer=_backward_infer("elu_backward"),
        cached_infer=True,
        kernel=_elu_grad_kernel,
        vjp=_elu_grad_vjp,
        cost=elementwise_cost(5),
        c=(
            "({1} > 0 ? {0} * {scale:compute} : {0} * {input_scale:compute} * "
            "({alpha:compute} * {scale:compute}) * "
            "exp{f}(({1} > 0 ? ({T})0 : {1}) * {input_scale:compute}))"
        ),
        doc="elu_backward(g, x; alpha, scale, input_scale): g scale where x > 0, else "
        "g input_scale alpha scale exp(input_scale x)",
    )
)

ELU = register(
    OpDef(
        name="elu",
        attrs=ELU_ATTRS,
        onnx=_onnx_elu,
        kind="elementwise",
        infer=_unary_infer("elu"),
        cached_infer=True,
        kernel=_elu_kernel,
        vjp=_elu_vjp,
        save_inputs=(0,),
        cost=elementwise_cost(4),
        c=(
            "({0} > 0 ? {0} * {scale:compute} : "
            "expm1{f}(({0} > 0 ? ({T})0 : {0}) * {input_scale:compute}) * "
            "({alpha:compute} * {scale:compute}))"
        ),
        doc="elu(x; alpha, scale, input_scale): scale x where x > 0, else "
        "expm1(input_scale x) alpha scale",
    )
)
