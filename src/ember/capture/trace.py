"""``ember.trace(fn, *example_inputs)``: capture a function or module into a graph function.

The function runs once with symbolic tensors in place of its tensor arguments (a `GraphBuilder`
records every op); Python values and Python control flow on them are baked in, while a use of a
tensor's value in Python raises `TraceError` at the user's line. Eager tensors the function
reads (a module's parameters, closed-over tensors) are captured as extra graph inputs and fed
with their current data at each call, so the graph follows later updates of those tensors.

A function may be a whole training step: what it changes (parameters updated in place, ``.grad``
set by ``loss.backward()``, optimizer buffers) is recorded as extra graph outputs and written
back after each run (capture/state.py), and the Python-level changes the trace itself made are
undone, so calling the result N times equals N eager steps.

`capture_call` does this for one call and is shared with ``ember.function``, which adds the
signature cache. The result, a `GraphFunction`, is callable with tensors of the traced types,
shows its ``.graph``, its generated Python ``.code`` and, for a training step, ``.graphs`` (the
AOT forward/backward partition); it runs on generated code (``executor="codegen"``, the
default), on the interpreter, on the parallel executor (``executor="parallel"``,
runtime/parallel.py: independent nodes on a thread pool where its cost model predicts a gain;
``.parallel_plan`` shows the plan), or on generated code writing into a planned arena
(``executor="arena"``, plan/arena.py).
"""

from __future__ import annotations

from ..errors import EmberError, ShapeError, TraceError
from ..graph import interpreter
from ..graph.builder import GraphBuilder
from ..graph.ir import Graph
from ..graph.printer import format_type
from ..graph.symbolic_tensor import SymbolicTensor
from ..graph.tree import flatten, replace_leaves, tensor_leaves, unflatten
from ..ops import _registry as _reg
from ..ops._registry import TensorType
from ..runtime.codegen import compile_graph
from ..symbolic import SymDim
from ..tensor import Tensor
from .signature import CallKey, explain, parameter_names, split_args

EXECUTORS = ("codegen", "interpreter", "parallel", "arena")  # arena: plan/arena.py
DEFAULT_OPT_LEVEL = 3  # transforms/pipeline.py: O3 runs every pass


def _feed(kind: str, source, leaves: list):
    """The array a graph input gets: the ``source``-th tensor argument ('arg') or its .grad
    ('arg_grad'), a captured tensor ('tensor') or the gradient a captured tensor has now
    ('grad_of': backward accumulates onto whatever .grad is at call time)."""
    if kind == "arg":
        return leaves[source]._data
    if kind == "arg_grad":
        return leaves[source].grad._data
    if kind == "grad_of":
        return source.grad._data
    if kind == "cotangent":
        return None  # fed by the backward pass (capture/aot.py), not by the call
    return source._data


