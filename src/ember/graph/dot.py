"""Graphviz DOT text of a graph: `to_dot(graph, phases=None)` (also ``graph.to_dot()``).

What the drawing shows:

* one box per node, labelled with its value name, its op, its module scope when the node
  records one (``node.scope``) and (for inputs and constants) its type; every edge between
  nodes is labelled with the type of the value it carries (``f32[8, 128, 256]``);
* a fused node (``fused_elementwise`` / ``fused_reduce`` / ``fused_epilogue``, made by
  transforms/fuse.py) as a cluster of its member ops, wired as its program reads them: an edge
  into the cluster ends at the member that reads that input, an edge out starts at the member
  whose result the node returns; edges between members carry no label (those intermediates live
  in registers inside the fused loop, never as tensors);
* a control-flow node (cond, while_loop, scan, ...) in a cluster together with one nested
  cluster per graph-valued attribute (branch, body), drawn by the same rules, so loops inside
  branches nest as deep as the graph does; dotted edges tie the node to its subgraphs' inputs
  and outputs;
* with ``phases`` (node -> ``'forward'`` / ``'backward'`` / ``'optimizer'``, see
  ember.tools.viz.step_phases): forward nodes filled blue, backward nodes red with a dashed
  outline and dashed edges, optimizer nodes yellow, each node carrying ``class="<phase>"`` (kept
  in SVG output), so the passes are told apart at a glance.

Graphviz itself is not needed to produce the text; ``dot -Tsvg`` renders it (ember.tools.viz.svg).
"""

from __future__ import annotations

from ..ops.program import Temp
from ._base import GraphBase
from .printer import format_type

__all__ = ["to_dot", "PHASE_STYLE"]


# fill colour, outline style and edge style per phase
PHASE_STYLE = {
    "forward": ("#dbeafe", "rounded,filled", "solid"),
    "backward": ("#fee2e2", "rounded,filled,dashed", "dashed"),
    "optimizer": ("#fef3c7", "rounded,filled", "solid"),
    None: ("#f3f4f6", "rounded,filled", "solid"),
}
_EDGE_COLOR = {"backward": "#b91c1c", "optimizer": "#92400e"}


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _is_graph(value) -> bool:
    return isinstance(value, GraphBase)


