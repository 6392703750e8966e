"""``Tensor.unfold(dimension, size, step)``: sliding windows as a view of the tensor's memory,
as PyTorch's. The view op ``unfold_view`` takes windows along the last dimension (the windows'
starts become that dimension, each window a new last one) as a strided NumPy view, writable
where its input is; `unfold` moves ``dimension`` last and the windows' dimension back, both
views. Writes through the windows reach the tensor; an update through overlapping windows is
refused (ember/_views.py), a fill allowed. A symbolic length along ``dimension``
(ember.compile's dynamic sizes) gives a symbolic number of windows, their gradient added back
by padding (`_spread_back`)."""

from __future__ import annotations

import operator

import numpy as np

from ..errors import ShapeError
from ..types import TensorType
from . import _batching
from . import api as E
from ._node_names import rename_node
from ._registry import OpDef, apply, export, register
from ._rules import Complex
from ._util import memory_cost, normalize_axis
from .promotion import to_tensor


def _count(length: int, size: int, step: int) -> int:
    return (length - size) // step + 1


def _infer(x, *, size, step):
    return TensorType((*x.shape[:-1], _count(x.shape[-1], size, step), size), x.dtype)


def _kernel(x, *, size, step):
    """Window ``i`` starts ``i * step`` elements along the last dimension: one step of the
    windows' dimension is ``step`` of the input's, one step of a window is one."""
    inner = x.strides[-1]
    return np.lib.stride_tricks.as_strided(
        x,
        shape=(*x.shape[:-1], _count(x.shape[-1], size, step), size),
        strides=(*x.strides[:-1], inner * step, inner),
        writeable=x.flags.writeable,
    )


def _positions(count: int, size: int, step: int) -> np.ndarray:
    """Each window's elements' positions along the last dimension, window after window."""
    return (np.arange(count)[:, None] * step + np.arange(size)[None, :]).reshape(-1)


def _vjp(c, g):
    """Each window's gradient added back where the window lies (overlapping windows add up)."""
    shape = tuple(c.in_types[0].shape)
    size, step = c.attrs["size"], c.attrs["step"]
    if not isinstance(shape[-1], int):
        return (_spread_back(g, shape[-1], size, step),)
    positions = _positions(_count(shape[-1], size, step), size, step)
    flat = E.reshape(g, (*shape[:-1], positions.size))
    zeros = E.zeros(shape, dtype=g.dtype)
    return (E.index_add(zeros, -1, to_tensor(positions.astype(np.int64)), flat),)


def _spread_back(g, length, size: int, step: int):
    """`_vjp` along a symbolic ``length``: element ``j`` of window ``i`` lies at ``i * step + j``,
    so each ``j``'s gradients, ``step - 1`` zeros between them, are padded into place and
    added (``size`` terms, a constant number)."""
    count = _count(length, size, step)
    total = None
    for j in range(size):
        column = E.select(g, -1, j)  # (..., count)
        if step > 1:
            gaps = [E.zeros_like(column)] * (step - 1)
            column = E.flatten(E.stack([column, *gaps], -1), -2)[..., : (count - 1) * step + 1]
        placed = E.pad(column, (j, length - (count - 1) * step - 1 - j))
        total = placed if total is None else total + placed
    return total


def _onnx(e):
    length = e.in_types[0].shape[-1]
    if not isinstance(length, int):
        e.unsupported("for a symbolic length")
    size, step = e.attrs["size"], e.attrs["step"]
    count = _count(length, size, step)
    taken = e.node(
        "Gather", [e.inputs[0], e.constant(_positions(count, size, step).astype(np.int64))], axis=-1
    )
    lead = [0] * (len(e.in_types[0].shape) - 1)  # (Reshape's 0: that dimension as it is)
    return e.node("Reshape", [taken, e.ints([*lead, count, size])])


def _batch(in_types, axes, attrs, k):
    if axes[0] >= len(in_types[0].shape) - 1:
        raise _batching.NotBatchable("the batch runs along the windowed dimension")
    return _batching.Batched((axes[0],), attrs)


_UNFOLD_VIEW = register(
    OpDef(
        name="unfold_view",
        float8=True,
        complex=Complex.GRADIENT,
        onnx=_onnx,
        kind="shape",
        infer=_infer,
        kernel=_kernel,
        vjp=_vjp,
        cost=memory_cost,
        save_inputs=(),
        view=True,
        batch=_batch,
        doc="unfold_view(x, size, step): windows of ``size`` elements every ``step`` along "
        "the last dimension, the windows' starts as that dimension and each window as a new "
        "last one (a view)",
    )
)


def unfold(self, dimension: int, size: int, step: int):
    """Sliding windows of ``size`` elements every ``step`` along ``dimension``: that dimension
    becomes the number of windows and a new last dimension holds each window (PyTorch's
    Tensor.unfold: a view)."""
    x = to_tensor(self)
    size, step = operator.index(size), operator.index(step)
    if x.ndim == 0:  # (PyTorch: one window of ``size`` elements, at most one, not a matrix)
        normalize_axis("unfold", dimension, 1)
        if step <= 0 or not 0 <= size <= 1:
            raise ShapeError(f"size {size} and step {step} do not fit a 0-d tensor", op="unfold")
        return E.narrow(E.reshape(x, (1,)), 0, 0, size)
    axis = normalize_axis("unfold", dimension, x.ndim)
    length = x.shape[axis]
    if step <= 0 or size < 0 or (isinstance(length, int) and size > length):
        raise ShapeError(
            f"size {size} and step {step} do not fit dim {axis} of size {length}",
            op="unfold",
        )
    windows = apply(_UNFOLD_VIEW, E.movedim(x, axis, -1), size=size, step=step)
    # (PyTorch's one node for the whole view)
    return rename_node(E.movedim(windows, -2, axis), "UnfoldBackward0", x)


export(unfold, name="unfold", method=True, toplevel=False)
