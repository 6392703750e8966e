"""searchsorted's ONNX form as PyTorch's binary search, step for step (ops/binning.py's
``_binary_search``): the search over a row of known length n takes n.bit_length() halvings,
written out one after another (a dozen nodes each). Its answer is eager ember's (and
PyTorch's) for every sequence, sorted or not, NaN included: the start moves past the middle
unless ``mid >= value`` (``right``: ``mid > value``) holds, which a NaN on either side never
does. (Counting the elements below a value agrees only on a sorted sequence without NaN.) Over
a symbolic row length the same halvings run in a ``Loop`` until no search is still active:
at most n.bit_length() + 1 iterations, each the written-out form's step."""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..types import TensorType

__all__ = ["binary_search", "binary_search_loop"]


def binary_search(e, seq: str, values: str, n: int, rows: bool, right: bool) -> str:
    """The insertion positions (int64, ``values``' shape) of ``values`` in the innermost rows
    of ``seq`` (length ``n``); ``rows``: ``seq`` has leading dimensions, matched by
    ``values``' (else ``seq`` is 1-d and ``values`` any shape)."""
    start = e.node("ConstantOfShape", [e.node("Shape", [values])], value=np.zeros(1, np.int64))
    end = e.node("Add", [start, e.scalar(n, "int64")])
    last = e.scalar(max(n - 1, 0), "int64")
    for _ in range(n.bit_length()):
        start, end = _halving(e, seq, values, start, end, last, rows, right)
    return start


def binary_search_loop(e, seq: str, values: str, rows: bool, right: bool, shape) -> str:
    """`binary_search` over rows of a length known only when the model runs (``shape``: the
    result's dimensions, some symbolic): a ``Loop`` of halvings while a search is active."""
    n = e.node("Gather", [e.node("Shape", [seq]), e.scalar(-1, "int64")], axis=0)
    start = e.node("ConstantOfShape", [e.node("Shape", [values])], value=np.zeros(1, np.int64))
    end = e.node("Add", [start, n])
    last = e.node("Max", [e.node("Sub", [n, e.scalar(1, "int64")]), e.scalar(0, "int64")])
    positions = TensorType(tuple(shape), dt.int64)
    flag = TensorType((), dt.bool_)

    def build(iteration, active, start, end):
        start, end = _halving(e, seq, values, start, end, last, rows, right)
        return [_any_active(e, start, end), start, end]

    body = e.body([TensorType((), dt.int64), flag, positions, positions], build, "halvings",
                  out_types=[flag, positions, positions])  # fmt: skip
    found, _ = e.node("Loop", ["", _any_active(e, start, end), start, end], outputs=2, body=body)
    return found


def _any_active(e, start: str, end: str) -> str:
    """Whether any search is still active (start < end): false for no values at all."""
    active = e.node("Cast", [e.node("Less", [start, end])], to=e.dtype(dt.int64))
    return e.node("Greater", [e.node("ReduceMax", [active], keepdims=0), e.scalar(0, "int64")])


def _halving(e, seq, values, start, end, last, rows: bool, right: bool) -> tuple:
    """One step of PyTorch's search on every active (start < end) search: (start, end)."""
    two, one = e.scalar(2, "int64"), e.scalar(1, "int64")
    active = e.node("Less", [start, end])
    mid = e.node("Add", [start, e.node("Div", [e.node("Sub", [end, start]), two])])
    at_index = e.node("Min", [mid, last])
    if rows:
        at = e.node("GatherElements", [seq, at_index], axis=-1)
    else:
        at = e.node("Gather", [seq, at_index], axis=0)
    if right:
        stays = e.node("Greater", [at, values])
    else:  # (Or of two comparisons: GreaterOrEqual is opset 12's)
        stays = e.node("Or", [e.node("Greater", [at, values]), e.node("Equal", [at, values])])
    moves = e.node("And", [active, e.node("Not", [stays])])
    halts = e.node("And", [active, stays])
    start = e.node("Where", [moves, e.node("Add", [mid, one]), start])
    end = e.node("Where", [halts, mid, end])
    return start, end
