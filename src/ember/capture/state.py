"""The state a captured function reads and writes: modules, optimizers and their tensors.

A training step reads and changes more than its arguments: parameters (updated in place),
their ``.grad`` (set by backward, cleared by zero_grad), optimizer buffers (created on the first
step, updated after), BatchNorm running statistics, tensors a module keeps as plain attributes
(``self.hidden``, set in one call and read by the next). `ember.function` finds that state *before*
tracing, from where a function can reach it: its arguments, the object of a bound method, its
closure cells and the globals its code names, and one attribute level into plain objects
(a trainer holding ``.model`` and ``.opt``), and through the closures and globals of the plain
functions it names (a loss helper). It keeps the `Module`s and `Optimizer`s it finds (and the
optimizers an optimizer holds as attributes: SAM's ``base_optimizer``). An
optimizer that steps during the trace but was not found is an error (`check_found`): without
its state in the cache key, a cached graph could replay its first step forever.

Python values the function reads are baked into its graph (a global ``scale = 0.5``, an
attribute ``self.eps`` of the traced object, a closed-over float, a global NumPy array that an op
turns into a constant). `discover` also finds those: the globals, closure variables and
attributes (of the traced object, of plain objects it reaches, of what globals and closure
cells hold) that the function's code, or a helper's it names, *loads and never stores*, when
they hold numbers, strings, None, NumPy scalars or arrays, or small tuples, lists and dicts of
them (`PythonValue`, capture/guards.py). They are guarded: they enter the cache key by content,
so a change retraces with a reason ("global scale changed from 0.5 to 0.7"), as
``torch.compile``'s guards do. A NumPy array of more than `ARRAY_GUARD_LIMIT` elements is
guarded by identity, shape and dtype only; a trace that reads one warns that a change of its
contents in place is not seen.

This module owns two more things about that state:

* `state_signature`: the part of the cache key the state gives (training flags, which tensors
  have a gradient, the optimizer's buffers and the hyper-parameters its graph bakes in, the
  identity of every tensor), so a graph is reused only while the Python-level facts it baked
  in still hold (hyper-parameters a scheduler changes are graph inputs instead:
  optim/optimizer.py `Optimizer._hyper`, capture/call.py `HyperFeed`);
* `state_parts`: what each of its tensors counts as in a memory plan (parameters, optimizer
  state).

What the trace did to the state, and its replay after each run (`Snapshot`, `Writeback`,
`plan_writebacks`, `apply_writebacks`), is capture/writebacks.py's.
"""

from __future__ import annotations

import contextlib
import types
from dataclasses import dataclass, field

from ..errors import TraceError
from ..graph.symbolic_tensor import SymbolicTensor
from ..nn.module import Module
from ..optim.optimizer import Optimizer
from ..tensor import GRAD_PROPERTY, GRAD_SLOT, Tensor
from .guards import (
    ARRAY_GUARD_LIMIT,
    MISSING,
    Probes,
    PythonValue,
    _reads,
    guards_number,
    python_value,
)
from .hook_key import hooks_of

__all__ = [
    "ARRAY_GUARD_LIMIT",
    "PythonValue",
    "Reachable",
    "discover",
    "grad_signature",
    "state_aliases",
    "state_parts",
    "watching_grad_reads",
    "state_signature",
]


def _walk(module: Module, named: bool = True) -> list:
    """(path, module) of ``module`` and its submodules, each once, as ``named_modules`` orders
    them, without its nested generators; ``named=False``: paths are None (a call's key needs
    the modules, not their names, and reads them on every call)."""
    out, seen, stack = [], set(), [("", module)]
    while stack:
        path, m = stack.pop()
        if id(m) in seen:
            continue
        seen.add(id(m))
        out.append((path, m))
        children = m._modules
        if not children:
            continue
        if named:
            for name, child in reversed(children.items()):
                if child is not None:
                    stack.append((f"{path}.{name}" if path else name, child))
        else:
            stack.extend((None, c) for c in reversed(children.values()) if c is not None)
    return out


