"""What the collective ops (ops/collective.py) call for a group of several ranks: this module
registers itself with ``ops.collective.set_backend`` when ember.distributed is imported, so the
ops layer runs MPI without importing anything above it.

A group is named in a graph by a tag (`group_tag`): ``"world"`` for the default group (the one
``init_process_group`` made when the graph runs), ``"group<n>"`` for another `ProcessGroup`,
kept here while the process lives. An all-reduce started by a graph is a `Work` of
collectives.py kept under an integer handle until ``wait`` takes it (the graph's
``all_reduce_wait`` node); the reduction lands in the array the start was given, in place.
"""

from __future__ import annotations

import itertools

from ..ops import collective as _ops
from ..tensor import Tensor
from . import collectives as C
from ._mpi import DistributedError, mpi
from .process_group import ProcessGroup, _group

__all__ = ["group_tag", "resolve"]

_OPS = {
    "sum": C.ReduceOp.SUM,
    "avg": C.ReduceOp.AVG,
    "max": C.ReduceOp.MAX,
    "min": C.ReduceOp.MIN,
    "product": C.ReduceOp.PRODUCT,
}
_NAMES = {v: k for k, v in _OPS.items()}
_groups: dict = {}  # tag -> ProcessGroup (other than the default one)
_in_flight: dict = {}  # handle -> Work
_handles = itertools.count()


def reduce_op_name(op) -> str:
    """A `ReduceOp` (or its op name) as the ops' attribute."""
    if isinstance(op, str) and op in _OPS:
        return op
    if op in _NAMES:
        return _NAMES[op]
    raise DistributedError(
        f"a graph's collectives reduce with SUM, AVG, MAX, MIN or PRODUCT, got {op!r}",
        op="all_reduce",
    )


def group_tag(group: ProcessGroup | None, what: str) -> tuple[str, ProcessGroup]:
    """(the tag a graph names ``group`` by, the group); None: the default group."""
    pg = _group(group, what)
    if group is None or pg is _group(None, what):
        return "world", pg
    for tag, known in _groups.items():
        if known is pg:
            return tag, pg
    tag = f"group{len(_groups) + 1}"
    _groups[tag] = pg
    return tag, pg


def resolve(tag: str, what: str) -> ProcessGroup:
    if tag == "world":
        return _group(None, what)
    if tag not in _groups:
        raise DistributedError(f"{what}: no process group {tag!r} in this process", op=what)
    return _groups[tag]


class _Backend:
    def all_reduce_start(self, array, op: str, group: str) -> int:
        pg = resolve(group, "all_reduce_start")
        work = C.all_reduce(Tensor._wrap(array), _OPS[op], pg, async_op=True, _check=False)
        handle = next(_handles)
        _in_flight[handle] = work
        # MPI moves a nonblocking collective's data only inside MPI calls: each start also
        # tests the ones in flight, as eager DDP's gradient hooks do
        mpi().Request.Testall([r for w in _in_flight.values() for r in w._requests])
        return handle

    def wait(self, handle: int) -> None:
        work = _in_flight.pop(handle, None)
        if work is None:
            raise DistributedError(
                f"all_reduce_wait: no all-reduce in flight under handle {handle} (waited twice?)",
                op="all_reduce_wait",
            )
        work.wait()

    def broadcast(self, array, src: int, group: str) -> None:
        C.broadcast(Tensor._wrap(array), src, resolve(group, "broadcast"))

    def rank(self, group: str) -> int:
        return resolve(group, "broadcast").rank()


_ops.set_backend(_Backend())
