"""Typed attribute rules: what each op's attributes may hold (kind, range, arity), checked where
attributes come from a file (graph/load.py) before any shape rule or kernel sees them.

An op's public function normalises what a user passes, so its kernels only ever see the
attributes that function makes: an axis in range, a tuple of sizes, a finite eps. A graph file
holds whatever its author wrote, and a kernel (a C loop above all) reading an empty tuple where
an axis goes, a bool where a count goes, a NaN where a size goes or an axis past the dimensions
can write outside its output. `check_attrs` refuses such a node at load.

Each attribute key has one rule: the op's own (``OpDef.attrs``, a dict of key -> rule declared
where the op is defined), else the rule of its name in `CONVENTIONS`, the meaning ember gives
that attribute name across the registry (``axis``: an axis of the first operand, ``eps``: a
finite non-negative number). tests/test_files59_attribute_rules.py walks the registry: every
keyword attribute of every op's kernel has a rule, and every attribute the ops' own samples
make passes its rule.
"""

from __future__ import annotations

import inspect
import math
import numbers

import numpy as np

from .. import dtypes as _dt

__all__ = [
    "Axes",
    "Axis",
    "Bool",
    "CONVENTIONS",
    "Choice",
    "DTypeAttr",
    "Float",
    "Int",
    "Ints",
    "Kind",
    "Nested",
    "Number",
    "OneOf",
    "Optional",
    "Pairs",
    "Str",
    "Structured",
    "attr_rule",
    "check_attrs",
]

_LIMIT = 2**63  # what an int64 holds: sizes, strides, counts
_MAX_ARITY = 64  # entries of a tuple attribute (dimensions, pairs): more than any tensor has
_MAX_TEXT = 4096  # characters of a text attribute (an einsum equation, a check's message)


def _symbolic(value) -> bool:
    from ..symbolic import SymDim

    return isinstance(value, SymDim)


