"""Collectives and point-to-point messages on ember tensors, PyTorch's ``torch.distributed`` API
over MPI's nonblocking calls.

Every call works in place on the NumPy array under the tensor, passed to MPI through the buffer
protocol without a copy when the array is C-contiguous and of a type MPI has (the float and
integer types). Other arrays go through a staging copy: non-contiguous ones, and float16/bfloat16
and bool, which are moved as bytes and reduced in float32 (bool in int32). A call writes its
result back into the caller's tensors and bumps their version counters (so caches keyed on them,
such as packed GEMM panels, see the change).

Each call is a nonblocking MPI request; ``async_op=True`` returns it as a `Work` (``wait()``,
``is_completed()``), otherwise the call waits. Waits poll with the group's timeout and raise
`DistributedError` when it passes.

**Agreement check.** Before a collective, the ranks exchange a small fixed-size record of what
each is about to do (the collective, its op or root, the dtype, the shape) in one allgather, and
all raise the same `DistributedError`, naming every rank's record, when they differ: a mismatch
otherwise corrupts memory or hangs inside MPI. It costs one small message per collective; set
``EMBER_DISTRIBUTED_CHECKS=0`` to skip it. DistributedDataParallel's gradient buckets skip it
(their shapes were checked once, when the model was wrapped).
"""

from __future__ import annotations

import enum
import os
import time
import zlib

import numpy as np

from ..errors import DTypeError, ShapeError
from ..tensor import Tensor
from ._mpi import DistributedError, mpi
from .process_group import ProcessGroup, _group

__all__ = [
    "ReduceOp",
    "Work",
    "all_gather",
    "all_gather_into_tensor",
    "all_reduce",
    "barrier",
    "broadcast",
    "irecv",
    "isend",
    "recv",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "send",
]


class ReduceOp(enum.Enum):
    """How ``all_reduce`` and ``reduce_scatter`` combine the ranks' values."""

    SUM = "sum"
    AVG = "avg"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"
    BAND = "band"
    BOR = "bor"
    BXOR = "bxor"


_NATIVE = {
    np.dtype(t)
    for t in (
        np.float32,
        np.float64,
        np.int8,
        np.int16,
        np.int32,
        np.int64,
        np.uint8,
        np.uint16,
        np.uint32,
        np.uint64,
    )
}
_KINDS = (
    "all_reduce",
    "broadcast",
    "all_gather",
    "all_gather_into_tensor",
    "reduce_scatter",
    "reduce_scatter_tensor",
)
_OPS = tuple(ReduceOp)
_RECORD = 13  # kind, extra (op or root), dtype code, ndim, numel, 8 dims


def _mpi_op(op: ReduceOp):
    MPI = mpi()
    return {
        ReduceOp.SUM: MPI.SUM,
        ReduceOp.AVG: MPI.SUM,
        ReduceOp.PRODUCT: MPI.PROD,
        ReduceOp.MIN: MPI.MIN,
        ReduceOp.MAX: MPI.MAX,
        ReduceOp.BAND: MPI.BAND,
        ReduceOp.BOR: MPI.BOR,
        ReduceOp.BXOR: MPI.BXOR,
    }[op]


_SPIN_S = 1e-3  # busy-test this long before sleeping (see _poll)


def _poll(requests, timeout_s: float, what: str, group: ProcessGroup | None = None) -> None:
    """Wait for ``requests``, testing them until done or until ``timeout_s`` has passed; then
    the error names the ranks that did not respond (_liveness.py; ``group``: the requests'
    group, the default one when None).

    MPI progresses a nonblocking collective only inside MPI calls, and a sleep, however short,
    costs tens of microseconds of timer slack: so the first millisecond tests without pause (a
    small all-reduce completes in a few microseconds), then the pauses grow to 1 ms, and this
    rank answers other ranks' liveness probes between them."""
    MPI = mpi()
    if MPI.Request.Testall(requests):
        return
    start = time.monotonic()
    deadline = start + timeout_s
    pause = 0.0
    comm = None
    while not MPI.Request.Testall(requests):
        now = time.monotonic()
        if now > deadline:
            if comm is None:
                comm = _probe_comm(group)
            detail = ""
            if comm is not None:
                from ._liveness import diagnose

                detail = ": " + diagnose(comm, what, min(max(timeout_s / 4, 0.2), 5.0))
            raise DistributedError(
                f"{what} did not complete within the process group's timeout of {timeout_s:g} s "
                f"(another rank failed, or the ranks called different collectives; a longer "
                f"timeout: init_process_group(timeout=...) or EMBER_DISTRIBUTED_TIMEOUT){detail}",
                op=what,
            )
        if now - start < _SPIN_S:
            continue
        if comm is None:
            comm = _probe_comm(group)
        if comm is not None:
            from ._liveness import answer_probes

            answer_probes(comm, what)
        time.sleep(pause)
        pause = min(pause * 2 or 1e-5, 1e-3)


