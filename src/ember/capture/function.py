"""``@ember.function``: trace on first call, cache one compiled graph per call signature.

The tf.function / torch.compile of ember. Calling a `Function`:

1. builds the call's key (capture/signature.py): tensor arguments by shape, dtype and
   requires_grad (or by the `TensorSpec` of ``input_signature``, whose ``None`` dimensions make
   the graph work for every size there, and requires_grad), Python arguments by value, and the
   state the function reaches (capture/state.py: module training flags, the optimizer's buffers and
   hyper-parameters, and which parameters have a gradient, though only for graphs that read a
   gradient or run backward: a forward pass is cached once whatever the gradients are);
2. on a new key, traces the function with a `GraphBuilder`: eager state is captured as graph
   inputs, in-place updates (``optimizer.step()``) and ``loss.backward()`` are recorded into
   the graph, and what the trace changed in Python (``.grad``, ``optimizer.state``) is turned
   into *writebacks* and undone;
3. runs the graph (by default on the executor runtime/auto.py picks for it: generated code,
   the C graph runner or parallel workers; or the one ``executor=`` names), returns the function's
   outputs as eager tensors, and applies the writebacks: new parameter values, gradients and
   optimizer buffers land where eager code would have put them. Calling a captured training
   step N times therefore equals N eager steps.

Building a key reads much of the state (the search of what the function reaches, every module
tree, every tensor's type); a call like one of the latest few skips it: the `CallGuard`
(capture/call_guard.py) of each of the `GUARDS` latest keys re-checks, cheaply, that everything
that key was built from is unchanged, and the first that holds runs its key's program (so calls
that alternate between a few signatures, a batch of 8 and one of 1, skip their keys too).

The cache is bounded, like ``torch.compile``'s (``torch._dynamo.config.cache_size_limit``):
a function keeps the ``cache_size`` most recently used programs (by default
`DEFAULT_CACHE_SIZE`, read whenever a trace is added, so setting
``ember.capture.function.DEFAULT_CACHE_SIZE`` affects existing functions too) and drops the
least recently used one when a new trace would exceed that (``fn.stats.evictions``); a later
call with a dropped signature traces again. Calls from several threads that need the same new
graph trace it once: the others wait for that trace and reuse it.

``fn.stats`` counts traces, cache hits and the reason for each retrace; after more than
`RETRACE_WARNING` retraces the function warns once, with the reasons. ``fn.graphs`` shows the
latest trace's graphs: the joint graph and, when it ran a backward pass, its AOT partition into
a forward graph (which also returns the activations the backward needs) and a backward graph.

A tensor argument the trace reads as host data (the lengths given to
``nn.utils.rnn.pack_padded_sequence``, a ``PackedSequence`` argument's batch sizes, an integer
argument's ``.tolist()``: `SymbolicTensor.host_value`) makes the function specialize on that
argument's value: the trace stops with `NeedsArgumentValue`, the argument joins the key by value
and the trace runs again with the value known, so each distinct value gets its own graph (as
torch.compile specializes), and a changed value retraces rather than reusing a wrong graph.

Python side effects other than those on tensors, gradients and optimizer state (printing,
appending to a list, a scheduler's step) happen once, while tracing: call them outside. A
module attribute set to a symbolic size (``self.seq_len = x.size(1)`` under an input
signature's ``None`` dimension) is set to each call's size (capture/size_checks.py); a symbolic
size kept anywhere else refuses the trace.
"""

from __future__ import annotations

import functools
import re
import threading
import warnings
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from .. import _meta, autograd
from ..errors import EmberError, NeedsArgumentValue, user_stacklevel
from ..graph.ir import Graph
from ..nn._tables import tables_version
from ..ops._autocast import state_key as autocast_state
from ..runtime.executors import DEFAULT_EXECUTOR
from ..tensor import Tensor
from .call_guard import CallGuard
from .compile import DEFAULT_OPT_LEVEL, CompileOptions
from .graph_function import GraphFunction
from .guards import Probes
from .signature import (
    CallKey,
    TensorSpec,
    explain,
    parameter_names,
    split_args,
    tensor_component,
)
from .state import discover, grad_signature, state_aliases, state_signature
from .trace import capture_call

__all__ = ["DEFAULT_CACHE_SIZE", "Function", "FunctionStats", "function", "RETRACE_WARNING"]
__all__ += ["reset_all"]

RETRACE_WARNING = 5
DEFAULT_CACHE_SIZE = 8  # programs a Function keeps when not given cache_size (see above)
_LIVE: weakref.WeakSet = weakref.WeakSet()  # every Function not yet collected, for `reset_all`


