"""GELU and layer normalization as primitives, forward and backward.

They are primitives rather than composites because they are measurably better: each is one
pass (kernels/cnorm_act.py) where the composite ran five to nine NumPy passes forward and as
many backward, and NumPy's erf (SciPy's) is slow. The public functions (``F.gelu``,
``F.layer_norm``) call them; the formulas are PyTorch's CPU kernels':

* ``gelu``:       ``x * 0.5 * (1 + erf(x / sqrt 2))``
* ``gelu_tanh``:  ``0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))``
* their backward ops take ``(x, g)`` and give ``g * gelu'(x)``. None of the four has a C
  expression for fused loops: ``1 + erf(x / sqrt 2)`` for negative x, and gelu' near its zero
  (x ~ -0.75), cancel, so a vector ``erf`` or ``tanh`` a few ulps from NumPy's gives a result
  many ulps away, beyond what a fused loop may differ from its reference; graphs run each as
  one op (its C kernel where it applies);
* ``layer_norm(x, weight, bias, eps)`` normalizes over the trailing ``weight.ndim``
  dimensions: ``(x - mean) * rstd * weight + bias`` with ``rstd = 1 / sqrt(var + eps)`` (the
  biased variance), mean and variance accumulated in double;
* ``layer_norm_backward(x, weight, g, eps)`` gives ``(dx, dweight, dbias)``, recomputing the
  row statistics (no saved mean and rstd: the row is read anyway).

Each backward op has its own VJP written in ember ops (the second derivatives), so gradients
of gradients work. Half-precision inputs are computed in float32 and rounded once.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import ShapeError
from ..types import TensorType
from . import _batching, _onnx
from . import api as E
from ._registry import OpDef, apply, register
from ._util import (
    elementwise_cost,
    fmt_shape,
    half_precision,
    require_float,
    require_same_dtype,
    value_bytes,
)

_SQRT1_2 = 0.70710678118654752440
_INV_SQRT_2PI = 0.39894228040143267794
_K_BETA = 0.79788456080286535588  # sqrt(2 / pi)
_K_KAPPA = 0.044715
_HALF = (np.dtype(np.float16), np.dtype("bfloat16"))


def _fast_module():
    from ..kernels import cnorm_act

    return cnorm_act


def _compute_dtype(x):
    return np.dtype(np.float32) if x.dtype in _HALF else x.dtype


def _c_runs(value) -> bool:
    """Whether the C kernels run for a value of this type, half precision included (they
    allocate only their results: the workspace rules below count NumPy's temporaries only
    where NumPy runs)."""
    return _fast_module().available(value.dtype.np)


def _numpy_workspace(node, half_buffers: int, buffers: int) -> int:
    """Bytes the NumPy kernels below allocate beyond their result, at their peak: each
    works in explicit buffers (``out=``, in-place updates) so the count does not depend on
    NumPy's elision of temporaries. ``half_buffers`` / ``buffers``: arrays of the result's
    size in the compute dtype alive at once at the peak in half precision (float32, the
    operands' widened copies among them) / otherwise, the one that becomes the result
    included (in half precision it is rounded into a new 16-bit array at the end, after
    the others are freed). The C kernels allocate only their results."""
    out = node.outputs[0]
    if _c_runs(out):
        return 0
    size = value_bytes(out) // out.dtype.itemsize
    if half_precision(out):
        return half_buffers * size * 4 - value_bytes(out)
    return (buffers - 1) * value_bytes(out)


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
        return (apply(grad_op(), c.inputs[0], g),)

    return vjp


def _gelu_grad_vjp(second, grad_op):
    def vjp(c, a):
        x, g = c.inputs
        return (a * g * second(x), apply(grad_op(), x, a))

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
        kernel=_gelu_tanh_grad_kernel,
        fast=_fast_gelu_grad(True),
        vjp=_gelu_grad_vjp(_gelu_second_tanh, lambda: GELU_TANH_BACKWARD),
        cost=elementwise_cost(16),
        workspace=_gelu_tanh_grad_workspace,
        doc="gelu_tanh_backward(x, g): g * gelu'(x) for the tanh form of gelu",
    )
)

_SQRT_HALF = math.sqrt(0.5)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _onnx_c(e, value):
    return _onnx.scalar(e, value, e.out_types[0].dtype)


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
        kernel=_gelu_tanh_kernel,
        fast=_fast_gelu(True),
        vjp=_gelu_vjp(lambda: GELU_TANH_BACKWARD),
        cost=elementwise_cost(8),
        workspace=_gelu_workspace,
        doc="gelu_tanh(x): 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))",
    )
)


# ------------------------------------------------------------------------------ layer norm


def _norm_infer(x, weight, bias, *, eps):
    require_float("layer_norm", x, weight, bias)
    require_same_dtype("layer_norm", x, weight, bias)
    k = len(weight.shape)
    if (
        k == 0
        or tuple(bias.shape) != tuple(weight.shape)
        or len(x.shape) < k
        or tuple(x.shape[len(x.shape) - k :]) != tuple(weight.shape)
    ):
        raise ShapeError(
            f"weight {fmt_shape(weight.shape)} and bias {fmt_shape(bias.shape)} must both have "
            f"the shape of the input's trailing dimensions, input {fmt_shape(x.shape)}",
            op="layer_norm",
        )
    return TensorType(tuple(x.shape), x.dtype)


def _norm_grad_infer(x, weight, g, *, eps):
    _norm_infer(x, weight, weight, eps=eps)
    require_same_dtype("layer_norm_backward", x, g)
    if tuple(g.shape) != tuple(x.shape):
        raise ShapeError(
            f"the gradient {fmt_shape(g.shape)} must have the input's shape {fmt_shape(x.shape)}",
            op="layer_norm_backward",
        )
    w = TensorType(tuple(weight.shape), x.dtype)
    return (TensorType(tuple(x.shape), x.dtype), w, w)


def _rows(x, weight):
    """``x`` as (rows, n) in the compute dtype, n the normalized size."""
    n = weight.size
    return x.reshape(-1, n).astype(_compute_dtype(x), copy=False), n


def _stats(v, eps):
    """Each row's mean and 1 / sqrt(biased variance + eps), accumulated in double and rounded
    to the compute dtype (as the C kernel does). Allocates the rows in double (unless they
    are) and their centred copy, both alive at once."""
    wide = v.astype(np.float64, copy=False)
    mean = wide.mean(axis=1, keepdims=True)
    centred = wide - mean
    del wide
    np.multiply(centred, centred, out=centred)
    var = centred.mean(axis=1, keepdims=True)
    del centred
    rstd = 1.0 / np.sqrt(var + eps)
    return mean.astype(v.dtype), rstd.astype(v.dtype)


# The kernels compute in explicit buffers, operation for operation as the plain formulas
# read (the same bits), freeing each as soon as it is done with: `_norm_workspace` and
# `_norm_grad_workspace` count exactly what they allocate.


@np.errstate(invalid="ignore", over="ignore")  # NaN and inf as the formula gives them
def _norm_kernel(x, weight, bias, *, eps):
    if x.size == 0:
        return np.empty_like(x)
    v, n = _rows(x, weight)
    mean, rstd = _stats(v, eps)
    w = weight.reshape(n).astype(v.dtype, copy=False)
    b = bias.reshape(n).astype(v.dtype, copy=False)
    y = v - mean  # (x - mean) * rstd * w + b
    del v
    y *= rstd
    y *= w
    y += b
    return y.reshape(x.shape).astype(x.dtype, copy=False)


@np.errstate(invalid="ignore", over="ignore")  # NaN and inf as the formula gives them
def _norm_grad_kernel(x, weight, g, *, eps):
    if x.size == 0:
        zeros = np.zeros(weight.shape, dtype=x.dtype)
        return np.empty_like(x), zeros, zeros.copy()
    v, n = _rows(x, weight)
    gr = g.reshape(-1, n).astype(v.dtype, copy=False)
    w = weight.reshape(n).astype(v.dtype, copy=False)
    mean, rstd = _stats(v, eps)
    xhat = v - mean  # (x - mean) * rstd
    del v
    xhat *= rstd
    u = w * gr
    wide = u.astype(np.float64)  # the double-precision sums' operand, reused below
    mu = (wide.sum(axis=1, keepdims=True) / n).astype(xhat.dtype)
    np.multiply(u, xhat, out=wide)  # (u * xhat) in the compute dtype, then widened
    mux = (wide.sum(axis=1, keepdims=True) / n).astype(xhat.dtype)
    np.multiply(gr, xhat, out=wide)
    dw = wide.sum(axis=0)
    np.copyto(wide, gr)
    db = wide.sum(axis=0)
    del wide
    u -= mu  # dx = rstd * ((u - mu) - xhat * mux)
    xhat *= mux
    u -= xhat
    del xhat, gr
    np.multiply(rstd, u, out=u)
    return (
        u.reshape(x.shape).astype(x.dtype, copy=False),
        dw.reshape(weight.shape).astype(x.dtype),
        db.reshape(weight.shape).astype(x.dtype),
    )


def _norm_fast(x, weight, bias, *, eps):  # (half precision too: kernels/cnorm_act.py)
    return _fast_module().layer_norm(x, weight, bias, eps)


def _norm_c_step(node):
    x, w, b = (v.type for v in node.inputs)
    return _fast_module().layer_norm_step(x, w, b, node.attrs["eps"])


def _norm_grad_fast(x, weight, g, *, eps):
    return _fast_module().layer_norm_backward(x, weight, g, eps)


def _norm_axes(x, weight):
    return tuple(range(x.ndim - weight.ndim, x.ndim)), tuple(range(x.ndim - weight.ndim))


def _norm_batch(in_types, axes, attrs, k):
    """layer_norm: the batch on a leading (not normalized) axis of x passes through; the
    weight and bias must not depend on it."""
    x_axis, w_axis, b_axis = axes
    if x_axis is None or w_axis is not None or b_axis is not None:
        raise _batching.NotBatchable("layer_norm: the weight or the bias depends on the batch")
    if x_axis >= len(in_types[0].shape) - len(in_types[1].shape):
        raise _batching.NotBatchable("layer_norm: the batch lies along the normalized axes")
    return _batching.Batched((x_axis,), attrs)


def _norm_grad_batch(in_types, axes, attrs, k):
    """layer_norm_backward: x and g carry the batch along one leading axis; dx keeps it,
    dweight and dbias are partial sums over each slice."""
    x_axis, w_axis, g_axis = axes
    if x_axis is None or x_axis != g_axis or w_axis is not None:
        raise _batching.NotBatchable("layer_norm_backward: x and g must carry the batch alike")
    if x_axis >= len(in_types[0].shape) - len(in_types[1].shape):
        raise _batching.NotBatchable("layer_norm_backward: the batch lies along normalized axes")
    return _batching.Batched((x_axis, None, None), attrs)


def _norm_vjp(c, g):
    x, weight, _ = c.inputs
    dx, dw, db = apply(LAYER_NORM_BACKWARD, x, weight, g, eps=c.attrs["eps"])
    return dx, dw, db


def _norm_grad_vjp(c, a, bw, bb):
    """The VJP of (dx, dw, db) = layer_norm_backward(x, w, g) for cotangents (a, bw, bb).

    Per row of n values, with r = rstd, xhat = (x - mean) r, u = w g and the projection
    P(v) = v - mean(v) - xhat mean(v xhat) (symmetric), dx = r P(u), so
    d/dg = w r P(a) + xhat bw + bb and d/dw = sum over rows of g r P(a). Through x, the
    row's scalar r [S1 - Sa Su / n] + sum(g bw xhat) (S1 = sum(a u) - sum(u) sum(a) / n,
    Sa = sum(a xhat), Su = sum(u xhat)) depends on xhat (h = its partial derivative) and r;
    dxhat/dx = r P and dr/dx = -r^2 xhat / n give the result."""
    x, w, g = c.inputs
    axes, lead = _norm_axes(x, w)
    n = float(math.prod(w.shape))
    mean = E.mean(x, axes, keepdim=True)
    centred = x - mean
    r = E.rsqrt(E.mean(centred * centred, axes, keepdim=True) + c.attrs["eps"])
    xhat = centred * r

    def project(v):
        return v - E.mean(v, axes, keepdim=True) - xhat * E.mean(v * xhat, axes, keepdim=True)

    pa = project(a) * r
    dg = w * pa + xhat * bw + bb
    dw = E.sum(g * pa, lead) if lead else g * pa
    u = w * g
    s_a = E.sum(a * xhat, axes, keepdim=True)
    s_u = E.sum(u * xhat, axes, keepdim=True)
    s1 = E.sum(a * u, axes, keepdim=True) - E.sum(u, axes, keepdim=True) * E.sum(
        a, axes, keepdim=True
    ) * (1.0 / n)
    h = (a * s_u + u * s_a) * (r * (-1.0 / n)) + g * bw
    dx = project(h) * r - xhat * (r * r * (1.0 / n)) * (s1 - s_a * s_u * (1.0 / n))
    return dx, dw, dg


def _norm_buffers(node, fixed: int, double_rows: int, stats: bool) -> int:
    """Bytes of the NumPy layer-norm kernels' buffers at a phase: ``fixed`` arrays of the
    input's size in the compute dtype (float32 copies in half precision, xhat, u, the
    result's), ``double_rows`` in double (`_stats`: the rows widened, unless double already,
    and centred; the backward's sums); with ``stats``, beside them the rows' statistics in
    double and the buffer of NumPy's row means (its ufunc buffer size, in doubles)."""
    x, weight = node.inputs[0], node.inputs[1]
    size = value_bytes(x) // x.dtype.itemsize
    compute = 4 if half_precision(x) else x.dtype.itemsize
    rows = size // max(value_bytes(weight) // weight.dtype.itemsize, 1)
    small = 2 * rows * 8 + min(size, np.getbufsize()) * 8 if stats else 0
    return fixed * size * compute + double_rows * size * 8 + small


