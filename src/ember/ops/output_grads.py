"""``sigmoid_backward`` and ``tanh_backward``: the gradients of sigmoid and tanh read off their
results, one op each (PyTorch's ``aten::sigmoid_backward`` and ``aten::tanh_backward``).

As composites (``g * (y * (1 - y))``, ``g * (1 - y * y)``) each backward ran three NumPy passes
with their dispatch: 1.9x PyTorch's sigmoid forward and backward on 1M float32 values. These
run one C loop eagerly where it is faster with NumPy's bits (ops/_half.py: IEEE arithmetic
only) and fuse in graphs. Values in PyTorch's order of operations: ``(g * (1 - y)) * y`` and
``g * (1 - y * y)``. Real floating dtypes only: complex gradients keep the composites with their
conjugates (ops/elementwise.py).

Second derivatives (PyTorch's): linear in g, the op itself on the incoming gradient; through
y, ``a g (1 - 2 y)`` and ``-2 a g y``.
"""

from __future__ import annotations

import numpy as np

from . import _attr_rules as R
from ._registry import OpDef, apply, register
from ._util import elementwise_cost
from .piecewise import _on_arrays, _same_types


@_on_arrays
def _sigmoid_grad_kernel(g, y):
    one = y.dtype.type(1)
    out = np.subtract(one, y)
    np.multiply(g, out, out=out)
    np.multiply(out, y, out=out)
    return out


@_on_arrays
def _tanh_grad_kernel(g, y):
    one = y.dtype.type(1)
    out = np.multiply(y, y)
    np.subtract(one, out, out=out)
    np.multiply(g, out, out=out)
    return out


def _sigmoid_grad_vjp(c, a):
    g, y = c.inputs
    return apply(SIGMOID_BACKWARD, a, y), a * g * (1 - 2 * y)


def _tanh_grad_vjp(c, a):
    g, y = c.inputs
    return apply(TANH_BACKWARD, a, y), a * g * y * -2


def _onnx_sigmoid_backward(e):
    g, y = e.inputs
    one = e.scalar(1, e.in_types[1].dtype)
    return e.node("Mul", [e.node("Mul", [g, e.node("Sub", [one, y])]), y])


def _onnx_tanh_backward(e):
    g, y = e.inputs
    one = e.scalar(1, e.in_types[1].dtype)
    return e.node("Mul", [g, e.node("Sub", [one, e.node("Mul", [y, y])])])


NO_ATTRS = R.NO_ATTRS  # (ops/_attr_rules.py)


SIGMOID_BACKWARD = register(
    OpDef(
        name="sigmoid_backward",
        attrs=NO_ATTRS,
        onnx=_onnx_sigmoid_backward,
        kind="elementwise",
        infer=lambda g, y: _same_types("sigmoid_backward", g, y),
        cached_infer=True,
        kernel=_sigmoid_grad_kernel,
        vjp=_sigmoid_grad_vjp,
        cost=elementwise_cost(3),
        c="(({0} * (({T})1 - {1})) * {1})",
        doc="sigmoid_backward(g, y): (g * (1 - y)) * y, sigmoid's gradient from its result y",
    )
)

TANH_BACKWARD = register(
    OpDef(
        name="tanh_backward",
        attrs=NO_ATTRS,
        onnx=_onnx_tanh_backward,
        kind="elementwise",
        infer=lambda g, y: _same_types("tanh_backward", g, y),
        cached_infer=True,
        kernel=_tanh_grad_kernel,
        vjp=_tanh_grad_vjp,
        cost=elementwise_cost(3),
        c="({0} * (({T})1 - {1} * {1}))",
        doc="tanh_backward(g, y): g * (1 - y * y), tanh's gradient from its result y",
    )
)