def reset_all() -> None:
    """`Function.reset` on every live function (``torch.compiler.reset``'s meaning)."""
    for fn in list(_LIVE):
        fn.reset()


GUARDS = 4  # the latest keys whose guards a call tries before building its key


@dataclass
class FunctionStats:
    """What a `Function` did: ``traces`` (graphs built), ``hits`` (calls that reused one),
    ``calls``, ``evictions`` (programs dropped from the bounded cache), and for each retrace
    (a trace after the first) the reason."""

    traces: int = 0
    hits: int = 0
    calls: int = 0
    evictions: int = 0
    retrace_reasons: list = field(default_factory=list)

    @property
    def retraces(self) -> int:
        return max(0, self.traces - 1)

    def __str__(self) -> str:
        lines = [f"{self.calls} calls, {self.traces} traces, {self.hits} cache hits"]
        if self.evictions:
            lines[0] += f", {self.evictions} programs evicted"
        lines += [f"  retrace {i + 1}: {r}" for i, r in enumerate(self.retrace_reasons)]
        return "\n".join(lines)


class Function:
    """A function (or nn.Module) compiled on demand; see the module docstring."""

    def __init__(
        self,
        fn,
        input_signature=None,
        executor: str = DEFAULT_EXECUTOR,
        name=None,
        opt_level=DEFAULT_OPT_LEVEL,
        verify: bool = False,
        memory_budget: int | None = None,
        cache_size: int | None = None,
        remat_policy=None,
    ):
        # checked now: a bad option fails here, not at the first call
        self.options = CompileOptions(executor, opt_level, verify, memory_budget, remat_policy)
        if cache_size is not None and (
            isinstance(cache_size, bool) or not isinstance(cache_size, int) or cache_size < 1
        ):
            raise ValueError(f"cache_size is a number of programs >= 1, got {cache_size!r}")
        self._cache_size = cache_size
        if input_signature is not None:
            input_signature = list(input_signature)
            for spec in input_signature:
                if not isinstance(spec, TensorSpec):
                    raise TypeError(f"input_signature holds ember.TensorSpec objects, got {spec!r}")
        self.fn = fn
        self.input_signature = input_signature
        self.name = name or getattr(fn, "__name__", None) or type(fn).__name__
        self.stats = FunctionStats()
        self._cache: OrderedDict[CallKey, GraphFunction] = OrderedDict()  # least recent first
        self._lock = threading.Lock()  # held while a trace is added: one trace per new key
        self._last_key: CallKey | None = None
        self._last_entry: GraphFunction | None = None
        # (guard, key) of the latest keys that had one, the most recent first; replaced, never
        # changed in place (calls from other threads read it without the lock)
        self._guards: list[tuple[CallGuard, CallKey]] = []
        self._warned = False
        self._arg_names = parameter_names(fn)
        # tensor arguments (by name) whose values a trace read as host data (the lengths of
        # packed sequences): part of the key by value, known to the trace (see `_entry`)
        self._by_value: set[str] = set()
        # state tensors (id -> (name, tensor)) whose values a trace read in Python (an ActNorm's
        # ``initialized`` flag): the graphs bake in the branch they chose, so the key holds them
        self._state_reads: dict[int, tuple] = {}
        functools.update_wrapper(self, fn, updated=())
        _LIVE.add(self)

    def reset(self) -> None:
        """Forget every captured program and what the traces learned about the arguments:
        the next call traces afresh (`reset_all`: every function's)."""
        with self._lock:
            self._cache.clear()
            self._guards = []
            self._last_key = self._last_entry = None
            self._by_value.clear()
            self._state_reads.clear()
            self._warned = False

    # the options as given (capture/compile.py `CompileOptions`)
    executor = property(lambda self: self.options.executor)
    opt_level = property(lambda self: self.options.opt_level)
    verify = property(lambda self: self.options.verify)
    memory_budget = property(lambda self: self.options.memory_budget)
    remat_policy = property(lambda self: self.options.remat_policy)

    @property
    def cache_size(self) -> int:
        """The most programs this function keeps (its ``cache_size``, else the module's
        `DEFAULT_CACHE_SIZE` now)."""
        return self._cache_size if self._cache_size is not None else int(DEFAULT_CACHE_SIZE)

    def __get__(self, obj, objtype=None):
        """As a method decorator: bind ``self`` (a Python-valued argument of the key)."""
        return self if obj is None else functools.partial(self.__call__, obj)

    # ------------------------------------------------------------------------------ keys
    def _key(self, leaves, names, structure, reach) -> CallKey:
        labels = ["the Python arguments and the arguments' structure", "grad mode"]
        values = [structure, autograd.is_grad_enabled()]
        specs = self.input_signature
        if specs is not None and len(specs) != len(leaves):
            raise EmberError(
                f"{self.name} has an input_signature of {len(specs)} tensors but was called "
                f"with {len(leaves)} tensor arguments",
                op="function",
            )
        for i, t in enumerate(leaves):
            spec = specs[i] if specs is not None else None
            if spec is not None:
                spec.check(t, f"argument {names[i]}")
            labels.append(f"argument {names[i]}")
            values.append(tensor_component(t, spec))
            if names[i] in self._by_value:
                labels.append(f"the value of argument {names[i]}")
                values.append(_value_component(t))
        for name, t in self._state_reads.values():
            labels.append(f"the value of {name} (read while tracing)")
            values.append(_value_component(t))
        # an argument that is a tensor of the state (an optimizer's parameter passed in) is
        # traced as that state tensor (capture/trace.py): which one is part of the key
        for i, k in enumerate(state_aliases(reach, leaves)):
            labels.append(f"argument {names[i]}: the position among the state's tensors")
            values.append(k)
        state_labels, state_values = state_signature(reach)
        return CallKey(
            lambda: labels + state_labels() + ["autocast"],
            values + state_values + [autocast_state()],
        )

    # ------------------------------------------------------------------------------ calls
    def __call__(self, *args, **kwargs):
        self.stats.calls += 1
        # (once any meta tensor exists in the process: a guard recorded the state's arrays,
        # which were not meta, by identity, so only the arguments need looking at on a hit;
        # the full path searches the state too)
        meta = _meta.active[0]
        guards = self._guards
        for k, (guard, key) in enumerate(guards):  # a call like a recent one: its program
            leaves = guard.leaves(args, kwargs)
            if leaves is not None:
                if meta and any(t.is_meta for t in leaves):
                    break  # (a meta argument of a recorded call's type: eager, below)
                self.stats.hits += 1
                if k:  # (tried first next time)
                    self._guards = [guards[k], *guards[:k], *guards[k + 1 :]]
                if guard.entry is not self._last_entry:  # the latest, as the key path does
                    self._last_key, self._last_entry = key, guard.entry
                    self._touch(guard.entry)
                return guard.entry.run(leaves)
        leaves, names, structure = split_args(args, kwargs, self._arg_names)
        if any(not isinstance(t, Tensor) for t in leaves):
            # called while another graph is being built: inline the function into that graph
            return self.fn(*args, **kwargs)
        if meta and any(t.is_meta for t in leaves):
            return self.fn(*args, **kwargs)  # (see `_entry`'s ``meta``)
        entry = self._entry(args, kwargs, leaves, names, structure, guard=True, meta=meta)
        if entry is None:
            return self.fn(*args, **kwargs)  # (the state it reads holds meta tensors)
        return entry.run(leaves)

    def compile(self, *args, **kwargs) -> GraphFunction:
        """Trace and compile for these arguments' signature without running; returns the
        compiled program (``.graph``, ``.code``, ``.pass_stats``: nodes before and after and
        the time of each optimization pass). A later call with that signature reuses it."""
        leaves, names, structure = split_args(args, kwargs, self._arg_names)
        leaves = [t if isinstance(t, Tensor) else Tensor(t) for t in leaves]
        return self._entry(args, kwargs, leaves, names, structure)

    def _entry(
        self, args, kwargs, leaves, names, structure, guard=False, meta=False
    ) -> GraphFunction | None:
        """The program for this call's key (traced if new); ``guard``: also record the
        `CallGuard` that lets the next call like this one skip its key; ``meta``: None where
        a tensor of the state the function reads (a model's parameters) is a meta tensor,
        which has no data for a program to run on: the caller runs the function eagerly, its
        ops inferring shapes (PyTorch's compiled functions run meta tensors through their
        shape rules too)."""
        version = tables_version()  # (before anything is read: a change meanwhile shows)
        # (the guard compares no tensor's value)
        guard = guard and not self._by_value and not self._state_reads
        probes = Probes() if guard else None
        reach = discover(self.fn, args, kwargs, self._arg_names, probes)
        if meta and any(t.is_meta for t in reach.state_tensors()):
            return None
        base = self._key(leaves, names, structure, reach)
        grad_labels, grad_values = grad_signature(reach, leaves, names)
        key = CallKey(lambda: list(base.labels) + grad_labels(), list(base.values) + grad_values)
        # (a guard compares arguments by type and shape, not whether they are state tensors)
        guard = guard and not any(k is not None for k in state_aliases(reach, leaves))
        if guard:  # (its facts as the key read them, before a trace or the run change any)
            guard = CallGuard.record(
                args,
                kwargs,
                leaves,
                names,
                reach,
                probes,
                version,
                self.input_signature,
                grad_values,
            )
        entry = self._lookup(base, key)
        if entry is None:
            with self._lock:  # one thread traces a new key; the others then find it
                entry = self._lookup(base, key)
                if entry is None:
                    try:
                        entry = self._add(base, key, args, kwargs, leaves, names, reach)
                    except NeedsArgumentValue as e:
                        # the trace read an argument as host data: specialize on its value
                        # (a graph per value, as torch.compile's specialization) and trace again
                        if e.argument is None or names[e.argument] in self._by_value:
                            raise
                        self._by_value.add(names[e.argument])
                        entry = None
                else:
                    self.stats.hits += 1
            if entry is None:
                return self._entry(args, kwargs, leaves, names, structure, guard, meta)
        else:
            self.stats.hits += 1
        self._last_key, self._last_entry = key, entry
        if self._by_value or self._state_reads:  # (a trace may just have found some)
            self._guards = []  # (guards compare no values: the keys now hold some)
        elif guard:
            others = [(g, k) for g, k in self._guards if g.entry is not entry]
            self._guards = [(guard.bind(entry), key), *others[: GUARDS - 1]]
        return entry

    def _touch(self, entry: GraphFunction) -> None:
        """Mark ``entry`` the most recently used of the cache (a guard ran it)."""
        try:
            for k, cached in reversed(self._cache.items()):
                if cached is entry:
                    self._cache.move_to_end(k)
                    return
        except (KeyError, RuntimeError):  # (another thread changed the cache meanwhile)
            pass

    def _lookup(self, base: CallKey, key: CallKey) -> GraphFunction | None:
        # a graph that reads no gradient is cached under the key without them (`base`)
        for k in (base, key):
            entry = self._cache.get(k)
            if entry is not None:
                try:
                    self._cache.move_to_end(k)  # the most recently used
                except KeyError:  # (evicted by another thread meanwhile: still usable)
                    pass
                return entry
        return None

    def _add(self, base, key, args, kwargs, leaves, names, reach) -> GraphFunction:
        """Trace for a new key (with the lock held) and cache the program, evicting the least
        recently used ones beyond `cache_size`."""
        reason = explain(key, self._last_key)
        entry = self._trace(args, kwargs, leaves, names, reach)
        self._state_reads.update(entry.state_reads)  # (later keys compare their values)
        self._cache[key if entry.reads_grads else base] = entry
        while len(self._cache) > self.cache_size:
            _, dropped = self._cache.popitem(last=False)
            self.stats.evictions += 1
            # (a dropped program is traced again when next needed, not run by its guard)
            self._guards = [(g, k) for g, k in self._guards if g.entry is not dropped]
        self.stats.traces += 1
        if self.stats.traces > 1:
            self.stats.retrace_reasons.append(reason)
            self._maybe_warn(dict(zip(names, (tuple(t.shape) for t in leaves))))
        return entry

    def _maybe_warn(self, shapes: dict) -> None:
        """Warn once past `RETRACE_WARNING` retraces; ``shapes``: the tensor arguments' shapes
        by name in the call that retraced (for the input_signature it suggests)."""
        if self.stats.retraces > RETRACE_WARNING and not self._warned:
            self._warned = True
            reasons = "; ".join(self.stats.retrace_reasons[-RETRACE_WARNING:])
            warnings.warn(
                f"ember.function {self.name} was traced {self.stats.traces} times; each "
                f"retrace builds and compiles a new graph (it keeps the {self.cache_size} most "
                f"recently used: cache_size=). Recent reasons: {reasons}."
                f"{_signature_hint(self.stats.retrace_reasons, shapes)} Pass changing Python "
                "numbers as tensors.",
                stacklevel=user_stacklevel(),
            )

    def _trace(self, args, kwargs, leaves, names, reach) -> GraphFunction:
        return capture_call(
            self.fn,
            args,
            kwargs,
            leaves=leaves,
            names=names,
            reach=reach,
            options=self.options,
            specs=self.input_signature,
            name=self.name,
            known={
                i: t.numpy(force=True).copy()
                for i, t in enumerate(leaves)
                if names[i] in self._by_value
            },
            state_arguments=True,
        )

    # ------------------------------------------------------------------------------ views
    def _latest(self) -> GraphFunction:
        if self._last_entry is None:
            raise EmberError(
                f"{self.name} has not been called yet, so it has no graph", op="function"
            )
        return self._last_entry

    @property
    def graph(self) -> Graph:
        """The graph of the latest call."""
        return self._latest().graph

    @property
    def graphs(self) -> dict:
        """The latest call's graphs: ``'joint'``, and ``'forward'`` / ``'backward'`` (the AOT
        partition) when the function ran a backward pass."""
        return self._latest().graphs

    @property
    def code(self) -> str:
        """The generated Python of the latest call's graph."""
        return self._latest().code

    @property
    def parallel_plan(self):
        """How the latest call's graph runs (`GraphFunction.parallel_plan`): with the default
        executor, what it chose and why (runtime/auto.py `Choice`)."""
        return self._latest().parallel_plan

    def __repr__(self) -> str:
        return f"<ember.function {self.name} ({self.executor}, {self.stats.traces} traces)>"


