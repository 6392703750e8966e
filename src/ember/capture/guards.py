"""Guards for the Python values a captured function reads (a global ``scale = 0.5``, an
attribute ``self.eps``, a closed-over float, a global NumPy array): `python_value` turns such a
value into a cache-key component (`PythonValue`) equal when the contents are, and `_reads` lists
what a code object loads and never stores. capture/state.py's `discover` finds the values and
puts their guards in the key, so a change retraces with a reason, as torch.compile's guards do.
"""

from __future__ import annotations

import dis
import hashlib
import types
from dataclasses import dataclass, field
from operator import is_

import numpy as np

from ..graph.tree import items as tree_items

__all__ = ["ARRAY_GUARD_LIMIT", "MISSING", "Probes", "PythonValue", "python_value"]

ARRAY_GUARD_LIMIT = 1 << 16  # elements: larger NumPy arrays are guarded by identity only

_SCALARS = (bool, int, float, complex, str, bytes, type(None))
# functions by identity: a helper or an activation held as an attribute (``self.act = F.gelu``)
# rebound between calls changes what the graph computes
_FUNCTIONS = (types.FunctionType, types.BuiltinFunctionType)
_GUARDABLE = (*_SCALARS, *_FUNCTIONS, np.generic, np.ndarray, tuple, list, dict)


@dataclass(frozen=True)
class PythonValue:
    """A Python value a traced function reads, as a cache-key component: equal when the
    contents are (``canonical``: floats by their bits, so a NaN equals itself; arrays by a
    digest), shown as the value (``shown``). ``whole``: False for a large array guarded by
    identity, shape and dtype only."""

    canonical: object
    shown: str = field(compare=False)
    whole: bool = field(default=True, compare=False)

    def __repr__(self) -> str:
        return self.shown


def _canonical(value, depth: int = 0):
    """A hashable, content-equal stand-in for a plain Python value, or None for values that
    are not guarded (objects, functions, tensors, long containers)."""
    if not isinstance(value, _GUARDABLE):  # (first: most values read are objects)
        return None
    if isinstance(value, _FUNCTIONS):
        return ("function", value)  # (held: its identity is never reused while cached)
    if isinstance(value, float):
        return ("float", value.hex())
    if isinstance(value, complex):
        return ("complex", value.real.hex(), value.imag.hex())
    if isinstance(value, _SCALARS):
        return (type(value).__name__, value)
    if isinstance(value, np.generic) and value.dtype.kind in "biufcSU":
        return ("numpy", value.dtype.str, value.tobytes())
    if isinstance(value, np.ndarray) and value.dtype.kind in "biufcSU":
        if value.size > ARRAY_GUARD_LIMIT:
            return ("large array", id(value), value.shape, value.dtype.str)
        data = np.ascontiguousarray(value)
        digest = hashlib.blake2b(data.view(np.uint8).reshape(-1), digest_size=16).digest()
        return ("array", value.shape, value.dtype.str, digest)
    if depth == 0 and isinstance(value, (tuple, list)) and len(value) <= 64:
        items = [_canonical(v, 1) for v in tree_items(value)]
        return None if None in items else (type(value).__name__, tuple(items))
    if depth == 0 and isinstance(value, dict) and len(value) <= 64:
        items = [(k, _canonical(v, 1)) for k, v in value.items()]
        if any(c is None for _, c in items) or not all(isinstance(k, _SCALARS) for k, _ in items):
            return None
        return ("dict", tuple(items))
    return None


def python_value(value) -> PythonValue | None:
    """The guard of ``value`` (see `PythonValue`), or None where it is not guarded."""
    canonical = _canonical(value)
    if canonical is None:
        return None
    if isinstance(value, np.ndarray):
        whole = canonical[0] != "large array"
        shown = f"array{value.shape} of {value.dtype}"
        if whole:  # the contents, or the start of them and a digest that tells them apart
            text = np.array2string(value.reshape(-1)[:6], separator=", ", threshold=6)
            more = ", ...]" if value.size > 6 else ""
            shown += f" {text[:-1] + more if more else text} #{canonical[3].hex()[:8]}"
        return PythonValue(canonical, shown, whole)
    if isinstance(value, _FUNCTIONS):
        return PythonValue(canonical, f"function {getattr(value, '__qualname__', value)}")
    shown = repr(value)
    return PythonValue(canonical, shown if len(shown) <= 60 else shown[:57] + "...")


_READS: dict[int, tuple] = {}  # id(code) -> (code, its `_reads`): a code object's hash is slow


def _reads(code) -> tuple:
    """``code``'s reads (`_loads`) with their labels: ((global name, label), ...), attribute
    names, ((index of the free variable, label), ...), and the same three for the names it
    also stores; computed once per code object."""
    entry = _READS.get(id(code))
    if entry is None or entry[0] is not code:
        if len(_READS) > 4096:
            _READS.clear()
        names, attrs, cells, changed = _loads(code)
        free = code.co_freevars

        def labelled(names, attrs, cells):
            return (
                tuple((n, f"global {n}") for n in names),
                attrs,
                tuple((i, f"closure variable {n}") for i, n in enumerate(free) if n in cells),
            )

        entry = _READS[id(code)] = (code, (*labelled(names, attrs, cells), labelled(*changed)))
    return entry[1]


_NUMBERS = (bool, int, float, complex)