def _whole(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _short(value) -> str:
    try:
        text = repr(value)
    except (ValueError, RecursionError):
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 60 else text[:57] + "..."


class Rule:
    """``problem(value, ranks)``: None where ``value`` is acceptable, else what is wrong with it.
    ``ranks``: the operands' numbers of dimensions, or None where they are not known (an
    instruction of a fused program), in which case the checks that need them are skipped."""

    def problem(self, value, ranks):  # pragma: no cover - every rule overrides it
        raise NotImplementedError


class Bool(Rule):
    def problem(self, value, ranks):
        return None if isinstance(value, (bool, np.bool_)) else "should be a bool"


class Int(Rule):
    """A whole number (not a bool) in ``[lo, hi)``; ``symbolic``: or a symbolic size."""

    def __init__(self, lo: int = -_LIMIT, hi: int = _LIMIT, *, symbolic: bool = False):
        self.lo, self.hi, self.symbolic = lo, hi, symbolic

    def problem(self, value, ranks):
        if self.symbolic and _symbolic(value):
            return None
        if not _whole(value):
            return "should be a whole number"
        if not self.lo <= value < self.hi:
            return f"should be in [{self.lo}, {self.hi})"
        return None


class Float(Rule):
    """A real number (a whole number is one; a bool is not) in ``[lo, hi]``; ``nan``: NaN
    allowed; ``finite``: infinities refused."""

    def __init__(self, lo=-math.inf, hi=math.inf, *, nan: bool = False, finite: bool = False):
        self.lo, self.hi, self.nan, self.finite = lo, hi, nan, finite

    def problem(self, value, ranks):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
            return "should be a real number"
        v = float(value)
        if math.isnan(v):
            return None if self.nan else "should be a number, not NaN"
        if self.finite and math.isinf(v):
            return "should be finite"
        if not self.lo <= v <= self.hi:
            return f"should be in [{self.lo}, {self.hi}]"
        return None


class Number(Rule):
    """Any number a tensor can hold (a fill value, a scalar factor): bool, real or complex, or
    a symbolic size (a graph over symbolic sizes fills with an element count: a mean's)."""

    def problem(self, value, ranks):
        if _symbolic(value):
            return None
        if isinstance(value, (bool, np.bool_)) or _whole(value):
            return None if -(2**64) < value < 2**64 else "is too large"
        return None if isinstance(value, numbers.Number) else "should be a number"


class Str(Rule):
    def problem(self, value, ranks):
        if not isinstance(value, str):
            return "should be text"
        return None if len(value) <= _MAX_TEXT else "is too long"


class Choice(Rule):
    def __init__(self, *choices):
        self.choices = choices

    def problem(self, value, ranks):
        for c in self.choices:
            if type(value) is type(c) and value == c:
                return None
        return f"should be one of {self.choices}"


class DTypeAttr(Rule):
    def problem(self, value, ranks):
        return None if isinstance(value, _dt.DType) else "should be a dtype"


class Kind(Rule):
    """An object of a type only the file's own tags make (a generator, a subgraph, an op, a
    program), checked by the loader as it builds it; ``what`` names the type."""

    def __init__(self, what: str, check):
        self.what, self.check = what, check

    def problem(self, value, ranks):
        return None if self.check(value) else f"should be {self.what}"


class Structured(Rule):
    """An attribute whose structure the op's shape rule checks in full (an indexing spec,
    a fused op's types): only its nesting and size are bounded here."""

    def __init__(self, why: str):
        self.why = why

    def problem(self, value, ranks):
        return _bounded(value, 0)


def _bounded(value, depth):
    if depth > 8:
        return "nests too deeply"
    if isinstance(value, (tuple, list)):
        if len(value) > 4 * _MAX_ARITY:
            return "has too many entries"
        for v in value:
            problem = _bounded(v, depth + 1)
            if problem:
                return problem
    return None


class Ints(Rule):
    """A tuple of whole numbers, each per ``item`` (default `Int` from ``lo``), of ``arity``
    entries (an int, or a range ``(min, max)``); ``symbolic``: entries may be symbolic sizes."""

    def __init__(self, lo=-_LIMIT, hi=_LIMIT, *, arity=(0, _MAX_ARITY), symbolic=False, item=None):
        self.item = item if item is not None else Int(lo, hi, symbolic=symbolic)
        self.arity = (arity, arity) if isinstance(arity, int) else arity

    def problem(self, value, ranks):
        if not isinstance(value, (tuple, list)):
            return "should be a tuple"
        if not self.arity[0] <= len(value) <= self.arity[1]:
            return f"should have {self.arity[0]} to {self.arity[1]} entries, has {len(value)}"
        for i, v in enumerate(value):
            problem = self.item.problem(v, ranks)
            if problem:
                return f"entry {i} {_short(v)} {problem}"
        return None


def Pairs(lo=-_LIMIT, arity=(0, _MAX_ARITY)) -> Ints:  # noqa: N802 - a rule's constructor
    """A tuple of ``(before, after)`` pairs of whole numbers from ``lo`` (padding)."""
    return Ints(item=Ints(lo, arity=2), arity=arity)


def Nested(item: Rule, arity=(0, _MAX_ARITY)) -> Ints:  # noqa: N802 - a rule's constructor
    """A tuple of entries each per ``item``."""
    return Ints(item=item, arity=arity)


class OneOf(Rule):
    def __init__(self, *rules: Rule):
        self.rules = rules

    def problem(self, value, ranks):
        problems = [r.problem(value, ranks) for r in self.rules]
        if any(p is None for p in problems):
            return None
        return " or ".join(dict.fromkeys(problems))


class _NoneRule(Rule):
    def problem(self, value, ranks):
        return None if value is None else "should be None"


def Optional(rule: Rule) -> OneOf:  # noqa: N802 - a rule's constructor
    return OneOf(_NoneRule(), rule)


class Axis(Rule):
    """An axis of operand ``of``: a whole number in ``[-r, r)`` for its rank ``r`` (at least 1:
    a 0-d operand's axis is 0 or -1, as PyTorch's) plus ``extra`` (stack's new axis)."""

    def __init__(self, of: int = 0, extra: int = 0):
        self.of, self.extra = of, extra

    def problem(self, value, ranks):
        if not _whole(value):
            return "should be a whole number (an axis)"
        if ranks is None or self.of >= len(ranks):
            return None if -_MAX_ARITY <= value < _MAX_ARITY else "is no axis of any tensor"
        r = max(ranks[self.of], 1) + self.extra
        if not -r <= value < r:
            return f"is out of range for an operand of {ranks[self.of]} dimensions"
        return None


class Axes(Rule):
    """A tuple of distinct axes of operand ``of``."""

    def __init__(self, of: int = 0):
        self.axis = Axis(of)

    def problem(self, value, ranks):
        if not isinstance(value, (tuple, list)):
            return "should be a tuple of axes"
        if len(value) > _MAX_ARITY:
            return "has too many axes"
        for v in value:
            problem = self.axis.problem(v, ranks)
            if problem:
                return f"axis {_short(v)} {problem}"
        if ranks is not None and self.axis.of < len(ranks):
            r = max(ranks[self.axis.of], 1)
            if len({v % r for v in value}) != len(value):
                return "names an axis twice"
        return None


def _generator(value) -> bool:
    from .. import random as _random

    return isinstance(value, _random.Generator)


def _graph(value) -> bool:
    return type(value).__name__ == "Graph" and hasattr(value, "nodes")  # (graph/ is above ops)


def _opdef(value) -> bool:
    from ._registry import OpDef

    return isinstance(value, OpDef)


def _program(value) -> bool:
    from .program import Program

    return isinstance(value, Program)


_REAL = Float(nan=True)
_FINITE = Float(finite=True)
_SIZE = Int(0)
_SIZES = Ints(0, symbolic=True)
_POSITIVE = Ints(1)
_GRAPH = Kind("a subgraph", _graph)

# The meaning of each attribute name across the registry, where the op declares no rule of its
# own for it. A name whose meaning differs between ops takes the union here and a declaration
# on the op where its kernel reads it narrowly.
CONVENTIONS: dict[str, Rule] = {
    # axes and layouts
    "axis": Axis(),
    "axes": Axes(),
    "dims": Axes(),
    "keepdims": Bool(),
    "shape": _SIZES,
    "in_shape": _SIZES,
    "in_size": _SIZES,
    "shift_shape": _SIZES,
    "out_size": Ints(0, symbolic=True),
    "size": OneOf(Int(0, symbolic=True), _SIZES),
    "sizes": _SIZES,
    "reps": _SIZES,
    "stride": Ints(1),
    "dilation": _POSITIVE,
    "kernel": _POSITIVE,
    "kernel_size": _POSITIVE,
    "padding": OneOf(Ints(0), Pairs()),  # (an input gradient's pairs crop: negative after)
    "pads": Pairs(),
    "window": Structured("pool windows: the pooling shape rule checks them"),
    "groups": Int(1),
    "offset": Int(),
    "diagonal": Int(),
    "step": Int(1),
    "steps": Int(0, symbolic=True),
    "count": Int(0, symbolic=True),
    "k": Int(0),
    "n": Int(0),
    "m": Int(0),
    "rows": _SIZE,
    "cols": _SIZE,
    "last_size": _SIZE,
    "num_samples": _SIZE,
    "blank": _SIZE,
    "src": _SIZE,
    "slot": _SIZE,
    "n_producer": _SIZE,
    "num_carries": _SIZE,
    "num_xs": _SIZE,
    "checkpoint_every": _SIZE,
    "outputs": OneOf(_SIZE, Ints(0)),
    "bins": OneOf(Int(1), Ints(1)),
    "output_mask": Nested(Bool()),
    # numbers
    "dtype": DTypeAttr(),
    "out_dtype": Str(),
    "eps": Float(0, finite=True),
    "scale": _FINITE,
    "x_scale": _FINITE,
    "out_scale": Optional(_FINITE),
    "zero_point": Int(),
    "x_zero_point": Int(),
    "out_zero_point": Int(),
    "quant_min": Int(),
    "quant_max": Int(),
    "value": Number(),
    "alpha": Number(),
    "beta": Number(),
    "start": Number(),
    "end": Number(),
    "lo": Optional(_REAL),
    "hi": Optional(_REAL),
    "low": _FINITE,
    "high": _FINITE,
    "lower": _REAL,
    "upper": OneOf(Bool(), _REAL),
    "threshold": _REAL,
    "lambd": _REAL,
    "slope": _REAL,
    "input_scale": _REAL,
    "delta": _REAL,
    "p": _REAL,
    "ord": _REAL,
    "mean": _REAL,
    "std": _REAL,
    "correction": _REAL,
    "atol": Optional(_REAL),
    "rtol": Optional(_REAL),
    "divisor_override": Optional(Int()),
    "ignore_index": Int(),
    "smoothing": Float(0, 1),
    "range": Optional(Nested(_REAL)),
    "ranges": Optional(Nested(_REAL)),
    "clamp1": Optional(Structured("a clamp's (bool, bound) pair")),
    "clamp2": Optional(Structured("a clamp's (bool, bound) pair")),
    # switches
    **{
        name: Bool()
        for name in (
            "ceil_mode",
            "count_include_pad",
            "relu",
            "reverse",
            "safe",
            "hermitian",
            "align_corners",
            "transpose",
            "density",
            "edges",
            "weighted",
            "causal",
            "inverse",
            "descending",
            "stable",
            "ordered",
            "include_self",
            "replacement",
            "right",
            "int32",
            "unitriangular",
            "full_matrices",
            "concatenated",
            "zero_inf",
            "codes",
            "real",
            "serial",
        )
    },  # fmt: skip
    # names and text
    **{
        name: Str()
        for name in (
            "mode",
            "group",
            "reduce_op",
            "norm",
            "uplo",
            "padding_mode",
            "message",
            "where",
            "reduce",
            "kind",
            "equation",
            "function",
            "reduction",
        )
    },  # fmt: skip
    # what only a file's own tags make (the loader builds and checks them)
    "generator": Optional(Kind("a generator", _generator)),
    "body": _GRAPH,
    "body_vjp": _GRAPH,
    "wrt_lifted": Structured("the lifted values a loop's gradient takes, checked by its rule"),
    "cond": _GRAPH,
    "true_branch": _GRAPH,
    "false_branch": _GRAPH,
    "producer": Kind("an op", _opdef),
    "program": Kind("a fused program", _program),
    "producer_attrs": Structured("the producer's attributes, checked as its own"),
    "out_types": Structured("a fused op's result types, checked by its shape rule"),
    "index": Structured("an indexing spec, checked by the indexing shape rules"),
    "spec": Structured("an indexing spec, checked by the indexing shape rules"),
    "backward": Structured("a recorded backward, which no file holds"),
}


def attr_rule(op, key: str) -> Rule | None:
    """The rule of ``op``'s attribute ``key``: the op's declaration, else the convention (and
    None also where the op's kernel defaults the attribute to None: a value it takes)."""
    declared = op.attrs
    if declared is not None and key in declared:
        return declared[key]
    rule = CONVENTIONS.get(key)
    if rule is not None and key in _signature(op)[1]:
        rule = Optional(rule)
    return rule


_SIGNATURES: dict = {}  # op -> (the keys it takes or None, the keys its kernel defaults to None)


def _signature(op) -> tuple:
    """The keyword attributes ``op`` takes: its NumPy kernel's (a NumPy ufunc: none but those
    the op declares), else its shape rule's where the kernel takes any (``**attrs``), else its
    declaration's where both do (None where none says); and those of them defaulting to None."""
    known = _SIGNATURES.get(op)
    if known is not None:
        return known
    declared = frozenset(op.attrs or ())
    keys, defaults_none = None, frozenset()
    if isinstance(op.kernel, np.ufunc):
        keys = declared
    else:
        for function in (op.kernel, op.infer):
            try:
                parameters = list(inspect.signature(function).parameters.values())
            except (TypeError, ValueError):  # (a builtin without a signature)
                continue
            if any(p.kind is p.VAR_KEYWORD for p in parameters):
                continue
            named = [p for p in parameters if p.kind is not p.VAR_POSITIONAL]
            keys = declared | frozenset(p.name for p in named)
            defaults_none = frozenset(p.name for p in named if p.default is None)
            break
        else:
            if op.attrs is not None:
                keys = declared
    _SIGNATURES[op] = known = (keys, defaults_none)
    return known


def taken_keys(op) -> frozenset | None:
    """The attribute keys ``op`` takes, or None where its definition does not say."""
    return _signature(op)[0]


def check_attrs(op, attrs, ranks) -> tuple[str, str] | None:
    """``(key, problem)`` of the first attribute of ``attrs`` its rule refuses (or that has no
    rule, or that the op's kernel does not take), or None. ``ranks``: the operands' numbers of
    dimensions, or None where unknown."""
    taken = taken_keys(op)
    for key, value in attrs.items():
        rule = attr_rule(op, key)
        if rule is None or (taken is not None and key not in taken):
            return key, f"is no attribute op {op.name} takes"
        problem = rule.problem(value, ranks)
        if problem:
            return key, f"{_short(value)} {problem}"
    return None


NO_ATTRS: dict = {}  # an op that takes no attributes (its kernel takes any, **attrs)
