"""The collective ops (ops/collective.py) have no public ``ember.*`` function for an OpInfo:
they are reached through ember.distributed.functional and DistributedDataParallel. Their
rules, kernels and VJPs on a world of one are checked by tests/ops/samples_collective.py, and on
two ranks under mpiexec by tests/distributed/ (against NumPy and one process on the global
batch)."""

OPS: list = []

_WHY = (
    "a collective (ops/collective.py), reached through ember.distributed.functional: checked by "
    "tests/ops/samples_collective.py and, on two ranks, tests/distributed/"
)
INTERNAL = {
    name: _WHY for name in ("all_reduce", "all_reduce_start", "all_reduce_wait", "broadcast")
}
