"""Building what ``ember.tools.memory`` plans: a `Spec` (the target and the options) becomes
a compiled program, its memory plan, and the `MemoryReport` with per-layer rows.

A module is copied (with its optimizer) before anything changes: converting the dtype,
resizing the batch and the warm-up step all act on the copy. The warm-up step (eager, on the
first two samples) creates the gradients and the optimizer state that a steady-state
training step holds; their shapes do not depend on the batch, so planning at any batch size
costs one small eager step and a compile, never a run at that size.
"""

from __future__ import annotations

import contextlib
import copy
import functools
from dataclasses import dataclass

import numpy as np

from ..errors import EmberError
from .memory_report import NO_MODULE, LayerMemory, MemoryReport, report_from_plan

__all__ = ["Spec", "analyse", "build_step"]

WARMUP_SAMPLES = 2


@dataclass(frozen=True)
class Spec:
    """What `ember.tools.memory` was asked (its arguments)."""

    target: object
    inputs: tuple = ()
    optimizer: object = None
    loss_fn: object = None
    targets: tuple = ()
    backward: bool = False
    batch_size: int | None = None
    dtype: object = None
    memory_budget: int | None = None
    remat_policy: object = None  # ember.function's (transforms/checkpoint.py), or None
    amp: object = None  # a 16-bit dtype: forward and loss under ember.autocast (float32 state)

    def report(self) -> MemoryReport:
        """The report of this spec (`analyse`): what a report's what-if helpers call on a
        changed copy of the spec it was made from."""
        return analyse(self)


def _mean_square(out, *targets):
    return (out * out).mean()


def _resized(t, batch: int, like: int):
    """``t`` with its first dimension ``like`` made ``batch`` (its rows repeated as needed)."""
    from ..tensor import Tensor

    if not isinstance(t, Tensor) or not t.shape or t.shape[0] != like or batch == like:
        return t
    data = t.numpy(force=True)
    rows = np.resize(data, (batch, *data.shape[1:]))
    # (a copy of its own: np.resize to fewer rows views a flat copy of all of them, which the
    # measured peak would count whole, four times a batch of 2 cut from 8)
    return Tensor(np.array(rows, dtype=data.dtype, copy=True), requires_grad=t.requires_grad)


def _converted(t, dtype):
    from ..tensor import Tensor

    if dtype is None or not isinstance(t, Tensor) or not t.dtype.is_floating_point:
        return t
    return t.detach().to(dtype)


def _named(spec: Spec) -> Spec:
    """A built-in model name as the module spec of its reference step."""
    from ..models import EXAMPLE_STEPS, example_step
    from ..nn import functional as F

    if spec.target not in EXAMPLE_STEPS:
        raise ValueError(
            f"memory: {spec.target!r} is not a built-in model; choose one of "
            f"{', '.join(EXAMPLE_STEPS)}, or pass a module or a function"
        )
    example = example_step(spec.target)
    targets = () if example.y is None else (example.y,)
    loss_fn = _mean_square if example.y is None else F.cross_entropy
    return Spec(
        example.model,
        (example.x,),
        example.optimizer,
        loss_fn,
        targets,
        False,
        spec.batch_size,
        spec.dtype,
        spec.memory_budget,
        spec.remat_policy,
        spec.amp,
    )


