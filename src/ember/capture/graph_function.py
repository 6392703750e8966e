"""`GraphFunction`: a captured call compiled to run, as ``ember.trace`` returns it and
``ember.function`` caches it per call signature.

It is made from the `CapturedCall` a trace recorded (capture/call.py) and the
`CompileOptions` (capture/compile.py), which compile it, unless the call leaves its backward to
eager autograd: then an `AutogradPlan` (capture/aot.py) runs the forward graph and puts the
backward on the tape. A call feeds each graph input from its `Feed`, runs the program, returns
the function's outputs as eager tensors and applies the writebacks (capture/state.py).

What it shows: ``.graph`` (what runs, after the passes), ``.captured_graph`` (as traced),
``.code`` (the generated Python), ``.graphs`` (the joint graph and, for a training step, its
AOT forward/backward partition), ``.parallel_plan``, ``.memory_plan`` (plan/program.py, which
reads it through `memory_parts`, `memory_layout` and `fed_arrays`), ``.pass_stats`` and
``.remat``.
"""

from __future__ import annotations

import contextlib
import functools
from operator import attrgetter

from ..errors import EmberError, ShapeError, TraceError
from ..graph.printer import format_type
from ..graph.tree import LEAF, tensor_leaves, unflatten
from ..kernels import cprepack
from ..kernels.conv_plan import charge_begin, charge_end
from ..ops._registry import apply
from ..plan.program import MemoryLayout, ProgramParts, plan_program, runner_held_bytes
from ..runtime.codegen import compile_graph
from ..symbolic import SymDim
from ..tensor import Tensor
from ..transforms.partition import partition
from ..transforms.pipeline import optimize
from .aot import eager_sources
from .call import ArgFeed, CapturedCall, TensorFeed
from .compile import CompileOptions, compile_call
from .signature import CallKey, explain
from .state import grad_signature, state_signature
from .writebacks import WritebackKind, apply_writebacks

__all__ = ["GraphFunction"]

_DATA = attrgetter("_data")
_ONE = object()  # `_out_shape` of a result that is one tensor


def _returned_inputs(call: CapturedCall) -> tuple:
    """(result position, feed, chain) of each of ``call``'s results that is a graph input fed
    by an argument or a captured tensor (not its gradient, a hyper-parameter or a cotangent),
    or a detach or view of one (``chain``: the alias and view nodes from it, in order), or a
    detach or view of the value a run writes into a captured tensor or argument
    (``m.weight.detach()`` after an optimizer's step). Each call gives the feed's eager tensor
    with the chain replayed on it (`_replay`): memory shared as PyTorch's results share it."""
    graph = call.graph
    position = {id(v): p for p, v in enumerate(graph.inputs)}
    written, k = {}, call.n_user  # id(value) -> the feed of the tensor it is written into
    for w in call.writebacks:
        if not w.takes_output:
            continue
        if w.kind is WritebackKind.DATA:
            written[id(graph.outputs[k])] = TensorFeed(w.tensor)
        elif w.kind is WritebackKind.ARG_DATA:
            written[id(graph.outputs[k])] = ArgFeed(w.value)
        k += 1
    # an eager tensor returned (captured state, an eager detach of it) that the graph reads
    # or writes: that tensor itself, which holds its new value once the run's writebacks ran
    state = {id(f.tensor) for f in call.feeds if type(f) is TensorFeed}
    state |= {id(w.tensor) for w in call.writebacks if w.kind is WritebackKind.DATA}
    found = [
        (i, TensorFeed(t), (), False)
        for i, t in enumerate(call.eager_results)
        if t is not None and id(t) in state
    ]
    done = {i for i, *_ in found}
    for i, v in enumerate(graph.outputs[: call.n_user]):
        if i in done:
            continue
        chain: list = []
        detached = i < len(call.detached) and call.detached[i]
        while True:
            p = position.get(id(v))
            aliased = chain or detached  # (a value written back, itself: a new tensor)
            feed = call.feeds[p] if p is not None else written.get(id(v)) if aliased else None
            if feed is not None:
                if type(feed) in (ArgFeed, TensorFeed):
                    found.append((i, feed, tuple(reversed(chain)), detached))
                break
            node = v.node
            if node is None or not _aliasing(node):
                break
            chain.append(node)
            v = node.inputs[0]
    return tuple(found)


