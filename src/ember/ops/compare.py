"""Comparison and logical primitives. Their outputs are bool, so they carry no gradient."""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..errors import ArgumentTypeError, KernelDTypeError
from ..types import TensorType
from . import api as E
from . import qtensor_ops
from ._registry import OpDef, apply, export, register
from ._rules import Complex
from ._util import broadcast_shapes, elementwise_cost, require_same_dtype
from .promotion import promote, to_tensor


def _onnx_compare(op_type, negate=False):
    def rule(e):
        x, y = e.inputs
        if e.in_types[0].dtype is dt.bool_ and op_type != "Equal":
            # ONNX orders numbers only: False < True as 0 < 1
            x, y = e.cast(x, dt.uint8), e.cast(y, dt.uint8)
        out = e.node(op_type, [x, y])
        return e.node("Not", [out]) if negate else out

    return rule


def _onnx_logical(op_type):
    def rule(e):
        operands = [
            x if t.dtype is dt.bool_ else e.cast(x, dt.bool_)  # (nonzero is true, as Cast's)
            for x, t in zip(e.inputs, e.in_types)
        ]
        return e.node(op_type, operands)

    return rule


def _onnx_predicate(op_type):
    def rule(e):
        (x,) = e.inputs
        if e.in_types[0].dtype.is_floating_point:
            if op_type == "IsFinite":
                bad = e.node("Or", [e.node("IsNaN", [x]), e.node("IsInf", [x])])
                return e.node("Not", [bad])
            return e.node(op_type, [x])
        if e.in_types[0].dtype is dt.bool_:
            x = e.cast(x, dt.uint8)
        same = e.node("Equal", [x, x])  # integers: never NaN nor infinite
        return same if op_type == "IsFinite" else e.node("Not", [same])

    return rule


def _compare_infer(name):
    def infer(x, y):
        require_same_dtype(name, x, y)
        return TensorType(broadcast_shapes(name, x.shape, y.shape), dt.bool_)

    return infer


def _comparison(name, kernel, methods, dunder_doc, onnx, complex=None, float8=False):
    op = register(
        OpDef(
            name=name,
            kind="elementwise",
            infer=_compare_infer(name),
            kernel=kernel,
            cost=elementwise_cost(1),
            doc=f"{name}(x, y): elementwise x {dunder_doc} y",
            c=f"({{0}} {dunder_doc} {{1}})",
            onnx=onnx,
            complex=complex,
            float8=float8,
        )
    )

    def fn(x, y):
        try:
            return apply(op, *promote(x, y))
        except KernelDTypeError:  # (PyTorch compares quantized tensors' values)
            if not qtensor_ops.quantized_form((x, y)):
                raise
            return qtensor_ops.compare(fn, x, y)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise ``x {dunder_doc} y`` (bool result, broadcasting, promotion)."
    export(fn, name=name, method=methods)


# equality compares complex numbers (a bool result carries no gradient); order does not
# (and float8 values, as PyTorch's CPU kernels)
_comparison("eq", np.equal, ("eq",), "==", _onnx_compare("Equal"), Complex.GRADIENT, True)
_comparison(
    "ne", np.not_equal, ("ne",), "!=", _onnx_compare("Equal", negate=True), Complex.GRADIENT, True
)
_comparison("lt", np.less, ("lt",), "<", _onnx_compare("Less"))
_comparison("le", np.less_equal, ("le",), "<=", _onnx_compare("LessOrEqual"))
_comparison("gt", np.greater, ("gt",), ">", _onnx_compare("Greater"))
_comparison("ge", np.greater_equal, ("ge",), ">=", _onnx_compare("GreaterOrEqual"))


def _logical_infer(name):
    def infer(*operands):
        shape = broadcast_shapes(name, *(t.shape for t in operands))
        return TensorType(shape, dt.bool_)

    return infer


def _logical(name, kernel, arity, onnx):
    op = register(
        OpDef(
            name=name,
            kind="elementwise",
            infer=_logical_infer(name),
            kernel=kernel,
            cost=elementwise_cost(1),
            doc=f"{name}: elementwise logical op on truth values (nonzero = true)",
            onnx=onnx,
        )
    )

    def fn(*operands):
        if len(operands) != arity:
            raise ArgumentTypeError(f"{name} takes {arity} operands, got {len(operands)}")
        # (a complex operand's truth, PyTorch's: either part non-zero; the op's kernels and
        # its C and ONNX forms take real values)
        operands = [to_tensor(x) for x in operands]
        return apply(op, *(E.ne(x, 0) if x.dtype.is_complex else x for x in operands))

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = op.doc
    export(fn, name=name, method=True)


_logical("logical_and", np.logical_and, 2, _onnx_logical("And"))
_logical("logical_or", np.logical_or, 2, _onnx_logical("Or"))
_logical("logical_xor", np.logical_xor, 2, _onnx_logical("Xor"))
_logical("logical_not", np.logical_not, 1, _onnx_logical("Not"))


def _predicate(name, kernel, onnx):
    op = register(
        OpDef(
            name=name,
            kind="elementwise",
            infer=lambda x: TensorType(tuple(x.shape), dt.bool_),
            kernel=kernel,
            cost=elementwise_cost(1),
            doc=f"{name}(x): elementwise test",
            onnx=onnx,
            complex=Complex.GRADIENT,  # (NumPy's: either part NaN / infinite; no gradient)
            float8=True,
        )
    )

    def fn(x):
        return apply(op, to_tensor(x))

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = op.doc
    export(fn, name=name, method=True)


_predicate("isnan", np.isnan, _onnx_predicate("IsNaN"))
_predicate("isinf", np.isinf, _onnx_predicate("IsInf"))
_predicate("isfinite", np.isfinite, _onnx_predicate("IsFinite"))
