"""Elementwise choices: ``where(condition, x, y)`` and ``clip`` (clamp), primitives with their
public functions (operands promoted as in ops/elementwise.py)."""

from __future__ import annotations

import math

import numpy as np

from .. import _meta
from .. import dtypes as dt
from ..errors import ArgumentTypeError, DTypeError
from ..types import TensorType
from . import _onnx
from . import _onnx_complex as cx
from . import api as E
from ._half import elementwise_fast
from ._node_names import rename_node
from ._registry import OpDef, TensorBase, apply, export, is_traced, register
from ._rules import Clamp, Complex, Select
from ._saved_operands import needs, saves
from ._select import select_bits, zero_bits
from ._util import (
    broadcast_shapes,
    check_fill_value,
    elementwise_cost,
    fill_number,
    require_same_dtype,
    same_type,
    value_bytes,
)
from .promotion import promote, to_tensor


def _where_infer(cond, x, y):
    if cond.dtype is not dt.bool_:
        raise DTypeError(f"the condition must be a bool tensor, got {cond.dtype}", op="where")
    dtype = require_same_dtype("where", x, y)
    return TensorType(broadcast_shapes("where", cond.shape, x.shape, y.shape), dtype)


def _where_kernel(cond, x, y):
    """``np.where``, computed branch-free on the values' bits when x and y share a dtype
    (ops/_select.py)."""
    return select_bits(cond, x, y)


def _where_vjp(c, g):
    cond = c.inputs[0]
    _, nx, ny = c.needs_input_grad
    return (
        None,
        E.sum_to(E.where(cond, g, 0), c.in_types[1].shape) if nx else None,
        E.sum_to(E.where(cond, 0, g), c.in_types[2].shape) if ny else None,
    )


def _no_temporaries(arrays) -> bool:
    """Whether `_where_kernel` makes no temporaries on these operands (x or y `_zero_bits`)."""
    return any(zero_bits(a) for a in arrays[1:])


def _where_workspace(node, layouts) -> int:
    """`_where_kernel`'s temporaries: none when x or y is a 0-d zero constant (one multiply);
    otherwise the mask as bits, ``x & mask`` (result-sized) and ``y & ~mask``."""
    cond, x, y = node.inputs
    for v in (x, y):
        if v.node.kind == "constant" and zero_bits(node.graph.constants[v.name]):
            return 0
    if x.dtype != y.dtype:
        return 0
    out = node.outputs[0]
    item = out.dtype.itemsize
    cond_size = value_bytes(cond) // max(cond.dtype.itemsize, 1) * item
    y_shape = np.broadcast_shapes(
        *(tuple(d if isinstance(d, int) else 1 for d in v.shape) for v in (cond, y))
    )
    return cond_size + value_bytes(out) + math.prod(y_shape) * item


def _onnx_where(e):
    return _onnx.select(e, *e.inputs, e.out_types[0].dtype)


_WHERE = register(
    OpDef(
        name="where",
        float8=True,
        complex=Complex.GRADIENT,
        onnx=cx.pairs(_onnx_where, cx.where),
        kind="elementwise",
        infer=_where_infer,
        cached_infer=True,
        kernel=_where_kernel,
        vjp=_where_vjp,
        cost=elementwise_cost(1),
        save_inputs=(0,),
        doc="where(cond, x, y): x where cond is true, else y (broadcasting).",
        c="({0} ? {1} : {2})",
        # half precision, and large float operands where measured faster: the C loop (for
        # float operands only where the kernel makes no temporaries either: a 0-d zero
        # operand, a ReLU's gradient; `_where_workspace` counts the kernel's)
        fast=elementwise_fast("where", float_when=_no_temporaries),
        workspace=_where_workspace,
        selects=(Select(value=1, fill=2), Select(value=2, fill=1)),
    )
)


