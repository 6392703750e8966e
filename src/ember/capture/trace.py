"""``ember.trace(fn, *example_inputs)``: capture a function or module into a graph function.

The function runs once with symbolic tensors in place of its tensor arguments (a `GraphBuilder`
records every op); Python values and Python control flow on them are baked in, while a use of a
tensor's value in Python raises `TraceError` at the user's line. Eager tensors the function
reads (a module's parameters, closed-over tensors) are captured as extra graph inputs and fed
with their current data at each call, so the graph follows later updates of those tensors.

A function may be a whole training step: what it changes (parameters updated in place, ``.grad``
set by ``loss.backward()``, optimizer buffers) is recorded as extra graph outputs and written
back after each run (capture/state.py), and the Python-level changes the trace itself made are
undone, so calling the result N times equals N eager steps. A function that does not run
backward itself but whose outputs need gradients gets an AOT backward graph (capture/aot.py).

`capture_call` does this for one call and is shared with ``ember.function``, which adds the
signature cache. It records a `CapturedCall` (capture/call.py) and compiles it with the
`CompileOptions` (capture/compile.py) into a `GraphFunction` (capture/graph_function.py), which
runs on the executor named by ``executor=`` (runtime/executors.py: ``"auto"``, the default,
which picks the fastest per graph, ``"codegen"``, ``"interpreter"``, ``"parallel"`` or
``"arena"``).
"""

from __future__ import annotations

import contextlib
import contextvars
import gc
import random
import tracemalloc
import warnings

import numpy as np

from ..errors import ShapeError, TraceError, user_location, user_stacklevel
from ..graph.builder import GraphBuilder
from ..graph.ir import Graph
from ..graph.traced_item import close_items, escaped_items, sizes_as_items
from ..graph.tree import flatten, replace_leaves
from ..ops import _registry as _reg
from ..optim.optimizer import HyperParameter
from ..runtime.executors import DEFAULT_EXECUTOR
from ..symbolic import SymDim
from ..symbolic_assumptions import example_sizes, recording, tracing_user_code
from ..tensor import Tensor
from ..types import TensorType
from .aot import AutogradPlan, add_backward, differentiable_inputs
from .call import (
    ArgFeed,
    ArgGradFeed,
    CapturedCall,
    CotangentFeed,
    GradOfFeed,
    HyperFeed,
    TensorFeed,
)
from .compile import DEFAULT_OPT_LEVEL, CompileOptions
from .graph_function import GraphFunction
from .signature import parameter_names, split_args
from .size_checks import SizeCheck
from .state import ARRAY_GUARD_LIMIT, check_found, discover, state_aliases, watching_grad_reads
from .undo import PythonGenerators
from .writebacks import Snapshot, plan_writebacks

__all__ = ["capture_call", "python_draws_refused", "trace"]

# whether a trace that draws from Python's or NumPy's global generators is refused (a
# TraceError: ember.compile then runs the call eagerly, drawing on each call as PyTorch does)
# rather than warned about (ember.function: the graph keeps the one draw)
_REFUSE_PYTHON_DRAWS: contextvars.ContextVar = contextvars.ContextVar(
    "ember_refuse_python_draws", default=False
)


@contextlib.contextmanager
def python_draws_refused():
    """Inside the block, a traced function's draws from Python's or NumPy's global random
    generators fail its capture (`_warn_python_draws`)."""
    token = _REFUSE_PYTHON_DRAWS.set(True)
    try:
        yield
    finally:
        _REFUSE_PYTHON_DRAWS.reset(token)


def capture_call(fn, args, kwargs, **options) -> GraphFunction:
    """Trace ``fn(*args, **kwargs)`` once into a `GraphFunction` (`_capture_call`), recording
    the size equalities the trace and the passes took for symbolic sizes, which every call of
    the result then checks (capture/size_checks.py)."""
    # (each symbol's size in this call: what the trace and the passes may ask of it)
    sizes = _example_sizes(options.get("specs"), options["leaves"], options["names"])
    with recording() as assumed, example_sizes(sizes):
        compiled = _capture_call(fn, args, kwargs, **options)
    check = SizeCheck(compiled.call.graph, compiled.call.feeds, tuple(assumed))
    check.stored = compiled.stored_sizes
    check.store(sizes)  # (the trace left the symbols there: this call's sizes instead)
    if check.needed:
        compiled.check_sizes = check
    return compiled


