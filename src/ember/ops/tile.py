"""Repetition and triangles: ``tile`` (with PyTorch's ``repeat`` and ``repeat_interleave``
on it) and ``tril`` / ``triu``."""

from __future__ import annotations

import operator

import numpy as np

from .. import dtypes as dt
from ..errors import NeedsArgumentValue, ShapeError, TraceError
from ..symbolic import SymDim
from ..types import TensorType
from . import api as E
from ._node_names import rename_node
from ._onnx import trilu
from ._registry import OpDef, TensorBase, apply, export, register
from ._rules import Complex
from ._util import fmt_shape, memory_cost, normalize_axis, shape_arg
from .promotion import to_tensor
from .shape import broadcast_to, flatten, reshape, unsqueeze

# -------------------------------------------------------------------------------------- tile


def _tile_infer(x, *, reps):
    if len(reps) != x.ndim:
        raise ShapeError(f"reps {reps} must have one entry per dimension", op="tile")
    return TensorType(tuple(s * r for s, r in zip(x.shape, reps)), x.dtype)


def _tile_vjp(c, g):
    reps = c.attrs["reps"]
    shape = c.in_types[0].shape
    split_shape = []
    for r, s in zip(reps, shape):
        split_shape += [r, s]
    summed = E.sum(reshape(g, split_shape), tuple(range(0, 2 * len(shape), 2)))
    return (summed,)


def _onnx_tile(e):
    return e.node("Tile", [e.inputs[0], e.ints(e.attrs["reps"])])


_TILE = register(
    OpDef(
        name="tile",
        grad_fn="RepeatBackward0",
        float8=True,
        complex=Complex.GRADIENT,
        onnx=_onnx_tile,
        kind="shape",
        infer=_tile_infer,
        kernel=lambda x, *, reps: np.tile(x, reps),
        vjp=_tile_vjp,
        cost=memory_cost,
        save_inputs=(),
        doc="tile(x, reps): repeat the whole tensor reps[d] times along each d",
    )
)


@export(method=True)
def tile(x, *reps):
    """Repeat ``x`` along each dimension (NumPy's tile; leading reps add dimensions)."""
    x = to_tensor(x)
    reps = shape_arg(reps)
    if len(reps) > x.ndim:
        x = reshape(x, (1,) * (len(reps) - x.ndim) + tuple(x.shape))
    reps = (1,) * (x.ndim - len(reps)) + reps
    if all(r == 1 for r in reps):
        return x
    return apply(_TILE, x, reps=reps)


@export(method=True, toplevel=False)
def repeat(x, *sizes):
    """PyTorch's ``Tensor.repeat``: `tile`, but with at least one count per dimension of
    ``x`` (PyTorch refuses fewer, where `tile` pads them with ones)."""
    x = to_tensor(x)
    counts = shape_arg(sizes)
    if len(counts) < x.ndim:
        raise ShapeError(
            f"the number of repeat counts ({len(counts)}) cannot be smaller than the number of "
            f"dimensions of the tensor (shape {fmt_shape(x.shape)})",
            op="repeat",
        )
    return tile(x, *sizes)


@export(method=True)
def repeat_interleave(x, repeats=None, dim=None, *, output_size=None):
    """Repeat each element of ``x`` along ``dim`` (flattened when dim is None), as PyTorch's:
    ``repeats`` an int or a tensor of one count per element (or one count for all); with
    ``repeats`` omitted, ``x`` holds the counts and the result repeats their indices
    (``repeat_interleave(tensor([1, 2]))`` is ``[0, 1, 1]``). Per-element counts make the
    result's size depend on their values, so they are read eagerly (an index_select carries
    the gradient); capturing them raises a `TraceError`."""
    x = to_tensor(x)
    if repeats is None:
        if x.ndim != 1 or not x.dtype.is_integer:
            raise ShapeError(
                f"with repeats omitted, the input is the 1-d integer counts, got "
                f"{x.dtype} of shape {fmt_shape(x.shape)}",
                op="repeat_interleave",
            )
        counts = _counts(x, x.shape[0])
        return E.tensor(np.repeat(np.arange(len(counts)), counts), dtype=dt.int64)
    if dim is None:
        x, dim = flatten(x), 0
    d = normalize_axis("repeat_interleave", dim, x.ndim)
    shape = tuple(x.shape)
    if not isinstance(repeats, TensorBase) or repeats.ndim == 0 and repeats.numel() == 1:
        repeats = operator.index(repeats)
        if repeats < 0:
            raise ShapeError(f"repeats must be >= 0, got {repeats}", op="repeat_interleave")
        y = broadcast_to(unsqueeze(x, d + 1), shape[: d + 1] + (repeats,) + shape[d + 1 :])
        out = reshape(y, shape[:d] + (shape[d] * repeats,) + shape[d + 1 :])
        return rename_node(out, "ViewBackward0", x)  # (PyTorch's: a copy, then its view)
    counts = _counts(repeats, shape[d])
    index = np.repeat(np.arange(shape[d]), counts)
    if output_size is not None and output_size != len(index):
        raise ShapeError(
            f"output_size={output_size} but the repeats sum to {len(index)}",
            op="repeat_interleave",
        )
    return E.index_select(x, d, E.tensor(index, dtype=dt.int64))