class GraphFunction:
    """One captured call: its graph, how to feed it, and what to do with its outputs (see the
    module docstring). ``captured`` lists the eager tensors fed as extra inputs."""

    def __init__(
        self,
        graph,
        feeds,
        out_spec,
        n_user,
        writebacks,
        backward_start,
        executor,
        autograd=None,
        reads_grads=True,
        opt_level=0,
        check=None,
        memory_budget=None,
        reach=None,
    ):
        if executor not in EXECUTORS:
            raise ValueError(f"executor must be one of {EXECUTORS}, got {executor!r}")
        self.captured_graph = graph  # as traced; ``graph`` is what runs, after the passes
        # the state the trace found: memory plans (a budget's among them) name parameters,
        # optimizer state and the batch by it
        self.reach = reach
        self.opt_level = opt_level
        self.pass_stats = autograd.pass_stats if autograd is not None else []
        late = []  # under a memory budget: passes run after rematerialization (fusion)
        if opt_level and autograd is None:
            from ..transforms.pipeline import optimize, passes_for

            passes = passes_for(opt_level)
            if memory_budget is not None:
                from ..transforms.remat import split_late

                passes, late = split_late(passes)
            graph, self.pass_stats = optimize(
                graph.copy(), passes=passes, check=check, label="joint"
            )
        self.graph = graph
        self.executor = executor
        self.feeds = feeds  # per graph input: (kind, source) for `_feed`
        self.captured = [source for kind, source in feeds if kind == "tensor"]
        self.out_spec = out_spec
        self.n_user = n_user
        self.writebacks = writebacks
        self.backward_start = backward_start
        self._n_args = sum(1 for kind, _ in feeds if kind == "arg")
        self.autograd = autograd  # an aot.AutogradPlan: run forward, keep the backward on the tape
        codegen = executor in ("codegen", "arena") and autograd is None
        self.memory_budget = memory_budget
        self.remat = None  # what a memory budget recomputed (transforms/remat.py)
        if memory_budget is not None:
            self._fit_budget(int(memory_budget), late)
            graph = self.graph
        arena = executor == "arena"
        self._compiled = compile_graph(graph, self._inplace(), arena) if codegen else None
        if executor == "parallel" and autograd is None:
            from ..runtime.parallel import ParallelProgram

            self._compiled = ParallelProgram(graph, self._inplace())
        self._frees = None if self._compiled else interpreter.last_uses(graph)
        self._graphs = None
        # whether the trace read a .grad or ran backward: if not, the graph does not depend on
        # which tensors have gradients, and ember.function caches it regardless of them
        self.reads_grads = reads_grads
        self._state_guard = None  # (reachable state, its key when traced): set by `trace`
        self._writes_data = any(w.kind == "data" for w in writebacks)

    def _fit_budget(self, budget: int, late: list) -> None:
        """Rematerialize activations until the planned peak fits ``budget`` bytes, then run the
        ``late`` passes (fusion) on the result (transforms/remat.py `fit_budget`)."""
        from ..plan.program import Planner
        from ..transforms.remat import fit_budget

        if self.autograd is not None:
            raise EmberError(
                "memory_budget applies to functions whose backward pass runs inside the graph "
                "(a training step calling loss.backward()); this one leaves it to eager autograd",
                op="memory_budget",
            )
        self.graph, self.remat, stats = fit_budget(self.graph, budget, Planner(self), late)
        self.pass_stats = self.pass_stats + stats

    def _inplace(self) -> dict:
        """Output position -> input position for the 'data' writebacks of captured tensors:
        the generated code may compute those updates straight into the tensors' memory."""
        inputs = {id(source): i for i, (kind, source) in enumerate(self.feeds) if kind == "tensor"}
        pairs, k = {}, self.n_user
        for w in self.writebacks:
            if not w.takes_output:
                continue
            if w.kind == "data" and id(w.tensor) in inputs:
                pairs[k] = inputs[id(w.tensor)]
            k += 1
        return pairs

    @property
    def memory_plan(self):
        """The predicted peak memory of one call and its breakdown, before anything runs
        (plan/memory.py; `ember.plan.measure_peak` measures a call the same way)."""
        from ..plan import plan_program

        if getattr(self, "_memory_plan", None) is None:
            self._memory_plan = plan_program(self)
        return self._memory_plan

    @property
    def code(self) -> str:
        """The generated Python of this graph."""
        return (self._compiled or compile_graph(self.graph)).source

    @property
    def parallel_plan(self):
        """What the parallel executor runs concurrently and the predicted gain (a
        `runtime.parallel.ParallelPlan`; for a graph with an AOT backward, a dict of the forward's
        and the backward's). For another executor: the plan it would run."""
        if self.autograd is not None:
            return self.autograd.parallel_plans
        plan = getattr(self._compiled, "plan", None)
        if plan is None:
            from ..runtime.parallel import plan as make_plan

            plan = make_plan(self.graph)
        return plan

    @property
    def graphs(self) -> dict:
        """``'joint'``: the whole graph; with a recorded backward pass also its AOT partition,
        ``'forward'`` (returning the saved activations too) and ``'backward'``."""
        from ..transforms.partition import partition

        if self._graphs is None:
            self._graphs = {"joint": self.graph}
            if self.autograd is not None:
                self._graphs.update(forward=self.autograd.forward, backward=self.autograd.backward)
            elif self.backward_start is not None:  # positions refer to the graph as traced
                forward, backward = partition(self.captured_graph, self.backward_start)
                if self.opt_level:
                    from ..transforms.pipeline import optimize

                    forward = optimize(forward, self.opt_level)[0]
                    backward = optimize(backward, self.opt_level)[0]
                self._graphs.update(forward=forward, backward=backward)
        return self._graphs

    def run(self, leaves: list):
        """Run on the tensor arguments ``leaves`` (already checked) and apply the writebacks."""
        from .state import apply_writebacks

        arrays = [_feed(kind, source, leaves) for kind, source in self.feeds]
        saved = None
        if self.autograd is not None:
            results, saved = self.autograd.run_forward(arrays)
        elif self._compiled is not None:
            results = self._compiled(*arrays)
        else:
            results = interpreter.run(self.graph, arrays, frees=self._frees)
        user, extra = results[: self.n_user], results[self.n_user :]
        fed = {id(a) for a in arrays}
        if self._writes_data:  # an output viewing fed memory must not see the writebacks
            user = [r.copy() if r.base is not None or id(r) in fed else r for r in user]
        if len({id(r) for r in user}) < len(user):  # one array twice: each output its own
            user = [r if i == _first(user, r) else r.copy() for i, r in enumerate(user)]
        outs = [Tensor._wrap(r) for r in user]
        if saved is not None:
            from .aot import eager_sources

            sources = eager_sources(self.feeds, leaves)
            tensors = [sources[p] for p in self.autograd.wrt]
            self.autograd.attach(outs, arrays, saved, tensors, sources)
        apply_writebacks(self.writebacks, extra, leaves, fed | {id(r) for r in user})
        return None if self.out_spec is None else unflatten(self.out_spec, outs)

    def check(self, leaves: list) -> None:
        """Raise a clear error unless ``leaves`` fit the traced argument types."""
        if len(leaves) != self._n_args:
            raise EmberError(
                f"{self.graph.name} was traced with {self._n_args} tensor arguments, got "
                f"{len(leaves)}",
                op="call",
            )
        bound: dict = {}
        arg_values = [v for v, (kind, _) in zip(self.graph.inputs, self.feeds) if kind == "arg"]
        for value, arg in zip(arg_values, leaves):
            expected = value.type
            if arg.dtype != expected.dtype:
                raise EmberError(
                    f"argument %{value.name} expects {format_type(expected)}, got dtype "
                    f"{arg.dtype}",
                    op=self.graph.name,
                )
            ok = len(arg.shape) == len(expected.shape)
            for want, got in zip(expected.shape, arg.shape):
                if isinstance(want, SymDim):
                    ok = ok and bound.setdefault(want, got) == got
                else:
                    ok = ok and want == got
            if not ok:
                raise ShapeError(
                    f"argument %{value.name} expects {format_type(expected)}, got shape "
                    f"{tuple(arg.shape)}",
                    op=self.graph.name,
                )

    def __call__(self, *args, **kwargs):
        leaves = tensor_leaves((args, kwargs))
        leaves = [t if isinstance(t, Tensor) else Tensor(t) for t in leaves]
        self.check(leaves)
        if self._state_guard is not None:
            self._check_state(leaves)
        return self.run(leaves)

    def _check_state(self, leaves) -> None:
        """A trace baked in Python facts about the state it read (which tensors had a .grad,
        which optimizer buffers existed, training flags); refuse to run once they changed."""
        reach, names, traced = self._state_guard
        now = _guard_key(reach, leaves, names, self.reads_grads)
        if now != traced:
            raise TraceError(
                f"{self.graph.name} was traced when its state was different ("
                f"{explain(now, traced)}); a trace is one fixed graph. Use ember.function, "
                "which traces again when the state changes, or trace after the state has "
                "settled (e.g. after one eager training step)",
                op=self.graph.name,
            )

    def __repr__(self) -> str:
        return f"<GraphFunction {self.graph.name} ({self.executor})>"


