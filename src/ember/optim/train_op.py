"""Training ops of define-then-run graphs: ``optimizer.minimize(loss)`` and `Operation`.

Inside ``with graph:``, ``minimize`` records ``loss.backward()`` and ``optimizer.step()`` into
the graph: the optimizer's own update code, functionalized by the `GraphBuilder` (an in-place
``p.sub_(...)`` becomes a new graph value for ``p``). It returns an `Operation`, the list of
(tensor, graph value) *updates* a `Session` writes into the tensors' memory when the op is
fetched. Recording leaves no trace in Python: ``.grad``, ``optimizer.state`` and the step count
are restored and the builder's rebinding is undone, so ops built afterwards read the Variables'
stored values (a fetched loss is the loss before the step, as in eager code).

Optimizer state created lazily on the first step (momentum buffers, Adam's moments and step
count) must persist between runs, so it becomes eager *slot* tensors. The first eager step may
differ in form from later ones (SGD's first momentum buffer is a copy of the gradient, later
ones are ``momentum * buf + g``), so such an op holds two recorded variants: *first* (the step
with the state as it is now: it creates the buffers, written into the slots; after the run the
slots are installed in ``optimizer.state``) and *steady* (recorded with the slots installed).
A Session runs *first* until the slots are installed, then *steady*: N runs are N eager steps.

In-place updates recorded before ``minimize`` (a BatchNorm's running statistics in the forward
pass) are pending in the builder; the op takes them over, like TF1's UPDATE_OPS. The step's
hyper-parameters (the learning rate) are Python numbers read while recording: a scheduler that
changes them later does not change the op.

This module records into a graph with the graph layer's builder alone, so it sits with the
optimizers (``Optimizer.minimize`` calls it) below the capture layer, whose `Session`
(capture/static.py) runs the ops it makes.
"""

from __future__ import annotations

import numpy as np

from ..errors import EmberError
from ..graph.symbolic_tensor import SymbolicTensor
from ..tensor import Tensor

__all__ = ["Operation", "minimize"]


class Operation:
    """A training op: fetch it with ``Session.run`` (its result is None). ``gradients`` lists
    (variable, symbolic gradient) pairs, fetchable too; ``variables`` the tensors it updates."""

    def __init__(self, graph, name, optimizer, first, steady, installs, gradients):
        self.graph = graph
        self.name = name
        self.optimizer = optimizer
        self.gradients = gradients
        self._first = first  # [(tensor, Value)]
        self._steady = steady  # the same, recorded with the slots installed; None: one form
        self._installs = installs  # [(param, key, slot tensor or Python value)]

    @property
    def variables(self) -> list:
        return [t for t, _ in self._first]

    def _installed(self) -> bool:
        state = self.optimizer.state
        for p, key, slot in self._installs:
            entries = state[p] if p in state else {}
            if key not in entries or (isinstance(slot, Tensor) and entries[key] is not slot):
                return False
        return True

    def updates(self) -> list:
        """The (tensor, Value) pairs the next run computes and writes."""
        return self._steady if self._steady is not None and self._installed() else self._first

    def _after_run(self, variant) -> None:
        if variant is self._first:
            for p, key, slot in self._installs:
                self.optimizer.state[p][key] = slot
        self.optimizer._step_count += 1

    def __repr__(self) -> str:
        return (
            f"<ember.Operation {self.name}: {type(self.optimizer).__name__} step updating "
            f"{len(self.variables)} tensors>"
        )


