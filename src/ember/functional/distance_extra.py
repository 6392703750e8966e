"""``pdist`` (the condensed matrix of row distances) and ``triplet_margin_with_distance_loss``
(the triplet loss over any distance function), as composites with PyTorch's signatures."""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..errors import ArgumentError, ShapeError
from ..ops import _item_scalars as _items
from ..ops import api as E
from ..ops import cdist_direct
from ..ops._node_names import rename_node
from ..ops._registry import apply, export
from ..ops._util import fmt_shape
from ._common import float_input, reduce_loss
from .distance import _p_norm, pairwise_distance


@export(functional=True)
def pdist(input, p: float = 2.0):
    """The p-norm distances between every pair of rows ``i < j`` of an (N, M) input, in
    row-major order: ``N * (N - 1) / 2`` values. The gradient at a zero distance is 0."""
    x = float_input("pdist", input)
    if x.ndim != 2:
        raise ShapeError(f"expected a 2-D input, got shape {fmt_shape(x.shape)}", op="pdist")
    if p < 0:
        raise ArgumentError(f"pdist only supports non-negative p values, got {p}")
    i, j = np.triu_indices(x.shape[0], 1)
    if cdist_direct.applies(x, x) and x.dtype in (dt.float32, dt.float64):
        # eagerly: every row pair's distance by cdist's direct op (its C kernels, each pair
        # twice), then the pairs i < j; the (pairs, M) differences below were 20x PyTorch's
        every = apply(cdist_direct.CDIST_DIRECT, x, x, p=float(p))
        upper = E.index_select(E.reshape(every, (-1,)), 0, (i * x.shape[0] + j).astype(np.int64))
        return rename_node(upper, "PdistBackward0")
    diff = E.index_select(x, 0, i.astype(np.int64)) - E.index_select(x, 0, j.astype(np.int64))
    return _p_norm(diff, float(p), 1, False)


@export(functional=True, toplevel=False)
def triplet_margin_with_distance_loss(
    anchor,
    positive,
    negative,
    *,
    distance_function=None,
    margin: float = 1.0,
    swap: bool = False,
    reduction: str = "mean",
):
    """``max(d(a, p) - d(a, n) + margin, 0)`` with ``distance_function`` (default
    ``pairwise_distance``); ``swap`` uses ``min(d(a, n), d(p, n))`` as the negative distance."""
    op = "triplet_margin_with_distance_loss"
    if reduction not in ("mean", "sum", "none"):
        raise ArgumentError(f"{op}: {reduction} is not a valid value for reduction")
    if margin <= 0:
        raise ArgumentError(f"{op}: margin must be greater than 0, got {margin}")
    dims = {anchor.ndim, positive.ndim, negative.ndim}
    if len(dims) != 1:
        raise ShapeError(
            f"the anchor, positive and negative tensors must have the same number of "
            f"dimensions, got {anchor.ndim}D, {positive.ndim}D and {negative.ndim}D",
            op=op,
        )
    dist = distance_function if distance_function is not None else pairwise_distance
    d_pos = dist(anchor, positive)
    d_neg = dist(anchor, negative)
    if swap:
        d_neg = E.minimum(d_neg, dist(positive, negative))
    # clamp_min's gradient: 1 where the hinge is at 0 too, as PyTorch's clamp passes it
    raw = _items.number(margin) + d_pos - d_neg
    loss = E.where(raw >= 0, raw, raw * 0)
    return reduce_loss(loss, reduction)