def _first(arrays: list, array) -> int:
    return next(i for i, a in enumerate(arrays) if a is array)


def capture_call(
    fn,
    args,
    kwargs,
    *,
    leaves,
    names,
    reach,
    specs=None,
    executor="codegen",
    name=None,
    opt_level=DEFAULT_OPT_LEVEL,
    verify=False,
    memory_budget=None,
) -> GraphFunction:
    """Trace ``fn(*args, **kwargs)`` once into a `GraphFunction` (shared by ``ember.trace`` and
    ``ember.function``). ``leaves``/``names``: the tensor arguments and their names (from
    `split_args`); ``reach``: the state found by ``state.discover``; ``specs``: a `TensorSpec`
    per leaf (None dimensions become symbolic sizes) or None for the leaves' own types.
    ``opt_level``: the pass pipeline run on the captured graphs (transforms/pipeline.py);
    ``verify``: check every pass on this call's inputs; ``memory_budget``: bytes the planned
    peak must fit (transforms/remat.py)."""
    from .state import Snapshot, check_found, plan_writebacks, watching_grad_reads

    graph_name = name or getattr(fn, "__name__", None) or type(fn).__name__
    builder = GraphBuilder(Graph(graph_name if graph_name.isidentifier() else "graph"))
    builder.capture_names = {id(t): n for n, t in reach.refresh().named_tensors()}
    symbolic, feeds, grad_args = [], [], []
    for i, t in enumerate(leaves):
        shape = specs[i].symbolic_shape(names[i]) if specs else t.shape
        s = builder.input(TensorType(shape, t.dtype), names[i], t.requires_grad)
        feeds.append(("arg", i))
        if t.requires_grad:
            grad_args.append((i, s))
            if t.grad is not None:  # backward accumulates onto the argument's gradient
                s.grad = builder.input(TensorType(shape, t.dtype), f"{names[i]}_grad")
                feeds.append(("arg_grad", i))
        symbolic.append(s)
    call_args, call_kwargs = replace_leaves((args, kwargs), iter(symbolic))
    entry_arg_grads = {i: s.grad for i, s in grad_args}
    snapshot = Snapshot(reach)
    try:
        with watching_grad_reads() as grads_read, builder:
            out = fn(*call_args, **call_kwargs)
        # a graph that neither ran backward nor read a .grad is the same whatever the gradients
        reads_grads = grads_read[0] or builder.backward_start is not None
        out_leaves, out_spec = [], None
        if out is not None:
            out_leaves, _, out_spec = flatten(out, "a traced function's results", op="trace")
        user_values = [builder.value_of(t) for t in out_leaves]
        check_found(builder, reach, graph_name)
        writebacks, extra = plan_writebacks(builder, snapshot, reach, grad_args, entry_arg_grads)
    finally:
        builder.restore_optimizers()  # those found are restored again by the snapshot
        snapshot.restore()
    graph = builder.graph
    for i, entry in entry_arg_grads.items():  # an argument's .grad nothing accumulated onto
        unused = entry is not None and not entry.value.users
        if unused and not any(entry.value is v for v in user_values + extra):
            graph.erase_node(entry.value.node)
            feeds.remove(("arg_grad", i))
    # every graph input's feed, in input order: arguments, captured tensors, cotangents
    by_value = {id(v): ("tensor", t) for t in builder.captured if (v := builder.input_value(t))}
    by_value.update(
        (id(builder.input_value(t)), ("grad_of", owner))
        for t in builder.captured
        if (owner := builder.grad_of.get(id(t))) is not None
    )
    arg_feeds = iter(feeds)
    feeds = [by_value[id(v)] if id(v) in by_value else next(arg_feeds) for v in graph.inputs]
    autograd_plan = None
    if builder.backward_start is None and _reg.is_grad_enabled():
        from .aot import AutogradPlan, add_backward, differentiable_inputs

        wrt = differentiable_inputs(graph, feeds, leaves)
        recorded = add_backward(builder, user_values, wrt) if wrt else None
        if recorded is not None:
            start, cotangent_values, grads = recorded
            cotangent_positions = [graph.inputs.index(c) for c in cotangent_values]
            feeds += [("cotangent", k) for k in range(len(cotangent_values))]
            graph.set_outputs(user_values + extra + grads)
            joint_arrays = None
            if verify:
                joint_arrays = [_feed(k, s, leaves) if k != "cotangent" else None for k, s in feeds]
            autograd_plan = AutogradPlan(
                graph,
                start,
                len(user_values) + len(extra),
                cotangent_positions,
                wrt,
                executor,
                opt_level=opt_level,
                check=joint_arrays,
            )
    if autograd_plan is None:
        graph.set_outputs(user_values + extra)
    traced = GraphFunction(
        graph,
        feeds,
        out_spec,
        len(user_values),
        writebacks,
        builder.backward_start if autograd_plan is None else None,
        executor,
        autograd_plan,
        reads_grads,
        opt_level,
        [_feed(k, s, leaves) for k, s in feeds] if verify and autograd_plan is None else None,
        memory_budget,
        reach,
    )
    return traced