class _Writer:
    """Emits nodes, clusters and edges; ``ports`` maps a value to the DOT node producing it."""

    def __init__(self, phases: dict | None):
        self.phases = phases or {}
        self.lines: list[str] = []
        self.edges: list[str] = []
        self.count = 0

    def fresh(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def node(self, ident: str, label: str, phase, indent: str, shape: str = "box") -> None:
        fill, style, _ = PHASE_STYLE.get(phase, PHASE_STYLE[None])
        css = f", class={_quote(phase)}" if phase else ""
        self.lines.append(
            f"{indent}{ident} [label={_quote(label)}, shape={shape}, style={_quote(style)}, "
            f"fillcolor={_quote(fill)}{css}];"
        )

    def edge(self, tail: str, head: str, label: str, phase, extra: str = "") -> None:
        _, _, line = PHASE_STYLE.get(phase, PHASE_STYLE[None])
        color = _EDGE_COLOR.get(phase, "#374151")
        attrs = f"label={_quote(label)}, style={line}, color={_quote(color)}"
        self.edges.append(f"  {tail} -> {head} [{attrs}{extra}];")

    # -------------------------------------------------------------------- one graph's nodes
    def graph(self, graph, indent: str, inherited=None) -> dict:
        """Draw ``graph``'s nodes at ``indent``; returns {id(value): DOT node id} for its values.
        Nodes of a subgraph take the phase of the node holding it (``inherited``)."""
        ports: dict[int, str] = {}
        for node in graph.nodes:
            phase = self.phases.get(node, inherited)
            if node.kind == "call" and node.op.fused is not None:
                self.fused(node, ports, phase, indent)
                continue
            ident = self.fresh("n")
            label = f"%{node.name}\n{node.target}"
            scope = getattr(node, "scope", None)  # the module that made it (when recorded)
            if scope:
                label += f"\n[{scope}]"
            if node.kind != "call":
                label += "\n" + format_type(node.outputs[0].type)
            shape = "ellipse" if node.kind == "input" else "box"
            subgraphs = [(k, v) for k, v in node.attrs.items() if _is_graph(v)]
            if subgraphs:
                self.control(node, ident, label, subgraphs, phase, indent)
            else:
                self.node(ident, label, phase, indent, shape)
            for v in node.inputs:
                self.edge(ports[id(v)], ident, format_type(v.type), phase)
            ports.update((id(v), ident) for v in node.outputs)
        return ports

    def fused(self, node, ports: dict, phase, indent: str) -> None:
        """A fused node as a cluster of its member ops (see the module docstring)."""
        rule = node.op.fused
        program, outputs = rule.members(node.attrs), rule.outputs(node.attrs)
        producer = rule.producer(node.attrs)
        cluster = self.fresh("cluster_fused_")
        self.lines.append(f"{indent}subgraph {cluster} {{")
        inner = indent + "  "
        label = f"{node.target} %{node.name} ({len(program)} ops)"
        self.lines.append(f'{inner}label={_quote(label)}; style="rounded,filled"; ')
        self.lines.append(f'{inner}fillcolor="#ede9fe"; color="#6d28d9";')
        # where each program input comes from: a node input, or the producer's result
        sources: list = list(node.inputs)
        if producer is not None:
            box = self.fresh("n")
            self.node(box, f"{producer.op.name}\n(epilogue producer)", phase, inner)
            for v in node.inputs[: producer.n_inputs]:
                self.edge(ports[id(v)], box, format_type(v.type), phase)
            sources = producer.program_inputs(node.inputs, box)
        members: list[str] = []
        for instr in program:
            ident = self.fresh("n")
            self.node(ident, instr.op.name, phase, inner, shape="box")
            for ref in instr.operands:
                source = ref.pick(sources, members, lambda value, dtype: None)
                if source is None:  # a constant, written into the loop
                    continue
                if isinstance(ref, Temp) or isinstance(source, str):  # a member, the producer
                    self.edge(source, ident, "", phase)
                else:
                    self.edge(ports[id(source)], ident, format_type(source.type), phase)
            members.append(ident)
        self.lines.append(f"{indent}}}")
        for value, j in zip(node.outputs, outputs):
            ports[id(value)] = members[j]

    def control(self, node, ident: str, label: str, subgraphs, phase, indent: str) -> None:
        """A control-flow node in a cluster with a nested cluster per subgraph."""
        cluster = self.fresh("cluster_control_")
        inner = indent + "  "
        self.lines.append(f"{indent}subgraph {cluster} {{")
        self.lines.append(f"{inner}label={_quote(node.target + ' %' + node.name)};")
        self.lines.append(f'{inner}style="rounded"; color="#0f766e";')
        self.node(ident, label, phase, inner, shape="hexagon")
        for key, sub in subgraphs:
            body = self.fresh("cluster_body_")
            self.lines.append(f"{inner}subgraph {body} {{")
            title = key if sub.name == key else f"{key}: {sub.name}"
            self.lines.append(f"{inner}  label={_quote(title)};")
            self.lines.append(f'{inner}  style="rounded,dashed"; color="#0f766e";')
            ports = self.graph(sub, inner + "  ", inherited=phase)
            self.lines.append(f"{inner}}}")
            for v in sub.inputs:
                self.edge(ident, ports[id(v)], "", phase, ', style=dotted, arrowhead="none"')
            for v in sub.outputs:
                self.edge(ports[id(v)], ident, format_type(v.type), phase, ", style=dotted")
        self.lines.append(f"{indent}}}")


def to_dot(graph, phases: dict | None = None, rankdir: str = "TB") -> str:
    """The DOT text of ``graph`` (see the module docstring); ``phases`` maps nodes to
    ``'forward'`` / ``'backward'`` / ``'optimizer'``."""
    writer = _Writer(phases)
    ports = writer.graph(graph, "  ")
    outputs = []
    for k, v in enumerate(graph.outputs):
        ident = f"output{k}"
        outputs.append(f'  {ident} [label="output {k}", shape=plaintext];')
        writer.edges.append(f"  {ports[id(v)]} -> {ident} [label={_quote(format_type(v.type))}];")
    header = [
        f"digraph {_quote(graph.name)} {{",
        f"  rankdir={rankdir};",
        # dot's global ranking: its older per-cluster ranking fails on some graphs whose
        # clusters (phases, fused nodes' members) edges cross ("trouble in init_rank")
        "  newrank=true;",
        f"  label={_quote(graph.name)}; labelloc=t;",
        '  node [fontname="Helvetica", fontsize=10];',
        '  edge [fontname="Helvetica", fontsize=8];',
    ]
    return "\n".join([*header, *writer.lines, *outputs, *writer.edges, "}"]) + "\n"
