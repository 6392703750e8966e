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
differs there goes to the static function). Each structure of tensor arguments (their ranks
and dtypes: a model called with targets while training and without them while generating)
has its own first shapes and varying dimensions. A call whose arguments hold no tensor goes to
the static function (a trace per shape, as before).

A comparison of sizes that the symbols leave open (``assert T <= block_size``, ``if
x.shape[1] > 16``) is decided at the traced call's own sizes and kept as a guard
(symbolic_assumptions.py ``deciding_by_example``), which every call checks: a call that fails
one (`SizeGuardError`) is served by another symbolic trace of the same signature, up to
`MAX_GUARDED` of them, as PyTorch recompiles on a failed guard. A symbolic trace that fails
(a size read as a Python number: ``range(T)``, ``int(T)``; a size kept in a dict, a list or a
global), or
guards past that many, sends every call to the static function from then on.
Once a structure's dimensions have varied, a call with its first shapes goes to the symbolic
program that takes them where one exists (PyTorch's newest graph serves them too), so what
that program replays each call (a module attribute set to a size) is set for them as well.
"""

from __future__ import annotations

from ..errors import ShapeError, TraceError
from ..symbolic_assumptions import deciding_by_example
from ..tensor import Tensor
from .signature import TensorSpec, split_args
from .size_checks import SizeGuardError

__all__ = ["MAX_GUARDED", "AutomaticDynamic"]

# symbolic traces kept for one pattern of varying dimensions, each for the outcomes of the size
# comparisons its trace decided (``if T > 16``); past them, the sizes steer the Python too much
# for symbolic sizes to pay: static traces, a program per shape
MAX_GUARDED = 4


class _Structure:
    """One structure of tensor arguments: its first call's (shape, dtype) per leaf, the
    dimensions that have varied since (or that mark_dynamic hinted), and whether hints came."""

    __slots__ = ("first", "varying", "hinted")

    def __init__(self, first: tuple, varying: list, hinted: bool):
        self.first, self.varying, self.hinted = first, varying, hinted


class AutomaticDynamic:
    """The function for each call: ``static`` (an `ember.function`) for the first call's
    shapes, ``make(specs)`` (an `ember.function` with that input signature) for the others."""

    def __init__(self, static, make):
        self.static = static
        self.make = make
        self.first: tuple | None = None  # per tensor leaf: (shape, dtype) of the first call
        # (rank, dtype) per tensor leaf -> that structure's first shapes and varying dimensions
        self.seen: dict = {}
        # input signature -> its Function; (signature, k) -> the k-th further one, whose trace
        # decided a comparison of sizes the other way (``if T > 16``: a guard, SizeGuardError)
        self.functions: dict = {}
        self.failed = False  # a symbolic trace failed: static functions from now on
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
        specs = self._choose(args, kwargs)
        if specs is None:
            return self.static(*args, **kwargs)
        for variant in range(MAX_GUARDED):
            # the functions of these specs in turn until one's guards hold (a comparison of
            # sizes each trace decided at its own call's sizes), else a new one
            key = specs if variant == 0 else (specs, variant)
            function = self.functions.get(key)
            if function is None:
                function = self.make([TensorSpec(shape, dtype) for shape, dtype in specs])
                self.functions[key] = function
            try:
                return self._run(function, args, kwargs)
            except SizeGuardError:
                continue
        # (the sizes decide too many branches: a program per shape, as before)
        self.failed = True
        self.functions.clear()
        return self.static(*args, **kwargs)

    def _run(self, function, args, kwargs):
        hits = function.stats.hits
        try:
            with deciding_by_example():
                return function(*args, **kwargs)
        except SizeGuardError:
            raise
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
        self.first, self.failed = None, False
        self.seen.clear()
        self.fast = None
        self.functions.clear()

    def _choose(self, args, kwargs):
        """The symbolic specs for this call ((shape, dtype) per tensor leaf), or None for the
        static function."""
        if self.failed:
            return None
        leaves = split_args(args, kwargs, self.static._arg_names)[0]
        if not leaves or not all(isinstance(t, Tensor) for t in leaves):
            return None  # (inside another trace, or no tensor to vary)
        shapes = tuple((tuple(t.shape), t.dtype) for t in leaves)
        # each structure of tensors (their ranks and dtypes: a call with and without targets)
        # has its own first shapes and varying dimensions
        structure = tuple((len(shape), dtype) for shape, dtype in shapes)
        seen = self.seen.get(structure)
        if seen is None:
            hints = [getattr(t, "_dynamo_dynamic_indices", ()) for t in leaves]
            varying = [{d for d in h if d < len(t.shape)} for h, t in zip(hints, leaves)]
            seen = self.seen[structure] = _Structure(shapes, varying, any(varying))
            if self.first is None:
                self.first = shapes
                plain = not kwargs and all(isinstance(a, Tensor) for a in args)
                if plain and not seen.hinted:
                    self.fast = tuple((a._data.shape, a._data.dtype) for a in args)
        first = shapes == seen.first and not seen.hinted
        if first and not any(seen.varying):
            return None  # (the structure's first shapes: its static program)
        changed = [
            {d for d, (a, b) in enumerate(zip(shape, before)) if a != b}
            for (shape, _), (before, _) in zip(shapes, seen.first)
        ]
        for t, dims in zip(leaves, changed):
            if dims & set(getattr(t, "_dynamo_static_indices", ())):
                return None  # (mark_static: that dimension keeps a program per size)
            if any(t.shape[d] <= 1 for d in dims):
                return None  # (a size of 0 or 1: broadcasting may read it as such)
        for varying, dims in zip(seen.varying, changed):
            varying.update(dims)
        if not any(seen.varying):
            return None
        self.fast = None  # (the first shapes too may now go to a symbolic program)
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
            for varying, (shape, dtype) in zip(seen.varying, shapes)
        )
        if first and specs not in self.functions:
            return None  # (no symbolic program takes them: the static one, no new trace)
        # (else the symbolic program serves the first shapes too, as PyTorch's newest graph
        # does: its Python's size stores, self.seq_len = T, are replayed at every call)
        return specs
