"""``DistributedDataParallel``: one model replica per rank, gradients averaged across the ranks
while backward still runs.

At wrap time the ranks check that their parameters agree in names, shapes and dtypes (one
allgather of a digest; a clear error naming the first difference), then take rank 0's parameters
and buffers. The parameters that require grad are grouped in reverse registration order (about
the order backward produces their gradients) into buckets of at most ``bucket_cap_mb``, one dtype
each. A post-accumulate-grad hook on every parameter marks it ready; when a bucket's parameters
are all ready its gradients are copied into one flat buffer and a nonblocking all-reduce starts
(``Iallreduce``), overlapping with the rest of backward. When the last bucket has started, the
hook waits for all of them and writes the averages back into each ``.grad``, so ``backward()``
returns with the gradients already synchronized.

``find_unused_parameters=True``: after forward, the parameters the output's graph cannot reach
count as ready at once (they add zeros); a parameter unused on every rank keeps ``.grad`` None.
Without it, a parameter that gets no gradient leaves the reduction unfinished and the next
forward raises, naming it. ``no_sync()`` turns the reduction off (gradients accumulate locally;
the first backward after it reduces the accumulated sums). ``broadcast_buffers``: rank 0's
buffers are sent to all ranks at each forward.

Inside ``ember.function`` / ``ember.compile`` the same hooks record the reduction as graph nodes
instead (nn/parallel/_ddp_graph.py): one ``all_reduce_start`` per bucket right after its last
gradient, the waits before the optimizer reads the gradients. A captured forward whose backward
runs eagerly (``ember.compile(ddp_model)``, then ``loss.backward()``) reduces eagerly, as here.
"""

from __future__ import annotations

import contextlib
import zlib

import numpy as np

from ...autograd import AccumulateGrad
from ...distributed import collectives as C
from ...distributed._mpi import DistributedError, mpi
from ...distributed.process_group import _group
from ...tensor import Tensor
from ..module import Module
from . import _ddp_graph

__all__ = ["DistributedDataParallel"]


class _Bucket:
    __slots__ = ("params", "offsets", "buffer", "pending", "work")

    def __init__(self, params, dtype):
        self.params = params
        self.offsets = np.cumsum([0] + [p._data.size for p in params]).tolist()
        self.buffer = np.zeros(self.offsets[-1], dtype=dtype)
        self.pending = len(params)
        self.work = None


def _outputs(value, found: list) -> list:
    if isinstance(value, Tensor):
        found.append(value)
    elif isinstance(value, dict):
        for v in value.values():
            _outputs(v, found)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _outputs(v, found)
    return found


def _reachable_leaves(outputs) -> set:
    """ids of the leaf tensors whose gradients the outputs' graph accumulates."""
    leaves, seen, stack = set(), set(), []
    for t in outputs:
        if t.grad_fn is not None:
            stack.append(t.grad_fn)
        elif t.requires_grad:
            leaves.add(id(t))
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, AccumulateGrad):
            leaves.add(id(node.variable))
            continue
        for edge in node._edges:
            if edge is not None:
                stack.append(edge[0])
    return leaves


