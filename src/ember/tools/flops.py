"""FLOP counting: ``ember.tools.flops(fn_or_module, *inputs)``.

Counts come from the op registry's cost formulas (``OpDef.cost``), applied to every call node of
the captured graphs *before* any optimization pass (``opt_level=0``), so fusion hides no op.
Each node is attributed:

* to a **phase**: ``forward`` (the forward graph), ``backward`` (the backward graph) or
  ``optimizer`` (backward-graph nodes in the optimizer's scope); a function that runs no
  backward itself is counted forward only unless ``backward=True`` asks for the backward pass
  of its outputs (what ``out.backward(cotangent)`` would cost);
* to a **module**, from the node's scope (graph/scope.py): modules are named as torch's
  ``FlopCounterMode`` names them (``"GPTBlock"``, ``"GPTBlock.qkv"``) and a module's count
  includes its submodules'; backward nodes belong to the module of the node they differentiate;
* to an **op** (the primitive's name) and a **family**. The families PyTorch counts are
  ``matmul`` (linear / matmul / einsum: aten mm, addmm, bmm outside attention), ``conv``
  (convolution and its two gradients: aten convolution, convolution_backward) and
  ``attention`` (the matrix products recorded inside ``scaled_dot_product_attention``); every
  other op is counted too, under its kind (``elementwise``, ``reduce``, ``nn``, ...), which
  PyTorch leaves out.

Conventions (the registry's formulas): 2 FLOPs per multiply-add, a bias add not counted (as
PyTorch). Attention is counted on the nodes ember runs: 4*b*h*s*s*d forward (two products, as
PyTorch's sdpa formula) and 8*b*h*s*s*d backward (four products; PyTorch's *fused* backward
formula adds a fifth for the recomputed scores, which ember does not recompute). Control-flow
nodes (cond, loops) count 0: their bodies' trip counts are not known statically.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ..graph import scope as _scope
from ..graph.ir import Graph, Node

__all__ = ["FlopCounts", "NodeFlops", "PhaseCounts", "count_graphs", "flops", "node_family"]

PHASES = ("forward", "backward", "optimizer")
# the families that PyTorch's FlopCounterMode counts, i.e. the 2-FLOPs-per-MAC products
MAC_FAMILIES = ("matmul", "conv", "attention")
NO_MODULE = "(no module)"


@dataclass
class PhaseCounts:
    """FLOPs of one row, per phase."""

    forward: int = 0
    backward: int = 0
    optimizer: int = 0

    @property
    def total(self) -> int:
        return self.forward + self.backward + self.optimizer

    def add(self, phase: str, flops: int) -> None:
        setattr(self, phase, getattr(self, phase) + flops)


@dataclass(frozen=True)
class NodeFlops:
    """One call node's count: its name and op, where it came from, its FLOPs and bytes moved."""

    node: str
    op: str
    family: str
    module: str  # the module path ('' outside every module)
    phase: str
    flops: int
    bytes: int


def node_family(node: Node) -> str:
    """The family a call node is reported under (see the module docstring); a fused epilogue
    under its producer's (a convolution with its bias and ReLU is a convolution)."""
    op = node.op
    producer = op.fused.producer(node.attrs) if op.fused is not None else None
    if producer is not None:
        return producer.op.flop_family or (
            "matmul" if producer.op.kind == "linalg" else producer.op.kind
        )
    if op.kind == "linalg":
        if _scope.function_of(node.scope) == "scaled_dot_product_attention":
            return "attention"
        return "matmul"
    # an op may name the family it is counted under (the convolutions and their gradients)
    return op.flop_family or op.kind


def _phase(graph_phase: str, node: Node) -> str:
    if graph_phase != "forward" and _scope.module_path(node.scope) == _scope.OPTIMIZER:
        return "optimizer"
    return graph_phase


def _count_nodes(graph: Graph, graph_phase: str) -> Iterable[NodeFlops]:
    for node in graph.call_nodes():
        if node.op.cost is None:
            raise ValueError(
                f"op {node.op.name} (node %{node.name}) has no cost formula; give its OpDef a "
                "cost(in_types, out_types, attrs) to count it"
            )
        in_types = tuple(v.type for v in node.inputs)
        out_types = tuple(v.type for v in node.outputs)
        cost = node.op.cost(in_types, out_types, node.attrs)
        yield NodeFlops(
            node.name,
            node.op.name,
            node_family(node),
            _scope.module_path(node.scope),
            _phase(graph_phase, node),
            int(cost.flops),
            int(cost.bytes),
        )


