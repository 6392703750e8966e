"""``print`` inside ``ember.compile``: printed on every call, with the call's values.

PyTorch's ``torch.compile`` breaks the graph at a ``print`` and runs it on every call, so its
tensor arguments print their values. While a compiled call runs, `prints_recorded` puts
`_recording_print` in ``builtins.print``: while ops are recorded into a graph (the trace) a call
of it records ops/host_print.py's op, with the call's tensor arguments as operands and a
`Printer` that formats them as ember tensors, the other arguments as they were, and prints with
the original ``print`` whenever the graph runs; otherwise (a run of the captured graph, an eager
fallback) it is the original ``print``. Only the arguments themselves are deferred: a tensor
formatted into a string while tracing (``f"{x}"``) is formatted then, a symbol.
"""

from __future__ import annotations

import builtins
import contextlib
import threading

from ..ops._registry import TensorBase, building_graph
from ..ops.host_print import host_print
from ..tensor import Tensor

__all__ = ["Printer", "prints_recorded"]

_state = threading.local()


class Printer:
    """``print(*args, sep=, end=, file=, flush=)`` with the tensor arguments (at the positions
    ``slots`` names) taken from the values a graph run hands over."""

    def __init__(self, print_fn, args: tuple, slots: tuple, kwargs: dict):
        self.print_fn = print_fn
        self.args = args
        self.slots = slots
        self.kwargs = kwargs

    def __call__(self, *arrays) -> None:
        args = list(self.args)
        for slot, array in zip(self.slots, arrays):
            args[slot] = Tensor._wrap(array)
        self.print_fn(*args, **self.kwargs)

    def __repr__(self) -> str:  # (printed graphs name it by what it prints)
        return f"Printer({len(self.args)} arguments, tensors at {list(self.slots)})"


def _recording_print(*args, **kwargs):
    original = getattr(_state, "original", None) or _ORIGINAL_PRINT
    if not building_graph() or getattr(_state, "depth", 0) == 0:
        return original(*args, **kwargs)
    slots = tuple(i for i, a in enumerate(args) if isinstance(a, TensorBase))
    kept = tuple(None if i in slots else a for i, a in enumerate(args))
    host_print([args[i] for i in slots], Printer(original, kept, slots, kwargs))
    return None


_ORIGINAL_PRINT = builtins.print


@contextlib.contextmanager
def prints_recorded():
    """Inside the block (a compiled call), a ``print`` while the call is traced is recorded
    into the graph, so each run of the graph prints (see the module docstring)."""
    depth = getattr(_state, "depth", 0)
    if depth == 0:
        _state.original = builtins.print
        builtins.print = _recording_print
    _state.depth = depth + 1
    try:
        yield
    finally:
        _state.depth = depth
        if depth == 0:
            builtins.print = _state.original
            _state.original = None