def _aliasing(node) -> bool:
    """Whether ``node`` is a view or an alias (detach) of its one input, with concrete
    attributes, which an eager call of its op can replay."""
    op = node.op
    if op is None or len(node.inputs) != 1 or len(node.outputs) != 1:
        return False
    if not (op.view or op.aliases):
        return False
    return not any(isinstance(d, SymDim) for d in _flat(tuple(node.attrs.values())))


def _flat(values):
    for v in values:
        if isinstance(v, (tuple, list)):
            yield from _flat(v)
        else:
            yield v


def _replay(tensor, chain, detached: bool):
    """``tensor`` through ``chain``'s detaches and views, eagerly (sharing its memory), and
    detached where the function returned a detach."""
    for node in chain:
        if node.op.stops_gradient:
            tensor = tensor.detach()
            continue
        tensor = apply(node.op, tensor, **node.attrs)
        if isinstance(tensor, (tuple, list)):  # (a split into one piece: its one output)
            (tensor,) = tensor
    return tensor.detach() if detached else tensor


def _out_shape(spec):
    """What `GraphFunction.run` shapes a forward pass's results into: `_ONE`, ``tuple`` (a
    tuple of tensors), or the structure itself (graph/tree.py)."""
    if spec == LEAF:
        return _ONE
    if (
        isinstance(spec, tuple)
        and len(spec) == 2
        and spec[0] is tuple
        and all(s == LEAF for s in spec[1])
    ):
        return tuple
    return spec


