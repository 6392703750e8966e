"""``var`` as one op, so its gradient is PyTorch's formula: ``var_backward``'s
``2 / (N - correction) * g * (x - mean(x))``.

The value is the shifted two-pass sum of ops/moments.py's `var` (the data less its mean ``m``,
with the shift's own rounding corrected: ``(sum(d * d) - sum(d) ** 2 / N) / (N - correction)``
for ``d = x - m``), each sum the sum op's kernel, so its bits are those of the composite it
replaces. Composed of the sum, square and mean ops, the gradient went through the correction
term as well: with an infinite upstream gradient ``inf * d - inf * sum(d) / N`` is NaN where
PyTorch's formula gives +-inf. The VJP here is PyTorch's, written in ember ops (the mean
differentiable again, so second derivatives are PyTorch's too). The op takes real floating
tensors of at least 32 bits; `var` itself handles complex and 16-bit tensors around it.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import KernelDTypeError
from ..symbolic import SymDim
from ..types import TensorType
from . import _batching, _onnx
from . import api as E
from ._registry import OpDef, register
from ._util import reduction_cost
from .promotion import to_tensor
from .reduce import _expand_back, _sum_kernel, reduced_shape


def _count(shape, axes):
    n = 1
    for a in axes:
        n = n * shape[a]
    return n


def _infer(x, *, axes, keepdims, correction):
    if not x.dtype.is_floating_point:
        raise KernelDTypeError(f"var needs a floating tensor, got {x.dtype}", op="var")
    return TensorType(reduced_shape(x.shape, axes, keepdims), x.dtype)


def _kernel(x, *, axes, keepdims, correction):
    n = _count(x.shape, axes)
    shape = reduced_shape(x.shape, axes, keepdims)
    if not n:  # the variance of nothing is NaN
        return np.full(shape, np.nan, dtype=x.dtype)
    shift = _sum_kernel(x, axes=axes, keepdims=True) / x.dtype.type(n)
    d = x - shift
    total = _sum_kernel(d, axes=axes, keepdims=keepdims)
    squares = _sum_kernel(d * d, axes=axes, keepdims=keepdims)
    with np.errstate(divide="ignore", invalid="ignore"):  # (N <= correction: inf or NaN)
        out = (squares - total * total / x.dtype.type(n)) / x.dtype.type(max(n - correction, 0))
    return np.asarray(out, dtype=x.dtype).reshape(shape)


def _scale(n, correction, dtype):
    """PyTorch's ``2 / (N - correction)`` (a double: inf where N equals the correction)."""
    if isinstance(n, SymDim):  # (a symbolic count: its value when the graph runs)
        return 2.0 / (to_tensor(n, dtype) - correction)
    rest = n - correction
    return 2.0 / rest if rest else math.inf


def _vjp(c, g):
    (x,) = c.inputs
    axes = c.attrs["axes"]
    scale = _scale(_count(c.in_types[0].shape, axes), c.attrs["correction"], g.dtype)
    centred = x - E.mean(x, axes, keepdim=True)
    return (_expand_back(g, c) * scale * centred,)


def _onnx_rule(e):
    """The kernel's formula in ONNX nodes, N from the input's shape (symbolic sizes too)."""
    x, t = e.inputs[0], e.in_types[0]
    axes, keep, correction = e.attrs["axes"], e.attrs["keepdims"], e.attrs["correction"]
    count = _onnx.squeeze(e, e.cast(e.dim(_count(t.shape, axes)), t.dtype), (0,))
    d = e.node("Sub", [x, _onnx.reduce(e, "ReduceMean", x, axes, True)])
    total = _onnx.reduce(e, "ReduceSum", d, axes, keep)
    squares = _onnx.reduce(e, "ReduceSum", e.node("Mul", [d, d]), axes, keep)
    spread = e.node("Sub", [squares, e.node("Div", [e.node("Mul", [total, total]), count])])
    rest = e.node("Sub", [count, e.scalar(correction, t.dtype)])
    rest = e.node("Max", [rest, e.scalar(0, t.dtype)])
    return e.node("Div", [spread, rest])


VAR = register(
    OpDef(
        name="var",
        grad_fn="VarBackward0",
        kind="reduce",
        infer=_infer,
        kernel=_kernel,
        vjp=_vjp,
        cost=reduction_cost,
        batch=_batching.reduce_rule(partial=False),
        onnx=_onnx_rule,
        doc="var(x, axes, keepdims, correction): the variance over axes with Bessel's "
        "correction, PyTorch's gradient.",
    )
)