def _capture_call(
    fn,
    args,
    kwargs,
    *,
    leaves,
    names,
    reach,
    options: CompileOptions,
    specs=None,
    name=None,
    known=None,
    state_arguments=False,
) -> GraphFunction:
    """Trace ``fn(*args, **kwargs)`` once into a `GraphFunction` (shared by ``ember.trace`` and
    ``ember.function``). ``leaves``/``names``: the tensor arguments and their names (from
    `split_args`); ``state_arguments``: an argument that is a tensor of the state is traced as
    that tensor (``ember.function``, whose key records which one; a graph run later on other
    arguments, ``ember.trace``'s, keeps every argument an input); ``reach``: the state found
    by ``state.discover``; ``options``: how to
    compile it; ``specs``: a `TensorSpec` per leaf (None dimensions become symbolic sizes) or
    None for the leaves' own types; ``name``: the graph's; ``known``: {leaf index: array} of
    the arguments whose values the graph is specialized on (read as host data while tracing:
    `SymbolicTensor.host_value`; reading another argument's raises `NeedsArgumentValue`)."""
    start = _traced_bytes()
    graph_name = name or getattr(fn, "__name__", None) or type(fn).__name__
    large = [label for label, guard in reach.python_values if not guard.whole]
    if large:
        warnings.warn(
            f"{graph_name} reads the NumPy array {', '.join(large)} (over "
            f"{ARRAY_GUARD_LIMIT} elements): the graph bakes in its contents, and a change made "
            "in place is not seen (a new array is); pass it as a tensor argument instead",
            stacklevel=user_stacklevel(),
        )
    builder = GraphBuilder(Graph(graph_name if graph_name.isidentifier() else "graph"))
    builder.capture_names = {id(t): n for n, t in reach.refresh().named_tensors()}
    for prefix, opt in reach.optimizers:  # the inputs a scheduler's values are fed through
        for n, t in opt.hyperparameter_tensors():
            builder.capture_names[id(t)] = f"{prefix}_{n}" if prefix else n
    # an argument that is a tensor of the state (an optimizer's parameter passed to the step)
    # is traced as that tensor, as the optimizer and the modules see it: one value, updated
    # in place and given its .grad as state is (its graph input is fed from the tensor)
    aliased = (
        {i for i, k in enumerate(state_aliases(reach, leaves)) if k is not None}
        if state_arguments
        else set()
    )
    symbolic, arg_feeds, grad_args = _argument_inputs(builder, leaves, names, specs, aliased)
    for i, s in enumerate(symbolic):
        if i in aliased:
            continue
        builder.argument_values[id(s.value)] = i
        if known and i in known:
            builder.host_values[id(s.value)] = known[i]
    entry_values = [None if i in aliased else s.value for i, s in enumerate(symbolic)]
    call_args, call_kwargs = replace_leaves((args, kwargs), iter(symbolic))
    entry_arg_grads = {i: s.grad for i, s in grad_args}
    # the state's gradients as the trace finds them: one that it reads (``p.grad.norm()`` in
    # a step whose backward ran eagerly) is fed with its owner's .grad of each call, not with
    # this tensor (zero_grad, then an eager backward, makes a new one)
    entry_grads = {id(t.grad): t for _, t in reach.named_tensors() if isinstance(t.grad, Tensor)}
    snapshot = Snapshot(reach, fn)
    python_rng = _python_rng_state()
    generators = PythonGenerators()
    location = user_location()
    try:
        with watching_grad_reads() as grads_read, builder, tracing_user_code():
            out = fn(*call_args, **call_kwargs)
            out = sizes_as_items(out)  # (symbolic sizes among them: each call's number)
        _warn_python_draws(python_rng, graph_name, location)
        changed = snapshot.changed_groups()
        if changed:
            snapshot.undo_group_changes()
            raise TraceError(
                f"{graph_name} changes {changed[0]} while it is traced (a learning-rate "
                "scheduler stepped, or a param group set, inside the function): the graph "
                "does not run that Python code, so the change would happen once, not on every "
                "call; step the scheduler or set the hyper-parameters outside the function "
                "(each run reads them)",
                op="function",
            )
        # a graph that neither ran backward nor read a .grad is the same whatever the gradients
        reads_grads = grads_read[0] or builder.backward_start is not None
        out_leaves, out_spec = [], None
        if out is not None:
            # (None and Python values among the results are returned as they are)
            out_leaves, _, out_spec = flatten(
                out, "a traced function's results", constants=True, item_leaves=True, op="trace"
            )
        kept = escaped_items(builder, out)
        if kept:
            raise TraceError(
                f"{graph_name} keeps the .item() of {kept[0].location} outside its results "
                "(in a list, an attribute or a global): the graph runs without Python, so the "
                "number would be stored once, while tracing, not on each call; return it from "
                "the function instead (each call then returns the number)",
                op="function",
                location=kept[0].location,
            )
        stored_sizes = snapshot.stored_attribute_sizes()
        sizes = snapshot.stored_sizes(stored_sizes)
        if sizes:
            raise TraceError(
                f"{graph_name} stores a size that varies between calls in {sizes[0]} (a "
                "symbolic dimension of its input signature): the graph runs without Python, so "
                "the number would not be stored on each call; return it from the function, or "
                "trace with static sizes there",
                op="function",
            )
        user_values = [builder.value_of(t) for t in out_leaves]
        check_found(builder, reach, graph_name)
        # arguments changed in place (x.clamp_(0, 1), x[mask] = 0): their tensors take the
        # new values after each run, as an eager call leaves them
        updated = [
            (i, s)
            for i, s in enumerate(symbolic)
            if i not in aliased and s.value is not entry_values[i]
        ]
        # arguments the function made require grad (x.requires_grad_(); loss.backward()):
        # their tensors take the gradient (and the flag) after each run, as eagerly
        late = [
            (i, s)
            for i, s in enumerate(symbolic)
            if i not in aliased
            and s.requires_grad
            and not leaves[i].requires_grad
            and s.grad is not None
        ]
        writebacks, extra = plan_writebacks(
            builder, snapshot, reach, grad_args + late, entry_arg_grads, updated
        )
        modes = snapshot.changed_modes()
    except (TraceError, ShapeError):
        snapshot.undo()  # (the call runs again: eagerly, or traced otherwise)
        generators.restore()  # (and draws again what the trace drew)
        raise
    finally:
        close_items(builder)
        builder.restore_optimizers()  # those found are restored again by the snapshot
        snapshot.restore()
    graph = builder.graph
    for i, entry in entry_arg_grads.items():  # an argument's .grad nothing accumulated onto
        unused = entry is not None and not entry.value.users
        if unused and not any(entry.value is v for v in user_values + extra):
            graph.erase_node(entry.value.node)
            arg_feeds.remove(ArgGradFeed(i))
    feeds = _feeds_in_input_order(builder, arg_feeds, entry_grads)
    n_user, backward_start = len(user_values), builder.backward_start
    call = CapturedCall(
        graph,
        feeds,
        out_spec,
        n_user,
        writebacks,
        backward_start,
        reads_grads,
        reach,
        modes,
        tuple(_is_detach(t) for t in out_leaves),
        tuple(t if isinstance(t, Tensor) else None for t in out_leaves),
        tuple(builder.backward_roots),
    )
    autograd = None
    # (also under no_grad where a result was computed with grad enabled inside the function,
    # ``with torch.enable_grad():``, as eagerly it has a grad_fn)
    wants_grad = _reg.is_grad_enabled() or any(
        getattr(t, "_requires_grad", False) for t in out_leaves
    )
    if builder.backward_start is None and wants_grad:
        autograd = _aot_backward(builder, call, user_values + extra, leaves, options)
    if autograd is None:
        graph.set_outputs(user_values + extra)
    verifying = options.verify and autograd is None  # (an AOT plan checks its own graphs)
    check = [f.array(leaves) for f in call.feeds] if verifying else None
    compiled = GraphFunction(call, options, autograd, check)
    del check
    # the state tensors whose values Python read while tracing (``if self.initialized:``):
    # the graph holds the branch their values chose, so a cache keys it on them
    compiled.state_reads = {
        id(t): (builder.capture_names[id(t)], t)
        for t in builder.value_reads
        if id(t) in builder.capture_names
    }
    compiled.stored_sizes = stored_sizes
    end = _traced_bytes()
    if start is not None and end is not None:
        compiled.compiled_bytes = max(end - start, 0)
    return compiled


