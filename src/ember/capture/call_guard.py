"""`CallGuard`: the facts a call's cache key was computed from, re-checked cheaply on the next
call, so that a call like the last one reuses its program without building its key again.

Building a call's key (capture/function.py) searches what the function reaches (its closure,
globals, the objects and modules there, the Python values its code reads: capture/state.py
`discover`), walks every module tree for the training flags and the tensors, and reads each
tensor's shape, dtype and requires_grad. A guard records, after such a call, what all of that
was read from:

* the arguments: each tensor argument's type, shape, NumPy dtype and requires_grad (or, with an
  ``input_signature``, its `TensorSpec`, checked again, and requires_grad), every other
  argument by identity;
* grad mode;
* every read of Python state the search made (`guards.Probes`: closure cells, globals, the
  objects' attributes, the lists and dicts it walked, by identity), and the contents of the
  guarded values that can change in place;
* the version of the module tables (nn/_tables.py: any parameter, buffer or submodule added,
  removed or replaced anywhere changes it), the training flag of every module walked (and the
  attributes its ``_graph_flags`` name), and of
  every tensor of the state its array (by identity: a new array, ``p.data = ...``, sends the
  call down the full path, which compares shapes and dtypes) and requires_grad;
* for a graph that reads gradients, which of those tensors have one.

Each of these is a function of what it replaces (a NumPy dtype decides ember's dtype, the
reads decide the search's result), so while they are all unchanged the key is the last one and
the program is the last one's. Anything else (a changed shape, mode, flag, value or table)
sends the call down the full path, which builds the key, retraces when it is new, and records a
new guard. State with optimizers is not guarded: their groups and buffers change as training
runs, and their part of the key is built on every call.
"""

from __future__ import annotations

from operator import attrgetter, is_

from .. import autograd
from ..nn._tables import Table, tables_version
from ..ops._autocast import state_key as autocast_state
from ..ops._registry import TensorBase
from ..ops.sparse_tensor import SparseTensor
from .guards import Probes
from .state import Reachable, grad_signature

__all__ = ["CallGuard"]

# what a tensor's part of a key is a function of (capture/signature.py `tensor_component`,
# capture/state.py `state_signature`), read without making ember's Size and DType objects
_FACTS = attrgetter("_data.shape", "_data.dtype", "_requires_grad")
# the same for the state's tensors, cheaper to compare: their arrays by identity (an array's
# shape and dtype are its own; the guard holds the arrays, so an identity is never reused)
_DATA = attrgetter("_data")
_REQUIRES_GRAD = attrgetter("_requires_grad")
_TRAINING = attrgetter("training")
_TABLES = attrgetter("_parameters", "_buffers", "_modules")


