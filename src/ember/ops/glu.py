"""The gated linear unit as a primitive each way (the public ``glu`` in
functional/activation.py calls it): the input split in halves ``a, b`` along ``axis``,

* ``glu(x; axis) = a * sigmoid(b)``;
* ``glu_backward(x, g; axis) = concat(g * s, g * a * s * (1 - s))`` with ``s = sigmoid(b)``,
  its VJP (``s (1 - s)`` computed as ``e / (1 + e)^2``, ``e = exp(-|b|)``: no cancelling for
  large b), itself differentiable in ember ops (PyTorch's double backward).

One kernel each way instead of a split, a sigmoid and a product recorded forward and some
six ops backward. The NumPy kernels (sigmoid as ops/elementwise.py computes it) are the
specification; kernels/cglu.py is the ``fast`` rule of each (glibc's vector exp: a few ulps).
"""

from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from ..types import TensorType
from . import _batching, _onnx
from . import api as E
from ._registry import OpDef, apply, register
from ._util import elementwise_cost, fmt_shape, require_float, require_same_dtype
from .elementwise import _sigmoid_kernel


def _halved(op: str, x, axis: int) -> tuple:
    shape = tuple(x.shape)
    if not 0 <= axis < len(shape):
        raise ShapeError(f"axis {axis} is not a dimension of shape {fmt_shape(shape)}", op=op)
    size = shape[axis]
    if isinstance(size, int) and size % 2:
        raise ShapeError(
            f"dimension {axis} of shape {fmt_shape(shape)} must have an even size to be halved",
            op=op,
        )
    return shape[:axis] + (size // 2,) + shape[axis + 1 :]


def _glu_infer(x, *, axis):
    require_float("glu", x)
    return TensorType(_halved("glu", x, axis), x.dtype)


def _halves(x, axis):
    a, b = np.split(x, 2, axis=axis)
    return a, b


def _glu_kernel(x, *, axis):
    if x.dtype.itemsize == 2:  # (float16, bfloat16: in float32, rounded once, as PyTorch's)
        return _glu_kernel(x.astype(np.float32), axis=axis).astype(x.dtype)
    a, b = _halves(x, axis)
    return np.multiply(a, _sigmoid_kernel(b)).astype(x.dtype, copy=False)


def _glu_fast(x, *, axis):
    from ..kernels import cglu

    return cglu.glu(x, axis)


def _glu_vjp(ctx, g):
    (x,) = ctx.inputs
    return (apply(GLU_BACKWARD, x, g, axis=ctx.attrs["axis"]),)


def _onnx_split(e, x, axis: int, half: int):
    return e.node("Split", [x, e.ints([half, half])], outputs=2, axis=axis)


def _onnx_glu(e):
    axis = e.attrs["axis"]
    a, b = _onnx_split(e, e.inputs[0], axis, e.in_types[0].shape[axis] // 2)
    return e.node("Mul", [a, e.node("Sigmoid", [b])])


def _batch(in_types, axes, attrs, k):
    """The batch along any axis but the halved one (and, backward, the same for x and g)."""
    if any(a != axes[0] for a in axes) or axes[0] is None:
        raise _batching.NotBatchable("the input and its gradient carry the batch differently")
    if axes[0] == attrs["axis"]:
        raise _batching.NotBatchable(f"it halves the batch axis {axes[0]}")
    return _batching.Batched((axes[0],), attrs)


GLU = register(
    OpDef(
        name="glu",
        onnx=_onnx_glu,
        kind="nn",
        infer=_glu_infer,
        kernel=_glu_kernel,
        fast=_glu_fast,
        vjp=_glu_vjp,
        cost=elementwise_cost(5),
        batch=_batch,
        doc="glu(x; axis): a * sigmoid(b) of x's halves a, b along axis (non-negative)",
    )
)


def _backward_infer(x, g, *, axis):
    require_float("glu_backward", x, g)
    require_same_dtype("glu_backward", x, g)
    if tuple(g.shape) != _halved("glu_backward", x, axis):
        raise ShapeError(
            f"the gradient {fmt_shape(g.shape)} must have the shape of the result of glu on "
            f"{fmt_shape(x.shape)} along axis {axis}",
            op="glu_backward",
        )
    return TensorType(tuple(x.shape), x.dtype)


@np.errstate(over="ignore", invalid="ignore")
def _backward_kernel(x, g, *, axis):
    if x.dtype.itemsize == 2:  # (float16, bfloat16: in float32, rounded once)
        wide = _backward_kernel(x.astype(np.float32), g.astype(np.float32), axis=axis)
        return wide.astype(x.dtype)
    a, b = _halves(x, axis)
    s = _sigmoid_kernel(b)
    e = np.exp(-np.abs(b))  # s (1 - s) = e / (1 + e)^2: no 1 - s cancelling for large b
    ga = g * s
    gb = g * a * (e / ((1 + e) * (1 + e)))
    return np.concatenate([ga, gb], axis=axis).astype(x.dtype, copy=False)


def _backward_fast(x, g, *, axis):
    from ..kernels import cglu

    return cglu.glu_backward(x, g, axis)


def _backward_vjp(ctx, u):
    """With s = sigmoid(b), s' = s (1 - s), the cotangent u = (ua, ub) of (g s, g a s'):
    d g = ua s + ub a s', d a = ub g s', d b = ua g s' + ub g a s' (1 - 2 s)."""
    x, g = ctx.inputs
    axis = ctx.attrs["axis"]
    a, b = E.chunk(x, 2, axis)
    ua, ub = E.chunk(u, 2, axis)
    s = E.sigmoid(b)
    ds = s * (1 - s)
    d_g = ua * s + ub * a * ds
    d_a = ub * g * ds
    d_b = (ua + ub * a * (1 - 2 * s)) * g * ds
    return E.cat([d_a, d_b], axis), d_g


def _onnx_backward(e):
    x, g = e.inputs
    axis = e.attrs["axis"]
    a, b = _onnx_split(e, x, axis, e.in_types[0].shape[axis] // 2)
    s = e.node("Sigmoid", [b])
    one = _onnx.scalar(e, 1, e.in_types[0].dtype)
    ds = e.node("Mul", [s, e.node("Sub", [one, s])])
    gb = e.node("Mul", [e.node("Mul", [g, a]), ds])
    return e.node("Concat", [e.node("Mul", [g, s]), gb], axis=axis)


GLU_BACKWARD = register(
    OpDef(
        name="glu_backward",
        onnx=_onnx_backward,
        kind="nn",
        infer=_backward_infer,
        kernel=_backward_kernel,
        fast=_backward_fast,
        vjp=_backward_vjp,
        cost=elementwise_cost(7),
        batch=_batch,
        doc="glu_backward(x, g; axis): the input's gradient of glu",
    )
)
