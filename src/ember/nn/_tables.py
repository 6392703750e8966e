"""The tables a `Module` registers its parameters, buffers and children in.

A `Table` is a dict that notes every change to it in one process-wide version
(`tables_version`), so code that keeps what it found in a module tree (the state
``ember.function`` reads on each call, capture/call_guard.py) can tell, by one comparison,
that no table of any module has changed since it looked, instead of walking the tree again.
Making a table counts as a change too (a module may be given a new table in place of its old
one).
Each change draws a fresh number from a counter, so a version once read never comes back.
"""

from __future__ import annotations

import itertools

__all__ = ["Table", "tables_version"]

_counter = itertools.count(1)
_version = [0]


def tables_version() -> int:
    """A number that changes whenever any `Table` changes (never back to an earlier one)."""
    return _version[0]


def _changed() -> None:
    # (after the change: a reader that saw the old number also sees the change's new one)
    _version[0] = next(_counter)


class Table(dict):
    """A module's table of parameters, buffers or children: a dict whose changes are noted
    (see the module docstring)."""

    __slots__ = ()

    def __init__(self, *args, **kwargs) -> None:
        # (a new table replaces a module's old one: Sequential renumbers its children so)
        dict.__init__(self, *args, **kwargs)
        _changed()

    def __setitem__(self, key, value) -> None:
        dict.__setitem__(self, key, value)
        _changed()

    def __delitem__(self, key) -> None:
        dict.__delitem__(self, key)
        _changed()

    def __ior__(self, other):
        dict.update(self, other)
        _changed()
        return self

    def pop(self, *args):
        try:
            return dict.pop(self, *args)
        finally:
            _changed()

    def popitem(self):
        try:
            return dict.popitem(self)
        finally:
            _changed()

    def setdefault(self, key, default=None):
        try:
            return dict.setdefault(self, key, default)
        finally:
            _changed()

    def update(self, *args, **kwargs) -> None:
        dict.update(self, *args, **kwargs)
        _changed()

    def clear(self) -> None:
        dict.clear(self)
        _changed()

    def __reduce__(self):  # (copies and pickles stay Tables)
        return (Table, (dict(self),))
