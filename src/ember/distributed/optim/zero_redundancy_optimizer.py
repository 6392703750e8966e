"""``ZeroRedundancyOptimizer``: PyTorch's ZeRO stage 1 (optimizer state sharding) over ember's
MPI process group.

Every rank holds the whole model, but the optimizer state (Adam's two moments, SGD's momentum)
only for its shard of the parameters. The shards are PyTorch's greedy partition: each param
group's parameters, largest first, each given to the rank with the fewest elements so far (the
count carried across groups). A step runs the wrapped optimizer (``optimizer_class``, built on
this rank's shard) on the gradients every rank already holds (DDP averaged them), then each
rank broadcasts the parameters it updated. Per-parameter updates do not depend on each other,
so the result is the unsharded optimizer's, and the state takes about 1/N of the memory
(`StateMemory` reports it per rank).

``parameters_as_bucket_view=True`` packs each rank's parameters of one dtype into one flat
array and makes the parameters views of it, so a step broadcasts one buffer per rank and dtype
instead of one per parameter.

The state dict is PyTorch's: ``consolidate_state_dict(to)`` (called on every rank) gathers the
shards' state on rank ``to``, whose ``state_dict()`` is then the state dict of the unsharded
optimizer (the format ``ember.save`` writes, loadable by a plain optimizer); ``load_state_dict``
takes such a dict on every rank, each keeping its shard's entries, whatever the number of ranks
that wrote it. The shards travel as ``ember.save`` streams (no pickling), waited for with the
group's timeout.
"""

from __future__ import annotations

import io
import zlib
from dataclasses import dataclass

import numpy as np

from ...ops._registry import building_graph
from ...optim.optimizer import Optimizer
from ...tensor import Tensor
from .. import collectives as C
from .._mpi import DistributedError
from ..process_group import _group

__all__ = ["StateMemory", "ZeroRedundancyOptimizer", "optimizer_state_bytes"]

_OP = "ZeroRedundancyOptimizer"


def optimizer_state_bytes(optimizer) -> int:
    """The bytes of the arrays in ``optimizer.state`` (this process's; for a
    ZeroRedundancyOptimizer, this rank's shard)."""
    state = optimizer.optim.state if isinstance(optimizer, ZeroRedundancyOptimizer) else None
    if state is None:
        state = optimizer.state
    total = 0
    for entries in state.values():
        for value in (entries or {}).values():
            if isinstance(value, Tensor):
                total += value._data.nbytes
            elif isinstance(value, np.ndarray):
                total += value.nbytes
    return total


@dataclass
class StateMemory:
    """Optimizer state bytes per rank (``per_rank[r]``), the parameters each rank owns, and the
    bytes one unsharded optimizer holds (their sum: the shards do not overlap)."""

    per_rank: list
    params_per_rank: list
    elements_per_rank: list
    optimizer: str

    @property
    def unsharded(self) -> int:
        return sum(self.per_rank)

    def __str__(self) -> str:
        n = len(self.per_rank)
        full = max(self.unsharded, 1)
        lines = [f"{self.optimizer} state, sharded over {n} rank(s) (ZeRO stage 1):"]
        lines.append(f"  {'rank':>4}  {'params':>6}  {'elements':>10}  {'state bytes':>12}  share")
        for r in range(n):
            lines.append(
                f"  {r:>4}  {self.params_per_rank[r]:>6}  {self.elements_per_rank[r]:>10,}  "
                f"{self.per_rank[r]:>12,}  {self.per_rank[r] / full:6.1%}"
            )
        lines.append(
            f"  unsharded: {self.unsharded:,} bytes on every rank; sharded: at most "
            f"{max(self.per_rank):,} bytes ({max(self.per_rank) / full:.1%}, ideal 1/{n} = "
            f"{1 / n:.1%})"
        )
        return "\n".join(lines)


def _copy_group_settings(source: list, target: list) -> None:
    """Each group's hyper-parameters (all but its parameters) from ``source`` to ``target``."""
    for src, dst in zip(source, target):
        for key, value in src.items():
            if key not in ("params", "param_names"):
                dst[key] = value


