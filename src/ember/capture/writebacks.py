"""What a trace did to the state a captured function reads and writes (capture/state.py), and
its replay after each run of the graph:

* `Snapshot`: what the state was before the trace, so the trace's Python side effects (a
  ``.grad`` set to a symbolic tensor, a buffer added to ``optimizer.state``) can be undone;
* `plan_writebacks`: after a trace, the list of `Writeback`s that replay those effects after
  each run of the graph, from the graph's extra outputs (graph values appended to a list the
  function reaches are appended again by each run);
* `apply_writebacks`: the replay, given a run's extra outputs.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np

from ..errors import TraceError
from ..graph.symbolic_tensor import SymbolicTensor
from ..symbolic import SymDim
from ..tensor import Tensor
from .undo import Contents

__all__ = ["Snapshot", "Writeback", "WritebackKind", "apply_writebacks", "plan_writebacks"]


class Snapshot:
    """The gradients and optimizer state dicts before a trace; `restore` puts them back."""

    def __init__(self, reach, fn=None):
        self.grads = {id(t): (t, t.grad) for _, t in reach.named_tensors()}
        self.optimizer_state = {
            id(opt): (opt, {p: dict(s) for p, s in opt.state.items()})
            for _, opt in reach.optimizers
        }
        # the per-parameter dicts themselves: `restore` refills them, for code that holds one
        # across the traced call (LBFGS's step holds its state while it calls a closure)
        self._state_dicts = {id(opt): dict(opt.state) for _, opt in reach.optimizers}
        # the modules' plain attributes: one the trace sets to a graph value (``self.hidden =
        # h.detach()``) is put back, and set after each run from the graph's output
        self.attributes = [(m, dict(vars(m))) for m in reach.walked_modules()]
        # the function's closure cells and the globals it names, and the items of the dicts
        # and lists they hold: a slot the trace sets to a graph value (``stats["loss"] =
        # total + loss.detach()``, ``global memory``) is handled as an attribute is
        # (and those of the forward hooks of the modules it runs: a feature-extraction hook
        # stores its module's output, ``features[name] = out.detach()``)
        self.slots = _unique(
            [
                (holder, key, get(holder, key))
                for f in (fn, *_forward_hooks(reach))
                for holder, key in _slots(f)
            ]
        )
        # the optimizers' param groups: their hyper-parameters are read at run time (or baked
        # in), so a trace that changes one (a scheduler stepped inside the function) would
        # change it once, while tracing, not on every call (`changed_groups`)
        self.groups = [
            (opt, [_group_values(g) for g in opt.param_groups], [dict(g) for g in opt.param_groups])
            for _, opt in reach.optimizers
        ]
        # and the schedulers the function reaches, which such a change comes from: put back
        # with the groups when the trace is refused for it (`undo_group_changes`)
        self.schedulers = [(v, dict(vars(v))) for _, _, v in self.slots if _is_scheduler(v)]
        # the lists among them, with their items: graph values the trace appends to one
        # (``history.append(loss.detach())``) are taken off again and appended by each run,
        # as each eager call appends
        lists = {id(v): v for _, _, v in self.slots if type(v) is list}
        self.lists = [(v, list(v)) for v in lists.values()]
        # and the dicts, with their keys: a key the trace adds with a graph value
        # (``features["h"] = h.detach()`` into an empty dict) is a slot too, absent before
        dicts = {id(v): v for _, _, v in self.slots if type(v) is dict}
        self.dicts = [(v, set(v)) for v in dicts.values()]
        # the containers all these hold, item by item, and the slots' values: what a trace
        # that fails changed in them is put back before the call runs again (`undo`)
        held = [v for _, before in self.attributes for v in before.values()]
        self.contents = Contents(held + [v for _, _, v in self.slots], self.slots, get)

    def entry_grad(self, t: Tensor, builder):
        if id(t) in self.grads:
            return self.grads[id(t)][1]
        return builder.capture_grads.get(id(t))

    def traced_attributes(self) -> list:
        """(module, name, index, value) of each graph value the trace left in a module's plain
        attribute, directly (index None) or as an item of a tuple or list."""
        found = []
        for m, _ in self.attributes:
            for name, value in vars(m).items():
                if isinstance(value, SymbolicTensor):
                    found.append((m, name, None, value))
                elif isinstance(value, (tuple, list)):
                    found += [
                        (m, name, i, v)
                        for i, v in enumerate(value)
                        if isinstance(v, SymbolicTensor)
                    ]
        return found

    def stored_sizes(self, replayed: list) -> list[str]:
        """Where the trace left a symbolic size (``self.n = x.shape[0]`` under an input
        signature's ``None`` dimension) in Python state the function reaches: a module's
        attribute, an item of a dict or list it holds, a closure cell or global, or an item of
        theirs. Nothing replays such a number on each call, so the trace is refused; but for
        ``replayed``, the module attributes `stored_attribute_sizes` found, which each call
        sets."""
        found = []

        def look(value, where: str) -> None:
            if _holds_size(value):
                found.append(where)
            elif isinstance(value, dict):
                found.extend(f"{where}[{k!r}]" for k, v in value.items() if _holds_size(v))
            elif isinstance(value, list):
                found.extend(f"{where}[{i}]" for i, v in enumerate(value) if _holds_size(v))

        replayed = {(id(m), name) for m, name, _ in replayed}
        for m, _ in self.attributes:
            for name, value in vars(m).items():
                if (id(m), name) not in replayed:
                    look(value, f"{type(m).__name__}.{name}")
        for holder, key, _ in self.slots:
            look(get(holder, key), repr(key))
        return found

    def stored_attribute_sizes(self) -> list:
        """(module, name, value) of each module attribute the trace set to a symbolic size or
        a shape holding one (``self.seq_len = x.size(1)``, ``self.shape = x.shape``): each
        call of the graph sets it to its own sizes (capture/size_checks.py), as eagerly."""
        return [
            (m, name, value)
            for m, before in self.attributes
            for name, value in vars(m).items()
            if before.get(name, _ABSENT) is not value and _is_size_value(value)
        ]

    def changed_modes(self) -> list:
        """(module, flag) of each module whose training flag the trace changed (``m.eval()``
        inside the function): each run sets it again, as each eager call would."""
        return [
            (m, m.training)
            for m, before in self.attributes
            if before.get("training", m.training) != m.training
        ]

    def _all_slots(self) -> list:
        """The slots, and the keys the trace added to the dicts among them (old: absent)."""
        added = [
            (d, k, _ABSENT)
            for d, keys in self.dicts
            for k in list(d)
            if k not in keys and isinstance(d[k], SymbolicTensor)
        ]
        return self.slots + added if added else self.slots

    def traced_slots(self) -> list:
        """(holder, key, old value, graph value) of each slot the trace set to a graph value."""
        found = []
        for holder, key, old in self._all_slots():
            value = get(holder, key)
            if isinstance(value, SymbolicTensor) and value is not old:
                found.append((holder, key, old, value))
        return found

    def changed_groups(self) -> list[str]:
        """What the trace changed in the optimizers' param groups, described."""
        out = []
        for opt, before, _ in self.groups:
            for i, (group, old) in enumerate(zip(opt.param_groups, before)):
                new = _group_values(group)
                out += [
                    f"{type(opt).__name__}.param_groups[{i}][{k!r}] (from {v!r} to "
                    f"{group.get(k)!r})"
                    for k, v in old.items()
                    if new.get(k) != v
                ]
        return out

    def undo_group_changes(self) -> None:
        """Put back the param groups' entries and the schedulers' state as they were before
        the trace (it is refused for changing them: a fallback then runs from there)."""
        for opt, _, entries in self.groups:
            for group, old in zip(opt.param_groups, entries):
                group.update(old)
        for sched, state in self.schedulers:
            vars(sched).clear()
            vars(sched).update(state)

    def appended(self) -> list:
        """(list, items) of each list the trace only appended to, graph values among what it
        appended (a list that received Python values only keeps what the trace appended, as
        any other Python side effect of the trace)."""
        found = []
        for lst, before in self.lists:
            n = len(before)
            if len(lst) > n and all(a is b for a, b in zip(lst, before)):
                items = lst[n:]
                if any(_holds_graph_values(v) or _dict_of_graph_values(v) for v in items):
                    found.append((lst, items))
        return found

    def undo(self) -> None:
        """Put the Python state back as it was before the trace (a trace that failed: the
        call runs again, so ``self.calls += 1``, ``history.append(...)``, ``stats[k] = ...``
        or a scheduler's step that ran while tracing must not count twice): every module's
        plain attributes, the closure cells, globals and containers the function reaches,
        and the optimizers' param groups and schedulers."""
        self.contents.restore(put)
        self.undo_group_changes()
        for m, before in self.attributes:
            current = vars(m)
            for name in [n for n in current if n not in before]:
                object.__delattr__(m, name)
            for name, value in before.items():
                if current.get(name, _ABSENT) is not value:
                    object.__setattr__(m, name, value)

    def restore(self) -> None:
        for lst, items in self.appended():
            del lst[len(lst) - len(items) :]
        for holder, key, old in self._all_slots():
            value = get(holder, key)
            if value is not old and isinstance(value, SymbolicTensor):
                put(holder, key, old)
        for m, before in self.attributes:
            for name, value in list(vars(m).items()):
                if before.get(name, _ABSENT) is not value and _holds_graph_values(value):
                    if name in before:
                        object.__setattr__(m, name, before[name])
                    else:
                        object.__delattr__(m, name)
        for t, grad in self.grads.values():
            t.grad = grad
        for opt, state in self.optimizer_state.values():
            dicts = self._state_dicts[id(opt)]
            opt.state.clear()
            for p, s in state.items():
                entries = dicts[p]
                entries.clear()
                entries.update(s)
                opt.state[p] = entries


_ABSENT = object()


def _is_size_value(value) -> bool:
    """A symbolic size, or a tuple (a shape) of sizes holding one."""
    if isinstance(value, SymDim):
        return True
    return (
        isinstance(value, tuple)
        and any(isinstance(v, SymDim) for v in value)
        and all(isinstance(v, (int, SymDim)) for v in value)
    )


def _holds_size(value) -> bool:
    """A symbolic size, or a tuple or list (a shape) holding one."""
    if isinstance(value, SymDim):
        return True
    return isinstance(value, (tuple, list)) and any(isinstance(v, SymDim) for v in value)


def _forward_hooks(reach) -> list:
    """The user's forward hooks (pre and post) on the modules ``reach`` walks (not ember's
    own, such as a parametrization's, whose module globals are no user state)."""
    from .state import _user_code

    tables = ("_forward_pre_hooks", "_forward_hooks")
    hooks = [h for m in reach.walked_modules() for t in tables for h in getattr(m, t).values()]
    return [h for h in hooks if _user_code(getattr(h, "__func__", h))]


def _unique(slots: list) -> list:
    """``slots`` without repeats (two hooks naming one global dict)."""
    seen: set = set()
    out = []
    for holder, key, old in slots:
        if (id(holder), key) not in seen:
            seen.add((id(holder), key))
            out.append((holder, key, old))
    return out


def _slots(fn) -> list:
    """(holder, key) of the places a call of ``fn`` may leave a tensor in: its closure cells
    (key None), the globals its code names (the globals dict, the name), the attributes of
    the object a bound method belongs to (a module's are `Snapshot.attributes`), and the items
    of the dicts and lists those hold."""
    from .state import _target

    if fn is None:
        return []
    from ..nn.module import Module

    target, owner = _target(fn)
    code = getattr(target, "__code__", None)
    if code is None:
        return []
    slots = [(cell, None) for cell in target.__closure__ or ()]
    if owner is not None and not isinstance(owner, Module) and hasattr(owner, "__dict__"):
        slots += [(vars(owner), n) for n in vars(owner)]  # a bound method's object (a trainer)
    globals_ = getattr(target, "__globals__", {})
    slots += [(globals_, n) for n in code.co_names if n in globals_]
    for holder, key in list(slots):
        value = get(holder, key)
        if isinstance(value, dict) and len(value) <= 64:
            slots += [(value, k) for k in value]
        elif isinstance(value, list) and len(value) <= 64:
            slots += [(value, i) for i in range(len(value))]
    return slots


def get(holder, key):
    if key is None:  # a closure cell
        try:
            return holder.cell_contents
        except ValueError:  # (empty)
            return _ABSENT
    try:
        return holder[key]
    except (KeyError, IndexError):
        return _ABSENT


def put(holder, key, value) -> None:
    if key is None:
        holder.cell_contents = value
    elif value is _ABSENT:
        holder.pop(key, None) if isinstance(holder, dict) else None
    else:
        holder[key] = value


def _holds_graph_values(value) -> bool:
    if isinstance(value, SymbolicTensor):
        return True
    return isinstance(value, (tuple, list)) and any(isinstance(v, SymbolicTensor) for v in value)


def _is_scheduler(value) -> bool:
    from ..optim.lr_scheduler import LRScheduler, ReduceLROnPlateau

    return isinstance(value, (LRScheduler, ReduceLROnPlateau))


def _group_values(group: dict) -> dict:
    """A param group's entries but its parameters, comparable (tensors by identity)."""

    def frozen(v):
        if isinstance(v, (list, tuple)):
            return tuple(frozen(x) for x in v)
        return ("tensor", id(v)) if isinstance(v, (Tensor, SymbolicTensor)) else v

    return {k: frozen(v) for k, v in group.items() if k not in ("params", "param_names")}


def _dict_of_graph_values(value) -> bool:
    return isinstance(value, dict) and _holds_graph_values(list(value.values()))


class WritebackKind(Enum):
    """What a `Writeback` does after a run."""

    DATA = "data"  # copy its graph output into ``tensor``'s memory
    GRAD = "grad"  # set ``tensor.grad`` to its output
    ARG_GRAD = "arg_grad"  # set the ``value``-th tensor argument's .grad to its output
    ARG_DATA = "arg_data"  # copy its output into the ``value``-th tensor argument's memory
    ATTR = "attr"  # set attribute ``key`` of module ``tensor`` (item ``value``) to its output
    SLOT = "slot"  # set item ``key`` of ``tensor`` (a dict, list, or a closure cell) to it
    STATE = "state"  # optimizer.state[tensor][key] = its output, as a new tensor
    GRAD_NONE = "grad_none"  # set ``tensor.grad`` to None
    # set ``tensor.grad`` to its output as a sparse COO tensor of its nonzero rows: the
    # gradient F.embedding(sparse=True) gives a leaf weight eagerly, computed densely in a graph
    SPARSE_GRAD = "sparse_grad"
    STATE_VALUE = "state_value"  # optimizer.state[tensor][key] = ``value``, a Python value
    # item ``key`` of the ``value`` items a run appends to list ``tensor``: its output, or
    # (APPEND_VALUE) the Python value ``value[1]``
    APPEND = "append"
    APPEND_VALUE = "append_value"
    # ``tensor`` (held by an attribute or slot the trace rebound) takes its output as new memory
    # of its own: the memory it shared (a detached parameter's, a view's) keeps its values
    REBIND = "rebind"

    @property
    def takes_output(self) -> bool:
        return self not in (
            WritebackKind.GRAD_NONE,
            WritebackKind.STATE_VALUE,
            WritebackKind.APPEND_VALUE,
        )


@dataclass
class Writeback:
    """One effect replayed after each run (`WritebackKind`). Kinds that take a graph output
    come first in the plan, in output order."""

    kind: WritebackKind
    tensor: object = None
    key: str | None = None
    optimizer: object = None
    value: object = None

    @property
    def takes_output(self) -> bool:
        return self.kind.takes_output

    def memory_part(self, known: dict) -> str:
        """The part of a memory plan (plan/memory.py) its output counts in; ``known``: the
        state's parts (`state_parts`)."""
        if self.kind in (WritebackKind.GRAD, WritebackKind.ARG_GRAD):
            return "gradients"
        if self.kind is WritebackKind.STATE:
            return "optimizer state"
        if self.kind in (
            WritebackKind.ARG_DATA,
            WritebackKind.ATTR,
            WritebackKind.SLOT,
            WritebackKind.APPEND,
        ):
            return "inputs"
        return known.get(id(self.tensor), "parameters")


def plan_writebacks(
    builder, snapshot: Snapshot, reach, grad_args: list, entry_arg_grads: dict, arg_updates=()
):
    """After a trace: the `Writeback`s and the graph values they read (one per output-taking
    writeback). ``grad_args`` lists (leaf index, symbolic argument) of arguments that require
    grad; ``entry_arg_grads`` maps a leaf index to the argument's .grad when the trace began;
    ``arg_updates`` lists (leaf index, symbolic argument) of the arguments the function
    changed in place (their new values are written into the caller's tensors, as eagerly)."""
    plan, values = [], []
    for index, arg in arg_updates:
        plan.append(Writeback(WritebackKind.ARG_DATA, value=index))
        values.append(builder.value_of(arg))
    new_entries: set[int] = set()  # tensors that became optimizer state during the trace
    for _, opt in reach.optimizers:
        before = snapshot.optimizer_state[id(opt)][1]
        for p, entries in opt.state.items():
            old = before.get(p, {})
            for key, value in entries.items():
                if old.get(key) is value:
                    continue  # the same buffer: an in-place update is a 'data' writeback
                if isinstance(value, (Tensor, SymbolicTensor)):
                    new_entries.add(id(value))
                    plan.append(Writeback(WritebackKind.STATE, p, key, opt))
                    values.append(builder.value_of(value))
                else:
                    plan.append(Writeback(WritebackKind.STATE_VALUE, p, key, opt, value))
    for t in builder.rebound.values():
        if id(t) not in new_entries:
            plan.append(Writeback(WritebackKind.DATA, t))
            values.append(builder.value_of(t))
    held = None  # ids of the modules' parameters and buffers, found when first needed
    for holder, key, old, value in snapshot.traced_slots():
        kind = WritebackKind.SLOT
        if isinstance(old, Tensor) and old.shape == value.shape and old.dtype == value.dtype:
            held = _module_tensors(reach) if held is None else held
            kind = _kept_tensor_kind(old, held, WritebackKind.SLOT)
        if kind is WritebackKind.SLOT:
            plan.append(Writeback(WritebackKind.SLOT, holder, key))
        else:
            plan.append(Writeback(kind, old))
        values.append(builder.value_of(value))
    for lst, items in snapshot.appended():
        for j, item in enumerate(items):
            if isinstance(item, SymbolicTensor):
                plan.append(Writeback(WritebackKind.APPEND, lst, j, value=len(items)))
                values.append(builder.value_of(item))
            elif _holds_graph_values(item) or _dict_of_graph_values(item):
                raise TraceError(
                    "the function appends a container holding graph values to a list it "
                    "reaches (in its closure or globals); append the tensors themselves, or "
                    "return them",
                    op="function",
                )
            else:
                plan.append(Writeback(WritebackKind.APPEND_VALUE, lst, j, value=(len(items), item)))
    before = {id(m): entries for m, entries in snapshot.attributes}
    for m, name, index, value in snapshot.traced_attributes():
        old = before[id(m)].get(name)
        # a buffer the trace reassigned (nn/module.py holds the graph value as an attribute)
        buffer = index is None and name in m._buffers and isinstance(m._buffers[name], Tensor)
        if buffer:
            old = m._buffers[name]
        if index is not None:
            old = old[index] if isinstance(old, (tuple, list)) and index < len(old) else None
        kind = WritebackKind.ATTR
        if isinstance(old, Tensor) and old.shape == value.shape and old.dtype == value.dtype:
            # into the tensor the attribute held (its identity, in the key, stays); a buffer
            # too, so the next call's key finds it (eagerly it would be a new tensor: only a
            # reference to the old buffer kept elsewhere sees the difference)
            held = _module_tensors(reach) if held is None else held
            kind = _kept_tensor_kind(old, set() if buffer else held, WritebackKind.ATTR)
        if kind is not WritebackKind.ATTR:
            plan.append(Writeback(kind, old))
        else:
            where = None
            if index is not None:  # (the item's place, and the other items as traced)
                traced = getattr(m, name)
                items = [None if isinstance(v, SymbolicTensor) else v for v in traced]
                where = (index, type(traced), items)
            plan.append(Writeback(WritebackKind.ATTR, m, name, value=where))
        values.append(builder.value_of(value))
    tensors = {id(t): t for _, t in reach.named_tensors()}
    tensors.update((id(t), t) for t in builder.captured)
    for t in tensors.values():
        if id(t) in new_entries:
            continue
        final, entry = t.grad, snapshot.entry_grad(t, builder)
        if final is entry and (final is None or id(final) not in builder.rebound):
            continue
        if final is None:
            plan.append(Writeback(WritebackKind.GRAD_NONE, t))
        else:
            sparse = _sparse_gradient(t, builder)
            plan.append(Writeback(WritebackKind.SPARSE_GRAD if sparse else WritebackKind.GRAD, t))
            values.append(builder.value_of(final))
    for index, arg in grad_args:
        if arg.grad is not None and arg.grad is not entry_arg_grads.get(index):
            plan.append(Writeback(WritebackKind.ARG_GRAD, value=index))
            values.append(builder.value_of(arg.grad))
    plan.sort(key=lambda w: not w.takes_output)  # output-taking ones first, order kept
    return plan, values


def _sparse_gradient(t: Tensor, builder) -> bool:
    """Whether eagerly ``t``'s gradient would be sparse: F.embedding(sparse=True) looked
    the leaf up while ``builder`` recorded (its graph computes the dense equivalent)."""
    from ..functional._embedding_sparse import captured_sparse

    return captured_sparse(t, builder)


def _module_tensors(reach) -> set:
    """The ids of the parameters and buffers of the modules ``reach`` walks."""
    return {
        id(t)
        for m in reach.walked_modules()
        for t in (*m._parameters.values(), *m._buffers.values())
        if t is not None
    }


def _kept_tensor_kind(old: Tensor, held: set, rebind: WritebackKind) -> WritebackKind:
    """How the tensor an attribute or slot held before the trace rebound it takes the new
    value after each run. Eagerly the rebinding leaves the old tensor as it was, so: a
    module's parameter or buffer (``self.prev = self.buf``) stays, and the holder is rebound
    (``rebind``, ATTR or SLOT); otherwise the same tensor takes the value, so that the next
    call finds it (its identity is in the cache key): into its memory (DATA) where that memory
    is its own, else as new memory (REBIND), since a parameter (``self.weight =
    self.weight_orig.detach()``, old-style spectral norm) or the base of a view shares it."""
    if id(old) in held:
        return rebind
    if old._is_view or old._data.base is not None:
        return WritebackKind.REBIND
    return WritebackKind.DATA


def apply_writebacks(plan: list, results: list, arg_leaves: list, fed: set) -> None:
    """Replay ``plan`` with ``results`` (the graph's extra outputs, in plan order). ``fed``
    holds the ids of the arrays the graph was fed. A result the generated code already wrote
    into its tensor's memory needs nothing; a new array the graph made becomes the new
    gradient or buffer as it is; anything else (a fed array, a view) is copied first, so no
    writeback reads memory an earlier one overwrote."""
    owned, seen = [], set(fed)  # a result met twice (two outputs of one value) is copied
    for r in results:
        owned.append(r.base is None and id(r) not in seen)
        seen.add(id(r))
    taking = [w for w in plan if w.takes_output]
    results = [
        r if own or (w.kind is WritebackKind.DATA and r is w.tensor._data) else np.array(r)
        for w, r, own in zip(taking, results, owned)
    ]
    results = iter(results)
    appends: dict = {}  # id(list) -> (the list, the items this run appends to it)
    for w in plan:
        if w.kind is WritebackKind.DATA:
            r = next(results)
            if r is not w.tensor._data:
                np.copyto(w.tensor._data, r, casting="unsafe")
            w.tensor._vc[0] += 1
        elif w.kind is WritebackKind.GRAD:
            w.tensor.grad = Tensor._wrap(next(results))
        elif w.kind is WritebackKind.SPARSE_GRAD:
            w.tensor.grad = Tensor._wrap(next(results)).to_sparse(1)
        elif w.kind is WritebackKind.GRAD_NONE:
            w.tensor.grad = None
        elif w.kind is WritebackKind.ARG_GRAD:
            target = arg_leaves[w.value]
            if not target._requires_grad:  # (made to require grad inside the function)
                target._requires_grad = True
            target.grad = Tensor._wrap(next(results))
        elif w.kind is WritebackKind.SLOT:
            put(w.tensor, w.key, Tensor._wrap(next(results)))
        elif w.kind is WritebackKind.ATTR:
            result = Tensor._wrap(next(results))
            if w.value is not None:  # an item: into the sequence as it is, or as traced
                index, kind, items = w.value
                current = getattr(w.tensor, w.key, None)
                fits = isinstance(current, kind) and len(current) == len(items)
                items = list(current) if fits else list(items)
                items[index] = result
                result = kind(items)
            setattr(w.tensor, w.key, result)
        elif w.kind is WritebackKind.ARG_DATA:
            target = arg_leaves[w.value]
            np.copyto(target._data, next(results), casting="unsafe")
            target._vc[0] += 1
        elif w.kind is WritebackKind.REBIND:
            t = w.tensor
            t._data = next(results)  # (a new array: `results` copied any the graph was fed)
            t._vc = [t._vc[0] + 1]  # (no longer the version of the memory it shared)
            t._is_view = False
            t._view_of = None
        elif w.kind is WritebackKind.STATE:
            w.optimizer.state[w.tensor][w.key] = Tensor._wrap(next(results))
        elif w.kind is WritebackKind.APPEND:
            items = appends.setdefault(id(w.tensor), (w.tensor, [None] * w.value))[1]
            items[w.key] = Tensor._wrap(next(results))
        elif w.kind is WritebackKind.APPEND_VALUE:
            items = appends.setdefault(id(w.tensor), (w.tensor, [None] * w.value[0]))[1]
            items[w.key] = w.value[1]
        else:
            w.optimizer.state[w.tensor][w.key] = w.value
    for lst, items in appends.values():
        lst.extend(items)