def tensor_attributes(module: Module) -> list:
    """(name, tensor) of the eager tensors ``module`` holds as plain attributes, directly or as
    the items of a tuple or list (``self.hidden = (h, c)``): ``hidden[0]``, ``hidden[1]``."""
    out = []
    for name, value in vars(module).items():
        if isinstance(value, Tensor):
            out.append((name, value))
        elif isinstance(value, (tuple, list)) and 0 < len(value) <= 16:
            out += [(f"{name}[{i}]", v) for i, v in enumerate(value) if isinstance(v, Tensor)]
    return out


@dataclass
class Reachable:
    modules: list  # [(name, Module)]: the top-level modules found
    optimizers: list  # [(name, Optimizer)]
    tensors: list  # [(name, Tensor)]: eager tensors found directly (globals, closure cells)
    # [(label, PythonValue)]: Python values the function's code reads (see the docstring)
    python_values: list = field(default_factory=list)
    _named: list | None = None
    _flags: list | None = None
    _tensors: list | None = None
    _walked: list | None = None

    def named_tensors(self) -> list:
        """Every eager tensor of the state with a readable name, without repeats (found once
        per `Reachable`: a call's key reads it twice)."""
        if self._named is None:
            self._named = self._find_tensors(named=True)
            self._tensors = [t for _, t in self._named]
        return self._named

    def state_tensors(self) -> list:
        """The tensors of `named_tensors`, in its order, found without making their names
        (what a call's key reads on every call; the names explain a retrace)."""
        if self._tensors is None:
            self._tensors = [t for _, t in self._find_tensors(named=False)]
        return self._tensors

    def refresh(self) -> Reachable:
        """Forget what `named_tensors` found (a `Reachable` kept across calls: the state may
        have gained tensors since, optimizer buffers for one)."""
        self._named = self._flags = self._tensors = self._walked = None
        return self

    def module_flags(self) -> list:
        """Per top-level module, the training flags of it and its submodules, in order."""
        self.state_tensors()
        return self._flags

    def walked_modules(self) -> list:
        """The modules whose training flags `module_flags` lists, in its order, flattened."""
        self.state_tensors()
        return self._walked

    def _find_tensors(self, named: bool) -> list:
        """(name, tensor) of the state's tensors; ``named=False``: names are None."""
        seen, found = set(), []

        def add(name, t):
            if isinstance(t, Tensor) and id(t) not in seen:
                seen.add(id(t))
                found.append((name, t))

        self._flags, self._walked = [], []
        for prefix, m in self.modules:
            # one walk of the module tree for its parameters, then its buffers, each in
            # named_parameters' and named_buffers' order
            walk = _walk(m, named)
            subs = [sub for _, sub in walk]
            flags = tuple(sub.training for sub in subs)
            # (and the attributes modules name in ``_graph_flags``: DDP's no_sync flag)
            extra = tuple(getattr(sub, n) for sub in subs for n in sub._graph_flags)
            # which modules the tree holds (``seq[1] = nn.Tanh()``) and their hooks: the
            # graph holds what they computed
            structure = (tuple(map(id, subs)), hooks_of(subs))
            self._flags.append((flags, extra, structure) if extra else (flags, structure))
            self._walked += subs
            if named:
                top = f"{prefix}." if prefix else ""  # the traced module itself: its own names
                walk = [(f"{top}{path}." if path else top, sub) for path, sub in walk]
            for key in ("_parameters", "_buffers"):
                for dot, sub in walk:
                    tensors = getattr(sub, key)
                    if not tensors:  # (most modules hold no buffers, activations nothing)
                        continue
                    for name, t in tensors.items():
                        if t is not None and id(t) not in seen and isinstance(t, Tensor):
                            seen.add(id(t))
                            found.append((dot + name if named else None, t))
            # tensors held as plain attributes (``self.hidden = h.detach()``): state too, so
            # the key sees them rebound and the graph reads their current values
            for dot, sub in walk:
                for name, t in tensor_attributes(sub):
                    add(dot + name if named else None, t)
        for prefix, opt in self.optimizers:
            for g, group in enumerate(opt.param_groups):
                for i, p in enumerate(group["params"]):
                    add(f"{prefix}.param{g}_{i}" if named else None, p)
                    # (the state of an optimizer whose step cannot be recorded is no graph's)
                    state = opt.state.get(p, {}) if opt.records_steps else {}
                    for key, value in state.items():
                        add(f"{prefix}.state{g}_{i}.{key}" if named else None, value)
        for name, t in self.tensors:
            add(name, t)
        return found