def build_step(spec: Spec):
    """(function to compile, its arguments, the model copy or None, the optimizer copy or
    None, a description) for ``spec``."""
    from ..autograd import no_grad
    from ..capture.function import Function
    from ..nn import Module

    if isinstance(spec.target, str):
        spec = _named(spec)
    target = spec.target
    args = list(spec.inputs) + list(spec.targets)
    batch = spec.batch_size
    first = next((t for t in spec.inputs if getattr(t, "shape", None)), None)
    if batch is not None:
        if first is None:
            raise ValueError("memory: batch_size needs a tensor input whose first dim is the batch")
        args = [_resized(t, int(batch), first.shape[0]) for t in args]
    if not isinstance(target, Module):
        if spec.dtype is not None or spec.optimizer is not None:
            raise ValueError(
                "memory: dtype and optimizer apply to modules (a function holds its own state); "
                "convert the model inside the function, or pass the module"
            )
        fn = target if isinstance(target, Function) else None
        label = getattr(target, "__name__", type(target).__name__)
        return fn, target, args, None, None, f"{label}({_shapes(args)})"

    model, optimizer = copy.deepcopy((target, spec.optimizer))
    if spec.dtype is not None:
        model.to(spec.dtype)
        args = [_converted(t, spec.dtype) for t in args]
        if optimizer is not None:
            for state in optimizer.state.values():
                for value in state.values():
                    if hasattr(value, "dtype") and value.dtype.is_floating_point:
                        value.data = value.to(spec.dtype)
    n_in = len(spec.inputs)
    loss_fn = spec.loss_fn or _mean_square
    region = contextlib.nullcontext
    if spec.amp is not None:  # the real autocast step: its casts and 16-bit values planned
        from ..amp import autocast

        if spec.dtype is not None:
            raise ValueError("memory: amp keeps the model in float32; give dtype or amp")
        region = functools.partial(autocast, "cpu", dtype=spec.amp)
    name = type(target).__name__

    if optimizer is not None:

        def step(*tensors):
            optimizer.zero_grad()
            with region():
                loss = loss_fn(model(*tensors[:n_in]), *tensors[n_in:])
            loss.backward()
            optimizer.step()
            return loss

        kind = f"training step ({type(optimizer).__name__})"
    elif spec.backward:

        def step(*tensors):
            model.zero_grad()
            with region():
                loss = loss_fn(model(*tensors[:n_in]), *tensors[n_in:])
            loss.backward()
            return loss

        kind = "forward and backward"
    else:

        def step(*tensors):
            with no_grad(), region():
                return model(*tensors[:n_in])

        kind = "forward (no_grad)"
    if optimizer is not None or spec.backward:
        rows = int(batch) if batch is not None else (first.shape[0] if first is not None else 0)
        step(*(t[:WARMUP_SAMPLES] if _batched(t, rows) else t for t in args))
    dtype = f", {spec.dtype}" if spec.dtype is not None else ""
    if spec.amp is not None:
        dtype = f", mixed precision {spec.amp.name}"
    return None, step, args, model, optimizer, f"{name} {kind} on {_shapes(args)}{dtype}"


def _batched(t, rows: int) -> bool:
    return bool(rows) and bool(getattr(t, "shape", None)) and t.shape[0] == rows


def _shapes(args) -> str:
    return ", ".join("x".join(map(str, t.shape)) or "scalar" for t in args if hasattr(t, "shape"))


def _value_scopes(graph) -> dict:
    scopes = {}
    for node in graph.nodes:
        if node.scope is not None:
            for v in node.outputs:
                scopes[v.name] = node.scope
    return scopes


def _codegen_function(step, memory_budget, remat_policy=None):
    """The generated code of ``step``, the program the report plans (the default executor may
    choose another, the C graph runner holding every intermediate value)."""
    from ..capture.function import function

    return function(
        step, executor="codegen", memory_budget=memory_budget, remat_policy=remat_policy
    )


def _given(fn):
    return fn