def _probe_comm(group):
    """The communicator liveness probes travel on, or None outside a group of several."""
    from . import process_group

    pg = group if group is not None else process_group._WORLD
    return pg.comm if pg is not None and pg.size() > 1 else None


class Work:
    """A collective or message in flight (PyTorch's ``Work``): ``wait()`` blocks until it is
    done and its results are in the caller's tensors; ``is_completed()`` asks without blocking."""

    def __init__(self, requests, finish, group: ProcessGroup, what: str, result=(), keep=None):
        self._requests = list(requests)
        self._keep = keep  # a staged buffer MPI reads from until the request completes
        self._finish = finish
        self._group = group
        self._what = what
        self._done = False
        self._result = list(result)

    def _complete(self) -> None:
        if not self._done:
            self._done = True
            if self._finish is not None:
                self._finish()

    def is_completed(self) -> bool:
        if not self._done and mpi().Request.Testall(self._requests):
            self._complete()
        return self._done

    def wait(self, timeout=None) -> bool:
        if not self._done:
            seconds = (timeout or self._group.timeout).total_seconds()
            _poll(self._requests, seconds, self._what, self._group)
            self._complete()
        return True

    def is_success(self) -> bool:
        return self.is_completed()

    def result(self) -> list:
        self.wait()
        return self._result

    def __repr__(self) -> str:
        return f"<Work {self._what} {'done' if self._done else 'pending'}>"


def _checked_tensor(t, name: str, what: str, write: bool = True) -> np.ndarray:
    if not isinstance(t, Tensor):
        raise TypeError(f"{what}: {name} must be an ember Tensor, got {type(t).__name__}")
    arr = t._data
    if write and not arr.flags.writeable:
        raise DistributedError(f"{what}: {name} is read-only (a broadcast view?)", op=what)
    return arr


def _dtype_code(dtype: np.dtype) -> int:
    return zlib.crc32(str(dtype).encode())


_BF16 = zlib.crc32(b"bfloat16")
_NAMES = {
    _dtype_code(np.dtype(n)): n
    for n in ("float16", "float32", "float64", "bool", "int8", "int16", "int32", "int64")
    + ("uint8", "uint16", "uint32", "uint64")
}


def _describe(record) -> str:
    dtype = _NAMES.get(int(record[2]), "bfloat16" if int(record[2]) == _BF16 else "?")
    kind = _KINDS[record[0]] if 0 <= record[0] < len(_KINDS) else "?"
    ndim = int(record[3])
    shape = tuple(int(d) for d in record[5 : 5 + min(ndim, 8)]) + (("...",) if ndim > 8 else ())
    return f"{kind}(extra={int(record[1])}, shape={shape}, numel={int(record[4])}, {dtype})"


def _agree(group: ProcessGroup, kind: str, extra: int, arr: np.ndarray, dtype_name: str) -> None:
    """Every rank must be calling the same collective on the same shape and dtype."""
    if group.size() == 1 or os.environ.get("EMBER_DISTRIBUTED_CHECKS", "1") == "0":
        return
    mine = np.full(_RECORD, -1, dtype=np.int64)
    mine[0] = _KINDS.index(kind)
    mine[1] = extra
    mine[2] = _dtype_code(arr.dtype)
    mine[3] = arr.ndim
    mine[4] = arr.size
    dims = arr.shape[:8]
    mine[5 : 5 + len(dims)] = dims
    table = np.empty((group.size(), _RECORD), dtype=np.int64)
    _poll([group.comm.Iallgather(mine, table)], group.timeout.total_seconds(), kind, group)
    if (table != table[0]).any():
        lines = "; ".join(f"rank {r}: {_describe(row)}" for r, row in enumerate(table))
        raise DistributedError(
            f"the ranks disagree on a collective (each must call the same one on tensors of the "
            f"same shape and dtype; this rank has {dtype_name} {tuple(arr.shape)}): {lines}",
            op=kind,
        )