def _candidates(fn, args, kwargs, arg_names, probes: Probes | None = None):
    """(name, object, is_an_argument) triples a function can reach: see the module
    docstring. ``probes`` notes the reads (capture/guards.py)."""
    found = []
    target = fn
    if isinstance(fn, types.MethodType):
        found.append(("self", fn.__self__, False))
        target = fn.__func__
    if isinstance(fn, Module):
        found.append(("", fn, False))
        target = type(fn).forward
    code = getattr(target, "__code__", None)
    if code is not None:
        for name, cell in zip(code.co_freevars, target.__closure__ or ()):
            try:
                found.append(
                    (name, cell.cell_contents if probes is None else probes.cell(cell), False)
                )
            except ValueError:  # an empty cell
                pass
        globals_ = getattr(target, "__globals__", {})
        if probes is None:
            found += [(n, globals_[n], False) for n in code.co_names if n in globals_]
        else:
            found += [
                (n, v, False)
                for n in code.co_names
                if (v := probes.entry(globals_, n)) is not MISSING
            ]
        # the defaults of the parameters the call leaves out (``def step(x, model=model)``)
        # are reached as closure cells are
        given = set(arg_names[: len(args)]) | set(kwargs)
        n_positional = code.co_argcount
        defaults = getattr(target, "__defaults__", None) or ()
        names = code.co_varnames[n_positional - len(defaults) : n_positional]
        found += [(n, v, False) for n, v in zip(names, defaults) if n not in given]
        kwdefaults = getattr(target, "__kwdefaults__", None) or {}
        found += [(n, v, False) for n, v in kwdefaults.items() if n not in given]
    # tensors in the arguments are the graph's inputs, not state
    for i, a in enumerate(args):
        found.append((arg_names[i] if i < len(arg_names) else f"arg{i}", a, True))
    found += [(k, v, True) for k, v in kwargs.items()]
    return found


def _target(fn):
    """(the code object a call of ``fn`` runs, the object it is bound to or None, its closure
    and globals)."""
    target, owner = fn, None
    if isinstance(fn, types.MethodType):
        owner, target = fn.__self__, fn.__func__
    if isinstance(fn, Module):
        owner, target = fn, type(fn).forward
    return target, owner


def _user_code(function) -> bool:
    """Whether ``function`` is the user's (not ember's own library code)."""
    module = getattr(function, "__module__", None) or ""
    return module != "ember" and not module.startswith("ember.")


_METHODS: dict[tuple, tuple] = {}  # (class, attribute names) -> `_user_methods`


def _user_methods(cls, attrs: frozenset) -> tuple:
    """The user's methods of ``cls`` among the attribute names ``attrs`` (cached)."""
    methods = _METHODS.get((cls, attrs))
    if methods is None:
        if len(_METHODS) > 4096:
            _METHODS.clear()
        found = [getattr(cls, a, None) for a in sorted(attrs)]
        methods = _METHODS[(cls, attrs)] = tuple(
            m for m in found if isinstance(m, types.FunctionType) and _user_code(m)
        )
    return methods


def _plain_object(value) -> bool:
    """Whether ``value`` is a plain object whose attributes a graph may bake in (a module's
    ``config``), not a module, optimizer, tensor, function or class."""
    return (
        hasattr(value, "__dict__")
        and not callable(value)
        and not isinstance(value, (Module, Optimizer, Tensor, types.ModuleType))
    )


