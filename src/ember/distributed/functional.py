"""Functional collectives: PyTorch's ``torch.distributed._functional_collectives`` on ember
tensors. Each returns a new tensor and leaves its operand alone, so it is an op
(ops/collective.py) that eager code runs at once and ``ember.function`` records as a graph node
(one the passes never drop, merge or reorder among collectives), with a gradient: the
all-reduce's of a sum is the all-reduce of the gradient.

``all_reduce(t, op, group)`` blocks until the result is there; ``all_reduce_start`` returns
(buffer, handle) and ``wait_tensor(buffer, handle)`` the result, so a captured graph can run
other work while the reduction travels. ``broadcast(t, src, group)`` is rank ``src``'s ``t``.
``group``: a `ProcessGroup`, or None for the default one.
"""

from __future__ import annotations

from ..ops import _registry as _reg
from ..ops.collective import ALL_REDUCE, ALL_REDUCE_START, ALL_REDUCE_WAIT, BROADCAST
from ._graph_backend import group_tag, reduce_op_name

__all__ = ["all_reduce", "all_reduce_start", "broadcast", "wait_tensor"]


def _attrs(op, group, what) -> dict:
    tag, pg = group_tag(group, what)
    return {"reduce_op": reduce_op_name(op), "group": tag, "size": pg.size()}


def all_reduce(tensor, op="sum", group=None):
    """``tensor`` combined across the ranks with ``op`` (a `ReduceOp` or its lower-case name)."""
    return _reg.apply(ALL_REDUCE, tensor, **_attrs(op, group, "all_reduce"))


def all_reduce_start(tensor, op="sum", group=None):
    """Start an all-reduce of ``tensor``: (buffer, handle) for `wait_tensor`."""
    return _reg.apply(ALL_REDUCE_START, tensor, **_attrs(op, group, "all_reduce_start"))


def wait_tensor(buffer, handle, op="sum", group=None):
    """The result of the all-reduce `all_reduce_start` began (same ``op`` and ``group``)."""
    return _reg.apply(ALL_REDUCE_WAIT, buffer, handle, **_attrs(op, group, "wait_tensor"))


def broadcast(tensor, src: int, group=None):
    """Rank ``src``'s ``tensor`` on every rank."""
    tag, pg = group_tag(group, "broadcast")
    return _reg.apply(BROADCAST, tensor, src=src, group=tag, size=pg.size())