@export
def where(condition, x=None, y=None):
    """Elementwise choice: ``x`` where ``condition`` holds, else ``y`` (broadcast, promoted).
    ``where(condition)`` alone is ``nonzero(condition, as_tuple=True)``, as in PyTorch."""
    if x is None and y is None:
        return E.nonzero(condition, as_tuple=True)
    if x is None or y is None:
        raise ArgumentTypeError("where: give both x and y, or neither")
    if _meta.active[0]:
        _meta.refuse_mixed("where", (condition, x, y))
    numbers = [v for v in (x, y) if not isinstance(v, TensorBase)]
    x, y = promote(x, y)
    for number in numbers:  # (a number taken into a tensor's dtype: PyTorch's checked convert)
        check_fill_value("where", number, x.dtype, floats="float32")
    return apply(
        _WHERE,
        to_tensor(condition, dt.bool_ if not isinstance(condition, TensorBase) else None),
        x,
        y,
    )


def _where_method(self, condition, y):
    """``x.where(condition, y)``: x where ``condition`` holds, else ``y`` (PyTorch's method:
    the tensor is the value kept, not the condition)."""
    return where(condition, self, y)


_where_method.__name__ = _where_method.__qualname__ = "where"
export(_where_method, name="where", method=True, toplevel=False)


def _clip_infer(x, *, lo, hi):
    if x.dtype is dt.bool_:
        raise DTypeError("clip is not defined for bool tensors", op="clip")
    return same_type(x)


def _clip_kernel(x, *, lo, hi):
    # np.clip with one bound is np.maximum or np.minimum, whose tie gives the bound (-0.0
    # against 0 becomes 0.0); PyTorch's clamp keeps x at a tie, as np.clip with two bounds
    # does, so a missing bound is the dtype's end of the line
    integer = x.dtype.kind in "iu"
    if lo is None and hi is not None:
        lo = np.iinfo(x.dtype).min if integer else -np.inf
    elif hi is None and lo is not None:
        hi = np.iinfo(x.dtype).max if integer else np.inf
    return _CLIP_UFUNC(x, lo, hi).astype(x.dtype, copy=False)


# np.clip's own ufunc, called without np.clip's Python wrappers (more than half of a small
# clamp's time): the same loop, the same bits
_CLIP_UFUNC = getattr(getattr(np, "_core", None), "umath", None)
_CLIP_UFUNC = getattr(_CLIP_UFUNC, "clip", None) or np.clip


def _clip_vjp(c, g):
    x = c.inputs[0]
    lo, hi = c.attrs["lo"], c.attrs["hi"]
    inside = None
    if lo is not None:
        inside = x >= lo
    if hi is not None:
        inside = x <= hi if inside is None else E.logical_and(inside, x <= hi)
    return (g if inside is None else E.where(inside, g, 0),)


def _onnx_clip(e):
    dtype = e.in_types[0].dtype
    lo, hi = e.attrs["lo"], e.attrs["hi"]
    bounds = [e.scalar(b, dtype) if b is not None else "" for b in (lo, hi)]
    if dtype is dt.bool_:
        e.unsupported("on bool tensors")
    return e.node("Clip", [e.inputs[0], *bounds])


def _clip_clamp(attrs, constants):
    """PyTorch's clamp is min(max(x, lo), hi), each comparison strict, so a value equal to a
    bound stays itself (-0.0 against a bound of 0.0), with one bound or two; NaN stays NaN.
    Where lo > hi every value becomes hi, and a NaN bound makes NaN: no one `Clamp` says so."""
    lo = float("-inf") if attrs["lo"] is None else float(attrs["lo"])
    hi = float("inf") if attrs["hi"] is None else float(attrs["hi"])
    return Clamp(lo, hi) if lo <= hi else None


# `_clip_clamp`'s comparisons, a NaN bound taken (NaN everywhere, as PyTorch); an open bound is
# an infinity, which decides every comparison as no bound would
_CLIP_MAX = "((({0} < {lo:lower}) | ({lo:lower} != {lo:lower})) ? {lo:lower} : {0})"
_CLIP_C = (
    f"((({_CLIP_MAX} > {{hi:upper}}) | ({{hi:upper}} != {{hi:upper}})) ? {{hi:upper}}"
    f" : {_CLIP_MAX})"
)


