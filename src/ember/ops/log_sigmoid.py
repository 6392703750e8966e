"""``log_sigmoid`` and ``log_sigmoid_backward``: F.logsigmoid one op each way, eagerly and in
graphs (PyTorch's ``aten::log_sigmoid_forward`` and ``aten::log_sigmoid_backward``).

As a composite of selections, ``exp``, ``log1p`` and a subtraction, eager ``F.logsigmoid`` ran
five NumPy ops forward and more backward, each with its own dispatch and temporaries: 2-3x
PyTorch's time on an activation-sized tensor. Each op here has a C expression, which runs it
eagerly as one C loop (ops/_half.py, ops/_vector_loops.py) and fuses it in graphs.

Values are PyTorch's formulas, in its order of operations (its CPU kernel's scalar path):

- ``log_sigmoid(x) = (x < 0 ? x : 0) - log1p(exp(-|x|))``, stable at both ends;
- its gradient ``g * (x < 0 ? 1 - q : q)``, ``q = z / (1 + z)``, ``z = exp(-|x|)``: sigmoid(-x)
  without overflow (PyTorch's ``(max_deriv - sign * q) * g``, whose ``0 - (-q)`` is ``q``
  exactly), so 0.5 at 0.

The second derivative is PyTorch's ``log_sigmoid_double_backward``: ``(a g) (s - 1) s``,
``s = sigmoid(x)``; linear in ``g``, the backward op itself on the incoming gradient.
"""

from __future__ import annotations

import numpy as np

from . import _attr_rules as R
from ._registry import OpDef, apply, register
from ._util import elementwise_cost, require_float, same_type
from .piecewise import _on_arrays, _same_types


def _exp_minus_abs(x):
    z = np.abs(x)
    np.negative(z, out=z)
    return np.exp(z, out=z)


@_on_arrays
def _log_sigmoid_kernel(x):
    t = x.dtype.type
    out = np.log1p(_exp_minus_abs(x))
    return np.subtract(np.where(np.less(x, t(0)), x, t(0)), out, out=out)


def _log_sigmoid_vjp(c, g):
    return (apply(LOG_SIGMOID_BACKWARD, g, c.inputs[0]),)


@_on_arrays
def _log_sigmoid_grad_kernel(g, x):
    t = x.dtype.type
    z = _exp_minus_abs(x)
    q = np.divide(z, np.add(t(1), z), out=z)
    slope = np.where(np.less(x, t(0)), np.subtract(t(1), q), q)
    return np.multiply(slope, g, out=slope)


def _log_sigmoid_grad_vjp(c, a):
    from . import api as E

    g, x = c.inputs
    s = E.sigmoid(x)
    return apply(LOG_SIGMOID_BACKWARD, a, x), (a * g) * (s - 1) * s


def _onnx_log_sigmoid(e):
    x = e.inputs[0]
    dtype = e.in_types[0].dtype
    below = e.node("Min", [x, e.scalar(0, dtype)])
    return e.node("Sub", [below, e.node("Softplus", [e.node("Neg", [e.node("Abs", [x])])])])


def _onnx_log_sigmoid_backward(e):
    g, x = e.inputs
    return e.node("Mul", [g, e.node("Sigmoid", [e.node("Neg", [x])])])


def _infer(x):
    require_float("log_sigmoid", x)
    return same_type(x)


NO_ATTRS = R.NO_ATTRS  # (ops/_attr_rules.py)


LOG_SIGMOID_BACKWARD = register(
    OpDef(
        name="log_sigmoid_backward",
        attrs=NO_ATTRS,
        onnx=_onnx_log_sigmoid_backward,
        kind="elementwise",
        infer=lambda g, x: _same_types("log_sigmoid_backward", g, x),
        kernel=_log_sigmoid_grad_kernel,
        vjp=_log_sigmoid_grad_vjp,
        cost=elementwise_cost(6),
        c=(
            "({{ {T} z_ = exp{f}(-fabs{f}({1})); {T} q_ = z_ / (({T})1 + z_); "
            "({1} < 0 ? ({T})1 - q_ : q_) * {0}; }})"
        ),
        doc="log_sigmoid_backward(g, x): g sigmoid(-x), as exp(-|x|) / (1 + exp(-|x|))",
    )
)

LOG_SIGMOID = register(
    OpDef(
        name="log_sigmoid",
        attrs=NO_ATTRS,
        onnx=_onnx_log_sigmoid,
        kind="elementwise",
        infer=_infer,
        kernel=_log_sigmoid_kernel,
        vjp=_log_sigmoid_vjp,
        save_inputs=(0,),
        cost=elementwise_cost(5),
        c="(({0} < 0 ? {0} : ({T})0) - log1p{f}(exp{f}(-fabs{f}({0}))))",
        doc="log_sigmoid(x): min(x, 0) - log1p(exp(-|x|))",
    )
)
