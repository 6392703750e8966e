"""The pipeline's partition: a model's forward graph for one microbatch cut into S stages.

`capture(module, mb_args)` records ``module(*mb_args)`` into a `Graph` (graph/builder.py): the
microbatch arguments are its first inputs, the module's parameters and buffers the captured
ones. `partition(...)` then assigns the call nodes, in the graph's execution order, to S
contiguous stages:

* at the user's split points (``split_spec``: module name -> `SplitPoint`), read from the
  module scope every node keeps (graph/scope.py: ``"Sequential.3"`` is the root's child ``3``);
* or by the cost model: each node's time in a training step, the node and its backward (its
  op's VJP recorded by graph autodiff, where the step differentiates the node), predicted from
  the ops' costs (FLOPs and bytes) on this machine's calibration (runtime/parallel_cost.py: the
  BLAS table for products and convolutions, the memory table for the rest), or measured
  (``cost="measured"``: the kernels timed on the example microbatch's values, cotangents of
  ones). A dynamic program over the execution order picks the
  S-1 cuts minimising the slowest stage's time, where a stage's time is its nodes' time plus the
  time to move the bytes crossing its two cuts (at ``link_bandwidth`` bytes/s; by default the
  memory bandwidth the calibration measured: MPI on one machine copies through shared memory).
  So among balanced partitions the one with the fewest bytes at its cuts wins, and a cut through
  a fat activation costs what sending it costs.

A value crosses a cut when a stage after its producer's reads it (a graph output counts as read
by the last stage); it is sent from its producer straight to each stage that reads it. Batch
arguments belong to stage 0; parameters and buffers to the stage that reads them (a parameter
read by two stages is refused: each stage updates its own), constants are copied where read.

``print(partition)`` shows per stage its ops (count and the most frequent), forward FLOPs,
parameter bytes, the bytes of the activations its nodes make per microbatch, its time forward
and backward by the cost model, and per cut the values and bytes crossing it.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from enum import Enum

import numpy as np

from ...errors import AutogradError, EmberError
from ...graph import scope as _scope
from ...graph.autodiff import backward_graph_values
from ...graph.builder import GraphBuilder
from ...graph.interpreter import all_values
from ...graph.ir import Graph
from ...ops import _registry as _reg
from ...tensor import Tensor
from ...types import TensorType

__all__ = ["PartitionError", "Partition", "SplitPoint", "Stage", "capture", "partition"]


class PartitionError(EmberError, ValueError):
    """A model or split the pipeline cannot partition (names the split point or node)."""


class SplitPoint(Enum):
    """Where a split given by module name falls (PyTorch's ``SplitPoint``): before the module's
    first node, or after its last."""

    BEGINNING = 1
    END = 2


def nbytes(t: TensorType) -> int:
    return int(np.prod(t.shape, dtype=np.int64)) * t.dtype.np.itemsize


def _human(n: float, unit: str = "B") -> str:
    for prefix in ("", "K", "M", "G"):
        if abs(n) < 1000:
            return f"{n:.0f} {prefix}{unit}" if prefix == "" else f"{n:.1f} {prefix}{unit}"
        n /= 1000
    return f"{n:.4g} T{unit}"


@dataclass
class Captured:
    """``module(*mb_args)`` as a graph: ``graph``'s first ``n_args`` inputs are the microbatch
    arguments, the rest the captured ``tensors`` (parameters, buffers) named in ``names``."""

    graph: Graph
    n_args: int
    tensors: list
    names: list
    root: str  # the root module's scope name (its class name)


def capture(module, mb_args: tuple) -> Captured:
    """Record ``module(*mb_args)`` (one microbatch) into a graph; see the module docstring."""
    graph = Graph(f"{type(module).__name__}_pipeline")
    builder = GraphBuilder(graph)
    args = []
    for i, a in enumerate(mb_args):
        if not isinstance(a, Tensor):
            raise PartitionError(f"pipeline: mb_args[{i}] is {type(a).__name__}, not a tensor")
        args.append(builder.input(TensorType(tuple(a.shape), a.dtype), f"arg{i}"))
    with builder:
        out = module(*args)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    graph.set_outputs([builder.value_of(o) for o in outs])
    if builder.rebound:
        raise PartitionError(
            "pipeline: the model updates tensors in place while it runs (BatchNorm's running "
            "statistics, a buffer); pipeline stages update only their parameters"
        )
    names_of = {id(t): n for n, t in module.named_parameters()}
    names_of.update({id(t): n for n, t in module.named_buffers()})
    tensors = list(builder.captured)
    names = [names_of.get(id(t), graph.inputs[len(args) + i].name) for i, t in enumerate(tensors)]
    return Captured(graph, len(args), tensors, names, type(module).__name__)


# ---------------------------------------------------------------------------- the cost model
def _needs_grad(captured: Captured) -> set:
    """Ids of the values a training step differentiates: the parameters and the floating-point
    values computed from them."""
    graph = captured.graph
    found = {
        id(v) for v, t in zip(graph.inputs[captured.n_args :], captured.tensors) if t.requires_grad
    }
    for node in graph.call_nodes():
        if any(id(v) in found for v in node.inputs):
            found.update(id(v) for v in node.outputs if v.type.dtype.is_floating_point)
    return found


def _with_backward(node, needs_grad: set) -> tuple[Graph, int]:
    """``node`` alone in a graph, followed by its backward (its op's VJP, recorded by graph
    autodiff) where the step differentiates it; returns the graph and where the backward
    starts. Its inputs: the node's operands, then one cotangent per differentiated output."""
    graph = Graph(f"cost_{node.name}")
    b = GraphBuilder(graph)
    operands = [b.input(v.type, f"in{i}") for i, v in enumerate(node.inputs)]
    outs = [v for v in node.outputs if id(v) in needs_grad]
    cotangents = [b.input(v.type, f"grad{i}") for i, v in enumerate(outs)]
    wrt = [t for t, v in zip(operands, node.inputs) if id(v) in needs_grad]
    with b:
        result = _reg.apply(node.op, *operands, **node.attrs)
        results = (result,) if node.op.num_outputs == 1 else tuple(result)
        start = len(graph.nodes)
        if outs and wrt:
            chosen = [r for r, v in zip(results, node.outputs) if id(v) in needs_grad]
            try:
                backward_graph_values(b, chosen, wrt, cotangents)
            except AutogradError:
                pass  # no VJP: stage building will say so; the cost counts the forward
    return graph, start


def predicted_times(captured: Captured) -> list[float]:
    """Each call node's predicted seconds in a training step (execution order): the node and
    its backward, from the calibrated cost tables."""
    from ...runtime.parallel_cost import calibrate, estimate

    calibration = calibrate()
    needs = _needs_grad(captured)
    times = []
    for node in captured.graph.call_nodes():
        small, _ = _with_backward(node, needs)
        times.append(sum(estimate(n, calibration).seconds for n in small.call_nodes()))
    return times


def measured_times(captured: Captured, arrays: list, repeats: int = 3) -> list[float]:
    """Each call node's seconds in a training step: its kernel and those of its backward
    (``op.run``: the C fast path where it applies) timed on the values the example microbatch
    gives them, cotangents of ones (the best of ``repeats``)."""
    graph = captured.graph
    env = all_values(graph, arrays)
    env.update({v.name: a for v, a in zip(graph.inputs, arrays)})
    needs = _needs_grad(captured)
    times = []
    for node in graph.call_nodes():
        small, _ = _with_backward(node, needs)
        n_in = len(node.inputs)
        given = [env[v.name] for v in node.inputs]
        given += [np.ones(tuple(v.shape), v.type.dtype.np) for v in small.inputs[n_in:]]
        values = all_values(small, given)
        values.update({v.name: a for v, a in zip(small.inputs, given)})
        total = 0.0
        for call in small.call_nodes():
            inputs = [values[v.name] for v in call.inputs]
            best = float("inf")
            for _ in range(repeats):
                start = time.perf_counter()
                call.op.run(*inputs, **call.attrs)
                best = min(best, time.perf_counter() - start)
            total += best
        times.append(total)
    return times


def default_bandwidth() -> float:
    """Bytes per second a cut's values move at by default: the calibration's largest memory
    measurement (an elementwise op over that many bytes), since MPI on one machine copies."""
    from ...runtime.parallel_cost import calibrate

    size, seconds = calibrate().numpy[-1][:2]
    return size / seconds


# ---------------------------------------------------------------------------- the partition
@dataclass
class Stage:
    """One stage: its call nodes (positions in the graph's call order), what it costs, and the
    values it exchanges (values of the captured graph)."""

    index: int
    nodes: list
    flops: int = 0
    seconds: float = 0.0
    param_bytes: int = 0
    activation_bytes: int = 0
    inputs: list = field(default_factory=list)  # captured-graph values read from other stages
    params: list = field(default_factory=list)  # positions in Captured.tensors it reads


@dataclass
class Partition:
    """S stages of a captured forward graph; ``cuts[k]``: the values crossing the cut between
    stage k and k+1 (produced at or before k, read after), ``producer``/``consumers``: per
    crossing value (by id) its stage and the later stages that read it."""

    captured: Captured
    stages: list
    cuts: list
    producer: dict
    consumers: dict
    method: str
    crossing: list = field(default_factory=list)  # every value sent, in execution order
    message_id: dict = field(default_factory=dict)  # id(value) -> its index in ``crossing``

    @property
    def num_stages(self) -> int:
        return len(self.stages)

    def cut_bytes(self) -> list[int]:
        return [sum(nbytes(v.type) for v in cut) for cut in self.cuts]

    def __str__(self) -> str:
        g = self.captured.graph
        lines = [
            f"pipeline partition of {self.captured.root}: {self.num_stages} stages "
            f"({self.method}), {len(list(g.call_nodes()))} ops, one microbatch "
            f"{[tuple(v.shape) for v in g.inputs[: self.captured.n_args]]}"
        ]
        calls = list(g.call_nodes())
        for st in self.stages:
            ops = Counter(calls[p].target for p in st.nodes)
            common = ", ".join(f"{name} x{k}" for name, k in ops.most_common(6))
            more = f", +{len(ops) - 6} kinds" if len(ops) > 6 else ""
            scopes = [_scope.module_path(calls[p].scope) for p in st.nodes]
            scopes = [s for s in scopes if s] or ["-"]
            first, last = scopes[0], scopes[-1]  # in execution order
            lines.append(
                f"  stage {st.index}: {len(st.nodes)} ops ({common}{more}); modules {first} .. "
                f"{last}; forward {_human(st.flops, 'FLOP')}; params {_human(st.param_bytes)}; "
                f"activations {_human(st.activation_bytes)}/microbatch; "
                f"forward+backward {st.seconds * 1e3:.3f} ms"
            )
        for k, cut in enumerate(self.cuts):
            what = ", ".join(f"%{v.name} {list(v.shape)}" for v in cut[:4])
            more = f", +{len(cut) - 4}" if len(cut) > 4 else ""
            lines.append(
                f"  cut {k}|{k + 1}: {_human(self.cut_bytes()[k])} in {len(cut)} value(s) "
                f"({what}{more})"
            )
        return "\n".join(lines)


def _module_cuts(captured: Captured, split_spec: dict) -> list[int]:
    """Cut positions (a cut at p: call nodes before p in one stage, from p on in the next)."""
    calls = list(captured.graph.call_nodes())
    root = captured.root
    cuts = set()
    for name, point in split_spec.items():
        if not isinstance(point, SplitPoint):
            raise PartitionError(f"pipeline: split_spec[{name!r}] is {point!r}, not a SplitPoint")
        path = f"{root}.{name}"
        inside = [
            p
            for p, n in enumerate(calls)
            if _scope.module_path(n.scope) == path
            or _scope.module_path(n.scope).startswith(path + ".")
        ]
        if not inside:
            known = sorted({_scope.module_path(n.scope) for n in calls} - {""})
            raise PartitionError(
                f"pipeline: split point {name!r}: no op of the captured graph was recorded in "
                f"module {path!r}; its modules: {', '.join(known[:20])}"
            )
        cut = inside[0] if point is SplitPoint.BEGINNING else inside[-1] + 1
        if not 0 < cut < len(calls):
            raise PartitionError(
                f"pipeline: split point {name!r} ({point.name}) leaves a stage with no ops"
            )
        cuts.add(cut)
    return sorted(cuts)


def _crossing(graph: Graph, n_args: int) -> tuple[list, list]:
    """Per value that may cross a cut: (value, producer position, last reader position), the
    positions in call order (batch arguments are produced at -1, graph outputs read at the end)."""
    calls = list(graph.call_nodes())
    position = {id(n): p for p, n in enumerate(calls)}
    produced = {}
    for v in graph.inputs[:n_args]:
        produced[id(v)] = (v, -1)
    for p, n in enumerate(calls):
        for v in n.outputs:
            produced[id(v)] = (v, p)
    last = {}
    for n in calls:
        for v in n.inputs:
            if id(v) in produced:
                last[id(v)] = max(last.get(id(v), -1), position[id(n)])
    for v in graph.outputs:
        if id(v) in produced:
            last[id(v)] = len(calls)
    spans = [(produced[k][0], produced[k][1], q) for k, q in last.items()]
    return calls, spans


def _balanced_cuts(seconds, cross_s, num_stages: int) -> list[int]:
    """The S-1 cut positions minimising the slowest stage, a stage costing its nodes' seconds
    plus the transfer seconds of the cuts on either side (``cross_s[p]``: the cut at p)."""
    n = len(seconds)
    prefix = np.concatenate([[0.0], np.cumsum(seconds)])
    inf = float("inf")
    # best[k][j]: the least bottleneck of the first j nodes in k stages (the k-th ending at j)
    best = np.full((num_stages + 1, n + 1), inf)
    arg = np.zeros((num_stages + 1, n + 1), dtype=np.int64)
    best[0][0] = 0.0
    for k in range(1, num_stages + 1):
        for j in range(k, n - (num_stages - k) + 1):
            out_s = cross_s[j] if j < n else 0.0
            for i in range(k - 1, j):
                if best[k - 1][i] == inf:
                    continue
                in_s = cross_s[i] if i > 0 else 0.0
                cost = max(best[k - 1][i], prefix[j] - prefix[i] + in_s + out_s)
                if cost < best[k][j]:
                    best[k][j], arg[k][j] = cost, i
    cuts, j = [], n
    for k in range(num_stages, 1, -1):
        j = int(arg[k][j])
        cuts.append(j)
    return sorted(cuts)


def partition(
    captured: Captured,
    num_stages: int | None = None,
    split_spec: dict | None = None,
    cost: str = "predicted",
    example: list | None = None,
    link_bandwidth: float | None = None,
) -> Partition:
    """Cut ``captured`` into stages at ``split_spec``'s module split points, or into
    ``num_stages`` by the cost model (``cost``: ``"predicted"`` or ``"measured"``, the latter
    on ``example``: the arrays of the graph's inputs). See the module docstring."""
    graph = captured.graph
    calls, spans = _crossing(graph, captured.n_args)
    n = len(calls)
    if split_spec:
        cuts = _module_cuts(captured, split_spec)
        if num_stages is not None and num_stages != len(cuts) + 1:
            raise PartitionError(
                f"pipeline: split_spec gives {len(cuts) + 1} stages, num_stages says {num_stages}"
            )
        num_stages = len(cuts) + 1
    if num_stages is None or num_stages < 1:
        raise PartitionError("pipeline: give split_spec or num_stages >= 1")
    if num_stages > n:
        raise PartitionError(f"pipeline: {num_stages} stages for a graph of {n} ops")
    if cost == "predicted":
        seconds = predicted_times(captured)
    elif cost == "measured":
        if example is None:
            raise PartitionError("pipeline: cost='measured' needs the example arrays")
        seconds = measured_times(captured, example)
    else:
        raise PartitionError(f"pipeline: cost must be 'predicted' or 'measured', got {cost!r}")
    # bytes crossing the cut at each position p (between call p-1 and call p)
    crossing = np.zeros(n + 1)
    for v, p, q in spans:
        crossing[p + 1 : q + 1] += nbytes(v.type)
    if not split_spec:
        bandwidth = link_bandwidth or default_bandwidth()
        cuts = _balanced_cuts(seconds, crossing / bandwidth, num_stages)
        method = f"cost model, {cost} times, cut bytes at {_human(bandwidth, 'B/s')}"
    else:
        method = "split points " + ", ".join(f"{k}:{v.name}" for k, v in split_spec.items())
    bounds = [0, *cuts, n]
    stage_of = np.zeros(n, dtype=np.int64)
    for s, (a, b) in enumerate(zip(bounds, bounds[1:])):
        stage_of[a:b] = s

    def stage_at(p: int) -> int:
        return 0 if p < 0 else (num_stages - 1 if p >= n else int(stage_of[p]))

    stages = [Stage(s, list(range(a, b))) for s, (a, b) in enumerate(zip(bounds, bounds[1:]))]
    producer, consumers = {}, {}
    readers: dict = {}
    for p, node in enumerate(calls):
        for v in node.inputs:
            readers.setdefault(id(v), set()).add(stage_at(p))
    for v in graph.outputs:
        readers.setdefault(id(v), set()).add(num_stages - 1)
    for v, p, _ in spans:
        later = sorted(s for s in readers.get(id(v), ()) if s > stage_at(p))
        if later:
            producer[id(v)] = stage_at(p)
            consumers[id(v)] = later
    cut_values = [
        [v for v, p, _ in spans if id(v) in producer and stage_at(p) <= k < consumers[id(v)][-1]]
        for k in range(num_stages - 1)
    ]
    n_args = captured.n_args
    for pos, (value, tensor) in enumerate(zip(graph.inputs[n_args:], captured.tensors)):
        owners = sorted(readers.get(id(value), ()))
        if tensor.requires_grad and len(owners) > 1:
            raise PartitionError(
                f"pipeline: parameter {captured.names[pos]} is read by stages "
                f"{', '.join(map(str, owners))}; each stage must own the parameters it updates "
                "(move the split)"
            )
        for s in owners:
            stages[s].params.append(pos)
            if tensor.requires_grad:
                stages[s].param_bytes += nbytes(value.type)
    for st in stages:
        for p in st.nodes:
            node = calls[p]
            c = None
            if node.op.cost is not None:
                in_types = tuple(v.type for v in node.inputs)
                c = node.op.cost(in_types, tuple(v.type for v in node.outputs), node.attrs)
            st.flops += int(c.flops) if c is not None else 0
            st.seconds += seconds[p]
            st.activation_bytes += sum(nbytes(v.type) for v in node.outputs)
        st.inputs = [
            v
            for v, _, _ in spans
            if id(v) in producer and producer[id(v)] != st.index and st.index in consumers[id(v)]
        ]
    crossing = [v for v, _, _ in spans if id(v) in producer]
    message_id = {id(v): i for i, v in enumerate(crossing)}
    return Partition(
        captured, stages, cut_values, producer, consumers, method, crossing, message_id
    )