def analyse(spec: Spec) -> MemoryReport:
    """Build, compile and plan ``spec`` (see the module docstring)."""
    from ..capture.function import function
    from ..plan.program import Planner, plan_program

    fn, step, args, model, optimizer, description = build_step(spec)
    if fn is None:
        # planned on the interpreter's program: the same graph and plan as the code
        # generator's (the Planner decides in-place updates as codegen does), without building
        # any kernel; the generated code is built only to run it (``report.measure()``)
        budget, policy = spec.memory_budget, spec.remat_policy
        program = function(step, executor="interpreter", memory_budget=budget, remat_policy=policy)
        program = program.compile(*args)
        runner = functools.partial(_codegen_function, step, budget, policy)
    else:
        if spec.memory_budget is not None or spec.remat_policy is not None:
            raise ValueError(
                "memory: give memory_budget and remat_policy to ember.function itself for a "
                "compiled function"
            )
        program = fn.compile(*args)
        runner = functools.partial(_given, fn)
    if program.autograd is not None and (optimizer is not None or spec.backward):
        raise EmberError("the traced step left its backward pass to eager autograd", op="memory")
    if program.autograd is not None:  # backward left to eager autograd: the forward runs
        graph, plan = program.autograd.forward, plan_program(program)
    else:
        graph = program.graph
        plan = Planner(program.memory_parts())(graph) if fn is None else program.memory_plan
    first = next((t for t in args if getattr(t, "shape", None)), None)
    report = report_from_plan(
        plan,
        graph,
        description=description,
        scopes=_value_scopes(program.captured_graph),
        batch_size=int(first.shape[0]) if first is not None else None,
        dtype=_dtype_label(spec, args, model),
        remat=program.remat,
        spec=spec,
        runner=runner,
        args=tuple(args),
    )
    _add_state_rows(report, getattr(program, "reach", None), getattr(program, "feeds", ()))
    return report


def _dtype_label(spec: Spec, args, model) -> str | None:
    if spec.amp is not None:
        return f"amp {spec.amp.name}"
    return spec.dtype.name if spec.dtype is not None else _float_dtype(args, model)


def _float_dtype(args, model) -> str | None:
    tensors = list(model.parameters()) if model is not None else list(args)
    for t in tensors:
        if hasattr(t, "dtype") and t.dtype.is_floating_point:
            return t.dtype.name
    return None


def _add_state_rows(report: MemoryReport, reach, feeds=()) -> None:
    """Per-layer parameters, gradients and optimizer state, from the modules and optimizers
    the trace found (named as scopes name them: the root by its class name); the optimizers'
    hyper-parameters the graph reads (``feeds``: the program's, capture/call.py) count in the
    optimizer's row."""
    from ..capture.call import HyperFeed
    from ..graph.scope import OPTIMIZER

    if reach is None:
        return
    layer_of: dict[int, str] = {}
    rows = {}
    for _, root in reach.modules:
        for qualified, module in root.named_modules():
            path = f"{type(root).__name__}.{qualified}" if qualified else type(root).__name__
            row = rows.setdefault(path, LayerMemory(path))  # module order
            for t in [*module.parameters(recurse=False), *module.buffers(recurse=False)]:
                layer_of.setdefault(id(t), path)
                row.parameters += t.numel() * t.dtype.itemsize
    has_grads = report.gradients > 0
    for _, opt in reach.optimizers:
        for group in opt.param_groups:
            for p in group["params"]:
                row = rows.setdefault(layer_of.get(id(p), NO_MODULE), LayerMemory(NO_MODULE))
                if has_grads and p.requires_grad:
                    row.gradients += p.numel() * p.dtype.itemsize
                for value in opt.state.get(p, {}).values():
                    if hasattr(value, "numel"):
                        row.optimizer_state += value.numel() * value.dtype.itemsize
    for feed in feeds:
        if isinstance(feed, HyperFeed):  # a learning rate, a beta: a float64 scalar each
            row = rows.setdefault(OPTIMIZER, LayerMemory(OPTIMIZER))
            row.optimizer_state += feed.tensor.numel() * feed.tensor.dtype.itemsize
    if not reach.optimizers and has_grads:  # forward and backward: every trainable parameter
        for _, root in reach.modules:
            for p in root.parameters():
                if p.requires_grad:
                    rows[layer_of[id(p)]].gradients += p.numel() * p.dtype.itemsize
    merged = {}
    for name in [*rows, *report.by_layer]:
        if name in merged:
            continue
        row = rows.get(name, LayerMemory(name))
        scoped = report.by_layer.get(name)
        if scoped is not None:
            row.activations, row.temporaries = scoped.activations, scoped.temporaries
        if any((row.parameters, row.optimizer_state, row.activations, row.temporaries)):
            merged[name] = row
    report.by_layer = merged
