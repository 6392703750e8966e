"""A captured graph over symbolic sizes checks, on every call, the size equalities it was built on.

Tracing with ``None`` dimensions (``input_signature=[TensorSpec((None, 3, None, None))]``,
``dynamic=True``) takes two sizes to be equal, or a division to be exact, when that holds for
aligned sizes (symbolic.py; the decisions are recorded by symbolic_assumptions.py while the call
is captured). `SizeCheck` binds each symbol to the argument dimension it names and refuses a
call whose sizes break one of them, naming the sizes, the assumption and the argument's shape,
before any kernel meets operands that disagree.
"""

from __future__ import annotations

from ..errors import ShapeError
from ..symbolic import SymDim, sym
from ..symbolic_assumptions import first_broken
from .call import ArgFeed


class SizeGuardError(ShapeError):
    """A call whose sizes break what the graph was captured assuming (an equality of aligned
    sizes, or a comparison the trace decided at its own call's sizes under automatic dynamic
    shapes): automatic dynamic shapes trace again for these sizes; anyone else sees the
    ShapeError it is."""


class SizeCheck:
    """The assumptions of one captured call, where each of their symbols is read, and the
    argument dimensions derived from other ones (a signature's ``2*n`` or ``h//2`` beside
    ``n`` or ``h``), which a call must give exactly (the graph was traced with that size)."""

    def __init__(self, graph, feeds, assumptions: tuple):
        self.assumptions = assumptions
        self.graph_name = graph.name
        # (module, attribute, size or shape) the traced Python stored a symbolic size in
        # (``self.seq_len = x.size(1)``): set to each call's value, as each eager call would
        self.stored: list = []
        # symbol -> (argument index, axis, k): that dimension is k times the symbol
        self.sources: dict[str, tuple[int, int, int]] = {}
        dims = []
        for value, feed in zip(graph.inputs, feeds):
            if isinstance(feed, ArgFeed):
                dims.extend((feed.index, axis, d) for axis, d in enumerate(value.type.shape))
        for index, axis, d in dims:
            name = d.symbol() if isinstance(d, SymDim) else None
            if name is not None:
                self.sources.setdefault(name, (index, axis, 1))
        for index, axis, d in dims:  # (then k * symbol, where the symbol is not alone)
            scaled = d.scaled_symbol() if isinstance(d, SymDim) else None
            if scaled is not None:
                self.sources.setdefault(scaled[1], (index, axis, scaled[0]))
        sources = {(index, axis) for index, axis, _ in self.sources.values()}
        self.derived = [
            (index, axis, d)
            for index, axis, d in dims
            if isinstance(d, SymDim)
            and (index, axis) not in sources
            and d.symbol() is None  # (one symbol named twice: the same size by convention)
            and d.symbols() <= set(self.sources)
        ]

    @property
    def needed(self) -> bool:
        """Whether a call has anything to check."""
        return bool(self.assumptions or self.derived or self.stored)

    def store(self, bindings: dict) -> None:
        """Set the stored attributes to their sizes at ``bindings``."""
        for module, name, value in self.stored:
            object.__setattr__(module, name, _at(value, bindings))

    def __call__(self, leaves: list) -> None:
        bindings = {}
        for name, (index, axis, k) in self.sources.items():
            shape = leaves[index].shape
            if axis < len(shape):
                if int(shape[axis]) % k:
                    self._refuse_derived(leaves, index, axis, k * sym(name))
                bindings[name] = int(shape[axis]) // k
        for index, axis, d in self.derived:
            shape = leaves[index].shape
            if axis < len(shape) and d.evaluate(bindings) != int(shape[axis]):
                self._refuse_derived(leaves, index, axis, d, bindings)
        broken = first_broken(self.assumptions, bindings)
        if broken is None:
            self.store(bindings)
            return
        sizes = ", ".join(f"{n}={bindings[n]}" for n in sorted(broken.symbols()))
        index = self.sources[sorted(broken.symbols())[0]][0]
        raise SizeGuardError(
            f"the graph was captured over symbolic sizes assuming "
            f"{broken.describe(bindings)}, which these sizes ({sizes}; argument {index} has "
            f"shape {tuple(leaves[index].shape)}) break; the model needs sizes for which that "
            "holds (an image size its strides divide), or call it eagerly",
            op=self.graph_name,
        )

    def _refuse_derived(self, leaves, index, axis, d, bindings=None):
        read = ", ".join(
            f"{name} from argument {i} axis {a}"
            for name, (i, a, _) in sorted(self.sources.items())
            if name in d.symbols()
        )
        value = "" if bindings is None else f" = {d.evaluate(bindings)}"
        raise ShapeError(
            f"argument {index} has shape {tuple(leaves[index].shape)}: its axis {axis} must be "
            f"{d}{value}, the size the graph was captured with ({read}); give sizes that fit "
            "the input signature, or call it eagerly",
            op=self.graph_name,
        )


def _at(value, bindings: dict):
    """A stored size (a SymDim, or a shape of them) at ``bindings``: ints, in its own kind."""
    if isinstance(value, SymDim):
        return value.evaluate(bindings)
    sizes = [_at(v, bindings) if isinstance(v, SymDim) else v for v in value]
    return tuple(sizes) if type(value) is tuple else type(value)(sizes)
