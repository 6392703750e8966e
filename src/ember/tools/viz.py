"""Drawings of graphs: DOT and SVG (Graphviz) and a self-contained interactive HTML viewer.

* `dot(graph, path=None, phases=None)`: the DOT text (graph/dot.py), written to ``path`` if given;
* `svg(graph, path, phases=None)`: rendered by Graphviz's ``dot`` program (Debian ``graphviz``;
  a clear `VizError` when it is not installed);
* `html(graph, path, phases=None)`: one HTML file with everything inlined (the viewer's JS and
  CSS from ``viz_assets/``, the graph as JSON, a layout computed here by viz_layout.py), so it
  opens offline. A canvas draws only what is on screen, so 5,000-node graphs stay responsive.
  Pan (drag), zoom (wheel), click a node for its op, attributes, input and output types, FLOPs
  and bytes (the op's cost rule), search by name or op, show or hide each phase.
* `step_phases(fn)`: which pass each node of a captured training step
  belongs to, ``'forward'`` / ``'backward'`` / ``'optimizer'``; `example_graph(name)` captures a
  built-in model's training step (ember.models.EXAMPLE_STEPS) with its phases.

Every file is written atomically (a temporary file in the target's folder, then a rename).

A graph may come from a file, so every text in a drawing is data, never markup: DOT strings are
quoted and escaped (graph/dot.py; Graphviz escapes them again in SVG), the viewer's JSON reaches
the page with ``<``, ``>`` and ``&`` as JSON escapes, the title is HTML-escaped, and the viewer
escapes every text it puts into the page (viz_assets/viewer.js).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html import escape as html_escape
from importlib import resources

import numpy as np

from .._files import write_atomic
from ..errors import EmberError
from ..graph import scope as _scope
from ..graph.dot import to_dot
from ..graph.printer import format_attr, format_graph, format_type
from .viz_layout import NODE_HEIGHT, layered_layout

__all__ = ["VizError", "dot", "svg", "html", "step_phases", "example_graph", "node_table"]

PHASES = ("forward", "backward", "optimizer")


class VizError(EmberError):
    """A drawing that cannot be made (Graphviz missing or failing, an unwritable path)."""


# ------------------------------------------------------------------------------ files
def _write_atomic(path, data: bytes) -> str:
    try:
        return str(write_atomic(path, data))
    except OSError as exc:
        raise VizError(f"cannot write {path}: {exc.strerror}", op="viz") from exc


def dot(graph, path=None, phases: dict | None = None) -> str:
    """The DOT text of ``graph`` (written to ``path`` too when given)."""
    text = to_dot(graph, phases)
    if path is not None:
        _write_atomic(path, text.encode())
    return text


def svg(graph, path, phases: dict | None = None, timeout: float = 300.0) -> str:
    """Render ``graph`` to an SVG file at ``path`` with Graphviz's ``dot``; returns the path."""
    program = shutil.which("dot")
    if program is None:
        raise VizError(
            "SVG output needs Graphviz's dot program, which is not installed "
            "(Debian: apt-get install graphviz); write .html for the built-in viewer instead",
            op="viz",
        )
    try:
        done = subprocess.run(
            [program, "-Tsvg"],
            input=to_dot(graph, phases).encode(),
            capture_output=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as exc:
        raise VizError(f"dot took over {timeout:.0f} s on {graph.name}", op="viz") from exc
    if done.returncode != 0:
        raise VizError(f"dot failed on {graph.name}: {done.stderr.decode()[:500]}", op="viz")
    return _write_atomic(path, done.stdout)


# ------------------------------------------------------------------------------ phases
def step_phases(fn) -> dict:
    """node -> phase for the joint graph of a captured step ``fn`` (a `GraphFunction`, what
    ``ember.function(step).compile(...)`` returns) and its 'forward' / 'backward' partitions.

    Nodes of the graph as traced are forward before ``fn.backward_start``; after it, nodes the
    optimizer recorded (their scope is ``optimizer``: graph/scope.py) are optimizer nodes and the
    rest backward. The optimized graphs keep the traced value names (a fused node is named after
    the value it computes), so each node takes the phase of the traced node defining its first
    output; a node with a new name takes the latest phase among its inputs' producers."""
    start = fn.backward_start
    traced: dict[str, str] = {}
    for i, node in enumerate(fn.captured_graph.nodes):
        if start is None or i < start:
            phase = "forward"
        elif _scope.module_path(node.scope) == _scope.OPTIMIZER:
            phase = "optimizer"
        else:
            phase = "backward"
        traced.update((v.name, phase) for v in node.outputs)
    phases: dict = {}
    for name, graph in fn.graphs.items():
        for node in graph.nodes:
            phase = next((traced[v.name] for v in node.outputs if v.name in traced), None)
            if phase is None and name == "backward" and node.kind == "input":
                phase = "forward"  # saved activations and parameters come from the forward
            if phase is None:
                known = [phases.get(v.node) for v in node.inputs]
                phase = max((p for p in known if p), key=PHASES.index, default="forward")
            phases[node] = phase
    return phases


def example_graph(name: str, forward_only: bool = False):
    """(graph, phases) of built-in model ``name``'s captured training step (the joint graph as
    it runs: forward, backward and optimizer), or of its forward partition only."""
    from ..capture.function import function
    from ..models import example_step

    fn = function(example_step(name).step).compile()
    phases = step_phases(fn)
    graph = fn.graphs["forward"] if forward_only else fn.graph
    return graph, phases


# ------------------------------------------------------------------------------ node facts
def _nbytes(t):
    """Bytes of a value of type ``t``: an int, or an expression in the symbolic sizes."""
    if all(isinstance(d, (int, np.integer)) for d in t.shape):
        return int(np.prod(t.shape, dtype=np.int64)) * t.dtype.itemsize
    total = t.dtype.itemsize
    for d in t.shape:
        total = total * d
    return str(total)


def _cost(node):
    if node.kind != "call" or node.op.cost is None:
        return None
    try:
        cost = node.op.cost(
            [v.type for v in node.inputs], [v.type for v in node.outputs], dict(node.attrs)
        )
    except Exception:  # noqa: BLE001 - a rule that cannot count these types: no figure
        return None
    return _count(cost.flops), _count(cost.bytes)


def _count(value):
    """An int, or for a symbolic size (a batch of N) its expression as text (``256*N``)."""
    try:
        return int(value)
    except (TypeError, ValueError, EmberError):
        return str(value)


def _total(sizes: list):
    if all(isinstance(b, int) for b in sizes):
        return sum(sizes)
    return " + ".join(str(b) for b in sizes)


def _members(node) -> list[str]:
    """A fused node's program, one line per member op (and its producer, for an epilogue)."""
    rule = node.op.fused
    lines = []
    producer = rule.producer(node.attrs)
    if producer is not None:
        lines.append(f"P = {producer.op.name}(inputs 0..{producer.n_inputs - 1})")
    lines += [f"t{j} = {instr}" for j, instr in enumerate(rule.members(node.attrs))]
    lines.append("returns " + ", ".join(f"t{j}" for j in rule.outputs(node.attrs)))
    return lines


def _attrs(node) -> list[list[str]]:
    fused = node.op.fused if node.kind == "call" else None
    skip = fused.keys if fused is not None else ()  # (shown as its members)
    rows = []
    for key, value in node.attrs.items():
        if key in skip:
            continue
        text = format_attr(value)
        rows.append([key, text if len(text) <= 200 else text[:200] + "..."])
    return rows


def node_table(graph, phases: dict | None = None) -> dict:
    """The viewer's data: per node its facts and layout box, and the edges between nodes."""
    phases = phases or {}
    index = {id(node): i for i, node in enumerate(graph.nodes)}
    nodes, edges, widths = [], [], []
    for i, node in enumerate(graph.nodes):
        types = [format_type(v.type) for v in node.outputs]
        label = f"{node.name}: {node.target}"
        widths.append(max(60, 7 * min(len(label), 40) + 16))
        cost = _cost(node)
        out_bytes = [_nbytes(v.type) for v in node.outputs]
        record = {
            "name": node.name,
            "op": node.target,
            "phase": phases.get(node) or "",
            "scope": getattr(node, "scope", None) or "",
            "outputs": [
                {"name": v.name, "shape": [str(d) for d in v.type.shape], "dtype": v.dtype.name}
                for v in node.outputs
            ],
            "types": types,
            "inputs": [f"%{v.name}: {format_type(v.type)}" for v in node.inputs],
            "attrs": _attrs(node),
            "flops": None if cost is None else cost[0],
            "bytes": None if cost is None else cost[1],
            "memory": _total(out_bytes),
        }
        if node.kind == "call" and node.op.fused is not None:
            record["members"] = _members(node)
        subgraphs = [format_graph(v, keyword=f"{k}: ") for k, v in node.attrs.items() if _is_g(v)]
        if subgraphs:
            record["subgraphs"] = subgraphs
        nodes.append(record)
        for v in node.inputs:
            edges.append((index[id(v.node)], i, v.index))
    order = {id(n): k for k, n in enumerate(graph.topological_order())}
    # the layout wants edges from lower to higher positions: lay out in topological order
    perm = sorted(range(len(nodes)), key=lambda i: order[id(graph.nodes[i])])
    rank = {i: k for k, i in enumerate(perm)}
    xs, ys = layered_layout(
        [widths[i] for i in perm], sorted({(rank[a], rank[b]) for a, b, _ in edges})
    )
    for i, record in enumerate(nodes):
        record.update(x=round(xs[rank[i]], 1), y=round(ys[rank[i]], 1), w=widths[i])
    return {"name": graph.name, "nodes": nodes, "edges": edges, "height": NODE_HEIGHT}


def _is_g(value) -> bool:
    from ..graph.ir import Graph

    return isinstance(value, Graph)


def _asset(name: str) -> str:
    return resources.files("ember.tools").joinpath("viz_assets", name).read_text()


def html(graph, path, phases: dict | None = None, title: str | None = None) -> str:
    """Write the interactive viewer of ``graph`` to ``path`` (see the module docstring)."""
    data = json.dumps(node_table(graph, phases), separators=(",", ":"))
    # the JSON sits inside a <script> element: no <, > or & may reach the HTML parser (not
    # only "</script>": "<!--" and "<script" change how it reads the rest); JSON.parse reads
    # the \\u escapes back
    data = data.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    title = html_escape(title or graph.name)
    parts = {"title": title, "css": _asset("viewer.css"), "js": _asset("viewer.js"), "data": data}
    # one pass, so a placeholder spelled inside the data or the assets is left alone
    page = re.sub(r"\{\{(title|css|js|data)\}\}", lambda m: parts[m[1]], _asset("viewer.html"))
    return _write_atomic(path, page.encode())