class GraphFunction:
    """One captured call, compiled (see the module docstring). ``check``: the call's input
    arrays to verify each optimization pass on, or None."""

    def __init__(
        self, call: CapturedCall, options: CompileOptions, autograd=None, check: list | None = None
    ):
        self.call = call
        self.options = options
        self.executor = options.executor
        self.autograd = autograd  # an aot.AutogradPlan: run forward, keep the backward on the tape
        if autograd is None:
            compiled = compile_call(call, options, check)
            self.graph, self._program = compiled.graph, compiled.program
            self.pass_stats, self.remat = compiled.pass_stats, compiled.remat
            self.checkpoint = compiled.checkpoint
        elif options.memory_budget is not None:
            raise EmberError(
                "memory_budget applies to functions whose backward pass runs inside the graph "
                "(a training step calling loss.backward()); this one leaves it to eager autograd",
                op="memory_budget",
            )
        else:  # the AOT plan compiled the forward and backward graphs
            self.graph, self._program = call.graph, None
            self.pass_stats, self.remat = autograd.pass_stats, None
            self.checkpoint = autograd.checkpoint
        self._n_args = sum(1 for f in call.feeds if isinstance(f, ArgFeed))
        self._arg_values = None  # (`check`)
        # where each input's array comes from when every feed is an argument's or a captured
        # tensor's (a forward pass): the tensor whose data it is (None: an argument, taken
        # from the position ``_feed_args`` gives), read by one map over them per call
        self._feed_sources = self._feed_args = None
        if all(type(f) in (ArgFeed, TensorFeed) for f in call.feeds):
            self._feed_sources = [f.tensor if type(f) is TensorFeed else None for f in call.feeds]
            self._feed_args = [(i, f.index) for i, f in enumerate(call.feeds) if type(f) is ArgFeed]
        self._writes_data = any(
            w.kind in (WritebackKind.DATA, WritebackKind.ARG_DATA) for w in call.writebacks
        )
        # a call that may compute parameters' new values into their arrays uses no packed
        # weights (kernels/cprepack.py: their counters move only after the call)
        self._pause = cprepack.paused() if self._writes_data else contextlib.nullcontext()
        # a forward pass (no writebacks, no autograd, no modes to restore): `run` returns the
        # program's results as they are, shaped by ``_out_shape`` (`_ONE`: one tensor; tuple: a
        # tuple of tensors; else the structure)
        self._plain = not (autograd is not None or call.writebacks or call.modes)
        self._plain = self._plain and self._program is not None
        self._out_shape = _out_shape(call.out_spec)
        # results that are an argument or a captured tensor, unchanged (``return x, m.weight``):
        # each call returns that tensor itself, as an eager call does (and as PyTorch's
        # compiled functions do), not a new tensor over its memory
        self._returned_inputs = _returned_inputs(call)
        if self._returned_inputs:
            self._plain = False
        self._graphs = None
        self._memory_plan = None
        self._state_guard = None  # (argument names, the state's key when traced): guard_state
        # the size equalities a trace over symbolic sizes took (a SizeCheck, set by
        # capture/trace.py), checked on every call; None where it took none
        self.check_sizes = None
        # (module, attribute, size) the traced Python stored a symbolic size in: each call
        # sets its own (capture/size_checks.py)
        self.stored_sizes: list = []
        self._scratch: dict = {}  # the kernel scratch the latest call keeps (key -> bytes)
        # bytes the trace and compile left allocated (capture/trace.py measures them while
        # tracemalloc traces; None: not measured, `memory_layout` estimates them)
        self.compiled_bytes: int | None = None
        self.state_reads: dict = {}  # id -> (name, tensor): state values read while tracing
        self._estimated: int | None = None

    # ------------------------------------------------------------------------------ the call
    @property
    def captured_graph(self):
        """The graph as traced; ``graph`` is what runs, after the passes."""
        return self.call.graph

    @property
    def feeds(self) -> list:
        """The `Feed` of each graph input (capture/call.py)."""
        return self.call.feeds

    @property
    def captured(self) -> list:
        """The eager tensors fed as extra inputs."""
        return [f.tensor for f in self.call.feeds if isinstance(f, TensorFeed)]

    @property
    def writebacks(self) -> list:
        return self.call.writebacks

    @property
    def n_user(self) -> int:
        return self.call.n_user

    @property
    def out_spec(self):
        return self.call.out_spec

    @property
    def backward_start(self) -> int | None:
        """Where the recorded backward pass begins in the graph as traced (None without one,
        or when an AOT plan holds it)."""
        return self.call.backward_start

    @property
    def reach(self):
        """The state the trace found: memory plans (a budget's among them) name parameters,
        optimizer state and the batch by it."""
        return self.call.reach

    @property
    def reads_grads(self) -> bool:
        """Whether the trace read a .grad or ran backward: if not, ember.function caches the
        graph whatever the gradients are."""
        return self.call.reads_grads

    @property
    def program(self):
        """The executor's program of ``graph`` (runtime/executors.py), or None when an AOT plan
        runs the forward and backward graphs."""
        return self._program

    # ------------------------------------------------------------------------------ views
    @property
    def code(self) -> str:
        """The generated Python of this graph."""
        return self._program.source if self._program else compile_graph(self.graph).source

    @property
    def parallel_plan(self):
        """What the parallel executor runs concurrently and the predicted gain (a
        `runtime.parallel.ParallelPlan`; for a graph with an AOT backward, a dict of the forward's
        and the backward's). For another executor: the plan it would run."""
        if self.autograd is not None:
            return self.autograd.parallel_plans
        return self.options.runner.parallel_plan(self._program)

    @property
    def graphs(self) -> dict:
        """``'joint'``: the whole graph; with a recorded backward pass also its AOT partition,
        ``'forward'`` (returning the saved activations too) and ``'backward'``."""
        if self._graphs is None:
            self._graphs = {"joint": self.graph}
            if self.autograd is not None:
                self._graphs.update(forward=self.autograd.forward, backward=self.autograd.backward)
            elif self.call.backward_start is not None:  # positions refer to the graph as traced
                forward, backward = partition(self.call.graph, self.call.backward_start)
                if self.options.opt_level:
                    forward = optimize(forward, self.options.opt_level)[0]
                    backward = optimize(backward, self.options.opt_level)[0]
                self._graphs.update(forward=forward, backward=backward)
        return self._graphs

    # ------------------------------------------------------------------------------ memory
    @property
    def memory_plan(self):
        """The predicted peak memory of one call and its breakdown, before anything runs
        (plan/memory.py; `ember.plan.measure_peak` measures a call the same way)."""
        if self._memory_plan is None:
            self._memory_plan = plan_program(self)
        else:  # (what ember holds changes as calls run: the kernel scratch they keep)
            self._memory_plan.held = self._held()
        return self._memory_plan

    def _held(self) -> dict:
        """What ember holds for this program between calls, by part (plan/memory.py)."""
        program = self._program if self.autograd is None else self.autograd.forward_program
        runner = runner_held_bytes(program)
        # (the program's own bytes include its arena and the runner's arrays, which the plan
        # counts on their own)
        own = self.compiled_bytes if self.compiled_bytes is not None else self._estimate()
        itself = max(own - program.arena_bytes - runner, 0)
        held = {"kernel scratch": sum(self._scratch.values()), "compiled program": itself}
        return {part: b for part, b in held.items() if b}

    def _estimate(self) -> int:
        """The bytes of this program's own objects (graphs, generated code, kernels' wrappers,
        constants), from their sizes: what `compiled_bytes` measures when tracemalloc traced
        the compile (this estimate sees only what the program references, not the caches a
        compile fills)."""
        if self._estimated is None:  # (the program's objects do not change: once)
            reach = self.call.reach
            state = [] if reach is None else [o for _, o in reach.modules + reach.optimizers]
            self._estimated = _object_bytes(self, exclude=[reach, *state])
        return self._estimated

    def memory_parts(self) -> ProgramParts:
        """How the joint graph's inputs and outputs count in a memory plan (plan/program.py)."""
        return self.call.memory_parts()

    def memory_layout(self) -> MemoryLayout:
        """What a call runs, for its memory plan: the graph, or with an AOT backward the forward
        graph (its inputs keep the joint inputs' parts; its outputs get the planner's)."""
        parts = self.memory_parts()
        if self.autograd is None:
            program = self._program
            return MemoryLayout(
                self.graph,
                parts,
                program.in_place,
                program.arena,
                program.arena_bytes,
                self._held(),
                runner_held_bytes(program),
            )
        positions = self.autograd.forward_inputs  # joint input position of each forward input
        inputs = {j: parts.input_parts.get(p, "inputs") for j, p in enumerate(positions)}
        forward_parts = ProgramParts(inputs, {}, parts.n_user, parts.in_place)
        program = self.autograd.forward_program
        return MemoryLayout(
            self.autograd.forward, forward_parts, {}, None, program.arena_bytes, self._held()
        )

    def fed_arrays(self, *args, **kwargs) -> list:
        """The array each graph input gets in a call with these arguments (None for a
        cotangent, which the AOT backward feeds)."""
        leaves = _as_tensors(tensor_leaves((args, kwargs)))
        return [feed.array(leaves) for feed in self.call.feeds]

    # ------------------------------------------------------------------------------ running
    def run(self, leaves: list):
        """Run on the tensor arguments ``leaves`` (already checked) and apply the writebacks."""
        if self.check_sizes is not None:  # (a graph over symbolic sizes: capture/size_checks.py)
            self.check_sizes(leaves)
        if self._feed_sources is not None:  # (arguments and captured tensors only)
            sources = self._feed_sources[:]
            for i, j in self._feed_args:
                sources[i] = leaves[j]
            arrays = list(map(_DATA, sources))
        else:
            arrays = [feed.array(leaves) for feed in self.call.feeds]
        saved = None
        # (the kernel scratch the call keeps is this program's; no context managers: they
        # cost microseconds a small graph's call notices)
        outer = charge_begin(self._scratch)
        try:
            if self._writes_data:
                with self._pause:
                    if self.autograd is not None:
                        results, saved = self.autograd.run_forward(arrays)
                    else:
                        results = self._program(*arrays)
            elif self.autograd is not None:
                results, saved = self.autograd.run_forward(arrays)
            else:
                results = self._program(*arrays)
        finally:
            charge_end(self._scratch, outer)
        if self._plain:  # a forward pass: the results are the outputs, nothing to write back
            if len(results) != self.call.n_user:
                results = results[: self.call.n_user]
            if len(results) > 1 and len({id(r) for r in results}) < len(results):
                results = [
                    r if i == _first(results, r) else r.copy() for i, r in enumerate(results)
                ]
            shape = self._out_shape
            if shape is _ONE:
                return Tensor._wrap(results[0])
            if shape is tuple:
                return tuple(map(Tensor._wrap, results))
            outs = list(map(Tensor._wrap, results))
            return None if shape is None else unflatten(shape, outs)
        n_user = self.call.n_user
        user, extra = results[:n_user], results[n_user:]
        writebacks = self.call.writebacks
        fed = {id(a) for a in arrays} if writebacks else None
        if self._writes_data:  # an output viewing fed memory must not see the writebacks
            user = [r.copy() if r.base is not None or id(r) in fed else r for r in user]
        if len(user) > 1 and len({id(r) for r in user}) < len(user):  # each output its own
            user = [r if i == _first(user, r) else r.copy() for i, r in enumerate(user)]
        outs = [Tensor._wrap(r) for r in user]
        if saved is not None:
            sources = eager_sources(self.call.feeds, leaves)
            tensors = [sources[p] for p in self.autograd.wrt]
            self.autograd.attach(outs, arrays, saved, tensors, sources)
        if writebacks:  # (a forward pass has none)
            apply_writebacks(writebacks, extra, leaves, fed | {id(r) for r in user})
        for module, flag in self.call.modes:  # (``model.eval()`` inside the function)
            module.training = flag
        for i, feed, chain, detached in self._returned_inputs:
            outs[i] = _replay(feed.eager_tensor(leaves), chain, detached)
        return None if self.call.out_spec is None else unflatten(self.call.out_spec, outs)

    def check(self, leaves: list) -> None:
        """Raise a clear error unless ``leaves`` fit the traced argument types."""
        if len(leaves) != self._n_args:
            raise EmberError(
                f"{self.graph.name} was traced with {self._n_args} tensor arguments, got "
                f"{len(leaves)}",
                op="call",
            )
        bound: dict = {}
        if self._arg_values is None:  # (the graph's inputs the arguments feed: found once)
            inputs = zip(self.graph.inputs, self.call.feeds)
            self._arg_values = [v for v, feed in inputs if isinstance(feed, ArgFeed)]
        for value, arg in zip(self._arg_values, leaves):
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
        leaves = _as_tensors(tensor_leaves((args, kwargs)))
        self.check(leaves)
        if self._state_guard is not None:
            self._check_state(leaves)
        return self.run(leaves)

    def guard_state(self, leaves: list, names: list) -> None:
        """Refuse later calls once the state the trace read has changed (``ember.trace`` does
        this for a function with state; ``ember.function`` traces again instead). ``leaves``,
        ``names``: the traced call's tensor arguments and their names."""
        self._state_guard = (names, self._state_key(leaves, names))

    def _state_key(self, leaves, names) -> CallKey:
        reach = self.call.reach
        labels, values = state_signature(reach.refresh())
        if not self.call.reads_grads:
            return CallKey(labels, values)
        grad_labels, grad_values = grad_signature(reach, leaves, names)
        return CallKey(lambda: labels() + grad_labels(), values + grad_values)

    def _check_state(self, leaves) -> None:
        """A trace baked in Python facts about the state it read (which tensors had a .grad,
        which optimizer buffers existed, training flags); refuse to run once they changed."""
        names, traced = self._state_guard
        now = self._state_key(leaves, names)
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


