"""searchsorted's ONNX form as PyTorch's binary search, step for step (ops/binning.py's
``_binary_search``): the search over a row of known length n takes n.bit_length() halvings,
written out one after another (a dozen nodes each). Its answer is eager ember's (and
PyTorch's) for every sequence, sorted or not, NaN included: the start moves past the middle
unless ``mid >= value`` (``right``: ``mid > value``) holds, which a NaN on either side never
does. (Counting the elements below a value agrees only on a sorted sequence without NaN.)"""

from __future__ import annotations

import numpy as np

__all__ = ["binary_search"]


def binary_search(e, seq: str, values: str, n: int, rows: bool, right: bool) -> str:
    """The insertion positions (int64, ``values``' shape) of ``values`` in the innermost rows
    of ``seq`` (length ``n``); ``rows``: ``seq`` has leading dimensions, matched by
    ``values``' (else ``seq`` is 1-d and ``values`` any shape)."""
    start = e.node("ConstantOfShape", [e.node("Shape", [values])], value=np.zeros(1, np.int64))
    end = e.node("Add", [start, e.scalar(n, "int64")])
    two, one, last = (e.scalar(c, "int64") for c in (2, 1, max(n - 1, 0)))
    for _ in range(n.bit_length()):
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
    return start
