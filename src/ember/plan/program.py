"""Memory plans of compiled programs, and the measured peak they are checked against.

`plan_program(graph_function)` plans the graph a `GraphFunction` runs, naming the parts of its
inputs and outputs from what the trace found: a module's parameters and buffers are
``parameters``, an optimizer's buffers ``optimizer state``, gradients (fed ``.grad`` arrays and
gradient writebacks) ``gradients``; the in-place updates are those the generated code chose.
For a function whose backward stays on eager autograd (AOT), the forward graph that runs at
the call is planned. In planned execution (``executor="arena"``) the buffers in the arena count
as one block held all the time (plan/arena.py) and fused loops reuse dying operands.

`measure_peak(fn, *args)` defines the *measured peak* of one call: the bytes of the distinct
arrays fed to the graph (parameters, optimizer state, gradients, the batch: alive when the call
starts) plus the largest increase of tracemalloc's traced memory during the call over its value
at the start (NumPy reports its allocations to tracemalloc), plus, in planned execution
(``executor="arena"``), the program's arena (allocated once, held between calls). Call once
before measuring, so that compiling is not measured.
"""

from __future__ import annotations

import tracemalloc

import numpy as np

from .memory import MemoryPlan, plan_memory

__all__ = ["Planner", "measure_peak", "plan_program", "state_parts"]


def state_parts(reach) -> dict:
    """id(tensor) -> part for the state a trace found (modules' tensors, optimizer buffers)."""
    parts = {}
    if reach is None:
        return parts
    for _, module in reach.modules:
        for _, t in module.named_parameters():
            parts[id(t)] = "parameters"
        for _, t in module.named_buffers():
            parts[id(t)] = "parameters"
    for _, opt in reach.optimizers:
        for group in opt.param_groups:
            for p in group["params"]:
                parts.setdefault(id(p), "parameters")
                for value in opt.state.get(p, {}).values():
                    if hasattr(value, "_data"):
                        parts[id(value)] = "optimizer state"
    return parts


def _parts(gf) -> tuple[dict, dict]:
    """(input position -> part, output position -> part) of `GraphFunction` ``gf``."""
    known = state_parts(getattr(gf, "reach", None))
    input_parts = {}
    for i, (kind, source) in enumerate(gf.feeds):
        if kind == "tensor":
            default = "parameters" if source.requires_grad else "inputs"
            input_parts[i] = known.get(id(source), default)
        elif kind in ("grad_of", "arg_grad"):
            input_parts[i] = "gradients"
    output_parts, k = {}, gf.n_user
    for w in gf.writebacks:
        if not w.takes_output:
            continue
        if w.kind in ("grad", "arg_grad"):
            output_parts[k] = "gradients"
        elif w.kind == "state":
            output_parts[k] = "optimizer state"
        else:
            output_parts[k] = known.get(id(w.tensor), "parameters")
        k += 1
    return input_parts, output_parts


class Planner:
    """graph -> MemoryPlan for graphs with the inputs and outputs of `GraphFunction` ``gf``
    (the graph it runs, or a rewrite of it such as rematerialization's): the parts of
    ``gf``, and the in-place updates the code generator would choose for that graph."""

    def __init__(self, gf, reuse: str = "codegen"):
        self.input_parts, self.output_parts = _parts(gf)
        self.inplace = gf._inplace()
        self.n_user = gf.n_user
        self.reuse = reuse

    def __call__(self, graph) -> MemoryPlan:
        from ..kernels.ccompile import compiler_available
        from ..runtime.codegen import _in_place_nodes

        # the nodes the code generator runs compiled (their hooks build C: none without a
        # compiler, where the NumPy kernels run and only one-ufunc nodes update in place)
        have_cc = compiler_available()
        compiled = {
            id(n): True
            for n in graph.nodes
            if have_cc and n.kind == "call" and n.op.extra.get("compile") is not None
        }
        in_place = _in_place_nodes(graph, self.inplace, compiled) if self.inplace else {}
        return plan_memory(
            graph,
            input_parts=self.input_parts,
            output_parts=self.output_parts,
            n_user=self.n_user,
            in_place=in_place,
            reuse=self.reuse,
        )


def plan_program(gf, reuse: str = "codegen") -> MemoryPlan:
    """The memory plan of `GraphFunction` ``gf`` (see the module docstring)."""
    if gf.autograd is not None:
        input_parts, _ = _parts(gf)
        forward = gf.autograd.forward
        parts = {j: input_parts.get(p, "inputs") for j, p in enumerate(gf.autograd.forward_inputs)}
        return plan_memory(forward, input_parts=parts, n_user=gf.n_user, reuse=reuse)
    input_parts, output_parts = _parts(gf)
    in_place = gf._compiled.in_place if gf._compiled is not None else {}
    arena = getattr(gf._compiled, "arena", None)
    return plan_memory(
        gf.graph,
        input_parts=input_parts,
        output_parts=output_parts,
        n_user=gf.n_user,
        in_place=in_place,
        reuse="planned" if arena is not None else reuse,
        arena=arena,
    )


def _distinct_bytes(arrays) -> int:
    """Bytes of the memory behind ``arrays``, each block counted once (views of one array)."""
    seen, total = set(), 0
    for a in arrays:
        if not isinstance(a, np.ndarray):
            continue
        base = a
        while isinstance(base.base, np.ndarray):
            base = base.base
        if id(base) not in seen:
            seen.add(id(base))
            total += base.nbytes
    return total


def measure_peak(fn, *args, **kwargs) -> int:
    """The measured peak of one call ``fn(*args, **kwargs)`` of an ``ember.function`` (see the
    module docstring), in bytes."""
    from ..capture.trace import _feed
    from ..graph.tree import tensor_leaves
    from ..tensor import Tensor

    gf = fn.compile(*args, **kwargs)
    leaves = tensor_leaves((args, kwargs))
    leaves = [t if isinstance(t, Tensor) else Tensor(t) for t in leaves]
    fed = [_feed(kind, source, leaves) for kind, source in gf.feeds if kind != "cotangent"]
    held = _distinct_bytes(fed)
    del fed
    # planned execution: the arena is allocated with the program and held between calls
    compiled = [gf._compiled] if gf._compiled is not None else []
    if gf.autograd is not None:
        compiled = [getattr(gf.autograd, "_run_forward", None)]
    held += sum(getattr(c, "arena_bytes", 0) for c in compiled)
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before, _ = tracemalloc.get_traced_memory()
        fn(*args, **kwargs)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        if started:
            tracemalloc.stop()
    return held + peak - before
