"""Bitwise primitives on integer (and, for and/or/xor/not, bool) tensors, PyTorch's names:
``bitwise_and``, ``bitwise_or``, ``bitwise_xor``, ``bitwise_not``, ``bitwise_left_shift`` and
``bitwise_right_shift`` (also the Tensor methods and their in-place forms).

Operands are promoted as for the arithmetic ops; floating-point operands are refused, as in
PyTorch. A shift by a negative amount or by at least the type's width gives what PyTorch gives:
0 for a left shift, the sign fill (0 or -1) for a right shift (C leaves these undefined, so
the kernels mask them). Integer results carry no gradient.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..errors import KernelDTypeError
from ..types import TensorType
from ._registry import OpDef, apply, export, register
from ._util import broadcast_shapes, elementwise_cost, require_same_dtype
from .promotion import promote, to_tensor


def _require_integral(name, *types, bools=True):
    for t in types:
        if t.dtype.is_floating_point or (t.dtype is dt.bool_ and not bools):
            kinds = "integer or bool" if bools else "integer"
            raise KernelDTypeError(f"defined for {kinds} tensors only, got {t.dtype}", op=name)


def _binary_infer(name, bools):
    def infer(x, y):
        _require_integral(name, x, y, bools=bools)
        dtype = require_same_dtype(name, x, y)
        return TensorType(broadcast_shapes(name, x.shape, y.shape), dtype)

    return infer


def _left_shift(x, y):
    bits = x.dtype.itemsize * 8
    inside = (y >= 0) & (y < bits)
    shifted = np.left_shift(x, np.where(inside, y, 0).astype(x.dtype))
    return np.where(inside, shifted, np.zeros((), x.dtype)).astype(x.dtype, copy=False)


def _right_shift(x, y):
    bits = x.dtype.itemsize * 8
    inside = (y >= 0) & (y < bits)
    # past the width, a right shift leaves the sign fill: the shift by width - 1
    amount = np.where(inside, y, bits - 1).astype(x.dtype)
    out = np.right_shift(x, amount)
    if x.dtype.kind == "u":
        out = np.where(inside, out, np.zeros((), x.dtype))
    return out.astype(x.dtype, copy=False)


def _onnx_logic(bitwise: str, logical: str):
    """ONNX's Bitwise* on integers (from opset 18), its logical op on bool."""

    def rule(e):
        if e.in_types[0].dtype is dt.bool_:
            return e.node(logical, e.inputs)
        if e.opset < 18:
            e.unsupported(f"on integers before opset 18 (no {bitwise})")
        return e.node(bitwise, e.inputs)

    return rule


def _onnx_shift(direction: str):
    """ONNX's BitShift (unsigned types only, until opset 28 added signed ones), past the width
    zero as in ember."""

    def rule(e):
        x, y = e.inputs
        dtype = e.in_types[0].dtype
        if dtype.is_signed:
            e.unsupported("on signed integers (ONNX's BitShift shifts unsigned types)")
        bits = dtype.itemsize * 8
        shifted = e.node("BitShift", [x, y], direction=direction)
        inside = e.node("Less", [y, e.scalar(bits, dtype)])
        return e.node("Where", [inside, shifted, e.scalar(0, dtype)])

    return rule


def _binary(name, kernel, symbol, bools=True, onnx=None):
    op = register(
        OpDef(
            name=name,
            kind="elementwise",
            infer=_binary_infer(name, bools),
            kernel=kernel,
            cost=elementwise_cost(1),
            onnx=onnx,
            doc=f"{name}(x, y): elementwise x {symbol} y on integer{' or bool' if bools else ''} "
            "tensors",
        )
    )

    def fn(input, other):
        return apply(op, *promote(input, other))

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = op.doc + " (broadcasting and type promotion, as in PyTorch)."
    export(fn, name=name, method=True, inplace=True)
    return op


_binary("bitwise_and", np.bitwise_and, "&", onnx=_onnx_logic("BitwiseAnd", "And"))
_binary("bitwise_or", np.bitwise_or, "|", onnx=_onnx_logic("BitwiseOr", "Or"))
_binary("bitwise_xor", np.bitwise_xor, "^", onnx=_onnx_logic("BitwiseXor", "Xor"))
_binary("bitwise_left_shift", _left_shift, "<<", bools=False, onnx=_onnx_shift("LEFT"))
_binary("bitwise_right_shift", _right_shift, ">>", bools=False, onnx=_onnx_shift("RIGHT"))


def _onnx_not(e):
    if e.in_types[0].dtype is dt.bool_:
        return e.node("Not", e.inputs)
    if e.opset < 18:
        e.unsupported("on integers before opset 18 (no BitwiseNot)")
    return e.node("BitwiseNot", e.inputs)


def _not_infer(x):
    _require_integral("bitwise_not", x)
    return TensorType(tuple(x.shape), x.dtype)


_NOT = register(
    OpDef(
        name="bitwise_not",
        kind="elementwise",
        infer=_not_infer,
        kernel=np.invert,  # (logical not for bool, as PyTorch's ~)
        cost=elementwise_cost(1),
        onnx=_onnx_not,
        doc="bitwise_not(x): elementwise ~x on integer or bool tensors",
    )
)


def bitwise_not(input):
    """Elementwise ``~x`` on integer or bool tensors (logical not for bool), as in PyTorch."""
    return apply(_NOT, to_tensor(input))


export(bitwise_not, method=True, inplace=True)
