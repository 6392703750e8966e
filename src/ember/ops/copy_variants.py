"""PyTorch's ``*_copy`` functions: the view functions' results as new tensors of their own
(``torch.permute_copy(x, dims)`` is ``x.permute(dims).clone()``: no alias of ``x``, so writing
into the result leaves ``x`` alone), with the view's gradient. (The ``unsafe_*`` splits, views
without the multi-output tracking, are in _unsafe_split.py, in the eager layer that owns
that tracking.)"""

from __future__ import annotations

from ._registry import export
from .promotion import to_tensor

__all__: list = []


def _cloned(result):
    if isinstance(result, (tuple, list)):
        return tuple(t.clone() for t in result)
    return result.clone()


def _copy_of(view_name: str, doc_call: str):
    """A top-level ``<view_name>_copy(input, *args, **kwargs)``: the view's result, cloned."""

    def fn(input, *args, **kwargs):
        return _cloned(getattr(to_tensor(input), view_name)(*args, **kwargs))

    name = f"{view_name}_copy"
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"PyTorch's ``torch.{name}``: ``{doc_call}``, cloned (no alias of the input)."
    return export(fn, name=name)


for _view, _call in (
    ("as_strided", "input.as_strided(size, stride, storage_offset)"),
    ("detach", "input.detach()"),
    ("diagonal", "input.diagonal(offset, dim1, dim2)"),
    ("expand", "input.expand(*sizes)"),
    ("permute", "input.permute(dims)"),
    ("select", "input.select(dim, index)"),
    ("split", "input.split(split_size, dim)"),
    ("split_with_sizes", "input.split_with_sizes(split_sizes, dim)"),
    ("squeeze", "input.squeeze(dim)"),
    ("t", "input.t()"),
    ("transpose", "input.transpose(dim0, dim1)"),
    ("unbind", "input.unbind(dim)"),
    ("unfold", "input.unfold(dimension, size, step)"),
    ("unsqueeze", "input.unsqueeze(dim)"),
    ("view", "input.view(*shape)"),
):
    _copy_of(_view, _call)


@export
def alias_copy(input):
    """PyTorch's ``torch.alias_copy``: a copy of ``input`` (the alias of a view, cloned)."""
    return input.clone()


@export
def slice_copy(input, dim: int = 0, start=None, end=None, step: int = 1):
    """PyTorch's ``torch.slice_copy``: ``input[..., start:end:step, ...]`` along ``dim``,
    cloned."""
    index = [slice(None)] * input.ndim
    index[dim] = slice(start, end, step)
    return input[tuple(index)].clone()


@export
def detach_(input):
    """PyTorch's ``torch.detach_``: ``input.detach_()`` (detached in place, returned)."""
    return input.detach_()
