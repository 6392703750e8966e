"""How much a checkpoint's pickle may make its allowed callables build.

The restricted unpickler (io/torch_format.py) runs no code from a file, but the callables it
allows still allocate: ``_codecs.encode`` makes bytes of a string, ``builtins.set`` copies a
list, ``torch.Size`` a tuple, an overlapping tensor view (``expand``) is copied, a NumPy array
is built from its bytes. Each call costs the pickle a few bytes, and its arguments can be memo
references (``BINGET``) to one large value, so without a bound a kilobyte file makes the
reader build gigabytes: a million-character string encoded ten thousand times, or a thousand
distinct ``expand``s of one float. `Allowance` counts the bytes each call's result newly holds
and refuses the file, naming it as damaged or hostile, once they pass `FLOOR` plus twice the
bytes the file itself brought (the pickle and the storages read so far): a real checkpoint's
calls build about what it stores, and copies of expanded views within `FLOOR`.
"""

from __future__ import annotations

import numpy as np

from .._file_limits import physical_memory

FLOOR = 1 << 30  # bytes any checkpoint's calls may build, whatever its size
_CONTAINER_ITEM = 64  # bytes a set, dict, list or tuple entry holds (pointer, hash, slot)


class AllowanceExceeded(Exception):
    """The pickle builds more than its allowance; the readers report the file as damaged."""


class Allowance:
    """Bytes built by one unpickling so far, against what the file brought (`earn`)."""

    def __init__(self, brought: int):
        self.brought = brought
        self.built = 0
        self._charged: set[int] = set()  # arrays already counted (a result passed on again)

    def earn(self, storage: np.ndarray) -> None:
        """The file brought ``storage`` (read from it): its bytes raise the limit, and views of
        it build nothing."""
        root = _root(storage)
        if id(root) not in self._charged:  # (a storage named again brings nothing more)
            self._charged.add(id(root))
            self.brought += root.nbytes

    def charge(self, value) -> None:
        """Count what ``value``, a call's result, newly holds; raise when over the limit."""
        built = self._new_bytes(value)
        if not built:
            return
        self.built += built
        limit = min(FLOOR + 2 * self.brought, physical_memory())
        if self.built > limit:
            raise AllowanceExceeded(
                f"its pickle builds {self.built:,} bytes from a file that holds "
                f"{self.brought:,} (the limit is {limit:,}): its calls copy values over and over "
                "(memo references, expanded views), as no checkpoint's values need"
            )

    def _new_bytes(self, value) -> int:
        if isinstance(value, (bytes, bytearray, str)):
            return len(value)
        if isinstance(value, (set, frozenset, dict, list, tuple)):
            return _CONTAINER_ITEM * len(value)
        total = 0
        # a tensor's array, a sparse tensor's indices' and values' arrays, or an array
        for part in (value, getattr(value, "_idx", None), getattr(value, "_vals", None)):
            array = _root(getattr(part, "_data", part))
            if isinstance(array, np.ndarray) and array.flags.owndata:
                if id(array) not in self._charged:  # (views of the file's storages own none)
                    self._charged.add(id(array))
                    total += array.nbytes
        return total


def _root(array):
    """The array whose memory ``array`` views (itself when it owns its memory)."""
    while isinstance(array, np.ndarray) and isinstance(array.base, np.ndarray):
        array = array.base
    return array
