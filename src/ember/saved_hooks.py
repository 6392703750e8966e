"""Saved-tensor hooks of the eager tape (PyTorch's ``torch.autograd.graph.saved_tensors_hooks``).

While a (pack, unpack) pair is active, every node the tape records (autograd.py `Node`) keeps
``pack(t)`` instead of each tensor ``t`` its VJP reads, wrapped in a `SavedHandle`; the node
calls ``unpack`` when its VJP asks. A user's hooks own what they packed, so an in-place change
of the original after the save is no error (PyTorch's: the backward reads what ``unpack``
gives). Activation checkpointing (utils/checkpoint.py) packs a number and recomputes the
tensor from the region's inputs, so its handles keep the original's version counter
(``check_version``) and an in-place change after the save is still caught.
"""

from __future__ import annotations

import contextlib

from .errors import AutogradError
from .ops._registry import TensorBase

__all__ = ["SavedHandle", "hooks", "pack_saved", "saved_tensors_hooks"]

# (pack, unpack) pairs, innermost last (autograd.py's Node reads it on every record)
hooks: list = []


class SavedHandle:
    """A saved value as a hook packed it: the original tensor's version counter, whether an
    in-place change after the save is an error (``checked``) and what ``pack`` returned."""

    __slots__ = ("_vc", "checked", "packed", "unpack")

    def __init__(self, counter, packed, unpack, checked: bool):
        self._vc = counter
        self.packed = packed
        self.unpack = unpack
        self.checked = checked

    def get(self):
        t = self.unpack(self.packed)
        if not isinstance(t, TensorBase):
            raise AutogradError(
                f"a saved-tensor unpack hook returned {type(t).__name__}, not a tensor",
                op="backward",
            )
        return t


def pack_saved(node, wrap) -> None:
    """Replace what ``node`` (an autograd.Node being made) saved by the innermost hook's
    packed values; ``wrap(array)``: a tensor of an array (``Tensor._wrap``: this module sits
    below tensor.py)."""
    pack, unpack, checked = hooks[-1]
    # the ops a pack hook runs save nothing through the hooks (PyTorch runs a pack hook with
    # them off: ``pack=lambda t: t * t`` would otherwise pack its own saves without end)
    active = hooks[:]
    hooks.clear()
    try:
        saved = node._saved_in
        for i, (t, version) in saved.items():
            saved[i] = (SavedHandle(t._vc, pack(t), unpack, checked), version)
        for i, (data, counter, version) in node._saved_out.items():
            # an output is packed as a tensor of its array alone, as the tape saves it: the
            # output itself holds this node as its grad_fn, and a hook keeping it would make a
            # cycle
            alias = wrap(data)
            alias._vc = counter
            handle = SavedHandle(counter, pack(alias), unpack, checked)
            node._saved_out[i] = (handle, counter, version)
    finally:
        hooks[:] = active


@contextlib.contextmanager
def saved_tensors_hooks(pack_hook, unpack_hook, check_version: bool = False):
    """PyTorch's ``torch.autograd.graph.saved_tensors_hooks``: while active, the tape keeps
    ``pack_hook(tensor)`` for every tensor a recorded op's gradient will read, and calls
    ``unpack_hook`` on it when the gradient is computed. Nested uses: the innermost applies.
    An op's saved output is given as a tensor of the output's array without its ``grad_fn``
    (the tape keeps no reference from a node to its own outputs)."""
    hooks.append((pack_hook, unpack_hook, check_version))
    try:
        yield
    finally:
        hooks.pop()
