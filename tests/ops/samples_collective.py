"""Conformance samples for the collective ops (ops/collective.py) on a world of one, where an
all-reduce and a broadcast are the identity and run without a process group: the shape rules,
the kernels, the VJPs (an all-reduce of the cotangent) by finite differences, and tracing.
Several ranks are tested under mpiexec in tests/distributed/."""

from ember.ops._registry import apply
from ember.ops.collective import ALL_REDUCE, ALL_REDUCE_START, ALL_REDUCE_WAIT, BROADCAST

from .harness import Sample, rng

r = rng(31)
X = r.standard_normal((3, 4))


def _start_wait(x, reduce_op):
    attrs = {"reduce_op": reduce_op, "group": "world", "size": 1}
    buffer, handle = apply(ALL_REDUCE_START, x, **attrs)
    return apply(ALL_REDUCE_WAIT, buffer, handle, **attrs)


SAMPLES = (
    [
        Sample(
            f"all_reduce/{op}",
            lambda x, op=op: apply(ALL_REDUCE, x, reduce_op=op, group="world", size=1),
            (X,),
            torch_fn=lambda x: x.clone(),
            grad=op in ("sum", "avg"),
        )
        for op in ("sum", "avg", "max")
    ]
    + [
        Sample(
            f"all_reduce_start_wait/{op}",
            lambda x, op=op: _start_wait(x, op),
            (X,),
            torch_fn=lambda x: x.clone(),
        )
        for op in ("sum", "avg")
    ]
    + [
        Sample(
            "broadcast/src0",
            lambda x: apply(BROADCAST, x, src=0, group="world", size=1),
            (X,),
            torch_fn=lambda x: x.clone(),
        )
    ]
)