def _python_rng_state() -> tuple:
    """What tells whether Python's or NumPy's global random generator drew since."""
    _, keys, position, *_ = np.random.get_state()
    return random.getstate(), keys[:4].copy(), position


def _warn_python_draws(before: tuple, graph_name: str, location: str | None) -> None:
    """Warn when the traced function drew from Python's or NumPy's global random generators
    (``random.random() < teacher_forcing_ratio``): the draw happened once, while tracing, and
    every call of the graph repeats its outcome."""
    now = _python_rng_state()
    if now[0] == before[0] and np.array_equal(now[1], before[1]) and now[2] == before[2]:
        return
    where = f" (called at {location})" if location else ""
    if _REFUSE_PYTHON_DRAWS.get():
        raise TraceError(
            f"{graph_name}{where} draws from Python's random module or NumPy's global "
            "generator: a graph would hold the one draw made while tracing and repeat its "
            "outcome on every call",
            op="function",
        )
    warnings.warn(
        f"{graph_name}{where} drew from Python's random module or NumPy's global generator "
        "while it was traced: the graph holds that one draw, and every call repeats its "
        "outcome; draw with ember's generator inside the function (ember.rand(()) < p, with "
        "ember.where for the choice), or draw outside and pass the value as an argument",
        stacklevel=user_stacklevel(),
    )


