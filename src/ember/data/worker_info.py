"""`get_worker_info`: which DataLoader worker is running the current code (PyTorch's name).

In the main process (and with a loader that runs in it) there is no worker and the answer is
None. A worker process records its `WorkerInfo` with `set_worker_info` when it starts; code in
a dataset then reads its ``id`` and ``num_workers`` to split the work.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["WorkerInfo", "get_worker_info", "set_worker_info"]


@dataclass(frozen=True)
class WorkerInfo:
    """``id`` (0..num_workers-1), ``num_workers``, the worker's ``seed`` and its copy of the
    ``dataset``."""

    id: int
    num_workers: int
    seed: int
    dataset: object


_current: WorkerInfo | None = None


def get_worker_info() -> WorkerInfo | None:
    """The current worker's `WorkerInfo`, or None outside a worker process."""
    return _current


def set_worker_info(info: WorkerInfo | None) -> None:
    """Record the worker this process is (called once by a worker process when it starts)."""
    global _current
    _current = info
