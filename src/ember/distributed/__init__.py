"""``ember.distributed``: PyTorch's ``torch.distributed`` on MPI (mpi4py; ``pip install
'ember[mpi]'``), for data-parallel training across processes and machines.

Start a job with ``ember run -n N script.py`` (``mpiexec`` underneath); a plain ``python`` process
is a world of one. ``init_process_group()`` joins the world; the collectives (``all_reduce``,
``broadcast``, ``all_gather``, ``reduce_scatter``, their ``*_tensor`` forms, ``barrier``) and the
messages (``send``/``recv``/``isend``/``irecv``) then work in place on ember tensors.
``ember.nn.parallel.DistributedDataParallel``, ``ember.nn.SyncBatchNorm`` and
``ember.utils.data.DistributedSampler`` build on them.

Modules: ``_mpi.py`` (the lazy import of mpi4py), ``process_group.py`` (the default group, its
timeout, the abort-on-exception hook), ``collectives.py`` (the calls, `Work`, the agreement check).
``_liveness.py`` (which ranks answer when a wait times out), ``optim/``
(``ZeroRedundancyOptimizer``), ``cost_model.py`` (all-reduce and data-parallel step times on
other networks).
``pipelining/``: pipeline parallelism by graph partition (``ember.distributed.pipelining``).
"""

from ._mpi import DistributedError, is_available
from .collectives import (
    ReduceOp,
    Work,
    all_gather,
    all_gather_into_tensor,
    all_reduce,
    barrier,
    broadcast,
    irecv,
    isend,
    recv,
    reduce_scatter,
    reduce_scatter_tensor,
    send,
)
from .process_group import (
    ProcessGroup,
    default_pg_timeout,
    destroy_process_group,
    get_backend,
    get_rank,
    get_world_size,
    init_process_group,
    is_initialized,
    is_mpi_available,
)

__all__ = [
    "DistributedError",
    "ProcessGroup",
    "ReduceOp",
    "Work",
    "all_gather",
    "all_gather_into_tensor",
    "all_reduce",
    "barrier",
    "broadcast",
    "default_pg_timeout",
    "destroy_process_group",
    "get_backend",
    "get_rank",
    "get_world_size",
    "init_process_group",
    "irecv",
    "is_available",
    "is_initialized",
    "is_mpi_available",
    "isend",
    "recv",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "send",
]
from . import _graph_backend, functional  # noqa: E402, F401  (the collective ops' backend)
