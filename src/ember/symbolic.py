"""Symbolic dimensions: sizes known only by name (the batch ``N``, an image's ``H``), in graph
value types.

A `SymDim` is a polynomial with integer coefficients over *atoms*: the symbols, and floor
divisions ``floor(p / k)`` of such a polynomial by a whole number ``k >= 2``. That covers what
shape rules do with sizes: carry them (``[N, 784]``), multiply them (``reshape`` of
``[N, 28, 28]`` to ``[N * 784]``), divide a product back exactly (``reshape(-1, 784)`` gives
``N``), add and subtract (``concat`` gives ``2*N``, a slice ``x[:, 1:-1]`` gives ``H-2``) and
divide with rounding down (a stride-2 convolution's ``(H-1)//2+1``, a pooling's ``H//2``). A
polynomial is kept in one normal form (terms sorted, floors of multiples taken apart:
``(2*H+1)//2`` is ``H``, ``(H//2)//2`` is ``H//4``), so equal expressions compare and hash equal.
A size without symbols is a plain int.

Assumptions, which a model's own run checks (its kernels, or the runtime an exported model
runs on, meet the concrete sizes):

* A symbol is a size of at least 1, and a symbolic size is never 1 as far as broadcasting goes
  (rules that test ``d == 1`` treat it as a real dimension, as PyTorch's dynamic shapes do).
* Two sizes are equal when they agree wherever every symbol is a multiple of `ALIGNED` (a
  large number with many small factors: image sizes divisible by the strides a model takes).
  So a U-Net's skip connection ``H`` and its upsampled ``2*(H//2)`` or ``2*((H+1)//2)`` are
  one size: the model runs for even ``H``, as in PyTorch, whose ``cat`` refuses the odd ones.
* An order comparison is decided by the sizes' bounds (every symbol >= 1); one the bounds do not
  decide is taken to hold for a size compared with 0 or 1 (a shape rule's "is the output
  non-empty" check: the size of an output is taken to be positive) and raises `ShapeError`
  otherwise, because guessing would make a shape rule silently wrong. A division that is not
  exact for every value of the symbols by a symbolic size raises too.
"""

from __future__ import annotations

import math
import sys
from fractions import Fraction

from . import symbolic_assumptions as assumptions
from .errors import ShapeError

__all__ = ["SymDim", "is_symbolic", "sym"]

_INF = math.inf
# equality takes every symbol to be a multiple of this: 2**12 * 3**4 * 5**2 * 7**2, so floors by
# the strides, scales and kernel sizes models use come apart
ALIGNED = 2**12 * 3**4 * 5**2 * 7**2


class _Floor:
    """The atom ``floor(numerator / divisor)``: a SymDim over a whole number >= 2."""

    __slots__ = ("numerator", "divisor", "_key")

    def __init__(self, numerator: SymDim, divisor: int):
        self.numerator = numerator
        self.divisor = divisor
        self._key = (1, str(self))

    def __eq__(self, other) -> bool:
        return (
            isinstance(other, _Floor)
            and self.divisor == other.divisor
            and self.numerator._terms == other.numerator._terms
        )

    def __hash__(self) -> int:
        return hash(self._key)

    def __str__(self) -> str:
        inner = str(self.numerator)
        if len(self.numerator._terms) > 1 or self.numerator._terms[0][1] != 1:
            inner = f"({inner})"
        return f"{inner}//{self.divisor}"


def _atom_key(atom):
    return (0, atom) if isinstance(atom, str) else atom._key


def _mono_key(mono):
    return tuple((_atom_key(a), p) for a, p in mono)


def _mono_mul(m1: tuple, m2: tuple) -> tuple:
    powers = dict(m1)
    for atom, p in m2:
        powers[atom] = powers.get(atom, 0) + p
    return tuple(sorted(powers.items(), key=lambda ap: _atom_key(ap[0])))


def _terms_of(value) -> dict:
    """``value`` (an int or a SymDim) as {monomial: coefficient}; the constant's monomial is ()."""
    if isinstance(value, SymDim):
        return dict(value._terms)
    return {(): int(value)} if value else {}


def _make(terms: dict):
    """The normal form of {monomial: coefficient}: an int when no symbol is left."""
    kept = {m: int(c) for m, c in terms.items() if c}
    if not any(kept):  # no non-constant monomial
        return kept.get((), 0)
    return SymDim._of(tuple(sorted(kept.items(), key=lambda mc: _mono_key(mc[0]))))