def guards_number(value) -> bool:
    """Whether ``value`` is a number: what a name the code both loads and stores is guarded by
    (``self.steps += 1``, ``if not self.started: ... self.started = True``). The trace bakes in
    the value it found on entry and its writeback leaves the value it stored, so a call that
    finds another value must retrace, not repeat the first call; any other value such a name
    holds (a tensor, a cache) is the state's to track (capture/state.py)."""
    return isinstance(value, _NUMBERS) or (
        isinstance(value, np.generic) and value.dtype.kind in "biufc"
    )


def _loads(code) -> tuple:
    """(globals, sorted; attribute names; free variables) that ``code`` or the code nested in
    it loads and never stores: what a trace reads and the function itself does not change;
    then the same three of the names it loads and also stores (guarded while they hold
    numbers: `guards_number`)."""
    loaded: dict[str, set] = {"global": set(), "attr": set(), "deref": set()}
    stored: dict[str, set] = {"global": set(), "attr": set(), "deref": set()}
    kinds = {
        "LOAD_GLOBAL": (loaded, "global"),
        "LOAD_NAME": (loaded, "global"),
        "STORE_GLOBAL": (stored, "global"),
        "DELETE_GLOBAL": (stored, "global"),
        "LOAD_ATTR": (loaded, "attr"),
        "LOAD_METHOD": (loaded, "attr"),
        "STORE_ATTR": (stored, "attr"),
        "DELETE_ATTR": (stored, "attr"),
        "LOAD_DEREF": (loaded, "deref"),
        "LOAD_CLASSDEREF": (loaded, "deref"),
        "STORE_DEREF": (stored, "deref"),
        "DELETE_DEREF": (stored, "deref"),
    }
    stack = [code]
    while stack:
        c = stack.pop()
        for ins in dis.get_instructions(c):
            kind = kinds.get(ins.opname)
            if kind is not None and isinstance(ins.argval, str):
                kind[0][kind[1]].add(ins.argval)
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    names = tuple(sorted(loaded["global"] - stored["global"]))
    changed = tuple(sorted(loaded["global"] & stored["global"]))
    kept = (frozenset(loaded[k] - stored[k]) for k in ("attr", "deref"))
    both = (frozenset(loaded[k] & stored[k]) for k in ("attr", "deref"))
    return (names, *kept, (changed, *both))


MISSING = object()  # what a probe saw where a name was not set (or a closure cell empty)
_IMMUTABLE = (*_SCALARS, *_FUNCTIONS, np.generic)


class Probes:
    """The reads of Python state one discovery made (capture/state.py `discover`), kept to
    check later, by identity, that every read would give the same object again, so that the
    discovery's result still holds: closure cells, entries of dicts (globals, an object's
    ``__dict__``, read or found missing), the items of the lists and dicts it walked, and the
    guarded values whose contents can change in place (lists, dicts, arrays), re-guarded by
    content. A walk whose every read gives the same objects goes the same way, so it finds the
    same modules, tensors and guards."""

    __slots__ = ("cells", "entries", "lists", "dicts", "values", "_seen")

    def __init__(self):
        self.cells: list = []  # (cell, its contents or MISSING)
        self.entries: list = []  # (mapping, key, its value or MISSING)
        self.lists: list = []  # (list, its items)
        self.dicts: list = []  # (dict, its keys, its values)
        self.values: list = []  # (value, its PythonValue): mutable guarded values
        self._seen: set = set()

    def cell(self, cell):
        """``cell``'s contents (ValueError where it is empty, as reading it raises)."""
        try:
            value = cell.cell_contents
        except ValueError:
            value = MISSING
        if ("cell", id(cell)) not in self._seen:
            self._seen.add(("cell", id(cell)))
            self.cells.append((cell, value))
        if value is MISSING:
            raise ValueError("empty cell")
        return value

    def entry(self, mapping: dict, key):
        """``mapping[key]``, or MISSING."""
        value = mapping.get(key, MISSING)
        if (id(mapping), key) not in self._seen:
            self._seen.add((id(mapping), key))
            self.entries.append((mapping, key, value))
        return value

    def contents(self, container) -> None:
        """Note the items of a list or dict the walk goes through."""
        if isinstance(container, list):
            self.lists.append((container, tuple(container)))
        elif isinstance(container, dict):
            self.dicts.append((container, tuple(container), tuple(container.values())))

    def guarded(self, value, guard: PythonValue) -> None:
        """Note a guarded value whose contents can change in place (a list, a dict, an array,
        a tuple holding an array)."""
        if isinstance(value, _IMMUTABLE):
            return
        if isinstance(value, tuple) and all(isinstance(v, _IMMUTABLE) for v in value):
            return
        self.values.append((value, guard))

    def hold(self) -> bool:
        """Whether every read still gives what it gave (and guarded contents are unchanged)."""
        for cell, value in self.cells:
            try:
                if cell.cell_contents is not value:
                    return False
            except ValueError:
                if value is not MISSING:
                    return False
        for mapping, key, value in self.entries:
            if mapping.get(key, MISSING) is not value:
                return False
        for container, items in self.lists:
            if len(container) != len(items) or not all(map(is_, container, items)):
                return False
        for container, keys, values in self.dicts:
            if (
                len(container) != len(keys)
                or tuple(container) != keys
                or not all(map(is_, container.values(), values))
            ):
                return False
        for value, guard in self.values:  # (contents alone: not `python_value`'s text)
            if not _canonical(value) == (None if guard is None else guard.canonical):
                return False
        return True