def _bytes_view(arr: np.ndarray) -> np.ndarray:
    return arr.reshape(-1).view(np.uint8)


def _movable(arr: np.ndarray):
    """(a buffer MPI can move that holds arr's bytes, copy_back or None)."""
    if arr.flags.c_contiguous:
        return (arr if arr.dtype in _NATIVE else _bytes_view(arr)), None
    staged = np.ascontiguousarray(arr)

    def back():
        arr[...] = staged

    return (staged if staged.dtype in _NATIVE else _bytes_view(staged)), back


def _reducible(arr: np.ndarray, op: ReduceOp, what: str):
    """(a buffer MPI can reduce holding arr's values, copy_back or None)."""
    floating = arr.dtype.kind == "f" or arr.dtype.name == "bfloat16"
    if op is ReduceOp.AVG and not floating:
        raise DTypeError(f"ReduceOp.AVG needs a floating-point tensor, got {arr.dtype}", op=what)
    if op in (ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR) and arr.dtype.kind not in "iub":
        raise DTypeError(f"{op} needs an integer or bool tensor, got {arr.dtype}", op=what)
    if arr.flags.c_contiguous and arr.dtype in _NATIVE:
        return arr, None
    wide = np.int32 if arr.dtype == np.bool_ else np.float32 if floating else arr.dtype
    staged = np.ascontiguousarray(arr, dtype=wide)

    def back():
        arr[...] = staged != 0 if arr.dtype == np.bool_ else staged

    return staged, back


def _bump(tensors) -> None:
    for t in tensors:
        t._vc[0] += 1


def _run(group, requests, finish, what, async_op, result=()):
    work = Work(requests, finish, group, what, result)
    if async_op:
        return work
    work.wait()
    return None


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False, _check: bool = True):
    """Combine ``tensor`` across the ranks with ``op``, in place on every rank."""
    what = "all_reduce"
    pg = _group(group, what)
    op = _reduce_op(op, what)
    arr = _checked_tensor(tensor, "tensor", what)
    if _check:
        _agree(pg, what, _OPS.index(op), arr, str(tensor.dtype))
    buf, back = _reducible(arr, op, what)
    request = pg.comm.Iallreduce(mpi().IN_PLACE, buf, _mpi_op(op))
    size = pg.size()

    def finish():
        if op is ReduceOp.AVG:
            np.divide(buf, size, out=buf)
        if back is not None:
            back()
        tensor._vc[0] += 1

    return _run(pg, [request], finish, what, async_op, [tensor])


def _reduce_op(op, what):
    if isinstance(op, ReduceOp):
        return op
    raise TypeError(f"{what}: op must be a ReduceOp, got {op!r}")


def _root(pg: ProcessGroup, rank: int, name: str, what: str) -> int:
    if not isinstance(rank, int) or not 0 <= rank < pg.size():
        raise DistributedError(
            f"{name}={rank!r} is not a rank of this group of {pg.size()}", op=what
        )
    return rank


def broadcast(tensor, src: int, group=None, async_op=False):
    """Copy rank ``src``'s ``tensor`` into every rank's ``tensor``."""
    what = "broadcast"
    pg = _group(group, what)
    src = _root(pg, src, "src", what)
    arr = _checked_tensor(tensor, "tensor", what)
    _agree(pg, what, src, arr, str(tensor.dtype))
    buf, back = _movable(arr)
    request = pg.comm.Ibcast(buf, root=src)

    def finish():
        if pg.rank() != src:
            if back is not None:
                back()
            tensor._vc[0] += 1

    return _run(pg, [request], finish, what, async_op, [tensor])


