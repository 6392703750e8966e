"""Batch rules: how one call of an op splits along a batch axis (micro-batching).

transforms/microbatch.py runs a training step's batch in ``k`` equal slices. For that it asks
each op, through ``batch`` rule (or the default of its kind: `elementwise` for elementwise
ops, `reduce_rule` for reductions), what becomes of one call when its operands carry the batch
along given axes:

``rule(in_types, axes, attrs, k) -> Batched``, where ``in_types`` are the whole batch's operand
types, ``axes`` per operand the axis holding the batch (None: the operand does not depend on
the batch), and ``k`` the number of slices. `Batched` says, per output, which axis holds the
batch (None where the call reduced over it: then each slice's output is a *partial* result and
the whole batch's is their sum), the attributes of a call on one slice (shapes divided by
``k``), and which batch-free operands must be sliced along the batch too (a full-size mask or
constant read elementwise with the batch). A rule raises `NotBatchable` when slicing would
change the results (a softmax across the batch, a statistic over the whole batch).

The batch axis of a value is where its leading slices lie: a reshape may merge it with later
dimensions (``(8, 128, 256) -> (1024, 256)``: slice ``i`` of 2 is rows ``512 i ..``), as long
as it stays the outermost factor.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from ..errors import EmberError

__all__ = [
    "Batched",
    "NotBatchable",
    "axis_rule",
    "broadcast_rule",
    "concat_rule",
    "elementwise",
    "indexing_rule",
    "linear_rule",
    "matmul_rule",
    "per_sample",
    "permute_rule",
    "reduce_rule",
    "reshape_rule",
    "split_rule",
]


class NotBatchable(EmberError):
    """Running this op on slices of the batch would not give the whole batch's results.

    ``out_axes`` (optional): where the batch lies in the op's outputs all the same when the
    call runs on the whole batch (None for a batch-free output, a statistic): the values read
    by later ops are then per-sample or batch-free as usual, and those ops may still run in
    slices (transforms/microbatch.py's `batch_axes`)."""

    def __init__(self, message: str, *, out_axes: tuple | None = None, **kwargs):
        super().__init__(message, **kwargs)
        self.out_axes = out_axes


class Batched(NamedTuple):
    out_axes: tuple  # per output: the batch axis, or None (a partial result: sum the slices')
    attrs: dict  # the attributes of the call on one slice
    slices: dict = {}  # operand position -> axis: a batch-free operand sliced like the batch


def _batch_size(in_types, axes) -> int:
    sizes = {t.shape[a] for t, a in zip(in_types, axes) if a is not None}
    if len(sizes) != 1:
        raise NotBatchable(f"operands carry batches of different sizes {sorted(sizes)}")
    return sizes.pop()


def _aligned(in_types, axes, rank: int, name: str) -> tuple[int, dict]:
    """The output axis of the batch when operands broadcast (right-aligned) to ``rank``
    dimensions, and the batch-free operands that have the batch's full size there (sliced)."""
    out = {a + rank - len(t.shape) for t, a in zip(in_types, axes) if a is not None}
    if len(out) != 1:
        raise NotBatchable(f"{name}: operands carry the batch along different axes")
    axis = out.pop()
    size = _batch_size(in_types, axes)
    slices = {}
    for i, (t, a) in enumerate(zip(in_types, axes)):
        if a is None:
            own = axis - (rank - len(t.shape))
            if own >= 0 and t.shape[own] != 1:
                if t.shape[own] != size:
                    raise NotBatchable(f"{name}: operand {i} does not broadcast with the batch")
                slices[i] = own
    return axis, slices


def elementwise(in_types, axes, attrs, k) -> Batched:
    """Elementwise ops (broadcasting): the batch stays on its (right-aligned) axis."""
    rank = max(len(t.shape) for t in in_types)
    axis, slices = _aligned(in_types, axes, rank, "elementwise")
    return Batched((axis,), attrs, slices)


def reduce_rule(partial: bool):
    """A reduction with ``axes`` and ``keepdims``: over other axes the batch passes through;
    over the batch axis each slice gives a partial result, which only a sum may add up
    (``partial``)."""

    def rule(in_types, axes, attrs, k) -> Batched:
        (axis,) = axes
        reduced = attrs.get("axes")
        reduced = tuple(range(len(in_types[0].shape))) if reduced is None else tuple(reduced)
        if axis in reduced:
            if not partial:
                raise NotBatchable("it reduces over the batch and is not a sum")
            return Batched((None,), attrs)
        if attrs.get("keepdims"):
            return Batched((axis,), attrs)
        return Batched((axis - sum(1 for r in reduced if r < axis),), attrs)

    return rule


def axis_rule(attr: str):
    """An op working along one axis (``attrs[attr]``: softmax, log_softmax): the batch must
    lie along another."""

    def rule(in_types, axes, attrs, k) -> Batched:
        (axis,) = axes
        if axis == attrs[attr] % len(in_types[0].shape):
            raise NotBatchable(f"it works along the batch axis {axis}")
        return Batched((axis,), attrs)

    return rule


def _divided(shape, axis: int, k: int, name: str) -> tuple:
    if shape[axis] % k:
        raise NotBatchable(f"{name}: dimension {axis} of {tuple(shape)} does not divide by {k}")
    return tuple(d // k if i == axis else d for i, d in enumerate(shape))


def reshape_rule(in_types, axes, attrs, k) -> Batched:
    """The batch stays the outermost factor of the output dimension that starts where it
    started (the same number of elements before it)."""
    (axis,) = axes
    shape, target = tuple(in_types[0].shape), tuple(attrs["shape"])
    before = math.prod(shape[:axis])
    for j in range(len(target)):
        if math.prod(target[:j]) == before and target[j] != 1:
            return Batched((j,), {**attrs, "shape": _divided(target, j, k, "reshape")})
    raise NotBatchable(f"reshape {shape} -> {target} moves the batch inside a dimension")


def permute_rule(in_types, axes, attrs, k) -> Batched:
    return Batched((tuple(attrs["dims"]).index(axes[0]),), attrs)


def broadcast_rule(in_types, axes, attrs, k) -> Batched:
    shape = tuple(attrs["shape"])
    axis = axes[0] + len(shape) - len(in_types[0].shape)
    return Batched((axis,), {**attrs, "shape": _divided(shape, axis, k, "broadcast_to")})


def split_rule(in_types, axes, attrs, k) -> Batched:
    (axis,) = axes
    if axis == attrs["axis"]:
        raise NotBatchable("it splits along the batch axis")
    return Batched((axis,) * len(attrs["sizes"]), attrs)


def concat_rule(in_types, axes, attrs, k) -> Batched:
    rank = len(in_types[0].shape)
    axis, slices = _aligned(in_types, axes, rank, "concat")
    if axis == attrs["axis"] % rank:
        raise NotBatchable("it joins along the batch axis")
    return Batched((axis,), attrs, slices)


def matmul_rule(in_types, axes, attrs, k) -> Batched:
    """``a @ b``: the batch on a's rows, b's columns or the broadcast leading dimensions passes
    through; on the contracted dimension of both (a weight's gradient, ``x.T @ dy``) each slice
    gives a partial product."""
    a, b = (tuple(t.shape) for t in in_types)
    (ra, rb), rank = (len(a), len(b)), max(len(a), len(b))
    at, bt = axes
    if at == ra - 1 or bt == rb - 2:  # the contracted dimension
        if (at, bt) == (ra - 1, rb - 2):
            return Batched((None,), attrs)
        if at is None or bt is None:  # the other operand is sliced along its own
            return Batched((None,), attrs, {0: ra - 1} if at is None else {1: rb - 2})
        raise NotBatchable("matmul: the batch is contracted in one operand only")
    if at == ra - 2 or bt == rb - 1:
        if at is not None and bt is not None:
            raise NotBatchable("matmul: the operands carry the batch along different axes")
        return Batched((rank - 2 if at is not None else rank - 1,), attrs)
    # leading (broadcast) dimensions
    lead = [t._replace(shape=t.shape[:-2]) for t in in_types]
    axis, slices = _aligned(lead, axes, rank - 2, "matmul")
    return Batched((axis,), attrs, slices)


def linear_rule(in_types, axes, attrs, k) -> Batched:
    """``x @ w.T + bias``: the batch on x's leading dimensions passes through."""
    x_axis, *rest = axes
    if any(a is not None for a in rest) or x_axis is None:
        raise NotBatchable("linear: the weight or the bias depends on the batch")
    if x_axis == len(in_types[0].shape) - 1:
        raise NotBatchable("linear: the batch lies along the input features")
    return Batched((x_axis,), attrs)


def per_sample(operands: tuple = (0,), outputs: int = 1, partial: bool = False):
    """Ops over ``(N, C, *spatial)`` samples (convolutions, pooling and their gradients): the
    batch only on axis 0 of the ``operands``; the ``outputs`` carry it on axis 0, or
    (``partial``: a convolution's weight gradient, summed over the samples) each slice gives a
    partial result."""

    def rule(in_types, axes, attrs, k) -> Batched:
        for i, a in enumerate(axes):
            if a is not None and (i not in operands or a != 0):
                raise NotBatchable(f"operand {i} carries the batch along axis {a}")
        if partial:
            if any(axes[i] is None for i in operands):
                raise NotBatchable("only some of its per-sample operands carry the batch")
            return Batched((None,) * outputs, attrs)
        return Batched((0,) * outputs, attrs)

    return rule


def indexing_rule(in_types, axes, attrs, k) -> Batched:
    """gather / scatter_add along ``attrs["axis"]``: the batch along another axis of operands
    of one rank passes through; a batch-free index of the batch's size is sliced with it."""
    rank = len(in_types[0].shape)
    axis, slices = _aligned(in_types, axes, rank, "indexing")
    if axis == attrs["axis"] % rank:
        raise NotBatchable("it indexes along the batch axis")
    return Batched((axis,), attrs, slices)
