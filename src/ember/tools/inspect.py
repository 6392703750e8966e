"""``ember inspect MODEL``: what ember knows about a model or a saved graph, on one page.

* A **built-in model** (`ember.models.EXAMPLE_STEPS`): its summary (tools/summary.py), the
  FLOPs of its reference training step by phase, module and family (tools/flops.py), the
  memory of that step by part and by layer (tools/memory.py), and the optimization passes'
  statistics of the compiled step (nodes before and after, time, per pass).
* A **graph file** (written by ``graph.save(path)``): node and op counts, FLOPs from the ops'
  cost rules (by family and module: a file records no phases), the memory plan of the graph as
  stored (a file does not say which inputs are parameters, optimizer state or the batch: they
  are all ``inputs``, and nothing is classed as saved activations), then the pass pipeline
  run on a copy and the plan of its result.

A missing file, a name that is neither a file nor a built-in model, and a corrupt or foreign
file each raise an `EmberError` naming the path and the problem; ``ember`` prints it on one
line and exits with status 2.
"""

from __future__ import annotations

import io
import os
from collections import Counter

from ..errors import EmberError

__all__ = ["InspectError", "add_parser", "inspect_graph_file", "inspect_model", "run"]


class InspectError(EmberError):
    """Nothing to inspect: no such built-in model or file."""


def _console(out):
    from rich.console import Console

    return Console(file=out, width=120, color_system=None, force_terminal=False, highlight=False)


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


def inspect_model(name: str, batch_size: int | None = None) -> str:
    """The page of built-in model ``name`` (see the module docstring)."""
    from ..capture.function import function
    from ..models import example_step
    from .flops import flops
    from .memory import memory
    from .summary import summary

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


def inspect_graph_file(path) -> str:
    """The page of the graph file at ``path`` (see the module docstring)."""
    from ..graph.load import load_graph
    from ..plan import plan_memory
    from ..transforms.pipeline import optimize
    from .flops import count_graphs
    from .memory_report import report_from_plan

    path = os.fspath(path)
    graph = load_graph(path)
    out = io.StringIO()
    console = _console(out)
    console.rule(f"{path}: graph {graph.name}", characters="=")
    _section(console, "nodes and ops")
    console.print(_op_counts(graph))
    _section(console, "FLOPs (the ops' cost rules; a graph file records no phases)")
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
        help="a built-in model's batch size (default: its own)",
    )


def run(args) -> int:
    from ..models import EXAMPLE_STEPS

    if args.model in EXAMPLE_STEPS:
        if args.batch_size is not None and args.batch_size < 1:
            raise InspectError(
                f"--batch-size must be at least 1, got {args.batch_size}", op="inspect"
            )
        print(inspect_model(args.model, args.batch_size))
        return 0
    if args.batch_size is not None:
        raise InspectError("--batch-size applies to the built-in models only", op="inspect")
    if not os.path.exists(args.model):  # a typo of a model name lands here too
        raise InspectError(
            f"{args.model}: no such file; MODEL is a graph file written by graph.save or one "
            f"of the built-in models {', '.join(EXAMPLE_STEPS)}",
            op="inspect",
        )
    if os.path.isdir(args.model):
        raise InspectError(f"{args.model} is a directory, not a graph file", op="inspect")
    print(inspect_graph_file(args.model))
    return 0
