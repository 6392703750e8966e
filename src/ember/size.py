"""`ember.Size`: the type of ``x.shape`` and ``x.size()`` (PyTorch's ``torch.Size``).

A tuple of the dimensions (ints, or symbolic sizes while a graph is captured), so everything
that works on a shape tuple keeps working; adds ``numel()`` and PyTorch's ``repr`` and ``str``
(``ember.Size([2, 3])``: ``print(x.shape)`` prints what it printed under PyTorch, with ember's
name). Slicing and ``+`` with a tuple give a Size, as in PyTorch. ember's own messages print
shapes as tuples (``(2, 3)``, `ops._util.fmt_shape` or ``tuple(x.shape)``), whether a shape came
from ``x.shape`` or was written as a tuple.
"""

from __future__ import annotations

__all__ = ["Size"]


class Size(tuple):
    """The dimensions of a tensor; ``Size([2, 3]) == (2, 3)``."""

    __slots__ = ()

    def numel(self):
        """The number of elements a tensor of this shape holds (1 for ``Size([])``)."""
        n = 1
        for d in self:
            n = d * n
        return n

    def __getitem__(self, index):
        item = tuple.__getitem__(self, index)
        return Size(item) if isinstance(index, slice) else item

    def __add__(self, other):
        if not isinstance(other, tuple):
            return NotImplemented
        return Size(tuple.__add__(self, other))

    def __radd__(self, other):
        if not isinstance(other, tuple):
            return NotImplemented
        return Size(tuple.__add__(other, self))

    def __mul__(self, count):
        return Size(tuple.__mul__(self, count))

    __rmul__ = __mul__

    def __repr__(self) -> str:
        return f"ember.Size([{', '.join(str(d) for d in self)}])"

    def __reduce__(self):
        return (Size, (tuple(self),))