class ZeroRedundancyOptimizer(Optimizer):
    """``optimizer_class`` (e.g. ``ember.optim.Adam``) with its state sharded across the ranks
    of ``process_group`` (the default group when None); ``**defaults`` are its arguments. See
    the module docstring."""

    records_steps = False  # a step broadcasts between ranks: it runs eagerly only

    def __init__(
        self,
        params,
        optimizer_class: type,
        process_group=None,
        parameters_as_bucket_view: bool = False,
        overlap_with_ddp: bool = False,
        **defaults,
    ):
        if overlap_with_ddp:
            raise DistributedError(
                "overlap_with_ddp=True needs a DistributedDataParallel communication hook "
                "(PyTorch's hook_with_zero_step), which ember's DistributedDataParallel does not "
                "have; use overlap_with_ddp=False (the step runs after backward)",
                op=_OP,
            )
        if not (isinstance(optimizer_class, type) and issubclass(optimizer_class, Optimizer)):
            raise DistributedError(
                f"optimizer_class must be an ember.optim optimizer class, got {optimizer_class!r}",
                op=_OP,
            )
        self._initialized = False
        self.process_group = _group(process_group, _OP)
        self.world_size = self.process_group.size()
        self.rank = self.process_group.rank()
        self.global_rank = self.rank
        self.parameters_as_bucket_view = parameters_as_bucket_view
        self._overlap_with_ddp = overlap_with_ddp
        self._optim_constructor = optimizer_class
        self._optim_defaults = dict(defaults)
        self._partition_cache: list | None = None
        self._buckets: list = []
        self._all_state_dicts: list | None = None
        super().__init__(params, dict(defaults))
        self._verify_same_params()
        self.optim = optimizer_class(self._partition_parameters()[self.rank], **defaults)
        _copy_group_settings(self.optim.param_groups, self.param_groups)
        self.state = self.optim.state
        if parameters_as_bucket_view:
            self._build_param_buckets()
        self._initialized = True

    # ------------------------------------------------------------------------ partition
    def _all_params(self) -> list:
        return [p for group in self.param_groups for p in group["params"]]

    def _partition_parameters(self) -> list:
        """Per rank, its param groups (one per group here, possibly without parameters):
        PyTorch's greedy partition by element count (see the module docstring)."""
        if self._partition_cache is None:
            per_rank = [[] for _ in range(self.world_size)]
            sizes = [0] * self.world_size
            for group in self.param_groups:
                mine = [[] for _ in range(self.world_size)]
                for p in sorted(group["params"], key=lambda t: t._data.size, reverse=True):
                    r = sizes.index(min(sizes))
                    mine[r].append(p)
                    sizes[r] += p._data.size
                for r in range(self.world_size):
                    part = {k: v for k, v in group.items() if k != "param_names"}
                    part["params"] = mine[r]
                    per_rank[r].append(part)
            self._partition_cache = per_rank
        return self._partition_cache

    @property
    def _param_to_rank(self) -> dict:
        return {
            id(p): r
            for r, groups in enumerate(self._partition_parameters())
            for g in groups
            for p in g["params"]
        }

    def _verify_same_params(self) -> None:
        """Every rank must list the same parameters (shapes, dtypes, groups): the partition is
        computed on each rank and must come out the same."""
        pg = self.process_group
        if pg.size() == 1:
            return
        listing = [[(tuple(p.shape), str(p.dtype)) for p in g["params"]] for g in self.param_groups]
        digest = np.array([zlib.crc32(repr(listing).encode())], dtype=np.int64)
        table = np.empty(pg.size(), dtype=np.int64)
        C._poll([pg.comm.Iallgather(digest, table)], pg.timeout.total_seconds(), _OP, pg)
        if (table != table[0]).any():
            differ = [r for r in range(pg.size()) if table[r] != table[self.rank]]
            raise DistributedError(
                f"the ranks' parameters differ (rank {self.rank} has groups of "
                f"{[len(g) for g in listing]} parameters; ranks {differ} list other shapes or "
                "dtypes): every rank must pass the same parameters in the same order",
                op=_OP,
            )

    # ---------------------------------------------------------------------- bucket view
    def _build_param_buckets(self) -> None:
        """Per rank and dtype one flat array; the parameters become views of it."""
        self._buckets = []
        for r, groups in enumerate(self._partition_parameters()):
            by_dtype: dict = {}
            for g in groups:
                for p in g["params"]:
                    by_dtype.setdefault(p._data.dtype, []).append(p)
            for dtype, params in by_dtype.items():
                flat = np.empty(sum(p._data.size for p in params), dtype=dtype)
                start = 0
                for p in params:
                    stop = start + p._data.size
                    flat[start:stop] = p._data.reshape(-1)
                    p._data = flat[start:stop].reshape(p._data.shape)
                    p._vc[0] += 1
                    start = stop
                self._buckets.append((r, flat, params))

    # ----------------------------------------------------------------------------- step
    def step(self, closure=None, **kwargs):
        """Step this rank's shard with the wrapped optimizer, then broadcast every shard's
        updated parameters from its rank. Returns ``closure()``'s loss when given."""
        if building_graph():
            raise DistributedError(
                "ZeroRedundancyOptimizer.step runs eagerly only (it broadcasts between ranks); "
                "call it outside ember.function / ember.compile",
                op=f"{_OP}.step",
            )
        _copy_group_settings(self.param_groups, self.optim.param_groups)
        if closure is not None:
            loss = self.optim.step(closure=closure, **kwargs)
        else:
            loss = self.optim.step(**kwargs)
        _copy_group_settings(self.optim.param_groups, self.param_groups)
        self._step_count += 1
        self._sync_params()
        return loss

    def _sync_params(self) -> None:
        pg = self.process_group
        if pg.size() == 1:
            return
        pending = []  # (request, owner, tensors, copy_back)
        if self.parameters_as_bucket_view:
            for owner, flat, params in self._buckets:
                request = pg.comm.Ibcast(C._movable(flat)[0], root=owner)
                pending.append((request, owner, params, None))
        else:
            for owner, groups in enumerate(self._partition_parameters()):
                for g in groups:
                    for p in g["params"]:
                        buf, back = C._movable(p._data)
                        pending.append((pg.comm.Ibcast(buf, root=owner), owner, [p], back))
        C._poll([item[0] for item in pending], pg.timeout.total_seconds(), f"{_OP}.step", pg)
        for _, owner, params, back in pending:
            if owner != self.rank:
                if back is not None:
                    back()
                for p in params:
                    p._vc[0] += 1

    # ----------------------------------------------------------------------- groups
    def add_param_group(self, param_group: dict) -> None:
        """Add a group (PyTorch's rule: the old groups keep their ranks, so the wrapped
        optimizer only gains this rank's part of the new group)."""
        super().add_param_group(param_group)
        if not getattr(self, "_initialized", False):
            return
        self._partition_cache = None
        self._verify_same_params()
        mine = self._partition_parameters()[self.rank]
        self.optim.add_param_group(mine[-1])
        if self.parameters_as_bucket_view:
            self._build_param_buckets()

    # ------------------------------------------------------------------------ state
    def _local_to_global(self, rank: int) -> list:
        """Rank ``rank``'s wrapped optimizer's parameter indices, as global indices."""
        index = {id(p): i for i, p in enumerate(self._all_params())}
        return [index[id(p)] for g in self._partition_parameters()[rank] for p in g["params"]]

    def consolidate_state_dict(self, to: int = 0) -> None:
        """Gather every shard's state on rank ``to`` (call it on every rank), for
        ``state_dict()`` there."""
        from ...io import load, save

        pg = self.process_group
        to = C._root(pg, to, "to", f"{_OP}.consolidate_state_dict")
        stream = io.BytesIO()
        save(self.optim.state_dict(), stream)
        mine = np.frombuffer(stream.getvalue(), dtype=np.uint8)
        if pg.size() == 1:
            self._all_state_dicts = [self.optim.state_dict()]
            return
        seconds = pg.timeout.total_seconds()
        what = f"{_OP}.consolidate_state_dict"
        counts = np.zeros(pg.size(), dtype=np.int64)
        C._poll(
            [pg.comm.Iallgather(np.array([mine.size], dtype=np.int64), counts)], seconds, what, pg
        )
        received = np.empty(int(counts.sum()) if self.rank == to else 0, dtype=np.uint8)
        offsets = np.concatenate([[0], np.cumsum(counts)[:-1]])
        recv_spec = [received, counts.tolist(), offsets.tolist(), C.mpi().BYTE]
        C._poll([pg.comm.Igatherv(mine, recv_spec, root=to)], seconds, what, pg)
        if self.rank != to:
            self._all_state_dicts = None
            return
        self._all_state_dicts = [
            load(io.BytesIO(received[o : o + n].tobytes())) for o, n in zip(offsets, counts)
        ]

    def state_dict(self) -> dict:
        """The unsharded optimizer's state dict (PyTorch's layout), on the rank that
        `consolidate_state_dict` gathered to."""
        if self._all_state_dicts is None:
            raise DistributedError(
                "Optimizer state has not been consolidated on this rank. Please call "
                "`consolidate_state_dict(to=...)` on all ranks beforehand if you meant to save "
                "the global state.",
                op=f"{_OP}.state_dict",
            )
        _copy_group_settings(self.optim.param_groups, self.param_groups)
        saved_state = self.state
        self.state = {}
        try:
            full = Optimizer.state_dict(self)
        finally:
            self.state = saved_state
        state = {}
        for rank, local in enumerate(self._all_state_dicts):
            to_global = self._local_to_global(rank)
            for local_index, entries in local["state"].items():
                state[to_global[int(local_index)]] = entries
        full["state"] = dict(sorted(state.items()))
        return full

    def load_state_dict(self, state_dict: dict) -> None:
        """Load an unsharded optimizer's state dict (from `state_dict`, a plain optimizer or
        ``ember.load``, written on any number of ranks); this rank keeps its shard's entries."""
        owner = self._param_to_rank
        params = self._all_params()
        entries_of = dict(state_dict.get("state", {})) if isinstance(state_dict, dict) else {}
        for key in entries_of:
            if not (isinstance(key, (int, np.integer)) and 0 <= int(key) < len(params)):
                raise DistributedError(
                    f"the state dict has state for parameter {key!r}, but this optimizer has "
                    f"parameters 0 to {len(params) - 1}",
                    op=f"{_OP}.load_state_dict",
                )
        # the groups' checks and hyper-parameters (the state is the shards' business)
        Optimizer.load_state_dict(self, {**state_dict, "state": {}})
        local_index = {id(p): i for i, p in enumerate(_params_of(self.optim))}
        local = {"state": {}, "param_groups": []}
        for key, entries in entries_of.items():
            p = params[int(key)]
            if owner[id(p)] == self.rank:
                local["state"][local_index[id(p)]] = entries
        start = 0
        for g, local_group in zip(self.param_groups, self.optim.param_groups):
            packed = {k: v for k, v in g.items() if k not in ("params", "param_names")}
            packed["params"] = list(range(start, start + len(local_group["params"])))
            start += len(local_group["params"])
            local["param_groups"].append(packed)
        self.optim.load_state_dict(local)
        self.state = self.optim.state
        self._all_state_dicts = None

    # ------------------------------------------------------------------------ memory
    def memory_report(self) -> StateMemory:
        """Every rank's optimizer state bytes, gathered on every rank (a collective)."""
        pg = self.process_group
        parts = self._partition_parameters()
        mine = np.array([optimizer_state_bytes(self)], dtype=np.int64)
        table = np.empty(pg.size(), dtype=np.int64)
        if pg.size() == 1:
            table[:] = mine
        else:
            C._poll(
                [pg.comm.Iallgather(mine, table)],
                pg.timeout.total_seconds(),
                f"{_OP}.memory_report",
                pg,
            )
        return StateMemory(
            per_rank=[int(b) for b in table],
            params_per_rank=[sum(len(g["params"]) for g in groups) for groups in parts],
            elements_per_rank=[
                sum(p._data.size for g in groups for p in g["params"]) for groups in parts
            ],
            optimizer=self._optim_constructor.__name__,
        )

    def __repr__(self) -> str:
        return (
            f"ZeroRedundancyOptimizer({self._optim_constructor.__name__}, rank {self.rank} of "
            f"{self.world_size}, {sum(len(g['params']) for g in self.optim.param_groups)} of "
            f"{len(self._all_params())} parameters here)"
        )


def _params_of(optimizer) -> list:
    return [p for g in optimizer.param_groups for p in g["params"]]