def _counts(repeats, size: int) -> np.ndarray:
    """The per-element counts of ``repeats`` (a tensor of one or ``size`` non-negative
    integers), read from its value: while a graph is built, host data's (a constant the
    function made, or an argument, which ember.function then specializes on, as lengths)."""
    if not repeats.dtype.is_integer or repeats.ndim > 1:
        raise ShapeError(
            f"repeats must be an integer tensor of 0 or 1 dimensions, got {repeats.dtype} of "
            f"shape {fmt_shape(repeats.shape)}",
            op="repeat_interleave",
        )
    try:
        if hasattr(repeats, "host_value"):  # (a graph value)
            counts = np.asarray(repeats.host_value("repeat_interleave's repeats")).reshape(-1)
        else:
            counts = repeats.detach().numpy().reshape(-1)
    except NeedsArgumentValue:
        raise
    except TraceError:
        raise TraceError(
            "the size of the result depends on the values of repeats, which a graph does not "
            "have while it is built; pass an int, or compute this outside the captured function",
            op="repeat_interleave",
        ) from None
    if counts.size == 1:
        counts = np.repeat(counts, size)
    if counts.size != size:
        raise ShapeError(
            f"repeats has {counts.size} counts for a dimension of size {size}",
            op="repeat_interleave",
        )
    if (counts < 0).any():
        raise ShapeError("repeats must be >= 0", op="repeat_interleave")
    return counts


# ---------------------------------------------------------------------------------- tril/triu


def _onnx_tri(upper):
    def rule(e):
        x, shape, diagonal = e.inputs[0], e.in_types[0].shape, e.attrs["diagonal"]
        if e.in_types[0].dtype is dt.bool_ and e.opset >= 14:  # (onnxruntime's Trilu: no bool)
            out = trilu(e, e.cast(x, dt.int64), shape, dt.int64, diagonal, upper)
            return e.cast(out, dt.bool_)
        return trilu(e, x, shape, e.in_types[0].dtype, diagonal, upper)

    return rule


def _tri(name, fn):
    def infer(x, *, diagonal):
        if x.ndim < 2:
            raise ShapeError(
                f"needs at least 2 dimensions, got shape {fmt_shape(x.shape)}", op=name
            )
        return TensorType(tuple(x.shape), x.dtype)

    op = register(
        OpDef(
            name=name,
            kind="shape",
            infer=infer,
            kernel=lambda x, *, diagonal: fn(x, diagonal),
            vjp=lambda c, g: (apply(op, g, diagonal=c.attrs["diagonal"]),),
            cost=memory_cost,
            save_inputs=(),
            doc=f"{name}(x, diagonal): keep the {name[-1]}riangle of the last two "
            "dimensions, zero the rest",
            onnx=_onnx_tri(int(name == "triu")),
            complex=Complex.GRADIENT,
        )
    )

    def public(x, diagonal=0):
        # (a symbolic size, ``diagonal=S - T`` over a growing cache, each run's own number)
        diagonal = diagonal if isinstance(diagonal, SymDim) else int(diagonal)
        return apply(op, to_tensor(x), diagonal=diagonal)

    public.__name__ = public.__qualname__ = name
    public.__doc__ = op.doc
    export(public, name=name, method=True)


_tri("tril", np.tril)
_tri("triu", np.triu)