def minimize(optimizer, loss, var_list=None, name: str | None = None):
    """See ``Optimizer.minimize`` and the module docstring."""
    builder = loss.builder if isinstance(loss, SymbolicTensor) else None
    if builder is None or builder.graph._builder is not builder:
        # eager, or traced by ember.trace / ember.function, which handle effects themselves
        optimizer.zero_grad()
        loss.backward(inputs=None if var_list is None else list(var_list))
        optimizer.step()
        return None
    params = [p for group in optimizer.param_groups for p in group["params"]]
    targets = _var_list(optimizer, params, var_list)
    saved_grads = [(p, p.grad) for p in params]
    saved_state = {p: dict(s) for p, s in optimizer.state.items()}
    saved_count = optimizer._step_count
    for n, t in optimizer.hyperparameter_tensors():  # the inputs a run feeds the group's values
        builder.capture_names.setdefault(id(t), n)
    try:
        with builder:
            pending = builder.take_updates()
            for p in params:
                p.grad = None
            loss.backward(inputs=targets)
            gradients = [(p, p.grad) for p in targets if p.grad is not None]
            if not gradients:
                raise EmberError(
                    f"the loss (%{loss.value.name}) depends on none of the optimizer's "
                    f"{len(targets)} variables, so there is nothing to minimize. A module built "
                    "inside `with graph:` records its initialization instead of running it: "
                    "build it before the block or under `with ember.init_scope():`",
                    op="minimize",
                )
            slots: dict = {}
            installs: list = []
            first = pending + _record_step(builder, optimizer, slots, installs)
            steady = None
            if installs:
                for p, key, slot in installs:
                    optimizer.state[p][key] = slot
                steady = pending + _record_step(builder, optimizer, slots, None)
    finally:
        builder.take_updates()  # whatever happened, later ops read the stored values
        for p, grad in saved_grads:
            p.grad = grad
        optimizer.state.clear()
        optimizer.state.update(saved_state)
        optimizer._step_count = saved_count
    for updates in (first, steady or []):
        _check_distinct(updates)
    op_name = name or f"{type(optimizer).__name__}_minimize"
    return Operation(builder.graph, op_name, optimizer, first, steady, installs, gradients)


def _var_list(optimizer, params: list, var_list) -> list:
    if var_list is None:
        return params
    ids = {id(p) for p in params}
    targets = list(var_list)
    for t in targets:
        if id(t) not in ids:
            raise EmberError(
                f"var_list holds a tensor of shape {tuple(t.shape)} that the optimizer does not "
                "optimize; give the optimizer every variable it should update",
                op="minimize",
            )
    return targets


def _record_step(builder, optimizer, slots: dict, installs: list | None) -> list:
    """Record one ``optimizer.step()``; its updates, the state entries it replaced or created
    written into slot tensors (``slots``: (id(param), key) -> slot). With ``installs`` (the
    first step) new entries get slots, listed there; without, a new entry is an error."""
    before = {id(p): dict(s) for p, s in optimizer.state.items()}
    optimizer.step()
    updates = []
    for p, entries in optimizer.state.items():
        old = before.get(id(p), {})
        for key, value in entries.items():
            if key in old and old[key] is value:
                continue  # the same buffer: updated in place, if at all (a rebound update)
            slot = slots.get((id(p), key))
            if slot is None and key in old and isinstance(old[key], Tensor):
                slot = old[key]  # existing state replaced by a new value: keep its memory
            if slot is None:
                if installs is None:
                    raise EmberError(
                        f"{type(optimizer).__name__} created state {key!r} after its first "
                        "step; a graph cannot record that",
                        op="minimize",
                    )
                if isinstance(value, Tensor):
                    slot = value  # made eagerly (a step counter): its own memory persists
                elif isinstance(value, SymbolicTensor):
                    slot = Tensor(np.zeros(_concrete(value.shape, key), value.dtype.np))
                    owner = builder.capture_names.get(id(p), "param")
                    builder.capture_names[id(slot)] = f"{owner}_{key}"  # its input's name
                else:
                    installs.append((p, key, value))  # a Python value: set after the run
                    continue
                slots[(id(p), key)] = slot
                installs.append((p, key, slot))
            if not isinstance(value, (Tensor, SymbolicTensor)):
                raise EmberError(
                    f"{type(optimizer).__name__} replaces state {key!r} by a Python value at "
                    "every step; a graph cannot record that",
                    op="minimize",
                )
            if value is not slot:
                updates.append((slot, builder.value_of(value)))
    return updates + builder.take_updates()


def _concrete(shape: tuple, key: str) -> tuple:
    if not all(isinstance(d, int) for d in shape):
        raise EmberError(f"optimizer state {key!r} has a symbolic shape {shape}", op="minimize")
    return shape


def _check_distinct(updates: list) -> None:
    seen: set = set()
    for t, _ in updates:
        if id(t) in seen:
            raise EmberError(
                f"a tensor of shape {tuple(t.shape)} is updated in place both while the loss is "
                "built and by the optimizer; a training op can write it once",
                op="minimize",
            )
        seen.add(id(t))