def _norm_workspace(node, layouts) -> int:
    """The C kernels: none beyond the results. NumPy's (`_norm_kernel`), at the statistics:
    the input's float32 copy (half precision) and its rows in double and centred; after
    them the result's buffer in the compute dtype (the result itself unless half precision,
    which rounds it into a new array)."""
    x = node.inputs[0]
    if _c_runs(x):  # (half precision too: read and written in 16 bits)
        return 0
    half = half_precision(x)
    wide = 0 if x.dtype.itemsize == 8 else 1
    stats = _norm_buffers(node, 1 if half else 0, 1 + wide, True)
    after = _norm_buffers(node, 2 if half else 1, 0, False)  # (the copy and the result's buffer)
    return max(stats, after) - value_bytes(x)


def _norm_grad_workspace(node, layouts) -> int:
    """The C kernels: none beyond the results (the per-block sums of dweight and dbias are a
    few rows of doubles). NumPy's (`_norm_grad_kernel`): at the statistics, the input's and
    the gradient's float32 copies (half precision) beside the rows in double and centred;
    then the gradient's copy, xhat, u (which becomes dx) and one double-precision buffer
    for the sums."""
    x = node.inputs[0]
    if _c_runs(x):
        return 0
    half = half_precision(x)
    wide = 0 if x.dtype.itemsize == 8 else 1
    stats = _norm_buffers(node, 2 if half else 0, 1 + wide, True)
    sums = _norm_buffers(node, 3 if half else 2, 1, False)
    return max(stats, sums) - value_bytes(x)


