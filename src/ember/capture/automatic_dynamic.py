"""Automatic dynamic shapes for ``ember.compile`` (``dynamic=None``, PyTorch's default).

``torch.compile`` traces its first call with static sizes; when a later call's tensor has
another size in some dimension, it marks that dimension dynamic and compiles once more with a
symbolic size there, which then serves every size (its ``automatic_dynamic_shapes``). Without
this, ember compiled one program per shape: a language model fed batches of varying sequence
length compiled at every new length (and its bounded cache thrashed), a loader's smaller last
batch compiled once more every epoch it was evicted.

`AutomaticDynamic` keeps the first call's shapes, which the static `ember.function` serves, and
for a call whose tensors have the same ranks and dtypes but other sizes, an `ember.function`
whose input signature makes symbolic every dimension that has differed from the first call so
far (`TensorSpec` names, one per distinct size: sizes equal in the call share a symbol, as a
batch of ids and its attention mask must): one more trace when a new dimension starts to vary,
none for new sizes of a varying one. Sizes 0 and 1 keep static programs, as PyTorch specializes
them (a symbolic size is never 1 where shapes broadcast: symbolic.py).
``torch._dynamo.mark_dynamic(t, dim)`` hints on the first call's tensors make those dimensions
symbolic from the start, as PyTorch, and ``mark_static`` ones never symbolic (a call whose size
differs there goes to the static function). A call whose tensors differ in rank or dtype, or
whose arguments hold no tensor, goes to the static function (a trace per shape, as before); so
does every call once a symbolic trace has failed (a size read as a Python number for control
flow the graph cannot express, a comparison its bounds do not decide), which is then not tried
again.
"""

from __future__ import annotations

from ..errors import ShapeError, TraceError
from ..tensor import Tensor
from .signature import TensorSpec, split_args

__all__ = ["AutomaticDynamic"]


class AutomaticDynamic:
    """The function for each call: ``static`` (an `ember.function`) for the first call's
    shapes, ``make(specs)`` (an `ember.function` with that input signature) for the others."""

    def __init__(self, static, make):
        self.static = static
        self.make = make
        self.first: tuple | None = None  # per tensor leaf: (shape, dtype) of the first call
        self.varying: list[set] = []  # per tensor leaf: the dimensions that have varied
        self.functions: dict = {}  # input signature -> its Function
        self.failed = False  # a symbolic trace failed: static functions from now on
        self.hinted = False  # the first call's tensors carried mark_dynamic hints
        # the first call's (shape, dtype) of each argument where all were tensors, no keyword
        # arguments and no hints: a call like it goes straight to the static function
        self.fast: tuple | None = None

    def __call__(self, args, kwargs):
        fast = self.fast
        if fast is not None and not kwargs and len(args) == len(fast):
            # (the first call's shapes again, every argument a tensor: the static program,
            # without taking the arguments apart)
            for a, (shape, dtype) in zip(args, fast):
                if not isinstance(a, Tensor) or a._data.shape != shape or a._data.dtype != dtype:
                    break
            else:
                return self.static(*args, **kwargs)
        function = self._choose(args, kwargs)
        if function is None:
            return self.static(*args, **kwargs)
        hits = function.stats.hits
        try:
            return function(*args, **kwargs)
        except (TraceError, ShapeError):
            if function.stats.hits != hits:
                raise  # (a program it had: the run's own error, not a trace's)
            # a symbolic size the program's Python could not take (a comparison the sizes'
            # bounds do not decide): the static function traces this shape, and raises the
            # error itself if the reason was not the sizes
            self.failed = True
            self.functions.clear()
            return self.static(*args, **kwargs)

    def reset(self) -> None:
        self.first, self.varying, self.failed, self.hinted = None, [], False, False
        self.fast = None
        self.functions.clear()

    def _choose(self, args, kwargs):
        """The symbolic-size function for this call, or None for the static one."""
        if self.failed:
            return None
        leaves = split_args(args, kwargs, self.static._arg_names)[0]
        if not leaves or not all(isinstance(t, Tensor) for t in leaves):
            return None  # (inside another trace, or no tensor to vary)
        shapes = tuple((tuple(t.shape), t.dtype) for t in leaves)
        if self.first is None:
            self.first = shapes
            hints = [getattr(t, "_dynamo_dynamic_indices", ()) for t in leaves]
            self.varying = [{d for d in h if d < len(t.shape)} for h, t in zip(hints, leaves)]
            self.hinted = any(self.varying)
            plain = not kwargs and all(isinstance(a, Tensor) for a in args)
            if plain and not self.hinted:
                self.fast = tuple((a._data.shape, a._data.dtype) for a in args)
        elif shapes == self.first and not self.hinted:
            return None  # (the first call's shapes: its static program)
        if len(shapes) != len(self.first):
            return None
        for (shape, dtype), (seen, seen_dtype) in zip(shapes, self.first):
            if len(shape) != len(seen) or dtype != seen_dtype:
                return None
        changed = [
            {d for d, (a, b) in enumerate(zip(shape, seen)) if a != b}
            for (shape, _), (seen, _) in zip(shapes, self.first)
        ]
        for t, dims in zip(leaves, changed):
            if dims & set(getattr(t, "_dynamo_static_indices", ())):
                return None  # (mark_static: that dimension keeps a program per size)
            if any(t.shape[d] <= 1 for d in dims):
                return None  # (a size of 0 or 1: broadcasting may read it as such)
        for varying, dims in zip(self.varying, changed):
            varying.update(dims)
        if not any(self.varying):
            return None
        # a symbol per distinct size among the varying dimensions: sizes equal in this call
        # (a batch of ids and its attention mask) are one symbol, so the trace may combine
        # them; a call where they differ has other specs, and its own trace
        symbols: dict = {}
        specs = tuple(
            (
                tuple(
                    symbols.setdefault(size, f"s{len(symbols)}") if d in varying else size
                    for d, size in enumerate(shape)
                ),
                dtype,
            )
            for varying, (shape, dtype) in zip(self.varying, shapes)
        )
        function = self.functions.get(specs)
        if function is None:
            function = self.make([TensorSpec(shape, dtype) for shape, dtype in specs])
            self.functions[specs] = function
        return function
