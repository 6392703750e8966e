"""``ember inspect MODEL``: what ember knows about a model or a saved graph, on one page.

* A **built-in model** (`ember.models.EXAMPLE_STEPS`): its summary (tools/summary.py), the
  FLOPs of its reference training step by phase, module and family (tools/flops.py), the
  memory of that step by part and by layer (tools/memory.py), and the optimization passes'
  statistics of the compiled step (nodes before and after, time, per pass).
* An **ONNX model** (``.onnx``; ``ember inspect`` routes it through ``ember.onnx``, a higher
  layer, which imports it and captures it at its declared input shapes, dynamic sizes set to
  ``--batch-size``): the same page as a graph file's, for the imported graph.
* A **graph file** (written by ``graph.save(path)``): node and op counts, FLOPs from the ops'
  cost rules (by family and module: a file records no phases), the memory plan of the graph as
  stored (a file does not say which inputs are parameters, optimizer state or the batch: they
  are all ``inputs``, and nothing is classed as saved activations), then the pass pipeline
  run on a copy and the plan of its result. A graph with symbolic sizes (a batch ``N``, as
  placeholders and ``ember.function`` make) is counted and planned with every symbol set to
  ``--batch-size`` (default 1: per sample), said on the page; byte counts are Python ints, so
  no size overflows.

A missing file, a name that is neither a file nor a built-in model, a corrupt or foreign file,
and a ``--batch-size`` whose training step would not fit in this machine's available memory
(estimated from the planner at batches 1 and 2, before anything that large is allocated) each
raise an `EmberError` naming the problem; ``ember`` prints it on one line and exits with
status 2.
"""

from __future__ import annotations

import io
import os
from collections import Counter

from ..errors import EmberError

__all__ = [
    "InspectError",
    "add_parser",
    "inspect_graph",
    "inspect_graph_file",
    "inspect_model",
    "run",
]


class InspectError(EmberError):
    """Nothing to inspect: no such built-in model or file."""


def _console(out):
    from rich.console import Console

    # markup off: names come from files, and "[/bold]" in one raised rich's MarkupError
    return Console(
        file=out, width=120, color_system=None, force_terminal=False, highlight=False, markup=False
    )


def _section(console, title: str) -> None:
    console.print()
    console.rule(title, characters="=")


def _pass_table(stats):
    """One row per pass: how many times it ran and changed the graph, the call nodes before
    its first run, the call nodes it removed over all its runs (fusion replaces groups by one
    node), its total time."""
    from rich.table import Table

    rows: dict[tuple, list] = {}
    for s in stats:
        row = rows.setdefault((s.graph, s.name), [0, 0, s.nodes_before, 0, 0.0])
        row[0] += 1
        row[1] += bool(s.changed)
        row[3] += s.nodes_before - s.nodes_after
        row[4] += s.seconds
    table = Table(title="optimization passes", title_justify="left")
    for column in ("Graph", "Pass", "Runs", "Changed", "Nodes before", "Removed", "Time"):
        table.add_column(column, justify="left" if column in ("Graph", "Pass") else "right")
    for (graph, name), (runs, changed, before, removed, seconds) in rows.items():
        cells = (runs, changed, before, removed)
        table.add_row(graph, name, *(str(c) for c in cells), f"{seconds * 1e3:.2f} ms")
    return table


def _flop_lines(counts, phases: bool) -> str:
    """The FLOP tables: by module and family with phases (a captured step), or one total per
    family and module (a graph file, which records no phases)."""
    from .flops import _human

    head = f"total {counts.total:,} FLOPs ({counts.macs:,} multiply-adds in products)"
    if phases:
        return "\n".join([head, counts.table("module"), "", counts.table("family")])
    lines = [head]
    for title, rows in (("family", counts.by_family), ("module", counts.by_module)):
        width = max([len(title)] + [len(k) for k in rows])
        lines += ["", f"{title:<{width}}  {'FLOPs':>12}"]
        ordered = sorted(rows.items(), key=lambda kv: -kv[1].total)
        lines += [f"{k:<{width}}  {_human(c.total):>12}" for k, c in ordered if c.total]
    return "\n".join(lines)