def _onnx_layer_norm_backward(e):
    x, weight, g = e.inputs
    k = len(e.in_types[1].shape)
    nd = len(e.in_types[0].shape)
    rstd, xhat = _onnx_normalized(e, x, k, float(e.attrs["eps"]))
    trailing, leading = list(range(nd - k, nd)), list(range(nd - k))
    db = _onnx.reduce(e, "ReduceSum", g, leading, False)
    dw = _onnx.reduce(e, "ReduceSum", e.node("Mul", [g, xhat]), leading, False)
    gh = e.node("Mul", [g, weight])
    mean_gh = _onnx.reduce(e, "ReduceMean", gh, trailing, True)
    mean_ghx = _onnx.reduce(e, "ReduceMean", e.node("Mul", [gh, xhat]), trailing, True)
    inner = e.node("Sub", [e.node("Sub", [gh, mean_gh]), e.node("Mul", [xhat, mean_ghx])])
    return e.node("Mul", [rstd, inner]), dw, db


LAYER_NORM_BACKWARD = register(
    OpDef(
        name="layer_norm_backward",
        onnx=_onnx_layer_norm_backward,
        kind="nn",
        infer=_norm_grad_infer,
        kernel=_norm_grad_kernel,
        fast=_norm_grad_fast,
        vjp=_norm_grad_vjp,
        cost=elementwise_cost(14),
        num_outputs=3,
        workspace=_norm_grad_workspace,
        batch=_norm_grad_batch,
        doc="layer_norm_backward(x, weight, g, eps): (dx, dweight, dbias) of layer_norm",
    )
)