def _python_values(fn, probes: Probes | None = None) -> list:
    """(label, `PythonValue`) of the Python values ``fn``'s code reads (see the module
    docstring), and one level further: the code of the helper functions it names, of the
    methods it calls on the objects it reaches, and of the modules' ``forward``. ``probes``
    notes the reads (capture/guards.py)."""
    out, seen = [], set()

    def add(label, value):
        guard = python_value(value)
        if guard is not None and label not in seen:
            seen.add(label)
            out.append((label, guard))
            if probes is not None:
                probes.guarded(value, guard)

    def attributes(label, obj, attrs, depth, changed=frozenset(), inner=True):
        if isinstance(obj, (type, types.ModuleType, types.FunctionType, Tensor)):
            return
        own = getattr(obj, "__dict__", None)
        if isinstance(own, dict):
            if probes is not None:  # (an attribute set later would be read instead)
                for a in attrs | changed:
                    probes.entry(own, a)
            for a in sorted(attrs & own.keys()):
                value = own[a]
                add(f"{label}.{a}", value)
                if depth == 0 and isinstance(value, Module):
                    trees.append((f"{label}.{a}", value))
                elif inner and _plain_object(value):  # ``self.config.use_cache``
                    attributes(f"{label}.{a}", value, attrs, depth + 1, inner=False)
            for a in sorted(changed & own.keys()):  # (a counter or flag the code changes)
                if guards_number(own[a]):
                    add(f"{label}.{a}", own[a])
        if depth == 0:  # the object's own methods the code calls read its attributes too
            for method in _user_methods(type(obj), attrs):
                read(method, obj, label, 1)

    def read(target, owner, owner_label, depth):
        code = getattr(target, "__code__", None)
        if code is None:
            return
        names, attrs, cells, (changed_names, changed_attrs, changed_cells) = _reads(code)
        if owner is not None and (attrs or changed_attrs):
            attributes(owner_label, owner, attrs, depth, changed_attrs)
        globals_ = getattr(target, "__globals__", {})
        closure = target.__closure__ or ()

        def found(names, cells) -> list:
            if probes is None:
                values = [(label, globals_[n]) for n, label in names if n in globals_]
            else:
                values = [
                    (label, v)
                    for n, label in names
                    if (v := probes.entry(globals_, n)) is not MISSING
                ]
            for i, label in cells:
                try:
                    cell = closure[i]
                    contents = cell.cell_contents if probes is None else probes.cell(cell)
                    values.append((label, contents))
                except ValueError:  # an empty cell
                    pass
            return values

        values = found(names, cells)
        for label, value in found(changed_names, changed_cells):
            if guards_number(value):  # (a counter or flag the code changes)
                add(label, value)
        for label, value in values:
            if isinstance(value, types.FunctionType):  # a helper: what it reads counts too
                add(label, value)  # (and which function it is: a global rebound retraces)
                if depth == 0 and _user_code(value):
                    # (a module's helper, ``attend(self, x)``: its attribute reads are of
                    # the module, most likely)
                    read(value, owner, owner_label, 1)
                continue
            add(label, value)
            short = label.split(" ")[-1]
            if attrs:
                attributes(short, value, attrs, depth)
            if depth == 0 and isinstance(value, Module):
                trees.append((short, value))

    def submodules(label, module):
        # every user module of a tree the function reaches: the Python attributes its forward
        # reads (``self.causal`` of a nested block) are baked into the graph as the
        # function's own are. (Not ember's modules' settings, a loss's ``label_smoothing``:
        # reading them all on every call would cost more than their rare changes warrant)
        for path, sub in _walk(module):
            if id(sub) in read_modules:
                continue
            read_modules.add(id(sub))
            forward = type(sub).forward
            sub_label = f"{label}.{path}" if path else label
            if _user_code(forward):
                read(forward, sub, sub_label, 0)  # (and the methods it calls: ``self._mask``)

    trees: list = []
    read_modules: set = set()
    target, owner = _target(fn)
    if isinstance(owner, Module):
        trees.append(("self", owner))
        read_modules.add(id(owner))
    read(target, owner, "self", 0)
    for label, module in trees:
        submodules(label, module)
    return out


