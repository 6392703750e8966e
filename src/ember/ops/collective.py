"""Collectives as ops: a process group's all-reduce and broadcast as graph nodes, functional as
PyTorch's ``_c10d_functional`` ops are (the result is a new value; the operand is untouched).

* ``all_reduce(x, reduce_op, group, size)``: ``x`` combined across the ranks of ``group``
  (``reduce_op``: ``"sum"``, ``"avg"``, ``"max"``, ``"min"``, ``"product"``);
* ``all_reduce_start(x, ...) -> (buffer, handle)`` and ``all_reduce_wait(buffer, handle)``: the
  same in two halves, so a graph can start the reduction as soon as ``x`` is ready and wait for
  it only where its result is read (DistributedDataParallel's gradient buckets: the start right
  after a bucket's last gradient, the waits before the optimizer). ``handle`` is an int64 0-d
  value naming the request in flight; ``buffer`` is the array the reduction lands in, which
  only the wait may read;
* ``broadcast(x, src, group, size)``: rank ``src``'s ``x`` on every rank.

``group`` names the process group (a tag the distributed package gives it); ``size`` is its
number of ranks when the call was recorded. For ``size == 1`` every collective is the identity
and runs here without a process group (a world of one). Otherwise the kernels call the backend
that ember.distributed registers with `set_backend` when it is imported: this layer never
imports a higher one (docs/ARCHITECTURE.md's layer table).

Each op has the ``effect`` rule (ops/_rules.py): passes never fold, merge, drop, recompute or
time it, and the starts and the blocking calls share the ordered channel ``"collective"``, so
every schedule keeps their relative order, which is the same on every rank because every rank
records the same graph. The waits are effects without an order (their handle places them).

Gradients: the all-reduce of a sum is linear in every rank's operand, so its VJP is the
all-reduce (sum) of the cotangents; the average's is the average of the cotangents. Max, min
and product have none (PyTorch's functional collectives have none either). The broadcast's
operand reaches the result only on the source rank; its VJP is the sum of the cotangents there
and zero elsewhere, i.e. an all-reduce sum scaled by whether this rank is the source (its
backend says which rank it is).
"""

from __future__ import annotations

import numpy as np

from ..errors import AutogradError, DTypeError, EmberError
from ..types import TensorType
from ._registry import Cost, OpDef, apply, register
from ._rules import Effect
from ._util import same_type, value_bytes

__all__ = [
    "ALL_REDUCE",
    "ALL_REDUCE_START",
    "ALL_REDUCE_WAIT",
    "BROADCAST",
    "REDUCE_OPS",
    "set_backend",
]

REDUCE_OPS = ("sum", "avg", "max", "min", "product")
ORDERED = Effect(ordered="collective")
UNORDERED = Effect(ordered=None)

# The backend ember.distributed registers (distributed/_graph_backend.py): an object with
# ``all_reduce_start(array, op, group) -> int`` (the reduction lands in ``array`` in place),
# ``wait(handle) -> None``, ``broadcast(array, src, group) -> None`` and ``rank(group)``.
_backend: list = [None]


def set_backend(backend) -> None:
    """Install the object the collective kernels call for groups of more than one rank."""
    _backend[0] = backend


def _get_backend(what: str):
    backend = _backend[0]
    if backend is None:
        raise EmberError(
            f"{what} on a group of several ranks needs ember.distributed (import it and call "
            "init_process_group)",
            op=what,
        )
    return backend


# ----------------------------------------------------------------------------- shape rules
def _check_attrs(what, x, reduce_op, size) -> None:
    if reduce_op is not None and reduce_op not in REDUCE_OPS:
        raise EmberError(
            f"{what}: reduce_op must be one of {REDUCE_OPS}, got {reduce_op!r}", op=what
        )
    if reduce_op == "avg" and not x.dtype.is_floating_point:
        raise DTypeError(f"{what}: reduce_op='avg' needs a floating tensor, got {x.dtype}", op=what)
    if not isinstance(size, int) or size < 1:
        raise EmberError(f"{what}: size must be a positive int, got {size!r}", op=what)


def _reduce_infer(x, *, reduce_op, group, size):
    _check_attrs("all_reduce", x, reduce_op, size)
    return same_type(x)


def _start_infer(x, *, reduce_op, group, size):
    _check_attrs("all_reduce_start", x, reduce_op, size)
    from .. import dtypes as dt

    return same_type(x), TensorType((), dt.int64)


def _wait_infer(buffer, handle, *, reduce_op, group, size):
    _check_attrs("all_reduce_wait", buffer, reduce_op, size)
    if tuple(handle.shape) != () or handle.dtype.name != "int64":
        raise EmberError(
            f"all_reduce_wait: the handle must be the int64 0-d value all_reduce_start returns, "
            f"got {handle.dtype} {tuple(handle.shape)}",
            op="all_reduce_wait",
        )
    return same_type(buffer)


def _broadcast_infer(x, *, src, group, size):
    _check_attrs("broadcast", x, None, size)
    if not isinstance(src, int) or not 0 <= src < size:
        raise EmberError(
            f"broadcast: src={src!r} is not a rank of a group of {size}", op="broadcast"
        )
    return same_type(x)


