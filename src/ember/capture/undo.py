"""The Python state a trace changed, put back when the trace fails.

A trace runs the user's Python once; when it fails part way (``.item()`` steering an ``if``,
a data-dependent shape), the call runs again, eagerly (ember.compile's fallback) or traced
otherwise, and must find the state as the call found it: the rerun does the side effects
again, and an eager call does each once (PyTorch resumes after a graph break rather than
repeating the code before it). `Contents` records the lists, dicts and sets the function
reaches, item by item, and the closure cells and globals that hold them, and `restore` puts
back what the trace changed, so a counter bumped, a list appended to or a dict item set
before the failure counts once. `PythonGenerators` does the same for Python's and NumPy's
global random generators: a draw made while tracing is drawn again by the rerun.
"""

from __future__ import annotations

import random

import numpy as np

__all__ = ["Contents", "PythonGenerators"]

_CONTAINERS = (list, dict, set)
_LIMIT = 4096  # (larger containers are recorded too: only their items are copied)


class Contents:
    """Copies of the containers among ``values`` (one level down into dicts and lists, as
    the slots the trace replays are found) and of the ``slots``' values."""

    def __init__(self, values, slots: list, get) -> None:
        self._get = get
        self.slots = [(holder, key, get(holder, key)) for holder, key, _ in slots]
        seen: dict[int, object] = {}
        for value in values:
            _collect(value, seen, depth=2)
        self.containers = [(c, _copy(c)) for c in seen.values()]

    def restore(self, put) -> None:
        """Put every recorded slot's value and container's items back as recorded."""
        for holder, key, old in self.slots:
            if self._get(holder, key) is not old:
                put(holder, key, old)
        for container, before in self.containers:
            if _changed(container, before):
                container.clear()
                if isinstance(container, dict):
                    container.update(before)
                elif isinstance(container, set):
                    container.update(before)
                else:
                    container.extend(before)


def _collect(value, seen: dict, depth: int) -> None:
    if type(value) not in _CONTAINERS or id(value) in seen:
        return
    seen[id(value)] = value
    if depth <= 1 or isinstance(value, set) or len(value) > _LIMIT:
        return
    items = value.values() if isinstance(value, dict) else value
    for item in items:
        _collect(item, seen, depth - 1)


def _copy(container):
    return dict(container) if isinstance(container, dict) else type(container)(container)


def _changed(container, before) -> bool:
    if len(container) != len(before):
        return True
    if isinstance(container, set):
        return container != before
    if isinstance(container, dict):
        return any(k not in before or before[k] is not v for k, v in container.items())
    return any(a is not b for a, b in zip(container, before))


class PythonGenerators:
    """The states of Python's ``random`` and NumPy's global generator, put back by `restore`."""

    def __init__(self) -> None:
        self.python = random.getstate()
        self.numpy = np.random.get_state()

    def restore(self) -> None:
        random.setstate(self.python)
        np.random.set_state(self.numpy)