def _signature_hint(reasons: list, shapes: dict) -> str:
    """For retraces caused by changing sizes: the input_signature that would trace once, with
    None at each dimension that changed (``shapes``: the arguments' shapes by name)."""
    varying: dict = {}
    for reason in reasons:
        for name, axis in re.findall(r"argument (\w+): .*?dimension (\d+) changed", reason):
            if name in shapes and int(axis) < len(shapes[name]):
                varying.setdefault(name, set()).add(int(axis))
    if not varying:
        return ""
    specs = []
    for name, shape in shapes.items():
        dims = ["None" if i in varying.get(name, ()) else str(d) for i, d in enumerate(shape)]
        specs.append(f"ember.TensorSpec(({', '.join(dims)}{',' if len(dims) == 1 else ''}))")
    return (
        f" For sizes that vary (a batch), give input_signature=[{', '.join(specs)}] (in "
        "argument order): traced once with a symbolic size there, one graph serves every size."
    )


class _ArgumentValue:
    """A tensor argument by value (the arguments a trace read as host data): compared by
    dtype, shape and bytes, shown as its values in a retrace's reason."""

    __slots__ = ("array", "_facts")

    def __init__(self, array):
        self.array = array.copy()
        self._facts = (array.dtype.str, array.shape, array.tobytes())

    def __eq__(self, other) -> bool:
        return isinstance(other, _ArgumentValue) and self._facts == other._facts

    def __hash__(self) -> int:
        return hash(self._facts)

    def __repr__(self) -> str:
        return np.array2string(self.array, threshold=8, separator=", ")