def _gather(pg, what, out_arr: np.ndarray | None, arr: np.ndarray, async_op, finish_more, result):
    """Allgather ``arr`` into ``out_arr`` (contiguous, size × arr) or a new buffer."""
    send = np.ascontiguousarray(arr)
    if out_arr is None or not out_arr.flags.c_contiguous:
        recv = np.empty((pg.size(),) + arr.shape, dtype=arr.dtype)
    else:
        recv = out_arr
    native = send.dtype in _NATIVE
    request = pg.comm.Iallgather(
        send if native else _bytes_view(send), recv if native else _bytes_view(recv)
    )
    return _run(pg, [request], lambda: finish_more(recv), what, async_op, result)


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """Every rank's ``tensor``, in rank order, into ``tensor_list`` (one tensor per rank, each
    of ``tensor``'s shape and dtype)."""
    what = "all_gather"
    pg = _group(group, what)
    arr = _checked_tensor(tensor, "tensor", what, write=False)
    if len(tensor_list) != pg.size():
        raise ShapeError(
            f"tensor_list has {len(tensor_list)} tensors for a group of {pg.size()} ranks", op=what
        )
    outs = [_checked_tensor(t, f"tensor_list[{i}]", what) for i, t in enumerate(tensor_list)]
    for i, o in enumerate(outs):
        if o.shape != arr.shape or o.dtype != arr.dtype:
            raise ShapeError(
                f"tensor_list[{i}] is {o.dtype} {o.shape}; the input tensor is {arr.dtype} "
                f"{arr.shape}",
                op=what,
            )
    _agree(pg, what, 0, arr, str(tensor.dtype))

    def finish(recv):
        for o, t, r in zip(outs, tensor_list, recv):
            o[...] = r
            t._vc[0] += 1

    return _gather(pg, what, None, arr, async_op, finish, tensor_list)


def _stacked(out: np.ndarray, size: int, part_shape: tuple, name: str, what: str) -> bool:
    """Whether ``out`` is ``size`` parts stacked (True) or concatenated along dim 0 (False)."""
    if out.shape == (size,) + tuple(part_shape):
        return True
    if part_shape and out.shape == (size * part_shape[0],) + tuple(part_shape[1:]):
        return False
    raise ShapeError(
        f"{name} has shape {out.shape}; for {size} ranks of parts of shape {tuple(part_shape)} "
        f"it must be {(size * part_shape[0],) + tuple(part_shape[1:]) if part_shape else ()} "
        f"or {(size,) + tuple(part_shape)}",
        op=what,
    )


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """Every rank's ``input_tensor`` concatenated along dim 0 (or stacked) into
    ``output_tensor``."""
    what = "all_gather_into_tensor"
    pg = _group(group, what)
    arr = _checked_tensor(input_tensor, "input_tensor", what, write=False)
    out = _checked_tensor(output_tensor, "output_tensor", what)
    if out.dtype != arr.dtype:
        raise DTypeError(f"output is {out.dtype}, input is {arr.dtype}", op=what)
    _stacked(out, pg.size(), arr.shape, "output_tensor", what)
    _agree(pg, what, 0, arr, str(input_tensor.dtype))
    direct = out.flags.c_contiguous
    target = out.reshape((pg.size(),) + arr.shape) if direct else None

    def finish(recv):
        if recv is not target:
            out[...] = recv.reshape(out.shape)
        output_tensor._vc[0] += 1

    return _gather(pg, what, target, arr, async_op, finish, [output_tensor])


