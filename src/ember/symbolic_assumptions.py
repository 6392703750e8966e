"""The size equalities a graph over symbolic sizes was built on, recorded so every call checks them.

symbolic.py decides that two sizes are equal when they agree wherever every symbol is a
multiple of `ALIGNED` (a U-Net's ``2*(H//2)`` is its ``H``), and that a division is exact on
the same grounds. A graph traced with such a decision holds it for every size: called at an
``H`` where it is false (an odd image), a kernel would meet operands whose shapes disagree and
fail with NumPy's own error, or compute something the model never meant. So each decision taken
while a graph is captured is recorded (`recording`) as an `Assumption`, and the captured
function checks them against the sizes of each call (`first_broken`), refusing the call with
an error naming the sizes and the assumption.

Recording costs nothing outside a capture, and only the decisions that needed the alignment
(sizes with the same expression are equal at every size) are recorded.
"""

from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass
from fractions import Fraction

__all__ = [
    "Assumption",
    "decide_by_example",
    "deciding_by_example",
    "example_sizes",
    "example_value",
    "examples",
    "first_broken",
    "record",
    "recording",
    "in_user_trace",
    "tracing_user_code",
]

_ACTIVE: contextvars.ContextVar = contextvars.ContextVar("ember_size_assumptions", default=None)
# {symbol: size} of the call being captured: what its sizes are in the call the trace runs on
_EXAMPLES: contextvars.ContextVar = contextvars.ContextVar("ember_size_examples", default=None)
# whether a comparison of sizes the symbols' bounds leave open is decided at the examples
_DECIDING: contextvars.ContextVar = contextvars.ContextVar("ember_size_deciding", default=False)
# whether the user's own Python is being traced (not the passes after it, whose choices by size
# must not become guards that retrace)
_USER: contextvars.ContextVar = contextvars.ContextVar("ember_size_user_trace", default=False)
# (`layout_by_example`: a view's layout pattern asked at the example sizes)
_LAYOUT: contextvars.ContextVar = contextvars.ContextVar("ember_layout_example", default=False)
_TESTS = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
}
_NEGATED = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}


@dataclass(frozen=True)
class Assumption:
    """``left * ratio == right`` (``kind == "equal"``), ``right`` a multiple of ``left``
    (``kind == "divides"``), or ``left op right`` (``kind == "holds"``: a guard, a comparison
    decided at the captured call's sizes), for sizes that are ints or SymDims."""

    kind: str
    left: object
    right: object
    ratio: Fraction = Fraction(1)
    op: str = ""

    def symbols(self) -> set:
        return set().union(*(getattr(v, "symbols", set)() for v in (self.left, self.right)))

    def holds(self, bindings: dict) -> bool:
        left, right = _value(self.left, bindings), _value(self.right, bindings)
        if self.kind == "divides":
            return left != 0 and right % left == 0
        if self.kind == "holds":
            return _TESTS[self.op](left, right)
        return left * self.ratio == right

    def __str__(self) -> str:
        if self.kind == "holds":
            return f"{self.left} {self.op} {self.right}"
        if self.kind == "divides":
            return f"{self.left} divides {self.right}"
        scale = "" if self.ratio == 1 else f"{self.ratio} * "
        return f"{scale}{self.left} == {self.right}"

    def describe(self, bindings: dict) -> str:
        left, right = _value(self.left, bindings), _value(self.right, bindings)
        if self.kind == "holds":
            return f"{self.left} {self.op} {self.right} (here {left} and {right})"
        if self.kind == "divides":
            return f"{self.left} divides {self.right} (here {left} and {right})"
        scale = "" if self.ratio == 1 else f"{self.ratio} * "
        return f"{scale}{self.left} == {self.right} (here {scale}{left} and {right})"


def _value(size, bindings: dict) -> int:
    return size if isinstance(size, int) else size.evaluate(bindings)


def record(kind: str, left, right, ratio: Fraction = Fraction(1)) -> None:
    """Note one decision that relied on the alignment, if a capture is recording."""
    found = _ACTIVE.get()
    if found is not None:
        found.setdefault((kind, str(left), str(right), ratio), Assumption(kind, left, right, ratio))