def trace(
    fn,
    *example_inputs,
    name: str | None = None,
    executor: str = "codegen",
    opt_level=DEFAULT_OPT_LEVEL,
    verify: bool = False,
):
    """Capture ``fn(*example_inputs)`` (a function, an nn.Module, or a whole training step)
    into a `GraphFunction`.

    Tensor arguments become graph inputs with their exact shapes and dtypes; other arguments are
    baked in as the Python values they are (call the result with the tensor arguments only).
    ``opt_level`` (0..3) picks the optimization passes run on the graph; ``verify=True`` checks
    each pass against its input on the example inputs (transforms/pipeline.py).
    """
    from .state import discover

    if executor not in EXECUTORS:
        raise ValueError(f"executor must be one of {EXECUTORS}, got {executor!r}")
    arg_names = parameter_names(fn)
    leaves, names, _ = split_args(example_inputs, {}, arg_names)
    reach = discover(fn, example_inputs, {}, arg_names)
    traced = capture_call(
        fn,
        example_inputs,
        {},
        leaves=leaves,
        names=names,
        reach=reach,
        executor=executor,
        name=name,
        opt_level=opt_level,
        verify=verify,
    )
    if traced.writebacks or reach.optimizers:  # a function with state: guard what it baked in
        # the state as it was: capture_call put back everything the trace changed
        traced._state_guard = (reach, names, _guard_key(reach, leaves, names, traced.reads_grads))
    return traced


def _guard_key(reach, leaves, names, reads_grads: bool):
    from .state import grad_signature, state_signature

    labels, values = state_signature(reach.refresh())
    if not reads_grads:
        return CallKey(labels, values)
    grad_labels, grad_values = grad_signature(reach, leaves, names)
    return CallKey(lambda: labels() + grad_labels(), values + grad_values)


__all__ = ["GraphFunction", "SymbolicTensor", "capture_call", "trace"]
