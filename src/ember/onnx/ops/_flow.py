"""What the control-flow converters (control.py: If and Loop; scan.py: Scan) share: whether a
graph is being built, which outer values a body reads and whether they are all static, and the
values that cross a captured control-flow node (tensors only: a sequence or an empty optional
cannot, and makes the model run eagerly through `NeedsData`).
"""

from __future__ import annotations

import numpy as np

from ...graph.builder import GraphBuilder
from ...ops import _registry as _reg
from .._convert import EMPTY, NeedsData, ember_dtype, is_static, static_value
from .._model import free_names
from ._common import E, np_dtype

INT64 = np.dtype(np.int64)
BOOL = np.dtype(np.bool_)


def capturing() -> bool:
    return isinstance(_reg.current_mode(), GraphBuilder)


# ---------------------------------------------------------------------------------------------
# what a body reads


def all_static(ctx, inputs, graph_attrs) -> bool:
    """Every input of the node, and every outer value its graphs read, is static."""
    if not all(static_value(v) for v in inputs):
        return False
    for name in graph_attrs:
        for free in free_names(ctx.attr(name)):
            if not static_value(ctx.env.get(free)):
                return False
    return True


# ---------------------------------------------------------------------------------------------
# values crossing a captured node


def captured(ctx, value, what: str):
    """A value a captured branch or body gives back, as an ember tensor."""
    if isinstance(value, list) or value is EMPTY or value is None:
        kind = "a sequence" if isinstance(value, list) else "an empty optional"
        raise NeedsData(f"{ctx.label}: {what} is {kind}, which a captured graph cannot carry")
    return ctx.tensor(value)


def predicate(ctx, value, what: str):
    """A 0-d bool tensor from a one-element condition."""
    t = ctx.tensor(value)
    if int(np.prod(t.shape)) != 1:
        raise ctx.error(f"{what} must hold one element, got shape {tuple(t.shape)}")
    if tuple(t.shape) != ():
        t = E.reshape(t, ())
    if t.dtype != ember_dtype(BOOL, ctx.label):
        t = E.cast(t, ember_dtype(BOOL, ctx.label))
    return t


def flag(ctx, value, what: str) -> bool:
    array = np.asarray(ctx.static(value, what))
    if array.size != 1:
        raise ctx.error(f"{what} must hold one element, got shape {array.shape}")
    return bool(array.reshape(()))


def same_type(a, b) -> bool:
    return tuple(a.shape) == tuple(b.shape) and a.dtype == b.dtype


def stack(ctx, values):
    if all(is_static(v) for v in values):
        return np.stack(values)
    return E.stack([ctx.tensor(v) for v in values])


def empty_stack(ctx, info) -> np.ndarray:
    """The scan output of zero iterations: no body ran, so its element type is the body's
    declared output type (unknown dimensions taken as 0, float32 when no type is declared)."""
    dtype, dims = np.dtype(np.float32), []
    if info.type.WhichOneof("value") == "tensor_type":
        tt = info.type.tensor_type
        if tt.elem_type:
            dtype = np_dtype(tt.elem_type, ctx.label)
        if tt.HasField("shape"):
            dims = [d.dim_value if d.HasField("dim_value") else 0 for d in tt.shape.dim]
    return np.zeros((0, *dims), dtype)