def _onnx_layer_norm(e):
    x, weight, bias = e.inputs
    k = len(e.in_types[1].shape)
    eps = float(e.attrs["eps"])
    if e.opset >= 17:
        return e.node("LayerNormalization", [x, weight, bias], axis=-k, epsilon=eps)
    _, xhat = _onnx_normalized(e, x, k, eps)
    return e.node("Add", [e.node("Mul", [xhat, weight]), bias])


def _onnx_normalized(e, x, k, eps):
    """(rstd, (x - mean) * rstd) over the trailing k dimensions (kept as size 1)."""
    nd = len(e.in_types[0].shape)
    axes = list(range(nd - k, nd))
    centered = e.node("Sub", [x, _onnx.reduce(e, "ReduceMean", x, axes, True)])
    var = _onnx.reduce(e, "ReduceMean", e.node("Mul", [centered, centered]), axes, True)
    rstd = e.node("Reciprocal", [e.node("Sqrt", [e.node("Add", [var, _onnx_c(e, eps)])])])
    return rstd, e.node("Mul", [centered, rstd])


LAYER_NORM = register(
    OpDef(
        name="layer_norm",
        grad_fn="NativeLayerNormBackward0",
        onnx=_onnx_layer_norm,
        kind="nn",
        infer=_norm_infer,
        kernel=_norm_kernel,
        fast=_norm_fast,
        c_step=_norm_c_step,
        vjp=_norm_vjp,
        cost=elementwise_cost(8),
        save_inputs=(0, 1),
        workspace=_norm_workspace,
        batch=_norm_batch,
        doc="layer_norm(x, weight, bias, eps): (x - mean) / sqrt(var + eps) * weight + bias "
        "over the trailing weight.ndim dimensions",
    )
)