def _add(a: dict, b: dict, sign: int = 1) -> dict:
    out = dict(a)
    for m, c in b.items():
        out[m] = out.get(m, 0) + sign * c
    return out


def _mul(a: dict, b: dict) -> dict:
    out: dict = {}
    for m1, c1 in a.items():
        for m2, c2 in b.items():
            m = _mono_mul(m1, m2)
            out[m] = out.get(m, 0) + c1 * c2
    return out


def _floor_div(terms: dict, k: int):
    """floor(terms / k) in normal form, k >= 1: the multiples of k taken out of the floor, the
    rest (divided by the common factor it shares with k) one `_Floor` atom."""
    quotient, rest = {}, {}
    for m, c in terms.items():
        q, r = divmod(c, k)
        if q:
            quotient[m] = q
        if r:
            rest[m] = r
    if not any(rest):  # (the remainder is a constant in [0, k): its floor is 0)
        return _make(quotient)
    g = math.gcd(k, *rest.values())
    rest, k = {m: c // g for m, c in rest.items()}, k // g
    if k == 1:
        return _make(_add(quotient, rest))
    inner = _make(rest)
    floors = [m for m in rest if m]
    if len(floors) == 1 and rest[floors[0]] == 1 and len(floors[0]) == 1:
        atom, power = floors[0][0]
        if power == 1 and isinstance(atom, _Floor):
            # floor((floor(p/a) + c)/k) = floor((p + a*c)/(a*k)): one floor, not two
            numerator = _add(dict(atom.numerator._terms), {(): atom.divisor * rest.get((), 0)})
            return _make(_add(quotient, _terms_of(_floor_div(numerator, atom.divisor * k))))
    return _make(_add(quotient, {((_Floor(inner, k), 1),): 1}))


def _interval_mul(a: tuple, b: tuple) -> tuple:
    # (0 * inf is 0 here: a bound of 0 times an unbounded factor)
    products = [0 if (x == 0 or y == 0) else x * y for x in a for y in b]
    return min(products), max(products)


def _bounds(terms) -> tuple:
    """(lowest, highest) value of ``terms`` with every symbol in [1, inf): each floor of degree
    one written as its quotient less a slack in [0, (k-1)/k] (so ``H - 2*(H//2)`` is known to
    lie in [0, 1]), the rest bounded by interval arithmetic, the ends rounded inwards (the
    value is a whole number)."""
    linear, lo, hi = _linearized(terms)
    for mono, c in linear.items():
        if not c:
            continue
        interval = (Fraction(1), Fraction(1))
        for atom, power in mono:
            if isinstance(atom, str):
                a = (Fraction(1), _INF)
            else:
                n_lo, n_hi = _bounds(atom.numerator._terms)
                a = (_floor_of(n_lo, atom.divisor), _floor_of(n_hi, atom.divisor))
            for _ in range(power):
                interval = _interval_mul(interval, a)
        t_lo, t_hi = (c * interval[0], c * interval[1])
        lo, hi = lo + min(t_lo, t_hi), hi + max(t_lo, t_hi)
    return (math.ceil(lo) if _finite(lo) else lo), (math.floor(hi) if _finite(hi) else hi)


def _nan(v) -> bool:
    return not isinstance(v, Fraction) and math.isnan(v)


def _finite(v) -> bool:
    return isinstance(v, Fraction) or math.isfinite(v)


def _floor_of(v, k: int):
    return Fraction(math.floor(v / k)) if _finite(v) else v


def _linearized(terms) -> tuple:
    """({monomial: Fraction}, slack low, slack high): ``terms`` with each floor that stands
    alone in its monomial replaced by its quotient, the rounding left as the slack interval."""
    linear: dict = {}
    lo = hi = Fraction(0)
    for mono, c in terms:
        atom = mono[0][0] if len(mono) == 1 and mono[0][1] == 1 else None
        if not isinstance(atom, _Floor):
            linear[mono] = linear.get(mono, 0) + Fraction(c)
            continue
        k = atom.divisor
        inner, inner_lo, inner_hi = _linearized(atom.numerator._terms)
        for m, v in inner.items():
            linear[m] = linear.get(m, 0) + v * c / k
        # c * floor(p/k) = c * (p/k - f), f in [0, (k-1)/k]; p's own slack scaled by c/k
        ends = (Fraction(0), Fraction(-c * (k - 1), k))
        lo, hi = lo + min(ends), hi + max(ends)
        scaled = (inner_lo * c / k, inner_hi * c / k)
        lo, hi = lo + min(scaled), hi + max(scaled)
    return linear, lo, hi


class SymDim:
    __slots__ = ("_terms", "_hash", "_scaled")

    def __init__(self, coefficient: int, factors: tuple):
        """The monomial ``coefficient * name1^p1 * ...`` (``factors``: ((name, power), ...))."""
        made = _make({tuple(sorted((str(n), int(p)) for n, p in factors)): int(coefficient)})
        if not isinstance(made, SymDim):
            raise ShapeError(f"SymDim({coefficient}, {factors}) has no symbol")
        self._terms = made._terms
        self._hash = self._scaled = None

    @classmethod
    def _of(cls, terms: tuple) -> SymDim:
        self = object.__new__(cls)
        self._terms = terms
        self._hash = self._scaled = None
        return self

    # -------- reading
    def symbol(self) -> str | None:
        """The name, when this size is exactly one symbol (an input's ``None`` dimension)."""
        if len(self._terms) == 1:
            mono, c = self._terms[0]
            if c == 1 and len(mono) == 1 and mono[0][1] == 1 and isinstance(mono[0][0], str):
                return mono[0][0]
        return None

    def scaled_symbol(self) -> tuple[int, str] | None:
        """(k, name) when this size is ``k * name`` for a whole k >= 1, else None."""
        mono = self._monomial()
        if mono is not None and len(mono[1]) == 1 and mono[1][0][1] == 1:
            return mono[0], mono[1][0][0]
        return None

    def symbols(self) -> set:
        """The names of every symbol in the expression (inside floors too)."""
        names: set = set()
        for mono, _ in self._terms:
            for atom, _ in mono:
                names |= {atom} if isinstance(atom, str) else atom.numerator.symbols()
        return names

    def fold(self, symbol, number, add, mul, floor):
        """The expression rebuilt with the given functions: ``symbol(name)``, ``number(int)``,
        ``add(a, b)``, ``mul(a, b)``, ``floor(a, int)`` (how it is evaluated, written as Python
        or as ONNX nodes)."""
        total = None
        for mono, c in self._terms:
            term = None
            for atom, power in mono:
                if isinstance(atom, str):
                    value = symbol(atom)
                else:
                    inner = atom.numerator.fold(symbol, number, add, mul, floor)
                    value = floor(inner, atom.divisor)
                for _ in range(power):
                    term = value if term is None else mul(term, value)
            if term is None:
                term = number(c)
            elif c != 1:
                term = mul(number(c), term)
            total = term if total is None else add(total, term)
        return total

    def evaluate(self, bindings: dict) -> int:
        """The concrete size once each symbol's size is known (``bindings``: name -> int)."""
        return self.fold(
            lambda n: int(bindings[n]),
            int,
            lambda a, b: a + b,
            lambda a, b: a * b,
            lambda a, k: a // k,
        )

    # -------- arithmetic
    def __add__(self, other):
        if isinstance(other, (SymDim, int)):
            return _make(_add(dict(self._terms), _terms_of(other)))
        return NotImplemented

    __radd__ = __add__

    def __sub__(self, other):
        if isinstance(other, (SymDim, int)):
            return _make(_add(dict(self._terms), _terms_of(other), -1))
        return NotImplemented

    def __rsub__(self, other):
        if isinstance(other, int):
            return _make(_add(_terms_of(other), dict(self._terms), -1))
        return NotImplemented

    def __neg__(self):
        return _make({m: -c for m, c in self._terms})

    def __mul__(self, other):
        if isinstance(other, float) and other.is_integer():  # (a scale factor of 2.0)
            other = int(other)
        if isinstance(other, (SymDim, int)):
            return _make(_mul(dict(self._terms), _terms_of(other)))
        if isinstance(other, float):
            raise ShapeError(
                f"the symbolic size {self} times {other} is no whole number while the graph is "
                "built; use whole-number arithmetic on sizes (// for division)"
            )
        return NotImplemented

    __rmul__ = __mul__

    def __floordiv__(self, other):
        if isinstance(other, int) and not isinstance(other, bool):
            if other <= 0:
                raise ShapeError(f"cannot divide the symbolic size {self} by {other}")
            return _floor_div(dict(self._terms), other)
        if isinstance(other, SymDim):
            exact = self._divide_exactly(other)
            if exact is None:
                raise ShapeError(f"cannot divide the symbolic size {self} by {other} exactly")
            return exact
        return NotImplemented

    def ratio(self, other, *, relied_on: bool = True) -> Fraction | None:
        """self / other when that is one number wherever every symbol is a multiple of ALIGNED
        (a U-Net's ``2*(H//2)`` over ``H`` is 2), else None. A ratio that holds for aligned
        sizes only is recorded as an assumption (symbolic_assumptions.py) unless the caller
        says it does not rely on it (``relied_on=False``: it checks the expressions itself)."""
        if not isinstance(other, SymDim):
            return None
        mine, theirs = dict(self._aligned()), dict(other._aligned())
        if set(mine) != set(theirs):
            return None
        mono = next(iter(theirs))
        r = Fraction(mine[mono], theirs[mono])
        if not all(mine[m] == r * c for m, c in theirs.items()):
            return None
        scaled_mine = {m: c * r.denominator for m, c in self._terms}
        if relied_on and scaled_mine != {m: c * r.numerator for m, c in other._terms}:
            if not _agree_at_example(self, other, r):
                return None  # (automatic dynamic shapes: not at the traced call's sizes)
            assumptions.record("equal", other, self, r)  # (the ratio for aligned sizes only)
        return r

    def _divide_exactly(self, other: SymDim):
        """self / other where other divides self as polynomials, or (a monomial ``c * m``
        dividing every term) where ``c`` divides the rest for every ALIGNED value of the
        symbols (then that quotient's floor); else None."""
        if len(other._terms) != 1:
            return _poly_divide(dict(self._terms), dict(other._terms))
        ((div_mono, div_c),) = other._terms
        divisor_powers = dict(div_mono)
        out = {}
        for mono, c in self._terms:
            powers = dict(mono)
            for atom, p in divisor_powers.items():
                if powers.get(atom, 0) < p:
                    return _constant_ratio(self, other)
                powers[atom] -= p
            kept = ((a, p) for a, p in powers.items() if p)
            out[tuple(sorted(kept, key=lambda ap: _atom_key(ap[0])))] = c
        if div_c < 0:
            out, div_c = {m: -c for m, c in out.items()}, -div_c
        quotient = _make(out)
        if isinstance(quotient, int):
            return quotient // div_c if quotient % div_c == 0 else None
        return quotient // div_c if quotient._aligned_multiple(div_c) else None

    def _aligned_multiple(self, k: int) -> bool:
        """Whether k divides self wherever every symbol is a multiple of ALIGNED (recorded as
        an assumption where it does not for every value of the symbols)."""
        if not all(c % k == 0 for _, c in self._aligned()):
            return False
        if not all(c % k == 0 for _, c in self._terms):
            at_example = assumptions.example_value(self)
            if at_example is not None and at_example % k:
                return False  # (automatic dynamic shapes: not at the traced call's sizes)
            assumptions.record("divides", k, self)
        return True

    def __mod__(self, other):
        """0 when the division is exact wherever every symbol is a multiple of ALIGNED (the
        assumption equality makes: a reshape's -1 over ``H*W`` by 4 is ``(H*W)//4``);
        otherwise undecidable and an error."""
        if isinstance(other, int) and other > 0:
            if self._aligned_multiple(other):
                return 0
            if assumptions.example_value(self) is not None:
                # (automatic dynamic shapes, at sizes it does not divide: the remainder as
                # a size, exact at every size, as PyTorch's symbolic Mod)
                return self - other * (self // other)
        elif isinstance(other, SymDim) and self._divide_exactly(other) is not None:
            return 0
        raise ShapeError(f"cannot tell whether {other} divides the symbolic size {self}")

    def __truediv__(self, other):
        if isinstance(other, (int, float, SymDim)):
            raise ShapeError(
                f"the symbolic size {self} / {other} is a float while the graph is built; "
                "use // on sizes (a whole number, computed when the graph runs)"
            )
        return NotImplemented

    def __rtruediv__(self, other):
        if isinstance(other, (int, float)):
            raise ShapeError(
                f"{other} / the symbolic size {self} is a float while the graph is built; "
                "give that dimension a fixed size"
            )
        return NotImplemented

    def __rfloordiv__(self, other):
        if isinstance(other, int):
            raise ShapeError(f"cannot divide {other} by the symbolic size {self}")
        return NotImplemented

    # (sizes are whole numbers: rounding them is the identity)
    def __floor__(self):
        return self

    __ceil__ = __trunc__ = __round__ = __floor__

    # -------- comparisons
    def _aligned(self) -> tuple:
        """The terms with every symbol ``s`` replaced by ``ALIGNED * s``: its floors of
        divisors of ALIGNED come apart, which is what equality compares."""
        if self._scaled is None:
            made = self.fold(
                lambda n: ALIGNED * sym(n),
                int,
                lambda a, b: a + b,
                lambda a, b: a * b,
                lambda a, k: a // k,
            )
            self._scaled = _terms_of(made).items()
            self._scaled = tuple(sorted(self._scaled, key=lambda mc: _mono_key(mc[0])))
        return self._scaled

    def __eq__(self, other) -> bool:
        if isinstance(other, SymDim):
            if self._terms == other._terms:
                return True
            if self._aligned() != other._aligned():
                return False
            if not _agree_at_example(self, other):
                return False  # (automatic dynamic shapes: not at the traced call's sizes)
            assumptions.record("equal", self, other)  # (equal for aligned sizes only)
            return True
        if (
            isinstance(other, int)
            and not isinstance(other, bool)
            and (other > 1 or self._may_be_small(other))
            and _user_caller()
        ):
            # (the user's ``if x.size(1) == 16``: under automatic dynamic shapes, decided at the
            # traced call's sizes and kept as a guard; 0 and 1 are never an input's symbolic
            # size, but an expression of one may be either (``n % 2 == 0``, ``n - 2 == 1``).
            # ember's own shape rules keep "never equal": a guard there would mix 16 with the
            # symbol)
            decided = assumptions.decide_by_example(self, "==", other)
            if decided is not None:
                return decided
        return False  # never equal to a concrete size (in particular, never 1)

    def _may_be_small(self, value: int) -> bool:
        """Whether this expression, not a bare symbol, may be ``value`` (0 or 1) by its
        bounds: a remainder ``n - 2*(n//2)`` may, a symbol (never 0 or 1) may not."""
        if value < 0 or self.symbol() is not None:
            return False
        lo, hi = _bounds(self._terms)
        return (_nan(lo) or lo <= value) and (_nan(hi) or value <= hi)

    def __ne__(self, other) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(self._aligned())
        return self._hash

    def _compare(self, other, op: str) -> bool:
        if isinstance(other, float) and math.isfinite(other):  # (a whole size against x)
            other = math.ceil(other) if op in ("<", ">=") else math.floor(other)
        if not isinstance(other, (SymDim, int)):
            return NotImplemented
        test = _TESTS[op]
        difference = self - other
        if isinstance(difference, int):
            return test(difference, 0)
        # the difference lies in [lo, hi]; a threshold test that holds (or fails) at both ends
        # holds (or fails) everywhere between
        lo, hi = _bounds(difference._terms)
        if not (_nan(lo) or _nan(hi)) and test(lo, 0) == test(hi, 0):
            return test(lo, 0)
        if isinstance(other, int):  # a size against 0 or 1: taken as a positive size
            if op == "<" and other <= 1 or op == "<=" and other <= 0:
                return False
            if op == ">" and other <= 0 or op == ">=" and other <= 1:
                return True
        decided = assumptions.decide_by_example(self, op, other)
        if decided is not None:  # (automatic dynamic shapes: a guard, checked on every call)
            return decided
        raise ShapeError(
            f"cannot decide {self} {op} {other}: the symbolic size has no value while the "
            "graph is built"
        )

    def __lt__(self, other):
        return self._compare(other, "<")

    def __le__(self, other):
        return self._compare(other, "<=")

    def __gt__(self, other):
        return self._compare(other, ">")

    def __ge__(self, other):
        return self._compare(other, ">=")

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
        text = ""
        for mono, c in sorted(self._terms, key=lambda mc: not mc[0]):  # the constant last
            factors = []
            for atom, p in mono:
                alone = len(mono) == 1 and p == 1 and abs(c) == 1
                word = atom if isinstance(atom, str) or alone else f"({atom})"
                factors.append(str(word) if p == 1 else f"{word}^{p}")
            body = "*".join(factors)
            term = str(abs(c)) if not body else body if abs(c) == 1 else f"{abs(c)}*{body}"
            text += ("-" if c < 0 else "+" if text else "") + term
        return text

    def __repr__(self) -> str:
        return f"SymDim({self})"

    # -------- files
    def to_json(self) -> dict:
        """A monomial of symbols as {"coefficient", "factors"} (the format graph files have
        always had); any other expression as {"terms": [[coefficient, [[atom, power], ...]],
        ...]}, an atom a name or {"floor": terms, "by": k}."""
        mono = self._monomial()
        if mono is not None:
            return {"coefficient": mono[0], "factors": [list(f) for f in mono[1]]}
        return {"terms": _terms_json(self._terms)}

    def _monomial(self):
        if len(self._terms) == 1:
            mono, c = self._terms[0]
            if c > 0 and mono and all(isinstance(a, str) for a, _ in mono):
                return c, mono
        return None

    @property
    def coefficient(self) -> int:
        return self._monomial_or_raise()[0]

    @property
    def factors(self) -> tuple:
        return self._monomial_or_raise()[1]

    def _monomial_or_raise(self):
        mono = self._monomial()
        if mono is None:
            raise ShapeError(f"the symbolic size {self} is not a product of symbols")
        return mono

    @staticmethod
    def from_json(record: dict) -> SymDim | int:
        """The size a `to_json` record holds; ValueError on a malformed one (graph files are
        checked by graph/load.py before, this is the last line)."""
        if "terms" in record:
            return _terms_from_json(record["terms"], 0)
        # whole numbers as JSON spells them, never coerced: int() of a file's Infinity raises
        # OverflowError, of 1.5 or "3" gives a size the file never said
        coefficient, factors = record["coefficient"], record["factors"]
        if type(coefficient) is not int or not 1 <= coefficient < 2**63:
            raise ValueError(
                f"a coefficient should be a whole number from 1, got {coefficient!r:.40}"
            )
        if not (isinstance(factors, list) and len(factors) <= 16):
            raise ValueError("the factors should be a list of at most 16 [name, power] pairs")
        powers = {}
        for factor in factors:
            if not (isinstance(factor, list) and len(factor) == 2 and type(factor[1]) is int):
                raise ValueError(f"a factor should be [name, power], got {factor!r:.80}")
            name, p = factor
            if not (isinstance(name, str) and name.isidentifier()) or name in powers:
                raise ValueError(f"a factor's name should be a new identifier, got {name!r:.40}")
            if not 1 <= p <= 64:
                raise ValueError("symbol powers must be whole numbers from 1 to 64")
            powers[name] = p
        return _make({tuple(sorted(powers.items())): coefficient})


def _user_caller() -> bool:
    """Whether SymDim.__eq__ was called from code outside ember (the user's program)."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_globals.get("__name__") == __name__:
        frame = frame.f_back  # (through __ne__)
    caller = "" if frame is None else frame.f_globals.get("__name__", "")
    return caller != "ember" and not caller.startswith("ember.")


def _agree_at_example(size, other, ratio: Fraction = Fraction(1)) -> bool:
    """Whether ``size == ratio * other`` at the captured call's sizes, where automatic dynamic
    shapes decide by them (symbolic_assumptions.py); True where they do not."""
    mine, theirs = assumptions.example_value(size), assumptions.example_value(other)
    return mine is None or theirs is None or mine == ratio * theirs


_TESTS = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def _poly_divide(num: dict, den: dict):
    """num / den by long division (the atoms as variables, graded lexicographic order), or
    None where it leaves a remainder or a coefficient is not divisible."""
    atoms = sorted({a for t in (num, den) for m in t for a, _ in m}, key=_atom_key)

    def order(mono):
        powers = dict(mono)
        exponents = tuple(powers.get(a, 0) for a in atoms)
        return (sum(exponents), exponents)

    lead_mono = max(den, key=order)
    lead_c, lead_powers = den[lead_mono], dict(lead_mono)
    rest, quotient = {m: c for m, c in num.items() if c}, {}
    for _ in range(4096):  # (each step lowers the remainder's leading term)
        if not rest:
            return _make(quotient)
        mono = max(rest, key=order)
        c, powers = rest[mono], dict(mono)
        if c % lead_c or any(powers.get(a, 0) < p for a, p in lead_powers.items()):
            return None
        q_powers = {a: p - lead_powers.get(a, 0) for a, p in powers.items()}
        q_mono = tuple(
            sorted(((a, p) for a, p in q_powers.items() if p), key=lambda ap: _atom_key(ap[0]))
        )
        step = {q_mono: c // lead_c}
        quotient = _add(quotient, step)
        rest = {m: v for m, v in _add(rest, _mul(step, den), -1).items() if v}
    return None


def _constant_ratio(a: SymDim, b: SymDim):
    """a / b when a is a whole multiple of b (their ratio a whole number), else None."""
    r = a.ratio(b)
    return int(r) if r is not None and r.denominator == 1 else None


def _terms_json(terms) -> list:
    out = []
    for mono, c in terms:
        atoms = []
        for atom, p in mono:
            if isinstance(atom, str):
                atoms.append([atom, p])
            else:
                atoms.append([{"floor": _terms_json(atom.numerator._terms), "by": atom.divisor}, p])
        out.append([c, atoms])
    return out


_MAX_DEPTH = 8  # floors nested in a file's size
_MAX_TERMS = 64


def _terms_from_json(record, depth: int):
    if depth > _MAX_DEPTH:
        raise ValueError(f"floors nested deeper than {_MAX_DEPTH}")
    if not (isinstance(record, list) and 1 <= len(record) <= _MAX_TERMS):
        raise ValueError(f"terms should be a list of 1 to {_MAX_TERMS} [coefficient, atoms]")
    total: dict = {}
    for term in record:
        if not (isinstance(term, list) and len(term) == 2 and type(term[0]) is int):
            raise ValueError(f"a term should be [coefficient, atoms], got {term!r:.80}")
        c, atoms = term
        if not -(2**62) < c < 2**62:
            raise ValueError("a coefficient should lie within +-2**62")
        if not (isinstance(atoms, list) and len(atoms) <= 16):
            raise ValueError("a term's atoms should be a list of at most 16 [atom, power]")
        value = c
        for pair in atoms:
            if not (isinstance(pair, list) and len(pair) == 2 and type(pair[1]) is int):
                raise ValueError(f"an atom should be [atom, power], got {pair!r:.80}")
            atom, p = pair
            if not 1 <= p <= 8:
                raise ValueError("an atom's power should be a whole number from 1 to 8")
            if isinstance(atom, str) and atom.isidentifier():
                base = sym(atom)
            elif isinstance(atom, dict) and set(atom) == {"floor", "by"}:
                k = atom["by"]
                if not (type(k) is int and 2 <= k < 2**62):
                    raise ValueError("a floor's divisor should be a whole number from 2")
                base = _terms_from_json(atom["floor"], depth + 1) // k
            else:
                raise ValueError(f"an atom should be a symbol name or a floor, got {atom!r:.80}")
            for _ in range(p):
                value = value * base
        total = _add(total, _terms_of(value))
    return _make(total)


def sym(name: str) -> SymDim:
    """A fresh symbolic dimension called ``name``."""
    if not name.isidentifier():
        raise ValueError(f"a symbolic dimension needs an identifier as its name, got {name!r}")
    return SymDim._of(((((name, 1),), 1),))


def holds(test) -> bool:
    """``test()`` (a comparison of sizes), taken to hold where symbolic sizes leave it
    undecided: for a shape rule's validity check, which the run checks on the concrete
    sizes (reflect padding narrower than a symbolic dimension)."""
    try:
        return bool(test())
    except ShapeError:
        return True


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
            name = d.symbol() if isinstance(d, SymDim) else None
            if name is not None:
                sources.setdefault(name, (position, axis))
    needed = set()
    for node in graph.nodes:
        for v in node.outputs:
            for d in v.type.shape:
                if isinstance(d, SymDim):
                    needed |= d.symbols()
    missing = needed - set(sources)
    if missing:
        raise ShapeError(
            f"graph {graph.name}: the symbolic size(s) {sorted(missing)} appear in no input "
            "dimension on their own, so their values cannot be known when the graph runs"
        )
    return sources
