"""The event record of a profile, and what a call's record is computed from.

An `Event` is one timed span on one thread (times from ``perf_counter_ns``): an op call, a
kernel call or a range. Its cost (FLOPs, bytes) comes from the op's cost rule on the call's
concrete types, computed when a report first asks (costs.py), not while the program runs.
The names of the threads that recorded are kept here too, for the reports (report.py).
"""

from __future__ import annotations

import time

import numpy as np

from ..ops import _registry as _reg
from ..types import TensorType

__all__ = ["Event", "allocated_bytes", "name_thread", "now", "thread_names", "types_of"]

now = time.perf_counter_ns

_thread_names: dict[int, str] = {}


def name_thread(tid: int, name: str) -> None:
    """Note the Python name of the thread with native id ``tid`` (a thread that records)."""
    _thread_names[tid] = name


def thread_names() -> dict[int, str]:
    """Native thread id -> Python thread name, for the threads that recorded events."""
    return dict(_thread_names)


class Event:
    """One timed span on one thread: an op call, a kernel call, or a range.

    ``cat``: ``op`` (an eager op), ``backward`` (an eager op run by the backward pass, or a
    tape node's range there), ``kernel`` (one call in a compiled graph), ``graph`` (the call of
    a compiled graph), ``user_annotation`` (a `record_function` range), ``profiler`` (the
    profiler's own work: generating a graph's instrumented code). ``op``, ``attrs``,
    ``in_types`` and ``out_types`` (with this call's concrete shapes) are set for op and kernel
    events: the cost rule reads them. ``allocated``: bytes of new memory the outputs hold
    (None unless ``profile_memory``)."""

    __slots__ = (
        "name",
        "cat",
        "start_ns",
        "end_ns",
        "tid",
        "op",
        "attrs",
        "in_types",
        "out_types",
        "allocated",
        "node",
        "parent",
        "children_ns",
        "_cost",
    )

    def __init__(self, name, cat, start_ns, end_ns, tid, op=None, attrs=None, in_types=None,
                 out_types=None, allocated=None, node=None):  # fmt: skip
        self.name = name
        self.cat = cat
        self.start_ns = start_ns
        self.end_ns = end_ns
        self.tid = tid
        self.op = op
        self.attrs = attrs
        self.in_types = in_types
        self.out_types = out_types
        self.allocated = allocated
        self.node = node  # the graph node's name, for kernel events
        self.parent: Event | None = None  # the innermost enclosing event on the same thread
        self.children_ns = 0  # time spent in direct children (self time = duration - this)
        self._cost = None

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns

    @property
    def self_ns(self) -> int:
        return self.duration_ns - self.children_ns

    @property
    def input_shapes(self) -> list | None:
        return None if self.in_types is None else [list(t.shape) for t in self.in_types]

    @property
    def cost(self) -> _reg.Cost:
        """(FLOPs, bytes moved) by the op's cost rule; (0, 0) for ranges."""
        if self._cost is None:
            from .costs import op_cost

            if self.op is None:
                self._cost = _reg.Cost(0, 0)
            else:
                self._cost = op_cost(self.op, self.in_types, self.out_types, self.attrs)
        return self._cost

    @property
    def flops(self) -> int:
        return self.cost.flops

    @property
    def bytes(self) -> int:
        return self.cost.bytes

    def __repr__(self) -> str:
        return f"<Event {self.cat} {self.name} {self.duration_ns / 1e3:.1f}us>"


def types_of(arrays, dtypes) -> tuple:
    return tuple([TensorType(a.shape, d) for a, d in zip(arrays, dtypes)])


def allocated_bytes(outputs, inputs) -> int:
    """Bytes of the ``outputs`` (arrays) that own new memory: not a view of an input, and not
    written into an input's buffer (a compiled in-place update)."""
    total = 0
    for out in outputs:
        if not any(np.may_share_memory(out, a) for a in inputs):
            total += out.nbytes
    return total
