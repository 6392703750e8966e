"""Symbolic dimensions: a size known only by name (the batch ``N``), in graph value types.

A `SymDim` is a monomial ``coefficient * N^a * M^b ...``. That covers what shape rules do with a
batch dimension: carry it through (``[N, 784]``), multiply it (``reshape`` of ``[N, 28, 28]`` to
``[N * 784]``) and divide the product back (``reshape(-1, 784)`` gives ``N``). Sums of like
monomials work (``concat`` of two ``N`` gives ``2*N``); anything else (``N + 1``, ordering
comparisons) raises a `ShapeError`, because guessing would make a shape rule silently wrong.

A symbolic size is never 1: rules that test ``d == 1`` for broadcasting treat it as a real
dimension, as PyTorch's dynamic shapes do.
"""

from __future__ import annotations

from .errors import ShapeError

__all__ = ["SymDim", "is_symbolic", "sym"]


class SymDim:
    __slots__ = ("coefficient", "factors")

    def __init__(self, coefficient: int, factors: tuple):
        self.coefficient = int(coefficient)
        self.factors = factors  # sorted ((name, power), ...), powers positive

    # -------- construction
    @staticmethod
    def _make(coefficient: int, powers: dict) -> SymDim | int:
        factors = tuple(sorted((n, p) for n, p in powers.items() if p != 0))
        if any(p < 0 for _, p in factors):
            raise ShapeError(f"symbolic size {_fmt(coefficient, factors)} is not a whole number")
        return int(coefficient) if not factors or coefficient == 0 else SymDim(coefficient, factors)

    def _powers(self) -> dict:
        return dict(self.factors)

    # -------- arithmetic
    def __mul__(self, other):
        if isinstance(other, SymDim):
            powers = self._powers()
            for name, p in other.factors:
                powers[name] = powers.get(name, 0) + p
            return SymDim._make(self.coefficient * other.coefficient, powers)
        if isinstance(other, int):
            return SymDim._make(self.coefficient * other, self._powers())
        return NotImplemented

    __rmul__ = __mul__

    def __floordiv__(self, other):
        if isinstance(other, int):
            if other == 0 or self.coefficient % other:
                raise ShapeError(f"cannot divide the symbolic size {self} by {other} exactly")
            return SymDim._make(self.coefficient // other, self._powers())
        if isinstance(other, SymDim):
            powers = self._powers()
            for name, p in other.factors:
                powers[name] = powers.get(name, 0) - p
            if self.coefficient % other.coefficient:
                raise ShapeError(f"cannot divide the symbolic size {self} by {other} exactly")
            return SymDim._make(self.coefficient // other.coefficient, powers)
        return NotImplemented

    def __mod__(self, other):
        """0 when the division is exact for every value of the symbols; otherwise undecidable
        (a reshape whose -1 could not be resolved for some batch sizes) and an error."""
        try:
            self // other
        except ShapeError:
            raise ShapeError(
                f"cannot tell whether {other} divides the symbolic size {self}"
            ) from None
        return 0

    def __rfloordiv__(self, other):
        if isinstance(other, int):
            raise ShapeError(f"cannot divide {other} by the symbolic size {self}")
        return NotImplemented

    def __add__(self, other):
        if isinstance(other, SymDim) and other.factors == self.factors:
            return SymDim._make(self.coefficient + other.coefficient, self._powers())
        if other == 0:
            return self
        sign, term = ("-", -other) if isinstance(other, int) and other < 0 else ("+", other)
        raise ShapeError(
            f"symbolic sizes support products and sums of like terms only, not {self} {sign} "
            f"{term}; give this dimension a concrete size"
        )

    __radd__ = __add__

    def __sub__(self, other):
        if isinstance(other, SymDim) and other.factors == self.factors:
            return SymDim._make(self.coefficient - other.coefficient, self._powers())
        if other == 0:
            return self
        if isinstance(other, int):
            return self.__add__(-other)  # raises the explanatory error, naming self - other
        raise ShapeError(
            f"symbolic sizes support products and sums of like terms only, not {self} - "
            f"{other}; give this dimension a concrete size"
        )

    def __neg__(self):
        raise ShapeError(f"a size cannot be negative: -{self}")

    # -------- comparisons
    def __eq__(self, other) -> bool:
        if isinstance(other, SymDim):
            return self.coefficient == other.coefficient and self.factors == other.factors
        return False  # never equal to a concrete size (in particular, never 1)

    def __ne__(self, other) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash((self.coefficient, self.factors))

    # a symbolic size is a positive whole number: ordering against 0 (the checks shape rules
    # make for -1 placeholders and negative sizes) is known; anything else is not
    def _order(self, other, op: str):
        raise ShapeError(
            f"cannot decide {self} {op} {other}: the symbolic size has no value while the "
            "graph is built"
        )

    def _same_terms(self, other) -> bool:
        return isinstance(other, SymDim) and other.factors == self.factors

    def __lt__(self, other):
        if self._same_terms(other):  # k*N < m*N for every N exactly when k < m
            return self.coefficient < other.coefficient
        return False if isinstance(other, int) and other <= 1 else self._order(other, "<")

    def __le__(self, other):
        if self._same_terms(other):
            return self.coefficient <= other.coefficient
        return False if isinstance(other, int) and other <= 0 else self._order(other, "<=")

    def __gt__(self, other):
        if self._same_terms(other):
            return self.coefficient > other.coefficient
        return True if isinstance(other, int) and other <= 0 else self._order(other, ">")

    def __ge__(self, other):
        if self._same_terms(other):
            return self.coefficient >= other.coefficient
        return True if isinstance(other, int) and other <= 1 else self._order(other, ">=")

    def __index__(self):
        raise ShapeError(
            f"the symbolic size {self} has no concrete value while the graph is built; use "
            "x.shape[i] in ember ops (reshape, view, ...) rather than in Python arithmetic"
        )

    __int__ = __index__

    def __bool__(self) -> bool:
        return True  # a size that is a symbol is not zero

    # -------- text
    def __str__(self) -> str:
        return _fmt(self.coefficient, self.factors)

    def __repr__(self) -> str:
        return f"SymDim({self})"

    def evaluate(self, bindings: dict) -> int:
        """The concrete size once each symbol's size is known (``bindings``: name -> int)."""
        value = self.coefficient
        for name, power in self.factors:
            value *= bindings[name] ** power
        return value

    def to_json(self) -> dict:
        return {"coefficient": self.coefficient, "factors": [list(f) for f in self.factors]}

    @staticmethod
    def from_json(record: dict) -> SymDim | int:
        powers = {str(name): int(p) for name, p in record["factors"]}
        return SymDim._make(int(record["coefficient"]), powers)


def _fmt(coefficient: int, factors: tuple) -> str:
    names = "*".join(n if p == 1 else f"{n}^{p}" for n, p in factors)
    if coefficient == 1:
        return names
    return f"{coefficient}*{names}"


def sym(name: str) -> SymDim:
    """A fresh symbolic dimension called ``name``."""
    if not name.isidentifier():
        raise ValueError(f"a symbolic dimension needs an identifier as its name, got {name!r}")
    return SymDim(1, ((name, 1),))


def is_symbolic(d) -> bool:
    return isinstance(d, SymDim)


def has_symbols(obj) -> bool:
    """Whether ``obj`` (an attribute: a size, or tuples/lists/dicts of them) holds a SymDim."""
    if isinstance(obj, SymDim):
        return True
    if isinstance(obj, (tuple, list)):
        return any(has_symbols(o) for o in obj)
    if isinstance(obj, dict):
        return any(has_symbols(o) for o in obj.values())
    return False


def resolve(obj, bindings: dict):
    """``obj`` with every SymDim replaced by its size under ``bindings``."""
    if isinstance(obj, SymDim):
        return obj.evaluate(bindings)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # a NamedTuple (a TensorType)
        return type(obj)(*(resolve(o, bindings) for o in obj))
    if isinstance(obj, (tuple, list)):
        return type(obj)(resolve(o, bindings) for o in obj)
    if isinstance(obj, dict):
        return {k: resolve(v, bindings) for k, v in obj.items()}
    return obj


def symbol_sources(graph) -> dict:
    """Where each symbol of ``graph`` gets its size at run time: name -> (input position,
    axis), from the first input dimension that is exactly that symbol. A symbol with no such
    dimension raises ShapeError: nothing could tell its size."""
    sources: dict = {}
    for position, value in enumerate(graph.inputs):
        for axis, d in enumerate(value.type.shape):
            if isinstance(d, SymDim) and d.coefficient == 1 and len(d.factors) == 1:
                name, power = d.factors[0]
                if power == 1:
                    sources.setdefault(name, (position, axis))
    needed = set()
    for node in graph.nodes:
        for v in node.outputs:
            for d in v.type.shape:
                if isinstance(d, SymDim):
                    needed.update(n for n, _ in d.factors)
    missing = needed - set(sources)
    if missing:
        raise ShapeError(
            f"graph {graph.name}: the symbolic size(s) {sorted(missing)} appear in no input "
            "dimension on their own, so their values cannot be known when the graph runs"
        )
    return sources