def discover(fn, args, kwargs, arg_names=(), probes: Probes | None = None) -> Reachable:
    """The state ``fn`` called with ``args`` and ``kwargs`` reaches (see the module
    docstring); ``probes``: notes every read of Python state the search makes, to check later
    that it would find the same (capture/call_guard.py)."""
    modules, optimizers, tensors, seen = [], [], [], set()

    def visit(name, obj, depth, from_args):
        if id(obj) in seen or isinstance(obj, (type, types.ModuleType)):
            return
        seen.add(id(obj))
        if isinstance(obj, types.FunctionType):
            if depth == 0 and obj.__module__ != "ember" and not obj.__module__.startswith("ember."):
                # a helper the function calls (a loss function): what it reaches counts too
                for inner, o, _ in _candidates(obj, (), {}, [], probes):
                    visit(inner, o, 1, False)
        elif isinstance(obj, Module):
            modules.append((name, obj))
        elif isinstance(obj, Optimizer):
            optimizers.append((name, obj))
            # an optimizer that wraps another (SAM's base_optimizer): the inner one's state too
            for k, o in vars(obj).items():
                if isinstance(o, Optimizer):
                    visit(f"{name}_{k}", o, depth + 1, False)
        elif isinstance(obj, Tensor) and not from_args:
            tensors.append((name, obj))
        elif depth == 0 and isinstance(obj, (list, tuple)):
            if probes is not None:
                probes.contents(obj)
            for i, o in enumerate(obj):
                visit(f"{name}{i}", o, depth + 1, from_args)
        elif depth == 0 and isinstance(obj, dict):
            if probes is not None:
                probes.contents(obj)
            for k, o in obj.items():
                visit(f"{name}_{k}", o, depth + 1, from_args)
        elif depth == 0 and hasattr(obj, "__dict__") and not callable(obj):
            if probes is not None:
                probes.contents(vars(obj))
            for k, o in vars(obj).items():
                visit(f"{name}_{k}", o, depth + 1, False)

    for name, obj, from_args in _candidates(fn, args, kwargs, list(arg_names), probes):
        visit(name, obj, 0, from_args)
    return Reachable(modules, optimizers, tensors, _python_values(fn, probes))


def state_parts(reach: Reachable | None) -> dict:
    """id(tensor) -> the part of a memory plan (plan/memory.py) it counts in, for the state a
    trace found: modules' parameters and buffers are ``parameters``, optimizer buffers
    ``optimizer state``."""
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
        for holder in opt._hyper_tensors.values():
            parts[id(holder)] = "optimizer state"
    return parts


def check_found(builder, reach: Reachable, where: str) -> None:
    """Raise unless every optimizer that stepped while ``builder`` recorded is in ``reach``."""
    known = {id(opt) for _, opt in reach.optimizers}
    for opt, _ in builder.stepped_optimizers.values():
        if id(opt) not in known:
            # (a capture failure: ember.compile runs the call eagerly, as PyTorch's compiled
            # code steps an optimizer the function makes itself on its first call)
            raise TraceError(
                f"{where}: a {type(opt).__name__} stepped inside the traced function, but the "
                "function does not reach it through its arguments, closure or globals before "
                "the call (it was made during the call, or is held where the search does not "
                "look), so changes to its state could not be tracked; pass the optimizer as an "
                "argument",
                op="function",
            )


def _state_key(entries: dict) -> tuple:
    """One parameter's optimizer state in the cache key: its buffers by name, and its plain
    Python values (a step count kept as an int, as optimizers written for PyTorch keep it) by
    value, since a recorded step bakes those in and writes back the value it ended with. (An
    optimizer whose step cannot be recorded, LBFGS, leaves its state out of the key.)"""
    key = []
    for name in sorted(entries):
        value = entries[name]
        if isinstance(value, (Tensor, SymbolicTensor)):
            key.append(name)
        elif value is None or isinstance(value, (bool, int, float, str)):
            key.append((name, type(value).__name__, value))
        else:
            key.append((name, type(value).__name__))
    return tuple(key)


