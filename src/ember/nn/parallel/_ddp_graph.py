"""DistributedDataParallel inside a captured step (``ember.function`` / ``ember.compile`` of a
training step that calls a DDP-wrapped module, ``loss.backward()`` and ``opt.step()``).

The recorded backward (graph/builder.py) calls the parameters' post-accumulate-grad hooks with
symbolic gradients, so DDP's own hooks run as in eager code; here they record the reduction
instead of running it:

* when a bucket's last gradient is final, its gradients are flattened into one vector and an
  ``all_reduce_start`` (ops/collective.py, averaging) is inserted right after the node that
  produced the latest of them, so the reduction can travel while the rest of backward runs;
* once every bucket has started, an ``all_reduce_wait`` per bucket is appended (after all of
  backward, before what reads the gradients: the optimizer's step), and each parameter's
  ``.grad`` becomes its slice of the bucket's result.

The starts keep their recorded order in every pass and schedule (the ``effect`` rule), and
every rank records the same graph, so the ranks start the same collectives in the same order.
``broadcast_buffers`` becomes a ``broadcast`` node per buffer at the start of the forward, its
result written back to the buffer. Under ``no_sync()`` no reduction is recorded (the graph
accumulates locally); its flag is one of DDP's ``_graph_flags``, part of the captured step's
cache key, so entering it around calls of a captured step retraces once for each state.
``find_unused_parameters=True`` is refused in a captured step; a parameter without a gradient
there is an error naming it when backward is recorded (`check_finished`).

A captured forward whose backward runs eagerly (``ember.compile(ddp_model)``: the AOT backward
under eager autograd) is reduced eagerly by the same hooks: `arm_eager_backward`.
"""

from __future__ import annotations

from ...distributed import functional as F
from ...distributed._mpi import DistributedError
from ...grad_mode import no_grad
from ...ops import _registry as _reg
from ...ops.concat import concat

__all__ = ["broadcast_buffers", "check_finished", "arm_eager_backward", "finish", "launch"]


def broadcast_buffers(ddp) -> None:
    """Record rank 0's buffers into every rank's, as graph nodes."""
    with no_grad():
        for b in ddp._buffers_list():
            b.copy_(F.broadcast(b, 0, ddp.process_group))


def launch(ddp, bucket) -> None:
    """Record the start of ``bucket``'s all-reduce after its latest gradient's producer."""
    builder = _reg.current_mode()
    graph = builder.graph
    grads = [p.grad for p in bucket.params]
    position = {id(n): i for i, n in enumerate(graph.nodes)}
    producers = [builder.value_of(g).node for g in grads if g is not None]
    with no_grad():
        if producers:
            last = max(producers, key=lambda n: position[id(n)])
            with graph.inserting_after(last):
                bucket.work = _start(ddp, bucket, grads)
        else:
            bucket.work = _start(ddp, bucket, grads)
    ddp._launched += 1


def _start(ddp, bucket, grads):
    from ...ops.creation import zeros

    parts = [
        g.reshape(-1) if g is not None else zeros(p.numel(), dtype=p.dtype)
        for p, g in zip(bucket.params, grads)
    ]
    flat = parts[0] if len(parts) == 1 else concat(parts)
    return F.all_reduce_start(flat, "avg", ddp.process_group)


def finish(ddp) -> None:
    """Record the waits and give each parameter its slice of its bucket's average."""
    with no_grad():
        for b in ddp._buckets:
            buffer, handle = b.work
            out = F.wait_tensor(buffer, handle, "avg", ddp.process_group)
            for p, start, stop in zip(b.params, b.offsets, b.offsets[1:]):
                p.grad = out[start:stop].reshape(tuple(p.shape))
    ddp._expecting = False


def check_finished(ddp) -> None:
    """After a recorded backward: every bucket must have been reduced."""
    if ddp._expecting and ddp._launched < len(ddp._buckets):
        missing = [ddp._names[id(p)] for p in ddp._params if id(p) not in ddp._ready]
        ddp._reset()
        raise DistributedError(
            "the captured step's backward gave no gradient to parameters "
            f"{missing[:8]}, so their buckets were never reduced; DistributedDataParallel in "
            "a captured step needs every parameter to get a gradient",
            op="DistributedDataParallel",
        )


def arm_eager_backward(ddp) -> None:
    """A gradient hook run eagerly after a captured forward (``ember.compile(ddp_model)``: its
    AOT backward runs under eager autograd, which calls the hooks). No forward runs at later
    calls to prepare the reduction, so the first hook of each backward does: from then on the
    eager reduction runs (the module docstring of distributed.py), under the no_sync flag as it
    is when backward runs."""
    if _reg.building_graph():
        return
    if ddp._in_graph:
        ddp._in_graph = False
        ddp._auto_arm = True
        ddp._expecting = False
    if not ddp._expecting:
        ddp._reset()
        ddp._expecting = ddp.require_backward_grad_sync and ddp.process_group.size() > 1
