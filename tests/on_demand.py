"""`OnDemand`: a module fixture's table of costly cases (exported models, trained runs), each
made at its first lookup.

pytest-xdist hands a file's tests to both workers one by one (``--dist loadgroup``), and a
module-scoped fixture is set up in every worker that runs one of them: a fixture that made
every case up front made them all twice, each worker paying for cases only the other used.
Made on demand, each case is made by the worker whose test needs it (twice only where both
workers run tests of the same case)."""

from __future__ import annotations

from collections.abc import Callable


class OnDemand(dict):
    """{key: make(key)}, ``make`` called once per key, at the key's first lookup."""

    def __init__(self, make: Callable):
        super().__init__()
        self._make = make

    def __missing__(self, key):
        value = self[key] = self._make(key)
        return value