def state_aliases(reach: Reachable, leaves) -> tuple:
    """Per tensor argument, its position among the state's tensors (an optimizer's parameter
    passed to the step), or None: such an argument is traced as that tensor of the state."""
    tensors = reach.state_tensors()
    if not tensors or not leaves:
        return ()
    positions = {id(t): k for k, t in enumerate(tensors)}
    return tuple(positions.get(id(t)) for t in leaves)


def state_signature(reach: Reachable) -> tuple:
    """(a function giving the labels, the values) of the state's part of the cache key (the
    labels are built only where a retrace is explained)."""
    values = list(reach.module_flags())
    for _, opt in reach.optimizers:
        # what of each group the graph bakes in: not the hyper-parameters a step reads at run
        # time (optim/optimizer.py `graph_facts`), so a scheduler does not retrace the step
        values += [opt.graph_facts(group) for group in opt.param_groups]
        values.append(
            tuple(
                _state_key(opt.state[p]) if p in opt.state and opt.records_steps else ()
                for group in opt.param_groups
                for p in group["params"]
            )
        )
    tensors = reach.state_tensors()
    values += [(id(t), t.shape, t.dtype.name, t._requires_grad) for t in tensors]
    values += [guard for _, guard in reach.python_values]

    def labels() -> list:
        out = [
            f"{name}: training flags (or _graph_flags), submodules or module hooks"
            for name, _ in reach.modules
        ]
        for name, opt in reach.optimizers:
            out += [
                f"{name}.param_groups[{g}] hyper-parameters the graph bakes in"
                for g in range(len(opt.param_groups))
            ]
            out.append(f"{name}: the buffers and Python values in its state")
        names = _names_of(reach, tensors)
        out += [f"{name} (object, shape, dtype, requires_grad)" for name in names]
        return out + [label for label, _ in reach.python_values]

    return labels, values


def _names_of(reach: Reachable, tensors: list) -> list:
    """The names of ``tensors`` (a key's, found earlier) in ``reach`` (named only when a
    retrace is explained; a tensor the state no longer holds is named by its shape)."""
    names = {id(t): name for name, t in reach.named_tensors()}
    return [names.get(id(t), f"a state tensor of shape {tuple(t.shape)}") for t in tensors]


def grad_signature(reach: Reachable, leaves=(), names=()) -> tuple:
    """(a function giving the labels, the values): which of the state's tensors and of the
    tensor arguments ``leaves`` (named ``names``) that require grad have a ``.grad``. Part of
    the key only for traces that read a ``.grad`` or ran backward (see `watching_grad_reads`):
    a forward pass does not."""
    grad = GRAD_SLOT.__get__
    tensors = reach.state_tensors()
    values = [grad(t, Tensor) is not None for t in tensors]
    wanting = [(name, t) for name, t in zip(names, leaves) if t.requires_grad]
    values += [grad(t, Tensor) is not None for _, t in wanting]

    def labels() -> list:
        out = [f"{name}: has a .grad" for name in _names_of(reach, tensors)]
        return out + [f"argument {name}: has a .grad" for name, _ in wanting]

    return labels, values


@contextlib.contextmanager
def watching_grad_reads():
    """Within the block, note whether any tensor's ``.grad`` is read (yields a one-element list
    set to True on the first read). A trace that never reads a gradient (a forward pass) gives
    the same graph whatever the gradients are, so its cache entry ignores them."""
    seen = [False]

    def read(tensor):
        seen[0] = True
        return GRAD_SLOT.__get__(tensor, Tensor)

    Tensor.grad = property(read, GRAD_PROPERTY.fset)
    try:
        yield seen
    finally:
        Tensor.grad = GRAD_PROPERTY
