"""GELU as primitives, exact (erf) and tanh forms, forward and backward.

One pass each way (kernels/cnorm_act.py) where the composite ran five to nine NumPy passes, and
NumPy's (SciPy's) erf is slow. The formulas are PyTorch's CPU kernels':

* ``gelu``:       ``x * 0.5 * (1 + erf(x / sqrt 2))``
* ``gelu_tanh``:  ``0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))``
* their backward ops take ``(x, g)`` and give ``g * gelu'(x)``. None of the four has a C
  expression for fused loops: ``1 + erf(x / sqrt 2)`` for negative x, and gelu' near its zero
  (x ~ -0.75), cancel, so a vector ``erf`` or ``tanh`` a few ulps from NumPy's gives a result
  many ulps away, beyond what a fused loop may differ from its reference; graphs run each as
  one op (its C kernel where it applies).

Each backward op has its own VJP written in ember ops (the second derivatives). Half-precision
inputs are computed in float32 and rounded once. Shared helpers: ops/_norm_act_common.py.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import ShapeError
from ..types import TensorType
from . import api as E
from ._norm_act_common import _compute_dtype, _fast_module, _numpy_workspace, _onnx_c
from ._registry import OpDef, register
from ._unrecorded import apply_direct
from ._util import (
    elementwise_cost,
    fmt_shape,
    require_float,
    require_same_dtype,
)

_SQRT1_2 = 0.70710678118654752440
_INV_SQRT_2PI = 0.39894228040143267794
_K_BETA = 0.79788456080286535588  # sqrt(2 / pi)
_K_KAPPA = 0.044715
_SQRT_HALF = math.sqrt(0.5)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def _gelu_workspace(node, layouts) -> int:
    """gelu, gelu_tanh and gelu_backward: two buffers, and the input's copy in half
    precision (the gradient's copy is made once the input's is freed)."""
    return _numpy_workspace(node, 3, 2)


def _gelu_tanh_grad_workspace(node, layouts) -> int:
    """gelu_tanh_backward: four buffers (the input's copy in half precision is freed before
    the fourth is made)."""
    return _numpy_workspace(node, 4, 4)


# ------------------------------------------------------------------------------------ gelu


# The kernels compute in explicit buffers, operation for operation as the formulas in the
# module docstring read (so the same bits as the plain expressions), and free each buffer
# as soon as it is done with: their workspace rules count exactly what they allocate.


def _arrays(kernel):
    """``kernel`` on 0-d operands as on one element: NumPy's arithmetic on 0-d arrays gives
    scalars, which the in-place steps (``out=``) cannot write."""

    def run(*arrays):
        if arrays[0].ndim:
            return kernel(*arrays)
        return kernel(*[np.reshape(a, (1,)) for a in arrays]).reshape(())

    run.__name__ = kernel.__name__
    return run


@_arrays
@np.errstate(invalid="ignore", over="ignore")  # NaN and inf as the formula gives them
def _gelu_erf_kernel(x):
    t = _compute_dtype(x).type
    from scipy.special import erf

    v = x.astype(t(0).dtype, copy=False)
    y = v * t(0.5)
    cdf = v * t(_SQRT1_2)
    del v
    erf(cdf, out=cdf)
    cdf += t(1)
    y *= cdf
    del cdf
    return y.astype(x.dtype, copy=False)


@_arrays
@np.errstate(invalid="ignore", over="ignore")  # NaN and inf as the formula gives them
def _gelu_tanh_kernel(x):
    t = _compute_dtype(x).type
    v = x.astype(t(0).dtype, copy=False)
    inner = v * v
    inner *= v
    inner *= t(_K_KAPPA)
    np.add(v, inner, out=inner)
    inner *= t(_K_BETA)
    y = t(0.5) * v
    del v
    np.tanh(inner, out=inner)
    inner += t(1)
    y *= inner
    del inner
    return y.astype(x.dtype, copy=False)


@_arrays
@np.errstate(invalid="ignore", over="ignore")  # NaN and inf as the formula gives them
def _gelu_erf_grad_kernel(x, g):
    t = _compute_dtype(x).type
    from scipy.special import erf

    v = x.astype(t(0).dtype, copy=False)
    slope = v * t(_SQRT1_2)  # becomes cdf + x pdf
    erf(slope, out=slope)
    slope += t(1)
    slope *= t(0.5)
    pdf = v * v
    pdf *= t(-0.5)
    np.exp(pdf, out=pdf)
    pdf *= t(_INV_SQRT_2PI)
    pdf *= v
    del v
    slope += pdf
    del pdf
    gv = g.astype(slope.dtype, copy=False)
    np.multiply(gv, slope, out=slope)
    del gv
    return slope.astype(x.dtype, copy=False)


@_arrays
@np.errstate(invalid="ignore", over="ignore")  # NaN and inf as the formula gives them
def _gelu_tanh_grad_kernel(x, g):
    t = _compute_dtype(x).type
    v = x.astype(t(0).dtype, copy=False)
    sq = v * v
    th = sq * v
    th *= t(_K_KAPPA)
    np.add(v, th, out=th)
    th *= t(_K_BETA)
    np.tanh(th, out=th)
    right = t(0.5) * v  # x / 2 (1 - th^2) k (1 + 3 0.044715 x^2)
    del v
    factor = th * th
    np.subtract(t(1), factor, out=factor)
    right *= factor
    np.multiply(t(3) * t(_K_KAPPA), sq, out=factor)
    del sq
    np.add(t(1), factor, out=factor)
    np.multiply(t(_K_BETA), factor, out=factor)
    right *= factor
    del factor
    th += t(1)  # (1 + th) / 2
    np.multiply(t(0.5), th, out=th)
    th += right
    del right
    gv = g.astype(th.dtype, copy=False)
    np.multiply(gv, th, out=th)
    del gv
    return th.astype(x.dtype, copy=False)


def _fast_gelu(tanh_form):
    # (half precision too: read and written in 16 bits, kernels/cnorm_act.py)
    def fast(x):
        return _fast_module().gelu(x, tanh_form)

    return fast


def _fast_gelu_grad(tanh_form):
    def fast(x, g):
        return _fast_module().gelu_backward(x, g, tanh_form)

    return fast


def _gelu_infer(name):
    def infer(x):
        require_float(name, x)
        return TensorType(tuple(x.shape), x.dtype)

    return infer


def _gelu_grad_infer(name):
    def infer(x, g):
        require_float(name, x, g)
        require_same_dtype(name, x, g)
        if tuple(x.shape) != tuple(g.shape):
            raise ShapeError(
                f"the input {fmt_shape(x.shape)} and its gradient {fmt_shape(g.shape)} must "
                "have one shape",
                op=name,
            )
        return TensorType(tuple(x.shape), x.dtype)

    return infer


def _gelu_second_erf(x):
    """gelu''(x) = phi(x) * (2 - x^2) for the erf form."""
    return E.exp(x * x * -0.5) * _INV_SQRT_2PI * (2.0 - x * x)


def _gelu_second_tanh(x):
    """gelu''(x) = sech^2(u) * (u' + x / 2 * (u'' - 2 t u'^2)) for the tanh form, with
    u = sqrt(2/pi) (x + 0.044715 x^3) and t = tanh(u); sech^2 as 1 / cosh^2 rather than
    1 - t^2, which cancels for large |x|."""
    sq = x * x
    u = (x + sq * x * _K_KAPPA) * _K_BETA
    t = E.tanh(u)
    cosh = E.cosh(u)
    du = (sq * (3 * _K_KAPPA) + 1.0) * _K_BETA
    d2u = x * (6 * _K_KAPPA * _K_BETA)
    return (du + x * 0.5 * (d2u - t * du * du * 2.0)) / (cosh * cosh)


def _gelu_vjp(grad_op):
    def vjp(c, g):
        return (apply_direct(grad_op(), c.inputs[0], g),)

    return vjp


def _gelu_grad_vjp(second, grad_op):
    def vjp(c, a):
        x, g = c.inputs
        return (a * g * second(x), apply_direct(grad_op(), x, a))

    return vjp


def _onnx_gelu_backward(e):
    x, g = e.inputs
    # gelu'(x) = Phi(x) + x phi(x), phi(x) = exp(-x^2 / 2) / sqrt(2 pi)
    square = e.node("Mul", [x, x])
    pdf = e.node(
        "Mul",
        [e.node("Exp", [e.node("Mul", [square, _onnx_c(e, -0.5)])]), _onnx_c(e, _INV_SQRT_2PI)],
    )
    return e.node("Mul", [g, e.node("Add", [_onnx_cdf(e, x), e.node("Mul", [x, pdf])])])


GELU_BACKWARD = register(
    OpDef(
        name="gelu_backward",
        onnx=_onnx_gelu_backward,
        kind="elementwise",
        infer=_gelu_grad_infer("gelu_backward"),
        cached_infer=True,
        kernel=_gelu_erf_grad_kernel,
        fast=_fast_gelu_grad(False),
        vjp=_gelu_grad_vjp(_gelu_second_erf, lambda: GELU_BACKWARD),
        cost=elementwise_cost(12),
        workspace=_gelu_workspace,
        doc="gelu_backward(x, g): g * gelu'(x) for the erf form of gelu",
    )
)


def _onnx_gelu_tanh_backward(e):
    x, g = e.inputs
    t = _onnx_tanh_inner(e, x)
    one = _onnx_c(e, 1)
    # d/dx x (1 + t) / 2 = (1 + t) / 2 + x (1 - t^2) k (1 + 3 * 0.044715 x^2) / 2
    slope = e.node("Add", [one, e.node("Mul", [e.node("Mul", [x, x]), _onnx_c(e, 3 * 0.044715)])])
    dt_dx = e.node(
        "Mul",
        [
            e.node("Sub", [one, e.node("Mul", [t, t])]),
            e.node("Mul", [slope, _onnx_c(e, _SQRT_2_OVER_PI)]),
        ],
    )
    d = e.node("Add", [e.node("Add", [one, t]), e.node("Mul", [x, dt_dx])])
    return e.node("Mul", [g, e.node("Mul", [d, _onnx_c(e, 0.5)])])


GELU_TANH_BACKWARD = register(
    OpDef(
        name="gelu_tanh_backward",
        onnx=_onnx_gelu_tanh_backward,
        kind="elementwise",
        infer=_gelu_grad_infer("gelu_tanh_backward"),
        cached_infer=True,
        kernel=_gelu_tanh_grad_kernel,
        fast=_fast_gelu_grad(True),
        vjp=_gelu_grad_vjp(_gelu_second_tanh, lambda: GELU_TANH_BACKWARD),
        cost=elementwise_cost(16),
        workspace=_gelu_tanh_grad_workspace,
        doc="gelu_tanh_backward(x, g): g * gelu'(x) for the tanh form of gelu",
    )
)


def _onnx_cdf(e, x):
    """Phi(x) = (1 + erf(x / sqrt 2)) / 2."""
    erf = e.node("Erf", [e.node("Mul", [x, _onnx_c(e, _SQRT_HALF)])])
    return e.node("Mul", [e.node("Add", [erf, _onnx_c(e, 1)]), _onnx_c(e, 0.5)])


def _onnx_tanh_inner(e, x):
    """tanh(sqrt(2 / pi) (x + 0.044715 x^3))."""
    cube = e.node("Mul", [x, e.node("Mul", [x, x])])
    inner = e.node("Add", [x, e.node("Mul", [cube, _onnx_c(e, 0.044715)])])
    return e.node("Tanh", [e.node("Mul", [inner, _onnx_c(e, _SQRT_2_OVER_PI)])])


def _onnx_gelu(e):
    (x,) = e.inputs
    if e.opset >= 20:
        return e.node("Gelu", [x])
    return e.node("Mul", [x, _onnx_cdf(e, x)])


GELU = register(
    OpDef(
        name="gelu",
        onnx=_onnx_gelu,
        kind="elementwise",
        infer=_gelu_infer("gelu"),
        cached_infer=True,
        kernel=_gelu_erf_kernel,
        fast=_fast_gelu(False),
        vjp=_gelu_vjp(lambda: GELU_BACKWARD),
        cost=elementwise_cost(5),
        workspace=_gelu_workspace,
        doc="gelu(x): x * 0.5 * (1 + erf(x / sqrt(2)))",
    )
)


def _onnx_gelu_tanh(e):
    (x,) = e.inputs
    if e.opset >= 20:
        return e.node("Gelu", [x], approximate="tanh")
    half = e.node("Mul", [e.node("Add", [_onnx_tanh_inner(e, x), _onnx_c(e, 1)]), _onnx_c(e, 0.5)])
    return e.node("Mul", [x, half])


GELU_TANH = register(
    OpDef(
        name="gelu_tanh",
        grad_fn="GeluBackward0",  # (PyTorch's one gelu node, approximate as an argument)
        onnx=_onnx_gelu_tanh,
        kind="elementwise",
        infer=_gelu_infer("gelu_tanh"),
        cached_infer=True,
        kernel=_gelu_tanh_kernel,
        fast=_fast_gelu(True),
        vjp=_gelu_vjp(lambda: GELU_TANH_BACKWARD),
        cost=elementwise_cost(8),
        workspace=_gelu_workspace,
        doc="gelu_tanh(x): 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))",
    )
)
