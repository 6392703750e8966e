"""The meta device's data: PyTorch's ``device="meta"`` tensors carry a shape and a dtype and no
values, so a model too large for memory can be built, inspected and then materialized
(``model.to_empty(device="cpu")``, ``load_state_dict(..., assign=True)``).

A meta tensor is an eager Tensor whose array is a `MetaArray`: a zero-strided view of one
element, whatever its shape, so it costs no memory and is read-only. The eager mode runs an op
with a meta operand by its shape rule alone (`OpDef.infer`), its results meta stand-ins
(eager.py); while `creating` is open (a factory given the meta device, an in-place fill of a
meta tensor) ops without tensor operands, the random draws among them, make stand-ins too and
draw nothing. NumPy's own functions, applied to a stand-in by code that bypasses the ops, give
MetaArrays too (a subclass survives NumPy's ufuncs), so nothing made from a meta tensor passes
for data.

`active` counts the stand-ins alive and the `creating` regions open: zero, the eager mode's
checks for stand-ins (and the shortcuts that skip the dispatch, ops/_unrecorded.py) cost one
list read per op, in programs that never used the meta device and in those whose meta tensors
are all gone (materialized by ``to_empty``, or freed).
"""

from __future__ import annotations

import contextlib
import sys
import threading

import numpy as np

from .errors import ShapeError

# the stand-ins alive plus the `creating` regions open: nonzero, the eager mode checks operands
# for stand-ins
active = [0]
_creating = [0]
# (a count updated by two threads at once could lose a step; a lost decrement leaves the checks
# on, a lost increment would turn them off while a stand-in lives. Reentrant: a stand-in freed
# by a signal handler inside the block must not deadlock; nested there, it can only be a
# decrement, which errs on the side of checking)
_count_lock = threading.RLock()


def _count(step: int) -> None:
    with _count_lock:
        active[0] += step


class MetaArray(np.ndarray):
    """The stand-in array of a meta tensor (never read: its one element is a zero). Every
    MetaArray, however NumPy made it (a view, a ufunc's result, an unpickled copy), passes
    through ``__array_finalize__`` when made and ``__del__`` when freed: `active` counts them."""

    def __array_finalize__(self, obj) -> None:
        _count(1)

    def __del__(self) -> None:
        _count(-1)


# (PyTorch refuses a size whose bytes overflow an int64; NumPy, a shape whose nonzero sizes
# multiply past its index type, even when a 0 makes it empty)
_MAX_BYTES = 2**63


def stand_in(shape, np_dtype) -> MetaArray:
    """A read-only stand-in of ``shape`` and ``np_dtype`` that holds one element. A size no
    storage could have (its bytes past an int64, as PyTorch checks: sizes from a file, or
    ``empty(2**62, 2**62, device="meta")``) raises `ShapeError`, as PyTorch raises its
    RuntimeError."""
    shape = tuple(shape)
    nonzero = 1
    for size in shape:
        nonzero *= size or 1
    if nonzero * np.dtype(np_dtype).itemsize >= _MAX_BYTES:
        raise ShapeError(f"Storage size calculation overflowed with sizes={list(shape)}")
    return np.broadcast_to(np.zeros((), np_dtype), shape).view(MetaArray)


def is_meta(array) -> bool:
    return type(array) is MetaArray


# modules whose functions wrap public ones (PyTorch's keywords, out=, autocast,
# __torch_function__'s dispatch): a call through them is still the user's
_WRAPPERS = frozenset(
    {
        "ember.ops._autocast",
        "ember.ops._out",
        "ember.ops._torch_keywords",
        "ember.overrides",
        "ember._torch_function",
    }
)


def refuse_mixed(op: str, tensors, depth: int = 2) -> None:
    """Raise PyTorch's error where ``tensors`` (anything else among them is skipped) mix the
    meta device with the CPU: the first operand that is not a 0-d CPU tensor sets the device
    expected. Called by the places where tensors meet (operators, a module's call), for the
    user's own calls only (the frame ``depth`` up is not ember's): ember's composites combine
    meta operands with CPU constants they make themselves (a dropout mask, a zero state),
    which PyTorch would make on the meta device. (Only meta programs pay for the check.)"""
    frame = sys._getframe(depth)
    while frame is not None and frame.f_globals.get("__name__") in _WRAPPERS:
        frame = frame.f_back
    if frame is not None and frame.f_globals.get("__name__", "").startswith("ember."):
        return
    expected = None
    for t in tensors:
        data = getattr(t, "_data", None)
        if not isinstance(data, np.ndarray):
            continue
        meta = type(data) is MetaArray
        if not meta and data.ndim == 0:
            continue
        if expected is None:
            expected = meta
        elif meta != expected:
            from .errors import DeviceMismatchError

            found, wanted = ("meta", "cpu") if meta else ("cpu", "meta")
            raise DeviceMismatchError(
                f"Tensor on device {found} is not on the expected device {wanted}!", op=op
            )


def creating_now() -> bool:
    return _creating[0] > 0


@contextlib.contextmanager
def creating():
    """Within the block, ops without tensor operands (factories, random draws) make stand-ins."""
    _count(1)
    _creating[0] += 1
    try:
        yield
    finally:
        _creating[0] -= 1
        _count(-1)
