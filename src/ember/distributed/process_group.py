"""The default process group: MPI's world communicator (a duplicate, so ember's messages never
meet the user's own mpi4py traffic), its rank, size and timeout.

``init_process_group`` also installs an excepthook: an exception that escapes on one rank of a
world larger than one prints its traceback and calls ``MPI_Abort``, so the job ends with an error
instead of the other ranks waiting forever in their next collective. Waits on collectives poll
their requests with the group's ``timeout`` (PyTorch's default, 30 minutes): a rank that never
arrives makes the others raise `DistributedError` (and so abort) rather than hang, the error
naming the ranks that did not answer a liveness probe (_liveness.py).
"""

from __future__ import annotations

import datetime
import os
import sys

from ._mpi import DistributedError, mpi


class GroupNotInitializedError(DistributedError, ValueError):
    """No process group yet: PyTorch raises ValueError here (``get_rank()`` before
    ``init_process_group``), which programs catch to run as a single process."""


__all__ = [
    "ProcessGroup",
    "default_pg_timeout",
    "destroy_process_group",
    "get_backend",
    "get_rank",
    "get_world_size",
    "init_process_group",
    "is_initialized",
    "is_mpi_available",
]


def _default_timeout() -> datetime.timedelta:
    """How long a collective or message waits before the job is declared broken: 60 s (a rank
    that died or hangs is named within a minute instead of PyTorch's 30), or
    ``EMBER_DISTRIBUTED_TIMEOUT`` seconds; ``init_process_group(timeout=...)`` overrides both
    (raise it where one rank legitimately works alone longer, e.g. evaluating on rank 0)."""
    text = os.environ.get("EMBER_DISTRIBUTED_TIMEOUT", "").strip()
    if not text:
        return datetime.timedelta(seconds=60)
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise DistributedError(
            f"EMBER_DISTRIBUTED_TIMEOUT must be a positive number of seconds, got {text!r}",
            op="init_process_group",
        )
    return datetime.timedelta(seconds=seconds)


default_pg_timeout = _default_timeout()


class ProcessGroup:
    """The ranks of one MPI communicator; ``comm`` is the mpi4py communicator."""

    def __init__(self, comm, timeout: datetime.timedelta):
        self.comm = comm
        self._rank = comm.Get_rank()
        self._size = comm.Get_size()
        self.timeout = timeout

    def rank(self) -> int:
        return self._rank

    def size(self) -> int:
        return self._size

    def name(self) -> str:
        return "mpi"

    def __repr__(self) -> str:
        return f"ProcessGroup(backend='mpi', rank={self._rank}, size={self._size})"


_WORLD: ProcessGroup | None = None
_previous_hook = None


def is_mpi_available() -> bool:
    from ._mpi import is_available

    return is_available()


def _abort_on_exception(exc_type, exc, tb):
    """Print the traceback, then end every rank: the others would wait for this one forever."""
    (_previous_hook or sys.__excepthook__)(exc_type, exc, tb)
    group = _WORLD
    if group is not None and group.size() > 1:
        sys.stdout.flush()
        sys.stderr.write(f"ember.distributed: rank {group.rank()} failed; aborting the job\n")
        sys.stderr.flush()
        group.comm.Abort(1)


def init_process_group(
    backend: str | None = "mpi",
    init_method=None,
    timeout: datetime.timedelta | None = None,
    world_size: int = -1,
    rank: int = -1,
    store=None,
    group_name: str = "",
    pg_options=None,
    device_id=None,
) -> None:
    """Join the job's world (started by ``mpiexec`` / ``ember run``; a plain ``python`` process is
    a world of one). ``world_size`` and ``rank``, when given, must be what MPI assigned."""
    global _WORLD, _previous_hook
    if backend not in (None, "mpi"):
        raise DistributedError(
            f"backend {backend!r} is not available: ember's only backend is 'mpi'",
            op="init_process_group",
        )
    if _WORLD is not None:
        raise DistributedError(
            "trying to initialize the default process group twice", op="init_process_group"
        )
    if timeout is not None and not isinstance(timeout, datetime.timedelta):
        raise DistributedError(
            f"timeout must be a datetime.timedelta, got {type(timeout).__name__}",
            op="init_process_group",
        )
    MPI = mpi()
    comm = MPI.COMM_WORLD.Dup()
    for name, given, actual in (
        ("world_size", world_size, comm.Get_size()),
        ("rank", rank, comm.Get_rank()),
    ):
        if given not in (-1, None) and given != actual:
            comm.Free()
            raise DistributedError(
                f"{name}={given} given, but MPI started this process with {name} {actual}",
                op="init_process_group",
            )
    _WORLD = ProcessGroup(comm, timeout or default_pg_timeout)
    if sys.excepthook is not _abort_on_exception:
        _previous_hook = sys.excepthook
        sys.excepthook = _abort_on_exception


def is_initialized() -> bool:
    return _WORLD is not None


def _group(group=None, op: str = "distributed") -> ProcessGroup:
    if group is not None:
        if not isinstance(group, ProcessGroup):
            raise DistributedError(f"group must be a ProcessGroup, got {group!r}", op=op)
        return group
    if _WORLD is None:
        raise GroupNotInitializedError(
            "Default process group has not been initialized, please make sure to call "
            "init_process_group.",
            op=op,
        )
    return _WORLD


def get_rank(group=None) -> int:
    return _group(group, "get_rank").rank()


def get_world_size(group=None) -> int:
    return _group(group, "get_world_size").size()


def get_backend(group=None) -> str:
    return _group(group, "get_backend").name()


def destroy_process_group(group=None) -> None:
    """Leave the default group (its communicator freed, the excepthook restored)."""
    global _WORLD, _previous_hook
    pg = _group(group, "destroy_process_group")
    if pg is _WORLD:
        _WORLD = None
        if sys.excepthook is _abort_on_exception:
            sys.excepthook = _previous_hook or sys.__excepthook__
            _previous_hook = None
    pg.comm.Free()