def _traced_bytes() -> int | None:
    """tracemalloc's traced bytes after a garbage collection, or None when it is not tracing:
    around a trace, what the compiled program (and the caches its compile filled) keeps."""
    if not tracemalloc.is_tracing():
        return None
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


def _argument_inputs(builder, leaves, names, specs, aliased=()) -> tuple[list, list, list]:
    """A graph input per tensor argument, and one for the ``.grad`` of each argument that has
    one and requires grad (backward accumulates onto it). Returns (the symbolic arguments, the
    feeds of those inputs in order, (leaf index, symbolic argument) of the arguments requiring
    grad). The arguments at the positions in ``aliased`` are tensors of the state: the
    function gets the eager tensor itself, which the builder captures as state."""
    symbolic, feeds, grad_args = [], [], []
    for i, t in enumerate(leaves):
        if i in aliased:
            symbolic.append(t)
            continue
        shape = specs[i].symbolic_shape(names[i]) if specs else t.shape
        s = builder.input(TensorType(shape, t.dtype), names[i], t.requires_grad)
        feeds.append(ArgFeed(i))
        if t.requires_grad:
            grad_args.append((i, s))
            if t.grad is not None:
                s.grad = builder.input(TensorType(shape, t.dtype), f"{names[i]}_grad")
                feeds.append(ArgGradFeed(i))
        symbolic.append(s)
    return symbolic, feeds, grad_args


def _example_sizes(specs, leaves, names) -> dict:
    """{symbol: size} of this call's arguments, for each symbol a dimension names alone."""
    sizes: dict = {}
    for spec, t, name in zip(specs or (), leaves, names):
        for d, n in zip(spec.symbolic_shape(name), t.shape):
            symbol = d.symbol() if isinstance(d, SymDim) else None
            if symbol is not None:
                sizes.setdefault(symbol, int(n))
    return sizes


def _is_detach(t) -> bool:
    """Whether a result is a detach of a graph value (graph/symbolic_tensor.py's alias)."""
    view_of = getattr(t, "_view_of", None) if isinstance(t, _reg.TensorBase) else None
    return view_of is not None and view_of[1] is None


