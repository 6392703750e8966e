"""The result of ``ember.tools.memory``: `MemoryReport`, its per-layer rows, and making one from
a memory plan (`report_from_plan`).

A `MemoryReport` gives

* ``peak_bytes`` and ``at_peak`` (bytes per part at the peak; they sum to the peak);
* each part's own largest size during the call, as practitioners count them: ``parameters``,
  ``gradients``, ``optimizer_state``, ``activations`` (forward values saved for the backward
  pass), ``temporaries`` (every other intermediate plus kernel workspace) and ``inputs`` (the
  batch). These do not sum to the peak: gradients grow while activations are freed;
* ``by_layer``: per module (the node scopes of graph/scope.py; a fused node is attributed
  through the values it computes, which keep their names): its own parameters, their
  gradients and optimizer state, the activations its nodes save, and the most of its nodes'
  temporaries (and workspace) alive at once;
* the what-if helpers ``with_batch_size``, ``with_dtype`` and ``with_checkpointing``: a report
  made from a model or function keeps its `Spec` (tools/memory_build.py), and each helper
  plans a changed copy of it (``spec.report()``); ``with_dtype(mode='amp')`` plans the step
  under ``ember.autocast`` (its casts, 16-bit values and float32 state).

This module imports neither the builder (memory_build.py) nor the entry points (memory.py,
whatif.py): they import it.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field, replace

import numpy as np

from .. import dtypes as dt
from ..graph import scope as _scope

__all__ = ["FIELDS", "LayerMemory", "MemoryReport", "report_from_plan"]

# planner part -> report field
FIELDS = {
    "parameters": "parameters",
    "gradients": "gradients",
    "optimizer state": "optimizer_state",
    "saved activations": "activations",
    "temporaries": "temporaries",
    "inputs": "inputs",
}
NO_MODULE = "(no module)"


@dataclass
class LayerMemory:
    """One module's share (see the module docstring); ``activations`` sum over layers to the
    saved activations of the step, ``temporaries`` is a largest-at-once, not a sum."""

    name: str
    parameters: int = 0
    gradients: int = 0
    optimizer_state: int = 0
    activations: int = 0
    temporaries: int = 0


@dataclass
class MemoryReport:
    """The memory of one call (see the module docstring). ``plan``: the planner's
    `MemoryPlan`; ``remat``: what activation checkpointing recomputed, if it ran."""

    description: str
    peak_bytes: int
    parameters: int
    gradients: int
    optimizer_state: int
    activations: int
    temporaries: int
    inputs: int
    at_peak: dict
    by_layer: dict
    plan: object = field(repr=False, default=None)
    batch_size: int | None = None
    dtype: str | None = None
    remat: object = field(repr=False, default=None)
    spec: object = field(repr=False, default=None)  # how to build it again (what-if helpers)
    runner: object = field(repr=False, default=None)  # () -> the ember.function that runs it
    args: tuple = field(repr=False, default=())  # the arguments it was planned for

    def measure(self) -> int:
        """Run the planned step (on the report's own copy of the model) and return its
        measured peak (``ember.plan.measure_peak``) in the steady state: two calls first,
        outside the measurement, compile the kernels and pack the weights (kernels/cprepack.py
        packs a weight's version on its second product)."""
        from ..plan import measure_peak

        if self.runner is None:
            raise ValueError("this report was made from a graph alone: there is nothing to run")
        fn = self.runner()
        for _ in range(2):
            fn(*self.args)
        return measure_peak(fn, *self.args)

    # ------------------------------------------------------------------ what-if
    def _rebuild(self, **changes) -> MemoryReport:
        if self.spec is None:
            raise ValueError(
                "this report was made from a graph alone; what-if helpers need the model or "
                "function: use ember.tools.memory(...)"
            )
        return replace(self.spec, **changes).report()

    def with_batch_size(self, batch_size: int) -> MemoryReport:
        """The same step planned at another batch size (every input and target whose first
        dimension is the batch is resized)."""
        return self._rebuild(batch_size=int(batch_size))

    def with_dtype(self, dtype, mode: str = "pure") -> MemoryReport:
        """The step in float16 / bfloat16 (any floating dtype). ``mode='pure'``: the model,
        its optimizer state and the floating inputs converted (as ``model.half()``), and the
        resulting program planned. ``mode='amp'``: the forward pass and the loss under
        ``ember.autocast(dtype=...)``, planned as it runs: float32 parameters, gradients and
        optimizer state, the 16-bit copies of the weights and the activations in the dtype
        each op's autocast policy gives (ember/amp.py)."""
        if mode == "pure":
            return self._rebuild(dtype=dtype)
        if mode == "amp":
            dtype = dt.as_dtype(dtype)
            if dtype not in (dt.bfloat16, dt.float16):
                raise ValueError(f"with_dtype(mode='amp'): bfloat16 or float16, got {dtype}")
            return self._rebuild(amp=dtype)
        raise ValueError(f"with_dtype: mode is 'pure' or 'amp', got {mode!r}")

    def with_checkpointing(self, budget_bytes: int | None = None, *, policy=None) -> MemoryReport:
        """The step with activations recomputed in the backward pass: until its planned peak
        fits ``budget_bytes`` (``ember.function(memory_budget=)``, transforms/remat.py;
        ``.remat`` says what was recomputed and its extra FLOPs; `MemoryBudgetError` with the
        lowest peak reachable when nothing fits), and/or saving only what ``policy`` saves
        (``ember.function(remat_policy=)``, transforms/checkpoint.py: ``"dots_saveable"``,
        ``"nothing_saveable"``, ``save_only("matmul", "conv")``; inside the step's checkpoint
        regions only, when it has any). A step whose model calls
        ``ember.utils.checkpoint.checkpoint`` is planned with its regions recomputed anyway."""
        if budget_bytes is None and policy is None:
            raise ValueError("with_checkpointing: give budget_bytes, policy, or both")
        budget = None if budget_bytes is None else int(budget_bytes)
        return self._rebuild(memory_budget=budget, remat_policy=policy)

    # ------------------------------------------------------------------ display
    def table(self):
        """The parts as a ``rich.table.Table``."""
        from rich.table import Table

        table = Table(title=f"peak {_bytes(self.peak_bytes)}", title_justify="left")
        table.add_column("Part")
        table.add_column("Largest", justify="right")
        table.add_column("At the peak", justify="right")
        table.add_column("Share of peak", justify="right")
        for part, name in FIELDS.items():
            here = self.at_peak.get(part, 0)
            share = here / self.peak_bytes if self.peak_bytes else 0.0
            table.add_row(part, _bytes(getattr(self, name)), _bytes(here), f"{share:.1%}")
        table.add_row("peak", "", _bytes(self.peak_bytes), "100.0%", style="bold")
        return table

    def layer_table(self):
        """``by_layer`` as a ``rich.table.Table`` (modules in first-use order)."""
        from rich.table import Table

        table = Table(title="per layer", title_justify="left")
        table.add_column("Layer")
        for column in ("Params", "Grads", "Optimizer", "Activations", "Temporaries"):
            table.add_column(column, justify="right")
        for row in self.by_layer.values():
            cells = (row.parameters, row.gradients, row.optimizer_state, row.activations)
            table.add_row(row.name, *(_bytes(c) for c in cells), _bytes(row.temporaries))
        return table

    def __str__(self) -> str:
        from rich.console import Console

        out = io.StringIO()
        console = Console(  # (markup off: layer names may come from files)
            file=out, width=120, color_system=None, force_terminal=False, markup=False
        )
        console.print(f"memory of {self.description}", highlight=False)
        console.print(self.table())
        if self.by_layer:
            console.print(self.layer_table())
        if self.remat is not None and self.remat.recomputed:
            console.print(str(self.remat).splitlines()[0])
        return out.getvalue().rstrip("\n")


def _bytes(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} B"


# ---------------------------------------------------------------------- from a plan
# byte counts are Python ints (object arrays): a graph may hold values of more than 2**63 bytes
# (a file's full((2**32, 2**32))), which int64 sums would overflow
_BYTES = object


def part_maxima(plan) -> tuple[dict, np.ndarray]:
    """(part -> its largest bytes at any node, workspace bytes per node) of a `MemoryPlan`."""
    n = len(plan.timeline)
    per_part = {part: np.zeros(n + 1, _BYTES) for part in FIELDS}
    for b in plan.buffers:
        if b.nbytes and n:
            diff = per_part[plan.part_of[b.index]]
            diff[max(b.start, 0)] += b.nbytes
            diff[min(b.end, n - 1) + 1] -= b.nbytes
    alive = {part: np.cumsum(d)[:n] for part, d in per_part.items()}
    held = sum(alive.values()) if n else np.zeros(0, _BYTES)
    workspace = np.asarray([int(t) for t in plan.timeline], _BYTES) - held
    alive["temporaries"] = alive["temporaries"] + workspace
    maxima = {part: int(a.max()) if n else 0 for part, a in alive.items()}
    if not n:  # a graph without nodes: everything is held
        for b in plan.buffers:
            maxima[plan.part_of[b.index]] += b.nbytes
    return maxima, workspace


def _layer_of(value, scopes: dict) -> str:
    scope = value.node.scope
    if scope is None:
        name = value.name[: -len("_remat")] if value.name.endswith("_remat") else value.name
        scope = scopes.get(name)
    return _scope.module_path(scope) or NO_MODULE


def scope_rows(plan, graph, scopes: dict, workspace) -> dict:
    """Per module: the saved activations its nodes make and the most of their temporaries
    (and workspace) alive at once. ``scopes``: value name -> scope of the graph as captured,
    before fusion made nodes that record none."""
    n = len(plan.timeline)
    rows: dict[str, LayerMemory] = {}
    temp: dict[str, np.ndarray] = {}
    order = sorted(
        (b for b in plan.buffers if b.start >= 0), key=lambda b: (b.start, b.index)
    )  # first-use order for the rows
    for b in order:
        part = plan.part_of[b.index]
        if part not in ("saved activations", "temporaries"):
            continue
        layer = _layer_of(b.owner, scopes)
        row = rows.setdefault(layer, LayerMemory(layer))
        if part == "saved activations":
            row.activations += b.nbytes
        else:
            diff = temp.setdefault(layer, np.zeros(n + 1, _BYTES))
            diff[b.start] += b.nbytes
            diff[min(b.end, n - 1) + 1] -= b.nbytes
    # the plan walks the graph in its node order: position p is graph.nodes[p]
    in_order = len(graph.nodes) == n
    for p, node in enumerate(graph.nodes if in_order else ()):
        if workspace[p] > 0 and node.outputs:
            layer = _layer_of(node.outputs[0], scopes)
            rows.setdefault(layer, LayerMemory(layer))
            diff = temp.setdefault(layer, np.zeros(n + 1, _BYTES))
            diff[p] += workspace[p]
            diff[p + 1] -= workspace[p]
    for layer, diff in temp.items():
        rows[layer].temporaries = int(np.cumsum(diff).max())
    return rows


def report_from_plan(plan, graph, *, description: str, scopes: dict | None = None, **extra):
    """A `MemoryReport` of a `MemoryPlan` of ``graph`` (whose node order it planned); per-layer
    rows from node scopes only (parameters and optimizer state need the objects: `memory`)."""
    maxima, workspace = part_maxima(plan)
    rows = scope_rows(plan, graph, scopes or {}, workspace)
    return MemoryReport(
        description=description,
        peak_bytes=plan.peak_bytes,
        **{name: maxima[part] for part, name in FIELDS.items()},
        at_peak=dict(plan.breakdown),
        by_layer=rows,
        plan=plan,
        **extra,
    )