class CallGuard:
    """What one call's key was computed from (see the module docstring), and the program
    (``entry``) that key found. `leaves` re-checks it for a new call."""

    __slots__ = (
        "entry",
        "_n_args",
        "_arg_objects",
        "_kw_names",
        "_specs",
        "_names",
        "_leaf_facts",
        "_grad_mode",
        "_autocast",
        "_probes",
        "_version",
        "_modules",
        "_flags",
        "_graph_flags",
        "_graph_flag_values",
        "_tensors",
        "_arrays",
        "_requires_grad",
        "_reach",
        "_grads",
        "_types",
        "_stateless",
    )

    @classmethod
    def record(
        cls,
        args: tuple,
        kwargs: dict,
        leaves: list,
        names: list,
        reach: Reachable,
        probes: Probes,
        version: int,
        specs: list | None,
        grads: list,
    ) -> CallGuard | None:
        """The guard of a call whose key was built from ``reach`` (found with ``probes``,
        while the module tables had ``version``; ``grads``: the key's gradient part), read
        before the call traces or runs (either may change the state), or None where one
        would not be cheaper than the key (state with optimizers; arguments held in lists or
        dicts, whose items the key reads). `bind` gives it the program the key found."""
        if reach.optimizers:
            return None
        arg_objects = []  # (whether a tensor; its type, or the object)
        for value in (*args, *kwargs.values()):
            if isinstance(value, TensorBase):
                arg_objects.append((True, type(value)))
            elif isinstance(value, (list, tuple, dict, SparseTensor)):
                return None
            else:
                arg_objects.append((False, value))
        modules = reach.walked_modules()
        if not all(type(t) is Table for m in modules for t in _TABLES(m)):
            return None  # (a table that notes no changes: only the full path sees them)
        self = cls()
        self.entry = None
        self._n_args = len(args)
        self._arg_objects = arg_objects
        self._kw_names = tuple(kwargs)
        self._specs = specs
        self._names = names
        self._leaf_facts = list(map(_FACTS, leaves))
        self._grad_mode = autograd.is_grad_enabled()
        self._autocast = autocast_state()
        self._probes = probes
        self._version = version
        self._modules = modules
        self._flags = list(map(_TRAINING, modules))
        self._graph_flags = [(m, n) for m in modules for n in m._graph_flags]
        self._graph_flag_values = [getattr(m, n) for m, n in self._graph_flags]
        self._tensors = reach.state_tensors()
        self._arrays = list(map(_DATA, self._tensors))
        self._requires_grad = list(map(_REQUIRES_GRAD, self._tensors))
        self._reach = reach
        self._grads = list(grads)
        # (the common call, for `leaves` to check first: positional tensors only, their types;
        # no modules or state tensors to compare)
        self._types = None
        if not kwargs and all(tensor for tensor, _ in arg_objects):
            self._types = tuple(want for _, want in arg_objects)
        self._stateless = not (modules or self._tensors or self._graph_flags)
        return self

    def bind(self, entry) -> CallGuard:
        """This guard, for the program ``entry`` its key found (a graph that reads no gradient
        does not depend on them)."""
        self.entry = entry
        if not entry.reads_grads:
            self._grads = None
        return self

    def leaves(self, args: tuple, kwargs: dict) -> list | None:
        """The tensor arguments of a call with ``args`` and ``kwargs`` when its key is the
        recorded call's, else None."""
        types = self._types
        if types is not None and not kwargs:  # tensors alone, by position
            if len(args) != len(types) or not all(map(is_, map(type, args), types)):
                return None
            leaves = list(args)
        else:
            leaves = self._mixed_leaves(args, kwargs)
            if leaves is None:
                return None
        if autograd.is_grad_enabled() != self._grad_mode or tables_version() != self._version:
            return None
        if autocast_state() != self._autocast:
            return None
        if self._specs is None:
            if list(map(_FACTS, leaves)) != self._leaf_facts:
                return None
        else:
            for spec, t, name in zip(self._specs, leaves, self._names):
                spec.check(t, f"argument {name}")  # (raises as the full path does)
            if [t._requires_grad for t in leaves] != [g for _, _, g in self._leaf_facts]:
                return None  # (the key holds it beside the spec)
        if not self._stateless and (
            list(map(_TRAINING, self._modules)) != self._flags
            or not all(map(is_, map(_DATA, self._tensors), self._arrays))
            or list(map(_REQUIRES_GRAD, self._tensors)) != self._requires_grad
            or (
                self._graph_flags
                and [getattr(m, n) for m, n in self._graph_flags] != self._graph_flag_values
            )
        ):
            return None
        if not self._probes.hold():
            return None
        if self._grads is not None:
            if grad_signature(self._reach, leaves, self._names)[1] != self._grads:
                return None
        return leaves

    def _mixed_leaves(self, args: tuple, kwargs: dict) -> list | None:
        """`leaves`' first check for a call with keywords or Python values: the tensor
        arguments where every argument is as recorded (a tensor of its type, any other value
        the same object), else None."""
        if len(args) != self._n_args or (kwargs and tuple(kwargs) != self._kw_names):
            return None
        if not kwargs and self._kw_names:
            return None
        leaves = []
        for value, (tensor, want) in zip(
            (*args, *kwargs.values()) if kwargs else args, self._arg_objects
        ):
            if tensor:
                if type(value) is not want:
                    return None
                leaves.append(value)
            elif value is not want:
                return None
        return leaves
