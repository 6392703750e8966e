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

import numpy as np

__all__ = ["ARRAY_GUARD_LIMIT", "PythonValue", "python_value"]

ARRAY_GUARD_LIMIT = 1 << 16  # elements: larger NumPy arrays are guarded by identity only

_SCALARS = (bool, int, float, complex, str, bytes, type(None))
_GUARDABLE = (*_SCALARS, np.generic, np.ndarray, tuple, list, dict)


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
        items = [_canonical(v, 1) for v in value]
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
    shown = repr(value)
    return PythonValue(canonical, shown if len(shown) <= 60 else shown[:57] + "...")


_READS: dict[int, tuple] = {}  # id(code) -> (code, its `_reads`): a code object's hash is slow


def _reads(code) -> tuple:
    """``code``'s reads (`_loads`) with their labels: ((global name, label), ...), attribute
    names, ((index of the free variable, label), ...); computed once per code object."""
    entry = _READS.get(id(code))
    if entry is None or entry[0] is not code:
        if len(_READS) > 4096:
            _READS.clear()
        names, attrs, cells = _loads(code)
        free = code.co_freevars
        entry = _READS[id(code)] = (
            code,
            (
                tuple((n, f"global {n}") for n in names),
                attrs,
                tuple((i, f"closure variable {n}") for i, n in enumerate(free) if n in cells),
            ),
        )
    return entry[1]


def _loads(code) -> tuple[tuple, frozenset, frozenset]:
    """(globals, sorted; attribute names; free variables) that ``code`` or the code nested in
    it loads and never stores: what a trace reads and the function itself does not change."""
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
    return (names, *(frozenset(loaded[k] - stored[k]) for k in ("attr", "deref")))
