"""The ONNX forms (``onnx`` rules, ops/_rules.py) of ops/reduce.py's reductions, arg-extremes
and cumulative sum: ONNX's Reduce* ops (axes an input from opset 18, from 13 for ReduceSum), with
NumPy's NaN propagation where ONNX's comparisons skip NaN. Written through the exporter's
emitter ``e``, never importing ``onnx``."""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from . import _onnx


def onnx_sum(e):
    x = e.inputs[0]
    if e.in_types[0].dtype is not e.out_types[0].dtype:
        x = e.cast(x, e.out_types[0].dtype)
    return _onnx.reduce(e, "ReduceSum", x, e.attrs["axes"], e.attrs["keepdims"])


def onnx_prod(e):
    x = e.inputs[0]
    if e.in_types[0].dtype is not e.out_types[0].dtype:
        x = e.cast(x, e.out_types[0].dtype)
    return _onnx.reduce(e, "ReduceProd", x, e.attrs["axes"], e.attrs["keepdims"])


def onnx_extreme(op_type):
    def rule(e):
        x, dtype = e.inputs[0], e.in_types[0].dtype
        if dtype is dt.bool_:  # (ONNX reduces bools from opset 20 only)
            x = e.cast(x, dt.uint8)
        axes, keep = e.attrs["axes"], e.attrs["keepdims"]
        out = _onnx.reduce(e, op_type, x, axes, keep)
        if dtype is dt.bool_:
            return e.cast(out, dt.bool_)
        if not dtype.is_floating_point:
            return out
        # NumPy's max and min propagate NaN; ONNX's reductions may skip it
        nan = e.cast(e.node("IsNaN", [x]), dt.uint8)
        has_nan = e.cast(_onnx.reduce(e, "ReduceMax", nan, axes, keep), dt.bool_)
        return e.node("Where", [has_nan, _onnx.scalar(e, np.nan, dtype), out])

    return rule


def onnx_arg(op_type):
    def rule(e):
        x, axis, keepdims = e.inputs[0], e.attrs["axis"], e.attrs["keepdims"]
        dtype = e.in_types[0].dtype
        if dtype is dt.bool_:
            x = e.cast(x, dt.uint8)
        if axis is None:
            x, axis, keep = e.node("Reshape", [x, e.ints([-1])]), 0, False
        else:
            keep = keepdims
        out = e.node(op_type, [x], axis=axis, keepdims=int(keep))
        if dtype.is_floating_point:
            # NumPy's argmax and argmin give the first NaN's position where there is one
            nan = e.cast(e.node("IsNaN", [x]), dt.uint8)
            first_nan = e.node("ArgMax", [nan], axis=axis, keepdims=int(keep))
            has_nan = e.cast(_onnx.reduce(e, "ReduceMax", nan, (axis,), keep), dt.bool_)
            out = e.node("Where", [has_nan, first_nan, out])
        if e.attrs["axis"] is None:
            out = e.node("Reshape", [out, e.shape(e.out_types[0].shape)])
        return out

    return rule


def onnx_bool_reduce(op_type):
    """all / any: the minimum / maximum of the truth values as 0 and 1."""

    def rule(e):
        x = e.cast(e.cast(e.inputs[0], dt.bool_), dt.uint8)
        out = _onnx.reduce(e, op_type, x, e.attrs["axes"], e.attrs["keepdims"])
        return e.cast(out, dt.bool_)

    return rule


def onnx_cumsum(e):
    x = e.inputs[0]
    if e.in_types[0].dtype is not e.out_types[0].dtype:
        x = e.cast(x, e.out_types[0].dtype)
    return e.node("CumSum", [x, e.scalar(e.attrs["axis"], dt.int64)])