def _value_component(t) -> tuple:
    return ("value", _ArgumentValue(t.numpy(force=True)))


def function(
    fn=None,
    *,
    input_signature=None,
    executor: str = DEFAULT_EXECUTOR,
    name=None,
    opt_level=DEFAULT_OPT_LEVEL,
    verify: bool = False,
    memory_budget: int | None = None,
    cache_size: int | None = None,
    remat_policy=None,
):
    """Compile ``fn`` on demand: ``@ember.function`` or ``ember.function(fn, input_signature=
    [ember.TensorSpec((None, 784))])``. ``opt_level`` 0..3 (or "O0".."O3") picks the
    optimization passes; ``verify=True`` checks each pass on the inputs of the call that traces
    and names the first pass that changes the results; ``memory_budget`` (bytes): when the
    planned peak of a call exceeds it, activations are recomputed in the backward pass until it
    fits (``fn.compile(...).remat`` reports what), or `MemoryBudgetError` states the minimum
    peak reachable; ``cache_size``: how many compiled programs (call signatures) to keep, the
    least recently used dropped first (default `DEFAULT_CACHE_SIZE`); ``remat_policy``: which
    forward values a training step saves for its backward pass, the others recomputed there
    (transforms/checkpoint.py: ``"nothing_saveable"``, ``"dots_saveable"``,
    ``ember.utils.checkpoint.save_only("matmul", "conv")``; inside
    ``ember.utils.checkpoint.checkpoint`` regions only, when the step has any). See
    `Function`."""
    args = (
        input_signature,
        executor,
        name,
        opt_level,
        verify,
        memory_budget,
        cache_size,
        remat_policy,
    )
    if fn is None:
        return lambda f: Function(f, *args)
    return Function(fn, *args)
