"""``ember.multiprocessing``: torch.multiprocessing's names over Python's multiprocessing.

ember tensors pickle by value (their arrays), so Python's queues, pipes and processes carry
them as they are; every name of Python's module (``Process``, ``Queue``, ``Pool``,
``set_start_method``, ``get_context``, ...) is this module's too. PyTorch's additions:

* the sharing strategy (``set_sharing_strategy("file_system")``, a common first line of data
  loading scripts): recorded and reported, one of PyTorch's two names; ember shares no
  storages between processes, so it changes nothing else;
* ``spawn(fn, args, nprocs, join, daemon, start_method)`` and ``start_processes``: ``nprocs``
  processes each calling ``fn(i, *args)``; with ``join`` this waits for them and raises
  `ProcessRaisedException` (the failing process's traceback in the message) or
  `ProcessExitedException` (a process that died without one), the others stopped, as
  PyTorch's; without it, the `ProcessContext` to ``join()``.
"""

from __future__ import annotations

import multiprocessing as _mp
import multiprocessing.connection as _connection
import sys
import traceback

__all__ = [
    "ProcessContext",
    "ProcessException",
    "ProcessExitedException",
    "ProcessRaisedException",
    "get_all_sharing_strategies",
    "get_sharing_strategy",
    "set_sharing_strategy",
    "spawn",
    "start_processes",
]

_STRATEGIES = ("file_descriptor", "file_system")
_strategy = ["file_descriptor"]


def set_sharing_strategy(new_strategy: str) -> None:
    """``torch.multiprocessing.set_sharing_strategy``: one of `get_all_sharing_strategies`."""
    if new_strategy not in _STRATEGIES:
        raise ValueError(
            f"set_sharing_strategy: {new_strategy!r} is not one of {sorted(_STRATEGIES)}"
        )
    _strategy[0] = new_strategy


def get_sharing_strategy() -> str:
    return _strategy[0]


def get_all_sharing_strategies() -> set:
    return set(_STRATEGIES)


class ProcessException(Exception):
    """A process started by `spawn` failed; ``error_index`` is its index, ``pid`` its id."""

    def __init__(self, msg: str, error_index: int, pid: int):
        super().__init__(msg)
        self.msg, self.error_index, self.pid = msg, error_index, pid

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.pid)


class ProcessRaisedException(ProcessException):
    """The process raised an exception; the message holds its traceback."""


class ProcessExitedException(ProcessException):
    """The process died (a signal, or an exit code) without raising in ``fn``."""

    def __init__(
        self, msg: str, error_index: int, error_pid: int, exit_code: int, signal_name=None
    ):
        super().__init__(msg, error_index, error_pid)
        self.exit_code, self.signal_name = exit_code, signal_name

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.pid, self.exit_code, self.signal_name)


def _run(fn, index: int, args: tuple, errors) -> None:
    """A spawned process's body: ``fn(index, *args)``, its traceback sent back on failure."""
    try:
        fn(index, *args)
    except KeyboardInterrupt:
        pass
    except Exception:
        errors.put(traceback.format_exc())
        sys.exit(1)


class ProcessContext:
    """The processes `start_processes` started, and their error queues."""

    def __init__(self, processes: list, error_queues: list):
        self.processes = processes
        self.error_queues = error_queues

    def pids(self) -> list:
        return [p.pid for p in self.processes]

    def join(self, timeout: float | None = None) -> bool:
        """Wait (at most ``timeout`` seconds) for the processes; True once all ended well.
        The first that failed stops the others and raises, as PyTorch's."""
        alive = {p.sentinel: i for i, p in enumerate(self.processes) if p.exitcode is None}
        if alive:
            _connection.wait(list(alive), timeout=timeout)
        for i, p in enumerate(self.processes):
            if p.exitcode is not None and p.exitcode != 0:
                self._fail(i, p)
        return all(p.exitcode == 0 for p in self.processes)

    def _fail(self, index: int, process) -> None:
        for other in self.processes:
            if other.is_alive():
                other.terminate()
            other.join()
        queue = self.error_queues[index]
        if not queue.empty():
            message = f"\n\n-- Process {index} terminated with the following error:\n"
            raise ProcessRaisedException(message + queue.get(), index, process.pid)
        code = process.exitcode
        raise ProcessExitedException(
            f"process {index} terminated with exit code {code}",
            index,
            process.pid,
            code,
            None if code >= 0 else f"signal {-code}",
        )


def start_processes(
    fn,
    args=(),
    nprocs: int = 1,
    join: bool = True,
    daemon: bool = False,
    start_method: str = "spawn",
):
    """``nprocs`` processes calling ``fn(i, *args)`` (see the module docstring)."""
    context = _mp.get_context(start_method)
    processes, queues = [], []
    for i in range(int(nprocs)):
        queue = context.SimpleQueue()
        process = context.Process(target=_run, args=(fn, i, tuple(args), queue), daemon=daemon)
        process.start()
        processes.append(process)
        queues.append(queue)
    spawned = ProcessContext(processes, queues)
    if not join:
        return spawned
    while not spawned.join():
        pass
    return None


def spawn(
    fn,
    args=(),
    nprocs: int = 1,
    join: bool = True,
    daemon: bool = False,
    start_method: str = "spawn",
):
    """``torch.multiprocessing.spawn``: `start_processes` with the "spawn" start method."""
    return start_processes(fn, args, nprocs, join, daemon, start_method)


def __getattr__(name: str):
    """Python's multiprocessing names (``Process``, ``Queue``, ``set_start_method``, ...)."""
    try:
        return getattr(_mp, name)
    except AttributeError:
        raise AttributeError(f"module 'ember.multiprocessing' has no attribute {name!r}") from None