_CLIP = register(
    OpDef(
        name="clip",
        grad_fn="ClampBackward1",
        onnx=_onnx_clip,
        kind="elementwise",
        infer=_clip_infer,
        kernel=_clip_kernel,
        vjp=_clip_vjp,
        cost=elementwise_cost(2),
        c=_CLIP_C,
        clamp=_clip_clamp,
        doc="clip(x, lo, hi) with scalar bounds (None = unbounded).",
    )
)


def _clip_tensors(x, lo, hi):
    """clamp with tensor bounds, PyTorch's: the value min(max(x, lo), hi) (NaN from any
    operand); the gradient goes whole to x where lo <= x <= hi (ties included), to lo where
    x < lo <= hi, to hi where x > hi, and nowhere where a NaN is involved (not split at ties
    as maximum's and minimum's)."""
    value = x
    if lo is not None:
        value = E.maximum(value, lo)
    if hi is not None:
        value = E.minimum(value, hi)
    out = E.stop_gradient(value)
    inside = None
    if hi is not None:
        above = x > hi
        if lo is not None:
            # lo > hi: the result and its gradient are hi's (NaN where x is NaN, as there)
            crossed = lo > hi
            above = E.logical_or(above, crossed)
            out = E.where(E.logical_and(crossed, E.isnan(x)), hi + x * 0, out)
        out = (
            E.where(above, hi, out)
            if lo is None
            else E.where(E.logical_and(above, E.logical_not(E.isnan(x))), hi, out)
        )
        inside = x <= hi
    if lo is not None:
        below = x < lo
        if hi is not None:
            below = E.logical_and(below, lo <= hi)
        out = E.where(below, lo, out)
        inside = x >= lo if inside is None else E.logical_and(inside, x >= lo)
    return E.where(inside, x, out)


@export(method=("clip", "clamp"), inplace=True)
def clip(x, min=None, max=None):
    """Clamp values into [min, max]; tensor bounds broadcast (a bound of None is open)."""
    if is_traced(min) or is_traced(max):
        # a traced .item() bound (graph/traced_item.py) has no number while the graph is built:
        # it is a weak scalar made a graph value, and clamps as a 0-d tensor bound does
        x = to_tensor(x)
        dtype = dt.result_type(x, *[b for b in (min, max) if b is not None])
        x = x if x.dtype is dtype else E.cast(x, dtype)
        return _clip_tensors(x, *[None if b is None else to_tensor(b, dtype) for b in (min, max)])
    if isinstance(min, TensorBase) or isinstance(max, TensorBase):
        # (one node, PyTorch's, saving the tensor and its bounds for every gradient)
        out = rename_node(_clip_tensors(to_tensor(x), min, max), "ClampBackward0")
        return saves(out, *((x, min, max) if needs(x, min, max) else ()))
    x = to_tensor(x)
    if any(isinstance(b, complex) for b in (min, max)):
        raise DTypeError(
            f"a complex bound ({min}, {max}) cannot be converted to a real number (tensor of "
            f"shape {tuple(x.shape)}, {x.dtype.name}), as in PyTorch",
            op="clamp",
        )
    # the bounds promote like scalars of an elementwise op: an int tensor with a float bound
    # is a default-float result, a bool tensor with an int bound int64 (PyTorch's clamp)
    dtype = dt.result_type(x, *[b for b in (min, max) if b is not None])
    if dtype is dt.bool_:
        raise DTypeError("not defined for bool results (as in PyTorch)", op="clip")
    if dtype is not x.dtype:
        x = E.cast(x, dtype)
    min, max = (None if b is None else fill_number("clamp", b, dtype) for b in (min, max))
    as_python = float if x.dtype.is_floating_point else int
    return apply(
        _CLIP,
        x,
        lo=None if min is None else as_python(min),
        hi=None if max is None else as_python(max),
    )


export(clip, name="clamp")

# (PyTorch's out= refuses an operand partly overlapping out: ops/_out.py, ops/_overlap.py)
clip.out_overlap_refused = where.out_overlap_refused = True
