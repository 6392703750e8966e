"""mpi4py, imported only when a process group is made: ember itself never needs it, and a
missing install is one clear error naming the extra that provides it."""

from __future__ import annotations

import importlib.util

from ..errors import EmberError

INSTALL = "pip install 'ember[mpi]'"


class DistributedError(EmberError, RuntimeError):
    """A process group's misuse or failure: no group, ranks that disagree, a timeout."""


def is_available() -> bool:
    """Whether mpi4py (and so an MPI library) can be imported; nothing is imported or started."""
    return importlib.util.find_spec("mpi4py") is not None


def mpi():
    """The ``mpi4py.MPI`` module (importing it initializes MPI)."""
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise DistributedError(
            f"ember.distributed runs on MPI through mpi4py, which is not installed "
            f"({exc}); install it with: {INSTALL}",
            op="init_process_group",
        ) from exc
    return MPI