class DistributedDataParallel(Module):
    """Wraps ``module`` for data-parallel training over the default process group (see the
    module docstring); ``forward`` calls it; ``module`` holds it (state_dict keys carry the
    ``module.`` prefix, as PyTorch's do)."""

    # a captured step records the reduction or not by this flag (no_sync): keyed on it
    _graph_flags = ("require_backward_grad_sync",)

    def __init__(
        self,
        module: Module,
        device_ids=None,
        output_device=None,
        dim: int = 0,
        broadcast_buffers: bool = True,
        process_group=None,
        bucket_cap_mb: float | None = 25,
        find_unused_parameters: bool = False,
        check_reduction: bool = False,
        gradient_as_bucket_view: bool = False,
        static_graph: bool = False,
    ):
        super().__init__()
        if device_ids:
            raise DistributedError(
                f"ember runs on the CPU only; DistributedDataParallel got "
                f"device_ids={device_ids!r}",
                op="DistributedDataParallel",
            )
        pg = _group(process_group, "DistributedDataParallel")
        self.module = module
        self.process_group = pg
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.bucket_cap_mb = 25 if bucket_cap_mb is None else bucket_cap_mb
        self.require_backward_grad_sync = True
        self.dim = dim
        named, seen = [], set()
        for name, p in module.named_parameters():
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                named.append((name, p))
        self._names = {id(p): name for name, p in named}
        self._params = [p for _, p in named]
        self._verify_shapes(named)
        self._sync_from_rank0(list(module.parameters()) + self._buffers_list())
        self._buckets = self._make_buckets()
        self._bucket_of = {}
        for b in self._buckets:
            for p in b.params:
                self._bucket_of[id(p)] = b
        self._expecting = False
        self._ready: set = set()
        self._used: set = set()
        self._launched = 0
        self._in_graph = False
        self._auto_arm = False  # a captured forward, an eager backward: hooks arm (_ddp_graph)
        self._handles = [p.register_post_accumulate_grad_hook(self._on_grad) for p in self._params]

    # ------------------------------------------------------------------------- wrap time
    def _buffers_list(self) -> list:
        return [b for b in self.module.buffers() if b is not None]

    def _verify_shapes(self, named) -> None:
        """Every rank must hold the same parameters: one allgather of a digest, then, only if
        they differ, of the full lists (to name the first difference)."""
        pg = self.process_group
        if pg.size() == 1:
            return
        listing = [(n, tuple(p.shape), str(p.dtype)) for n, p in named]
        digest = np.array([zlib.crc32(repr(listing).encode())], dtype=np.int64)
        table = np.empty(pg.size(), dtype=np.int64)
        C._poll([pg.comm.Iallgather(digest, table)], pg.timeout.total_seconds(), "DDP", pg)
        if (table == table[0]).all():
            return
        lists = pg.comm.allgather(listing)
        for r, other in enumerate(lists):
            if other != listing:
                for mine, theirs in zip(listing, other):
                    if mine != theirs:
                        break
                else:
                    mine, theirs = f"{len(listing)} parameters", f"{len(other)} parameters"
                raise DistributedError(
                    f"the ranks' models differ: rank {pg.rank()} has {mine} where rank {r} has "
                    f"{theirs} (DistributedDataParallel needs the same parameters on every rank)",
                    op="DistributedDataParallel",
                )

    def _sync_from_rank0(self, tensors) -> None:
        """Rank 0's values into every rank's tensors (one broadcast per tensor, started
        together)."""
        pg = self.process_group
        if pg.size() == 1 or not tensors:
            return
        works = [C.broadcast(t, 0, pg, async_op=True) for t in tensors]
        for w in works:
            w.wait()

    def _make_buckets(self) -> list:
        cap = int(self.bucket_cap_mb * 1024 * 1024)
        buckets, current, size, dtype = [], [], 0, None
        for p in reversed(self._params):
            nbytes = p._data.nbytes
            if current and (p._data.dtype != dtype or size + nbytes > cap):
                buckets.append(_Bucket(current, dtype))
                current, size = [], 0
            current.append(p)
            size += nbytes
            dtype = p._data.dtype
        if current:
            buckets.append(_Bucket(current, dtype))
        return buckets

    # ---------------------------------------------------------------------------- forward
    def forward(self, *inputs, **kwargs):
        if self._expecting and self._launched < len(self._buckets):
            missing = [self._names[id(p)] for p in self._params if id(p) not in self._ready]
            self._reset()
            raise DistributedError(
                "the previous iteration's gradient reduction did not finish: parameters "
                f"{missing[:8]} got no gradient. Pass find_unused_parameters=True when some "
                "parameters do not contribute to the loss",
                op="DistributedDataParallel",
            )
        from ...ops._registry import building_graph, current_mode

        self._in_graph = building_graph()  # a captured step: record the reduction (_ddp_graph)
        self._auto_arm = False
        if self._in_graph and self.find_unused_parameters:
            raise DistributedError(
                "find_unused_parameters=True is not supported inside ember.function / "
                "ember.compile (which parameters got a gradient is decided when the step runs)",
                op="DistributedDataParallel",
            )
        if self.broadcast_buffers and self.process_group.size() > 1:
            if self._in_graph:
                _ddp_graph.broadcast_buffers(self)
            else:
                self._sync_from_rank0(self._buffers_list())
        output = self.module(*inputs, **kwargs)
        from ...grad_mode import is_grad_enabled

        self._reset()
        if is_grad_enabled() and self.require_backward_grad_sync and self.process_group.size() > 1:
            self._expecting = True
            if self._in_graph:
                current_mode().backward_callbacks.append(lambda: _ddp_graph.check_finished(self))
            if self.find_unused_parameters:
                reached = _reachable_leaves(_outputs(output, []))
                for p in self._params:
                    if id(p) not in reached:
                        self._mark_ready(p, used=False)
        return output

    def _reset(self) -> None:
        self._expecting = False
        self._ready = set()
        self._used = set()
        self._launched = 0
        for b in self._buckets:
            b.pending = len(b.params)
            b.work = None

    # --------------------------------------------------------------------------- backward
    def _on_grad(self, p: Tensor) -> None:
        if self._in_graph or self._auto_arm:
            _ddp_graph.arm_eager_backward(self)
        if self._expecting and id(p) not in self._ready:
            self._mark_ready(p, used=True)

    def _mark_ready(self, p: Tensor, used: bool) -> None:
        self._ready.add(id(p))
        if used:
            self._used.add(id(p))
        bucket = self._bucket_of[id(p)]
        bucket.pending -= 1
        if bucket.pending == 0:
            self._launch(bucket)
        if self._in_graph:
            if self._launched == len(self._buckets):
                _ddp_graph.finish(self)
            return
        pending = [b.work._requests[0] for b in self._buckets if b.work is not None]
        if pending:
            mpi().Request.Testall(pending)  # drives MPI's progress while backward runs
        if self._launched == len(self._buckets):
            self._finish()

    def _launch(self, bucket: _Bucket) -> None:
        if self._in_graph:
            _ddp_graph.launch(self, bucket)
            return
        for p, start, stop in zip(bucket.params, bucket.offsets, bucket.offsets[1:]):
            if p.grad is None:
                bucket.buffer[start:stop] = 0
            else:
                bucket.buffer[start:stop] = p.grad._data.reshape(-1)
        holder = Tensor._wrap(bucket.buffer)
        bucket.work = C.all_reduce(
            holder, C.ReduceOp.AVG, self.process_group, async_op=True, _check=False
        )
        self._launched += 1

    def _finish(self) -> None:
        used_anywhere = None
        if self.find_unused_parameters:
            flags = np.array([id(p) in self._used for p in self._params], dtype=np.uint8)
            C.all_reduce(Tensor._wrap(flags), C.ReduceOp.MAX, self.process_group, _check=False)
            used_anywhere = flags
        for b in self._buckets:
            b.work.wait()
        index = {id(p): i for i, p in enumerate(self._params)}
        for b in self._buckets:
            for p, start, stop in zip(b.params, b.offsets, b.offsets[1:]):
                if used_anywhere is not None and not used_anywhere[index[id(p)]]:
                    continue
                value = b.buffer[start:stop].reshape(p._data.shape)
                if p.grad is None:
                    p.grad = Tensor._wrap(value.copy())
                else:
                    p.grad._data[...] = value
                    p.grad._vc[0] += 1
        self._expecting = False

    @contextlib.contextmanager
    def no_sync(self):
        """Inside, backward accumulates gradients locally without reducing them."""
        previous = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = previous