# --------------------------------------------------------------------------------- kernels
_LOCAL: dict = {}  # handles of a world of one: nothing in flight
_next_local = [0]


def _start_kernel(x, *, reduce_op, group, size):
    buffer = np.array(x, copy=True, order="C")
    if size == 1:
        _next_local[0] -= 1  # negative numbers: a world of one's handles, never the backend's
        return buffer, np.array(_next_local[0], dtype=np.int64)
    handle = _get_backend("all_reduce_start").all_reduce_start(buffer, reduce_op, group)
    return buffer, np.array(handle, dtype=np.int64)


def _wait_kernel(buffer, handle, *, reduce_op, group, size):
    h = int(handle)
    if h >= 0:
        _get_backend("all_reduce_wait").wait(h)
    return buffer


def _reduce_kernel(x, *, reduce_op, group, size):
    buffer, handle = _start_kernel(x, reduce_op=reduce_op, group=group, size=size)
    return _wait_kernel(buffer, handle, reduce_op=reduce_op, group=group, size=size)


def _broadcast_kernel(x, *, src, group, size):
    buffer = np.array(x, copy=True, order="C")
    if size > 1:
        _get_backend("broadcast").broadcast(buffer, src, group)
    return buffer


# ------------------------------------------------------------------------------- gradients
def _reduce_grad(what: str, g, reduce_op, group, size):
    if reduce_op not in ("sum", "avg"):
        raise AutogradError(
            f"{what} with reduce_op={reduce_op!r} has no gradient (only 'sum' and 'avg' do)",
            op=what,
        )
    return apply(ALL_REDUCE, g, reduce_op=reduce_op, group=group, size=size)


def _reduce_vjp(ctx, g):
    return (_reduce_grad("all_reduce", g, **ctx.attrs),)


def _start_vjp(ctx, g_buffer, g_handle):
    return (_reduce_grad("all_reduce_start", g_buffer, **ctx.attrs),)


def _wait_vjp(ctx, g):
    return g, None


def _broadcast_vjp(ctx, g):
    attrs = ctx.attrs
    total = apply(ALL_REDUCE, g, reduce_op="sum", group=attrs["group"], size=attrs["size"])
    mine = 0 if attrs["size"] == 1 else _get_backend("broadcast").rank(attrs["group"])
    return (total if mine == attrs["src"] else total * 0,)


# ---------------------------------------------------------------------------------- costs
def _moved(in_types, size) -> int:
    """Bytes a ring all-reduce sends (and receives) per rank: 2 (n-1)/n of the operand."""
    return 2 * (size - 1) * value_bytes(in_types[0]) // size


def _reduce_cost(in_types, out_types, attrs) -> Cost:
    n = value_bytes(in_types[0]) // max(in_types[0].dtype.itemsize, 1)
    flops = n * (attrs["size"] - 1) // attrs["size"] if attrs["size"] > 1 else 0
    return Cost(flops, 2 * value_bytes(in_types[0]) + _moved(in_types, attrs["size"]))


def _wait_cost(in_types, out_types, attrs) -> Cost:
    return Cost(0, 0)


def _broadcast_cost(in_types, out_types, attrs) -> Cost:
    moved = value_bytes(in_types[0]) if attrs["size"] > 1 else 0
    return Cost(0, 2 * value_bytes(in_types[0]) + moved)


ALL_REDUCE = register(
    OpDef(
        name="all_reduce",
        kind="nn",
        infer=_reduce_infer,
        kernel=_reduce_kernel,
        vjp=_reduce_vjp,
        save_inputs=(),
        cost=_reduce_cost,
        effect=ORDERED,
        batch=None,
        doc="all_reduce(x, reduce_op, group, size): x combined across a process group's ranks.",
    )
)

ALL_REDUCE_START = register(
    OpDef(
        name="all_reduce_start",
        kind="nn",
        infer=_start_infer,
        kernel=_start_kernel,
        vjp=_start_vjp,
        save_inputs=(),
        num_outputs=2,
        cost=_reduce_cost,
        effect=ORDERED,
        batch=None,
        doc="all_reduce_start(x, reduce_op, group, size) -> (buffer, handle): starts one.",
    )
)

ALL_REDUCE_WAIT = register(
    OpDef(
        name="all_reduce_wait",
        kind="nn",
        infer=_wait_infer,
        kernel=_wait_kernel,
        vjp=_wait_vjp,
        save_inputs=(),
        cost=_wait_cost,
        aliases=True,
        effect=UNORDERED,
        batch=None,
        doc="all_reduce_wait(buffer, handle): the all-reduce's result, once it has arrived.",
    )
)

BROADCAST = register(
    OpDef(
        name="broadcast",
        kind="nn",
        infer=_broadcast_infer,
        kernel=_broadcast_kernel,
        vjp=_broadcast_vjp,
        save_inputs=(),
        cost=_broadcast_cost,
        effect=ORDERED,
        batch=None,
        doc="broadcast(x, src, group, size): rank src's x on every rank.",
    )
)