def _available_memory() -> int | None:
    """Bytes this machine can still give (MemAvailable), None when unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None


def _check_batch_fits(name: str, batch_size: int) -> None:
    """Refuse a batch whose training step would not fit in the available memory: the planned
    peak is affine in the batch, so batches 1 and 2 (planned, never run at size) give it."""
    from ..models import example_step
    from .memory import memory

    if batch_size <= example_step(name).x.shape[0]:
        return  # no larger than the model's own batch
    available = _available_memory()
    if available is None:
        return
    one, two = (memory(name, batch_size=b).peak_bytes for b in (1, 2))
    estimate = one + (batch_size - 1) * max(two - one, 0)
    if estimate > available:
        raise InspectError(
            f"--batch-size {batch_size}: one training step of {name} needs about "
            f"{_human_bytes(estimate)} (planned) but this machine has {_human_bytes(available)} "
            "available; choose a smaller batch",
            op="inspect",
        )


def _human_bytes(n: int) -> str:
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{n} B"


def inspect_model(name: str, batch_size: int | None = None) -> str:
    """The page of built-in model ``name`` (see the module docstring)."""
    from ..capture.function import function
    from ..models import example_step
    from .flops import flops
    from .memory import memory
    from .summary import summary

    if batch_size is not None:
        _check_batch_fits(name, batch_size)
    example = example_step(name, batch=batch_size)
    example.step()  # gradients and optimizer state exist, as in training
    out = io.StringIO()
    console = _console(out)
    console.rule(
        f"{name}: {type(example.model).__name__}, {type(example.optimizer).__name__}, "
        f"batch {tuple(example.x.shape)}",
        characters="=",
    )
    _section(console, "summary")
    result = summary(example.model, input_data=[example.x], verbose=False)
    console.print(result.table())
    console.print(result.totals_text())
    _section(console, "FLOPs of one training step")
    console.print(_flop_lines(flops(example.step), phases=True))
    _section(console, "memory of one training step (planned)")
    console.print(str(memory(name, batch_size=batch_size)))
    _section(console, "optimization of the training step")
    program = function(example.step, executor="interpreter").compile()
    captured = sum(1 for n in program.captured_graph.nodes if n.kind == "call")
    after = sum(1 for n in program.graph.nodes if n.kind == "call")
    console.print(f"call nodes: {captured} traced -> {after} after the passes")
    console.print(_pass_table(program.pass_stats))
    return out.getvalue().rstrip("\n")


def _op_counts(graph) -> str:
    kinds = Counter(n.kind for n in graph.nodes)
    ops = Counter(n.op.name for n in graph.nodes if n.kind == "call")
    lines = [
        f"{len(graph.nodes)} nodes: {kinds.get('call', 0)} calls, {kinds.get('input', 0)} "
        f"inputs, {kinds.get('constant', 0)} constants; {len(graph.outputs)} outputs; "
        f"{len(ops)} distinct ops"
    ]
    lines += [f"  {op:<24} {count:>6}" for op, count in ops.most_common()]
    return "\n".join(lines)


def _symbols(graph) -> set:
    from ..symbolic import SymDim

    found = set()

    def visit(value):
        if isinstance(value, SymDim):
            found.update(value.symbols())
        elif isinstance(value, (tuple, list)):
            for v in value:
                visit(v)
        elif _is_graph(value):
            found.update(_symbols(value))

    for node in graph.nodes:
        for v in node.outputs:
            visit(v.type.shape)
        for v in node.attrs.values():
            visit(v)
    return found


def _is_graph(value) -> bool:
    from ..graph.ir import Graph

    return isinstance(value, Graph)


def bind_sizes(graph, bindings: dict):
    """A copy of ``graph`` with every symbolic size evaluated under ``bindings`` (symbol ->
    size), in types, attributes and subgraphs; the copy is not verified."""
    from ..graph.ir import Graph
    from ..symbolic import resolve

    new = Graph(graph.name)
    env: dict[int, object] = {}
    for node in graph.nodes:
        types = [resolve(v.type, bindings) for v in node.outputs]
        names = [v.name for v in node.outputs]
        if node.kind == "input":
            copy = new.add_input(types[0], names[0]).node
        elif node.kind == "constant":
            copy = new.add_constant(graph.constants[node.name], names[0]).node
        else:
            attrs = {
                k: bind_sizes(v, bindings) if _is_graph(v) else resolve(v, bindings)
                for k, v in node.attrs.items()
            }
            inputs = [env[id(v)] for v in node.inputs]
            copy = new.add_call(node.op, inputs, attrs, out_types=types, names=names)
        copy.scope = node.scope
        env.update((id(a), b) for a, b in zip(node.outputs, copy.outputs))
    new.inputs = [env[id(v)] for v in graph.inputs]
    new.set_outputs([env[id(v)] for v in graph.outputs])
    return new


def _concrete(graph, path: str, size: int | None):
    """(graph with its symbolic sizes set to ``size`` (default 1), the line saying so)."""
    from ..graph._base import GraphError

    symbols = sorted(_symbols(graph))
    if not symbols:
        if size is not None:
            raise InspectError(
                f"--batch-size: {path} has no symbolic sizes to set (its sizes are fixed)",
                op="inspect",
            )
        return graph, None
    size = 1 if size is None else size
    bindings = dict.fromkeys(symbols, size)
    try:
        concrete = bind_sizes(graph, bindings).verify()
    except (GraphError, EmberError) as exc:
        raise InspectError(
            f"{path}: cannot set its symbolic sizes {', '.join(symbols)} to {size}: "
            f"{getattr(exc, 'detail', exc)}",
            op="inspect",
        ) from exc
    what = ", ".join(f"{s} = {size}" for s in symbols)
    hint = "" if size != 1 else " (per sample; --batch-size sets them)"
    return concrete, f"symbolic sizes counted as {what}{hint}"


def inspect_graph_file(path, batch_size: int | None = None) -> str:
    """The page of the graph file at ``path`` (see the module docstring); ``batch_size``: the
    value of its symbolic sizes (default 1)."""
    from ..graph.load import load_graph

    path = os.fspath(path)
    graph, note = _concrete(load_graph(path, runnable=False), path, batch_size)
    return inspect_graph(graph, f"{path}: graph {graph.name}", note)


def inspect_graph(graph, title: str, note: str | None = None) -> str:
    """The page of a graph with fixed sizes (a graph file's, or an imported ONNX model's):
    node and op counts, FLOPs, the memory plan as it is, the passes run on a copy."""
    from ..plan import plan_memory
    from ..transforms.pipeline import optimize
    from .flops import count_graphs
    from .memory_report import report_from_plan

    out = io.StringIO()
    console = _console(out)
    console.rule(title, characters="=")
    if note:
        console.print(note)
    _section(console, "nodes and ops")
    console.print(_op_counts(graph))
    _section(console, "FLOPs (the ops' cost rules; the graph records no phases)")
    console.print(_flop_lines(count_graphs({"forward": graph}), phases=False))
    _section(console, "memory plan of the graph as stored")
    console.print(
        "(a graph file does not say which inputs are parameters, optimizer state or the batch: "
        "all count as inputs)"
    )
    console.print(str(report_from_plan(plan_memory(graph), graph, description=graph.name)))
    _section(console, "optimization passes run on a copy")
    optimized, stats = optimize(graph.copy(), 3, label=graph.name)
    console.print(_pass_table(stats))
    plan = plan_memory(optimized)
    console.print(
        f"after the passes: {sum(1 for n in optimized.nodes if n.kind == 'call')} call nodes, "
        f"planned peak {plan.peak_bytes / 2**20:.2f} MiB"
    )
    return out.getvalue().rstrip("\n")


def add_parser(sub) -> None:
    from ..models import EXAMPLE_STEPS

    p = sub.add_parser(
        "inspect",
        help="summary, FLOPs, memory and optimization statistics of a model or graph file",
        description="Print what ember knows about a built-in model "
        f"({', '.join(EXAMPLE_STEPS)}): its summary, the FLOPs and planned memory of its "
        "training step (by part and by layer), and the optimization passes' statistics; or, "
        "for a graph file written by graph.save(path), its node and op counts, FLOPs, memory "
        "plan and the passes run on it.",
    )
    p.add_argument("model", metavar="MODEL", help="a built-in model name or a graph file path")
    p.add_argument(
        "--batch-size",
        type=int,
        default=None,
        help="a built-in model's batch size (default: its own), or the size a graph file's "
        "symbolic sizes are counted at (default: 1)",
    )


def run(args) -> int:
    from ..models import EXAMPLE_STEPS

    if args.batch_size is not None and args.batch_size < 1:
        raise InspectError(f"--batch-size must be at least 1, got {args.batch_size}", op="inspect")
    if args.model in EXAMPLE_STEPS:
        try:
            print(inspect_model(args.model, args.batch_size))
        except MemoryError as exc:  # (the estimate guards this; a safety net, not the plan)
            raise InspectError(
                f"--batch-size {args.batch_size}: the training step of {args.model} does not fit "
                "in memory; choose a smaller batch",
                op="inspect",
            ) from exc
        return 0
    if not os.path.exists(args.model):  # a typo of a model name lands here too
        raise InspectError(
            f"{args.model}: no such file; MODEL is a graph file written by graph.save or one "
            f"of the built-in models {', '.join(EXAMPLE_STEPS)}",
            op="inspect",
        )
    if os.path.isdir(args.model):
        raise InspectError(f"{args.model} is a directory, not a graph file", op="inspect")
    print(inspect_graph_file(args.model, args.batch_size))
    return 0