@dataclass
class FlopCounts:
    """The FLOP breakdown of a captured call: ``nodes`` (one `NodeFlops` per call node), and
    the totals ``total`` / ``forward`` / ``backward`` / ``optimizer``, ``by_op``,
    ``by_family`` and ``by_module`` (each a dict of `PhaseCounts`) derived from them.
    ``print(counts)`` shows the tables."""

    nodes: list[NodeFlops] = field(default_factory=list)

    def _rows(self, key) -> dict[str, PhaseCounts]:
        rows: dict[str, PhaseCounts] = {}
        for n in self.nodes:
            for name in key(n):
                rows.setdefault(name, PhaseCounts()).add(n.phase, n.flops)
        return rows

    def only(self, *families: str) -> FlopCounts:
        """The counts of the nodes of ``families`` only (e.g. ``only(*MAC_FAMILIES)``, the
        families PyTorch counts)."""
        return FlopCounts([n for n in self.nodes if n.family in families])

    @property
    def total(self) -> int:
        return sum(n.flops for n in self.nodes)

    @property
    def forward(self) -> int:
        return sum(n.flops for n in self.nodes if n.phase == "forward")

    @property
    def backward(self) -> int:
        return sum(n.flops for n in self.nodes if n.phase == "backward")

    @property
    def optimizer(self) -> int:
        return sum(n.flops for n in self.nodes if n.phase == "optimizer")

    @property
    def macs(self) -> int:
        """Multiply-adds of the matrix products and convolutions (half their FLOPs)."""
        return sum(n.flops for n in self.nodes if n.family in MAC_FAMILIES) // 2

    @property
    def by_op(self) -> dict[str, PhaseCounts]:
        return self._rows(lambda n: (n.op,))

    @property
    def by_family(self) -> dict[str, PhaseCounts]:
        return self._rows(lambda n: (n.family,))

    @property
    def by_module(self) -> dict[str, PhaseCounts]:
        """Per module path; a module's row includes its submodules' (``"GPTBlock"`` holds
        ``"GPTBlock.qkv"``), nodes outside every module are under ``"(no module)"``."""

        def prefixes(n: NodeFlops):
            if not n.module:
                return (NO_MODULE,)
            parts = n.module.split(".")
            return tuple(".".join(parts[: i + 1]) for i in range(len(parts)))

        return self._rows(prefixes)

    def table(self, rows: str = "module") -> str:
        """A text table of ``by_module`` / ``by_family`` / ``by_op`` (``rows`` = 'module',
        'family' or 'op'), with a total row."""
        tables = {"module": self.by_module, "family": self.by_family, "op": self.by_op}
        if rows not in tables:
            raise ValueError(f"rows must be one of {tuple(tables)}, got {rows!r}")
        body = tables[rows]
        if rows != "module":  # the largest first, zero rows left out; modules in call order
            body = dict(sorted(((k, c) for k, c in body.items() if c.total), key=_largest))
        body = {**body, "total": self._rows(lambda n: ("total",)).get("total", PhaseCounts())}
        width = max([len(rows)] + [len(k) for k in body])
        head = f"{rows:<{width}}  " + "  ".join(f"{p:>12}" for p in (*PHASES, "total"))
        lines = [head, "-" * len(head)]
        for name, c in body.items():
            cells = (c.forward, c.backward, c.optimizer, c.total)
            lines.append(f"{name:<{width}}  " + "  ".join(f"{_human(v):>12}" for v in cells))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table("module") + "\n\n" + self.table("family")


def _largest(item) -> int:
    return -item[1].total


def _human(n: int) -> str:
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            return f"{n / scale:.3f} {unit}"
    return str(n)


def count_graphs(graphs: dict[str, Graph]) -> FlopCounts:
    """Count ``{'forward': graph, 'backward': graph}`` (or just a forward graph): the backward
    graph's nodes in the optimizer's scope count as the optimizer phase."""
    unknown = set(graphs) - {"forward", "backward"}
    if unknown:
        raise ValueError(f"count_graphs takes 'forward' and 'backward' graphs, got {unknown}")
    counts = FlopCounts()
    for phase, graph in graphs.items():
        counts.nodes.extend(_count_nodes(graph, phase))
    return counts


def flops(fn_or_module, *inputs, backward: bool = False) -> FlopCounts:
    """FLOPs of ``fn_or_module(*inputs)``: a module, a function, or a whole training step
    (forward, ``loss.backward()`` and ``optimizer.step()``), captured as ember.trace does,
    without optimization passes. Nothing runs: only shapes are needed. See the module
    docstring for how nodes are attributed; ``backward=True`` also counts the backward pass of
    a function that does not run one itself."""
    from ..capture.trace import trace

    traced = trace(fn_or_module, *inputs, opt_level=0, executor="interpreter")
    graphs = traced.graphs
    if "forward" not in graphs:  # no backward anywhere: the joint graph is the forward pass
        return count_graphs({"forward": graphs["joint"]})
    ran_backward = traced.autograd is None  # AOT autograd adds a backward nobody asked for
    if ran_backward or backward:
        return count_graphs({"forward": graphs["forward"], "backward": graphs["backward"]})
    return count_graphs({"forward": graphs["forward"]})
