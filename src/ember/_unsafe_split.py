"""PyTorch's ``unsafe_split``, ``unsafe_chunk`` and ``unsafe_split_with_sizes`` (functions and
Tensor methods): `split`, `chunk` and `split_with_sizes` whose pieces are views of the input
without the view tracking of multi-output ops (_views.py). The pieces share the input's memory
as the safe forms' do, and may be written in place while gradients are recorded; such a write
does not reach the input's history, which is what PyTorch means by "unsafe" (its results are
then undefined, and so they are here). Everything else (values, gradients, capture) is the
safe forms'."""

from __future__ import annotations

from ._views import MULTI_OUTPUT
from .ops._registry import PUBLIC, export

__all__ = ["unsafe_chunk", "unsafe_split", "unsafe_split_with_sizes"]


def _untracked(pieces):
    for piece in pieces:
        view_of = getattr(piece, "_view_of", None)
        if view_of is not None and view_of[1] is MULTI_OUTPUT:
            piece._view_of = None
    return pieces


@export(method=True)
def unsafe_split(input, split_size, dim: int = 0):
    """``torch.unsafe_split``: `split` into pieces of ``split_size`` (an int, as PyTorch's;
    sizes per piece are `unsafe_split_with_sizes`) without view tracking (see the module)."""
    if not isinstance(split_size, int) or isinstance(split_size, bool):
        raise TypeError(
            f"unsafe_split(): argument 'split_size' (position 1) must be int, not "
            f"{type(split_size).__name__}"
        )
    return _untracked(PUBLIC["split"](input, split_size, dim))


@export(method=True)
def unsafe_chunk(input, chunks: int, dim: int = 0):
    """``torch.unsafe_chunk``: `chunk` without view tracking (see the module)."""
    return _untracked(PUBLIC["chunk"](input, chunks, dim))


@export(method=True)
def unsafe_split_with_sizes(input, split_sizes, dim: int = 0):
    """``torch.unsafe_split_with_sizes``: `split_with_sizes` without view tracking."""
    return _untracked(PUBLIC["split_with_sizes"](input, split_sizes, dim))
