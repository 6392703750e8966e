"""The positions PyTorch's CPU ``topk`` and ``sort(stable=False)`` report, the
specification of kernels/ctopk.py.

``sort(stable=False)`` is ``std::sort`` of each row's (value, position) pairs (NaN above every
number). It is not stable: among equal values the order is what its steps leave (rows of up
to 16 are insertion-sorted, which is stable). `sort_positions` runs those steps on the rows
that hold equal values; elsewhere the stable order is the only order.

PyTorch selects each row with libstdc++'s algorithms on (value, position) pairs compared by
value only (NaN above every number): ``std::partial_sort`` of the first k where
``k * 64 <= n``, else ``std::nth_element`` at k - 1 and, for ``sorted=True``, ``std::sort`` of
the k - 1 before it. Without ties among the values they pick, those algorithms leave the
stable order's first k (the order is then unique); with ties, which equal values they pick and
in what order is what their steps leave, and `_select` runs those steps (ops/_stl_steps.py).
`_select` is per element Python, so it runs only on the rows where the answer could differ
from the stable one.
"""

from __future__ import annotations

import numpy as np

from ._stl_steps import Steps

__all__ = ["sort_positions", "topk_positions"]


def topk_positions(a: np.ndarray, k: int, largest: bool, ordered: bool, stable) -> np.ndarray:
    """PyTorch's topk positions (rows, k) of the 2-D ``a``, given ``stable``: the stable
    order's first k of each row (int64, (rows, k))."""
    rows, n = a.shape
    if k == 0 or rows == 0:
        return stable
    if not ordered and k > 1 and k * 64 > n:  # (nth_element's order: no sort to undo it)
        ambiguous = np.ones(rows, bool)
    else:
        v = np.take_along_axis(a, stable, 1)
        tied = _same(v[:, 1:], v[:, :-1]).any(axis=1)
        ambiguous = tied | (_same(a, v[:, -1:]).sum(axis=1) > 1)
    out = stable.copy()
    for r in np.flatnonzero(ambiguous):
        out[r] = _select(a[r].tolist(), k, largest, ordered)
    return out


def sort_positions(a: np.ndarray, descending: bool, stable) -> np.ndarray:
    """PyTorch's ``sort(stable=False)`` positions of the 2-D ``a``, given ``stable``: the
    stable order of each row (int64, a's shape)."""
    rows, n = a.shape
    if n <= 16 or rows == 0:
        return stable
    v = np.take_along_axis(a, stable, 1)
    out = stable.copy()
    comp = _comparator(descending)
    for r in np.flatnonzero(_same(v[:, 1:], v[:, :-1]).any(axis=1)):
        pairs = [(value, j) for j, value in enumerate(a[r].tolist())]
        Steps(pairs, comp).sort(0, n)
        out[r] = [j for _, j in pairs]
    return out


def _comparator(largest: bool):
    """PyTorch's comparison of (value, position) pairs: by value, NaN above every number."""
    if largest:
        return lambda x, y: (x[0] != x[0] and y[0] == y[0]) or x[0] > y[0]
    return lambda x, y: (x[0] == x[0] and y[0] != y[0]) or x[0] < y[0]


def _same(x, y):
    """Equal under PyTorch's comparator: neither before the other (NaN with NaN)."""
    return (x == y) | ((x != x) & (y != y))


def _select(row: list, k: int, largest: bool, ordered: bool) -> list:
    a = [(v, j) for j, v in enumerate(row)]
    steps = Steps(a, _comparator(largest))
    n = len(a)
    if k * 64 <= n:
        steps.heap_select(0, k, n)
        steps.sort_heap(0, k)
    else:
        steps.nth_element(0, k - 1, n)
        if ordered:
            steps.sort(0, k - 1)
    return [j for _, j in a[:k]]