def _feeds_in_input_order(builder, arg_feeds: list, entry_grads: dict) -> list:
    """Every graph input's feed, in input order: the arguments' (``arg_feeds``, in their
    order) interleaved with the captured tensors' and their gradients' (those a recorded
    backward accumulated onto, and ``entry_grads``: {id(.grad): owner} of the state's at
    entry, read as they were)."""
    by_value = {
        id(v): HyperFeed(t) if isinstance(t, HyperParameter) else TensorFeed(t)
        for t in builder.captured
        if (v := builder.input_value(t))
    }
    by_value.update(
        (id(builder.input_value(t)), GradOfFeed(owner))
        for t in builder.captured
        if (owner := builder.grad_of.get(id(t), entry_grads.get(id(t)))) is not None
        and builder.input_value(t)
    )
    args = iter(arg_feeds)
    return [by_value[id(v)] if id(v) in by_value else next(args) for v in builder.graph.inputs]


def _aot_backward(builder, call: CapturedCall, forward_values, leaves, options):
    """Record the backward pass of ``call``'s outputs with respect to the eager tensors that
    require grad, and split it off (capture/aot.py); returns the `AutogradPlan`, or None when
    no output depends on such a tensor. The joint graph gains a cotangent input per floating
    output (fed by the backward pass) and the gradients as outputs after ``forward_values``."""
    graph = call.graph
    wrt = differentiable_inputs(graph, call.feeds, leaves)
    user_values = forward_values[: call.n_user]
    recorded = add_backward(builder, user_values, wrt) if wrt else None
    if recorded is None:
        return None
    start, cotangent_values, grads, unreached, connected = recorded
    cotangent_positions = [graph.inputs.index(c) for c in cotangent_values]
    call.feeds += [CotangentFeed(k) for k in range(len(cotangent_values))]
    graph.set_outputs(forward_values + grads)
    check = [f.array(leaves) for f in call.feeds] if options.verify else None
    n_forward = len(forward_values)
    return AutogradPlan(
        graph, start, n_forward, cotangent_positions, wrt, options, check, unreached, connected
    )


_NO_FN = object()


def trace(
    fn=_NO_FN,
    *example_inputs,
    name: str | None = None,
    executor: str = DEFAULT_EXECUTOR,
    opt_level=DEFAULT_OPT_LEVEL,
    verify: bool = False,
    input=_NO_FN,  # noqa: A002  (PyTorch's torch.trace(input=x))
):
    """Capture ``fn(*example_inputs)`` (a function, an nn.Module, or a whole training step)
    into a `GraphFunction`; or, called on a tensor (anything not callable: ``ember.trace(x)``,
    ``ember.trace(input=x)``), PyTorch's ``torch.trace``: the sum of a matrix's diagonal.

    Tensor arguments become graph inputs with their exact shapes and dtypes; other arguments are
    baked in as the Python values they are (call the result with the tensor arguments only).
    ``executor`` names how the graph runs (runtime/executors.py); ``opt_level`` (0..3) picks
    the optimization passes run on the graph; ``verify=True`` checks each pass against its
    input on the example inputs (transforms/pipeline.py).
    """
    if input is not _NO_FN:
        if fn is not _NO_FN:
            raise TypeError("trace() got both a positional argument and input=")
        fn = input
    if fn is _NO_FN:
        raise TypeError("trace() missing its first argument: a function to capture or a matrix")
    if not callable(fn):  # torch.trace(matrix)
        return _reg.PUBLIC["trace"](fn, *example_inputs)
    options = CompileOptions(executor, opt_level, verify)
    arg_names = parameter_names(fn)
    leaves, names, _ = split_args(example_inputs, {}, arg_names)
    reach = discover(fn, example_inputs, {}, arg_names)
    traced = capture_call(
        fn, example_inputs, {}, leaves=leaves, names=names, reach=reach, options=options, name=name
    )
    if traced.writebacks or reach.optimizers:  # a function with state: guard what it baked in
        # the state as it was: capture_call put back everything the trace changed
        traced.guard_state(leaves, names)
    return traced