@contextlib.contextmanager
def recording():
    """Collect the assumptions made inside the block; yields the list they end up in (filled
    when the block exits). Nested blocks each see their own and pass them to the outer one."""
    found: dict = {}
    token = _ACTIVE.set(found)
    result: list = []
    try:
        yield result
    finally:
        _ACTIVE.reset(token)
        result.extend(found.values())
        outer = _ACTIVE.get()
        if outer is not None:
            outer.update(found)


@contextlib.contextmanager
def deciding_by_example():
    """Inside the block, a comparison of sizes that the symbols' bounds leave open (``if
    x.shape[1] > 16``, ``assert T <= block_size``) is decided at the captured call's sizes and
    recorded as a guard, which every call of the graph checks (PyTorch's guards on dynamic
    sizes); outside it, such a comparison raises."""
    token = _DECIDING.set(True)
    try:
        yield
    finally:
        _DECIDING.reset(token)


def decide_by_example(left, op: str, right) -> bool | None:
    """``left op right`` at the captured call's sizes, recorded as a guard, where
    `deciding_by_example` is on and every symbol has an example size; else None."""
    bindings = _EXAMPLES.get()
    if not _DECIDING.get() or not _USER.get() or not bindings:
        return None
    try:
        outcome = _TESTS[op](_value(left, bindings), _value(right, bindings))
    except KeyError:  # (a symbol of no argument dimension)
        return None
    held = op if outcome else _NEGATED[op]
    found = _ACTIVE.get()
    if found is not None:
        key = ("holds", str(left), str(right), held)
        found.setdefault(key, Assumption("holds", left, right, op=held))
    return outcome


def in_user_trace() -> bool:
    """Whether the user's own Python is being traced now (`tracing_user_code`)."""
    return _USER.get()


@contextlib.contextmanager
def tracing_user_code():
    """Inside the block the traced function's own Python runs: only its comparisons of sizes
    become guards (`decide_by_example`), not those of the passes that compile its graph."""
    token = _USER.set(True)
    try:
        yield
    finally:
        _USER.reset(token)


@contextlib.contextmanager
def example_sizes(bindings: dict):
    """Inside the block, `examples` gives ``bindings``: each symbol's size in the call being
    captured. A question a graph's symbolic sizes cannot answer but any size answers alike
    (whether a transpose's view is dense, for sizes other than 0 and 1) is asked of these."""
    token = _EXAMPLES.set(bindings)
    try:
        yield
    finally:
        _EXAMPLES.reset(token)


def example_value(size) -> int | None:
    """``size`` at the captured call's sizes where `deciding_by_example` is on and each of its
    symbols has one; else None."""
    bindings = _EXAMPLES.get()
    if not _DECIDING.get() or not bindings:
        return None
    try:
        return _value(size, bindings)
    except KeyError:
        return None


@contextlib.contextmanager
def layout_by_example():
    """Inside the block, a view of a tensor of symbolic sizes has its layout worked out at the
    example sizes (`examples`): for questions whose answer is the same at every size but 0
    and 1 (is it dense? can it be viewed as this shape?), never for strides handed to the
    user's code, which would bake one call's numbers into the graph."""
    token = _LAYOUT.set(True)
    try:
        yield
    finally:
        _LAYOUT.reset(token)


def layout_examples() -> dict | None:
    """`examples` inside `layout_by_example`, else None."""
    return _EXAMPLES.get() if _LAYOUT.get() else None


def examples() -> dict | None:
    """{symbol: size} of the call being captured (`example_sizes`), or None outside one."""
    return _EXAMPLES.get()


def first_broken(assumptions, bindings: dict) -> Assumption | None:
    """The first assumption that fails for these symbol sizes (those whose every symbol is
    bound), else None."""
    for assumption in assumptions:
        if assumption.symbols() <= bindings.keys() and not assumption.holds(bindings):
            return assumption
    return None
