"""Comparison and logical primitives. Their outputs are bool, so they carry no gradient."""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..types import TensorType
from ._registry import OpDef, apply, export, register
from ._util import broadcast_shapes, elementwise_cost, require_same_dtype
from .elementwise import promote, to_tensor


def _compare_infer(name):
    def infer(x, y):
        require_same_dtype(name, x, y)
        return TensorType(broadcast_shapes(name, x.shape, y.shape), dt.bool_)

    return infer


def _comparison(name, kernel, methods, dunder_doc):
    op = register(
        OpDef(
            name=name,
            kind="elementwise",
            infer=_compare_infer(name),
            kernel=kernel,
            cost=elementwise_cost(1),
            doc=f"{name}(x, y): elementwise x {dunder_doc} y",
            c=f"({{0}} {dunder_doc} {{1}})",
        )
    )

    def fn(x, y):
        return apply(op, *promote(x, y))

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise ``x {dunder_doc} y`` (bool result, broadcasting, promotion)."
    export(fn, name=name, method=methods)


_comparison("eq", np.equal, ("eq",), "==")
_comparison("ne", np.not_equal, ("ne",), "!=")
_comparison("lt", np.less, ("lt",), "<")
_comparison("le", np.less_equal, ("le",), "<=")
_comparison("gt", np.greater, ("gt",), ">")
_comparison("ge", np.greater_equal, ("ge",), ">=")


def _logical_infer(name):
    def infer(*operands):
        shape = broadcast_shapes(name, *(t.shape for t in operands))
        return TensorType(shape, dt.bool_)

    return infer


def _logical(name, kernel, arity):
    op = register(
        OpDef(
            name=name,
            kind="elementwise",
            infer=_logical_infer(name),
            kernel=kernel,
            cost=elementwise_cost(1),
            doc=f"{name}: elementwise logical op on truth values (nonzero = true)",
        )
    )

    def fn(*operands):
        if len(operands) != arity:
            raise TypeError(f"{name} takes {arity} operands, got {len(operands)}")
        return apply(op, *(to_tensor(x) for x in operands))

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = op.doc
    export(fn, name=name, method=True)


_logical("logical_and", np.logical_and, 2)
_logical("logical_or", np.logical_or, 2)
_logical("logical_xor", np.logical_xor, 2)
_logical("logical_not", np.logical_not, 1)


def _predicate(name, kernel):
    op = register(
        OpDef(
            name=name,
            kind="elementwise",
            infer=lambda x: TensorType(tuple(x.shape), dt.bool_),
            kernel=kernel,
            cost=elementwise_cost(1),
            doc=f"{name}(x): elementwise test",
        )
    )

    def fn(x):
        return apply(op, to_tensor(x))

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = op.doc
    export(fn, name=name, method=True)


_predicate("isnan", np.isnan)
_predicate("isinf", np.isinf)
_predicate("isfinite", np.isfinite)