def _object_bytes(root, exclude=()) -> int:
    """``sys.getsizeof`` summed over the objects ``root`` reaches (containers, instances,
    closures, generated functions and their namespaces, arrays' data), each once; not classes,
    modules, functions defined in files, ops, nor the ``exclude``d objects and eager tensors
    (the caller's state)."""
    import sys
    import types

    import numpy as np

    from ..ops._registry import OpDef

    shared = (type, types.ModuleType, types.BuiltinFunctionType, OpDef, Tensor)
    seen = {id(o) for o in exclude if o is not None}
    total, stack = 0, [root]
    while stack:
        o = stack.pop()
        if id(o) in seen or isinstance(o, shared):
            continue
        seen.add(id(o))
        if isinstance(o, types.FunctionType):
            generated = o.__code__.co_filename.startswith("<")
            if not generated and o.__closure__ is None:
                continue  # a function of a module: not the program's
            stack += [c.cell_contents for c in o.__closure__ or () if c.cell_contents is not None]
            stack += [o.__code__, o.__defaults__, o.__kwdefaults__]
            if generated:
                stack.append(o.__globals__)
        total += sys.getsizeof(o)
        if isinstance(o, np.ndarray):
            if o.base is not None:
                stack.append(o.base)
            elif not o.flags.owndata:
                continue
            continue
        if isinstance(o, dict):
            stack += list(o.keys()) + list(o.values())
        elif isinstance(o, (list, tuple, set, frozenset)):
            stack += list(o)
        elif isinstance(o, types.CodeType):
            stack += list(o.co_consts)
        elif isinstance(o, (functools.partial, types.MethodType)):
            stack += [getattr(o, a, None) for a in ("func", "args", "keywords", "__self__")]
        else:
            d = getattr(o, "__dict__", None)
            if isinstance(d, dict):
                stack.append(d)
            for cls in type(o).__mro__:
                for slot in cls.__dict__.get("__slots__", ()):
                    value = getattr(o, slot, None)
                    if value is not None and not isinstance(value, (int, float, str)):
                        stack.append(value)
    return total


def _as_tensors(leaves: list) -> list:
    return [t if isinstance(t, Tensor) else Tensor(t) for t in leaves]


def _first(arrays: list, array) -> int:
    return next(i for i, a in enumerate(arrays) if a is array)