def _reduce_scatter(pg, what, out_tensor, out, send: np.ndarray, op, async_op):
    buf, back = _reducible(out, op, what)
    wide = np.ascontiguousarray(send, dtype=buf.dtype)
    request = pg.comm.Ireduce_scatter_block(wide, buf, _mpi_op(op))
    size = pg.size()

    def finish():
        if op is ReduceOp.AVG:
            np.divide(buf, size, out=buf)
        if back is not None:
            back()
        out_tensor._vc[0] += 1

    return _run(pg, [request], finish, what, async_op, [out_tensor])


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    """Rank r's ``output`` = ``op`` over the ranks of their ``input_list[r]``."""
    what = "reduce_scatter"
    pg = _group(group, what)
    op = _reduce_op(op, what)
    out = _checked_tensor(output, "output", what)
    if len(input_list) != pg.size():
        raise ShapeError(
            f"input_list has {len(input_list)} tensors for a group of {pg.size()} ranks", op=what
        )
    parts = [_checked_tensor(t, f"input_list[{i}]", what, False) for i, t in enumerate(input_list)]
    for i, p in enumerate(parts):
        if p.shape != out.shape or p.dtype != out.dtype:
            raise ShapeError(
                f"input_list[{i}] is {p.dtype} {p.shape}; output is {out.dtype} {out.shape}",
                op=what,
            )
    _agree(pg, what, _OPS.index(op), out, str(output.dtype))
    return _reduce_scatter(pg, what, output, out, np.stack(parts), op, async_op)


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """``input`` (the ranks' parts concatenated along dim 0, or stacked) reduced across the
    ranks; rank r keeps part r in ``output``."""
    what = "reduce_scatter_tensor"
    pg = _group(group, what)
    op = _reduce_op(op, what)
    out = _checked_tensor(output, "output", what)
    arr = _checked_tensor(input, "input", what, write=False)
    if arr.dtype != out.dtype:
        raise DTypeError(f"output is {out.dtype}, input is {arr.dtype}", op=what)
    _stacked(arr, pg.size(), out.shape, "input", what)
    _agree(pg, what, _OPS.index(op), out, str(output.dtype))
    return _reduce_scatter(pg, what, output, out, arr, op, async_op)


def barrier(group=None, async_op=False, device_ids=None):
    """Wait until every rank has reached its barrier."""
    pg = _group(group, "barrier")
    return _run(pg, [pg.comm.Ibarrier()], None, "barrier", async_op)


def isend(tensor, dst: int, group=None, tag: int = 0):
    """Send ``tensor`` to rank ``dst`` without waiting; returns a `Work`."""
    what = "isend"
    pg = _group(group, what)
    dst = _root(pg, dst, "dst", what)
    arr = _checked_tensor(tensor, "tensor", what, write=False)
    buf, _ = _movable(arr)  # a staged copy is complete before the send starts
    return Work([pg.comm.Isend(buf, dest=dst, tag=tag)], None, pg, what, keep=buf)


def irecv(tensor, src: int | None = None, group=None, tag: int = 0):
    """Receive into ``tensor`` from rank ``src`` (any rank when None) without waiting; returns a
    `Work`. The message must have ``tensor``'s size in bytes (MPI reports a truncation)."""
    what = "irecv"
    pg = _group(group, what)
    MPI = mpi()
    source = MPI.ANY_SOURCE if src is None else _root(pg, src, "src", what)
    arr = _checked_tensor(tensor, "tensor", what)
    buf, back = _movable(arr)
    request = pg.comm.Irecv(buf, source=source, tag=tag)

    def finish():
        if back is not None:
            back()
        tensor._vc[0] += 1

    return Work([request], finish, pg, what, [tensor])


def send(tensor, dst: int, group=None, tag: int = 0) -> None:
    isend(tensor, dst, group, tag).wait()


def recv(tensor, src: int | None = None, group=None, tag: int = 0) -> int:
    """Receive into ``tensor``; returns the sender's rank."""
    what = "recv"
    pg = _group(group, what)
    MPI = mpi()
    status = MPI.Status()
    source = MPI.ANY_SOURCE if src is None else _root(pg, src, "src", what)
    arr = _checked_tensor(tensor, "tensor", what)
    buf, back = _movable(arr)
    request = pg.comm.Irecv(buf, source=source, tag=tag)
    deadline = time.monotonic() + pg.timeout.total_seconds()
    while not request.Test(status):  # (Test fills in the sender when it completes the request)
        if time.monotonic() > deadline:
            from ._liveness import diagnose

            detail = diagnose(pg.comm, what, min(max(pg.timeout.total_seconds() / 4, 0.2), 5.0))
            raise DistributedError(
                f"recv from {src} did not complete within the process group's timeout of "
                f"{pg.timeout.total_seconds():g} s: {detail}",
                op=what,
            )
        if pg.size() > 1:
            from ._liveness import answer_probes

            answer_probes(pg.comm, what)
        time.sleep(1e-4)
    if back is not None:
        back()
    tensor._vc[0] += 1
    return status.Get_source()
