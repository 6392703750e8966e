"""``embedding_bag``: sums, means or maxima of bags of embedding rows (PyTorch's
F.embedding_bag), and ``gumbel_softmax``.

The rows are looked up with `embedding` (which brings ``max_norm`` and ``scale_grad_by_freq``),
then reduced per bag. Where the bags are known in NumPy (a 2-D input, or offsets with data),
their bounds are row splits and each mode is one segment reduction (ops/segment.py: a
``reduceat`` forward, a ``repeat`` backward), the kept entries per bag counted in NumPy where
the indices have data. Where ``offsets`` is a traced input, each index's bag is computed in
ember ops (how many bag starts lie at or before its position); sums and means are then an
``index_add`` into the bags, maxima an ``amax`` over a masked (bags, indices, dim) selection.
Entries equal to ``padding_idx`` belong to no bag: they add nothing, are not counted by ``mean``
and never win ``max``. Empty bags are zero rows, as in PyTorch.
"""

from __future__ import annotations

import warnings

import numpy as np

from ..errors import ArgumentError, DTypeError, ShapeError, UnsupportedError, user_stacklevel
from ..ops import api as E
from ..ops._node_names import renames
from ..ops._registry import export
from ..ops._util import fmt_shape
from ..ops.extra_random import standard_exponential
from ..ops.promotion import to_tensor
from ..ops.segment import segment
from ._common import concrete, dim_arg, float_input
from .embedding import embedding


def _bags(op: str, idx, offsets, include_last_offset: bool):
    """(flat indices, each one's bag, the bounds, the number of bags). Where the bags are known
    in NumPy (a 2-D input, or offsets with data), the bounds are their row splits (bags + 1
    positions in the flat input, from 0 to its length) and each one's bag is None; a 2-D input
    of symbolic sizes has neither (its bags are its rows: `_row_bags`); else the bounds are
    None and each one's bag is computed in ember ops."""
    if idx.ndim == 2:
        if offsets is not None:
            raise ArgumentError(
                f"{op}: if input is 2-D, offsets has to be None: the input is a batch of "
                "fixed-length bags"
            )
        b, length = idx.shape
        if not (isinstance(b, int) and isinstance(length, int)):
            return E.reshape(idx, (-1,)), None, None, b
        return E.reshape(idx, (-1,)), None, np.arange(b + 1, dtype=np.int64) * length, b
    if idx.ndim != 1:
        raise ShapeError(
            f"input has to be 1-D or 2-D, got shape {fmt_shape(idx.shape)}", op="embedding_bag"
        )
    if offsets is None:
        raise ArgumentError(f"{op}: offsets has to be a 1-D tensor, got None")
    off = to_tensor(offsets)
    if off.ndim != 1 or not off.dtype.is_integer:
        raise ShapeError(
            f"offsets has to be a 1-D integer tensor, got shape {fmt_shape(off.shape)} of "
            f"{off.dtype}",
            op=op,
        )
    n = idx.shape[0]
    data = concrete(off)
    if data is not None and len(data):
        if data[0] != 0:
            raise ArgumentError(f"{op}: offsets[0] has to be 0, got {int(data[0])}")
        if (np.diff(data) < 0).any() or data[-1] > n:
            raise ArgumentError(
                f"{op}: offsets must be non-decreasing and at most the input's length {n}, "
                f"got {data.tolist()}"
            )
    if include_last_offset and off.shape[0] < 1:
        raise ArgumentError(f"{op}: include_last_offset needs at least one offset")
    # (with include_last_offset, the last offset is the input's length, and PyTorch's last bag
    # runs to the end of the input whatever it says)
    bags = off.shape[0] - (1 if include_last_offset else 0)
    if data is None:  # a traced input: each position's bag in ember ops
        starts = E.narrow(off, 0, 0, bags) if include_last_offset else off
        positions = to_tensor(np.arange(n, dtype=np.int64))
        bag = E.sum(E.cast(E.unsqueeze(positions, 1) >= E.unsqueeze(starts, 0), idx.dtype), 1)
        return idx, E.clamp(bag - 1, 0, max(bags - 1, 0)), None, bags
    return idx, None, np.append(data[:bags], n).astype(np.int64), bags


def _known_bags(mode: str, rows, keep, bounds: np.ndarray, kept):
    """The bags' sums, means or maxima where their bounds are known in NumPy: one segment
    reduction over the (already weighted, padding-masked) rows; a bag with no kept entries is
    a zero row. ``kept``: which entries count, in NumPy (None: all of them, or where ``keep``
    is a traced value)."""
    splits = to_tensor(bounds)
    if keep is None:
        counts = np.diff(bounds)
    elif kept is not None:
        counts = np.diff(np.append(0, np.cumsum(kept))[bounds])
    else:  # (traced indices: the kept entries counted in ember ops)
        counts = segment("sum", E.cast(keep, rows.dtype), splits)
    known = isinstance(counts, np.ndarray)
    if mode == "mean" and keep is None and counts.all() and not rows.requires_grad:
        return segment("mean", rows, splits)  # (with a gradient: the sum over known counts,
        # whose VJP is one division, where the mean's computes the lengths in ember ops)
    if mode == "max":
        if keep is not None:
            rows = E.where(E.unsqueeze(keep, 1), rows, float("-inf"))
        best = segment("max", rows, splits)
        if known and counts.all():
            return best
        filled = to_tensor(counts > 0) if known else counts > 0
        return E.where(E.unsqueeze(filled, 1), best, 0)
    total = segment("sum", rows, splits)
    if mode == "sum":
        return total
    if known:
        divisor = to_tensor(np.maximum(counts, 1).astype(rows.dtype.np))
    else:
        divisor = E.clamp(counts, min=1)
    return total / E.unsqueeze(divisor, 1)


def _row_bags(mode: str, rows, keep, shape):
    """The bags of a 2-D input of ``shape`` whose sizes are symbolic (a batch traced for
    export): each row one bag, reduced over the row's axis; a bag with no kept entries is a
    zero row, as `_known_bags`."""
    grid = (*shape, rows.shape[-1])
    if mode == "max":
        if keep is not None:
            rows = E.where(E.unsqueeze(keep, 1), rows, float("-inf"))
        best = E.amax(E.reshape(rows, grid), 1)
        if keep is None:
            return best
        return E.where(E.unsqueeze(E.any(E.reshape(keep, shape), 1), 1), best, 0)
    total = E.sum(E.reshape(rows, grid), 1)
    if mode == "sum":
        return total
    if keep is None:
        counts = E.sum(E.ones_like(E.reshape(rows, grid)[..., :1]), 1)
    else:
        counts = E.unsqueeze(E.sum(E.cast(E.reshape(keep, shape), rows.dtype), 1), 1)
    return total / E.clamp(counts, min=1)


def _traced_bags_max(rows, bag, keep, bags: int):
    """Each bag's elementwise maximum of its kept rows, 0 for a bag with none, where the bags
    are traced (offsets without data)."""
    if keep is not None:
        rows = E.where(E.unsqueeze(keep, 1), rows, float("-inf"))
    n, dim = rows.shape
    if n:
        # offsets without data (a traced input): a (bags, n, dim) masked selection
        selected = E.unsqueeze(bag, 0) == E.unsqueeze(to_tensor(np.arange(bags)), 1)
        picked = E.where(E.unsqueeze(selected, 2), E.unsqueeze(rows, 0), float("-inf"))
        best = E.amax(picked, 1)
    else:
        return E.zeros((bags, dim), dtype=rows.dtype)
    ones = E.ones((n,), dtype=rows.dtype)
    if keep is not None:
        ones = E.where(keep, ones, 0)
    counts = E.index_add(E.zeros((bags,), dtype=rows.dtype), 0, bag, ones)
    return E.where(E.unsqueeze(counts > 0, 1), best, 0)


@export(functional=True, toplevel=False)
@renames("EmbeddingBagBackward0")
def embedding_bag(
    input,
    weight,
    offsets=None,
    max_norm: float | None = None,
    norm_type: float = 2,
    scale_grad_by_freq: bool = False,
    mode: str = "mean",
    sparse: bool = False,
    per_sample_weights=None,
    include_last_offset: bool = False,
    padding_idx: int | None = None,
):
    """Reduce bags of rows of the (num_embeddings, embedding_dim) ``weight``: a 2-D input is
    a batch of equal bags; a 1-D input is split into bags at ``offsets`` (bag ``i`` is
    ``input[offsets[i]:offsets[i + 1]]``, the last one running to the end of the input; with
    ``include_last_offset`` offsets has one more entry, the input's length). ``mode`` is
    ``sum``, ``mean`` or ``max``; ``per_sample_weights`` (``sum`` only) scales each entry. The
    result is (bags, embedding_dim).

    ``scale_grad_by_freq`` divides each entry's gradient by its index's count in the input, as
    ``embedding`` does; PyTorch 2.13's CPU kernel gives some indices that occur once half their
    gradient (the values agree)."""
    op = "embedding_bag"
    if mode not in ("sum", "mean", "max"):
        raise ArgumentError(f"{op}: mode has to be one of sum, mean or max, got {mode!r}")
    idx = to_tensor(input)
    if not idx.dtype.is_integer:
        raise DTypeError(f"input must be an integer tensor, got {idx.dtype}", op=op)
    weight = float_input(op, weight, "weight")
    if weight.ndim != 2:
        raise ShapeError(f"weight has to be 2-D, got shape {fmt_shape(weight.shape)}", op=op)
    if mode == "max" and scale_grad_by_freq:
        raise ArgumentError(
            f"{op}: max mode does not support scaling the gradient by the frequency"
        )
    psw = None
    if per_sample_weights is not None:
        if mode != "sum":
            raise ArgumentError(
                f"{op}: per_sample_weights is only supported for mode='sum', got mode={mode!r}"
            )
        psw = to_tensor(per_sample_weights)
        if tuple(psw.shape) != tuple(idx.shape):
            raise ShapeError(
                f"per_sample_weights of shape {fmt_shape(psw.shape)} must have the input's "
                f"shape {fmt_shape(idx.shape)}",
                op=op,
            )
        if psw.dtype is not weight.dtype:
            raise DTypeError(
                f"per_sample_weights ({psw.dtype}) must have the weight's dtype ({weight.dtype})",
                op=op,
            )
        psw = E.reshape(psw, (-1,))
    if sparse and mode == "max":
        raise UnsupportedError("max mode does not support sparse weights", op=op)
    flat, bag, bounds, bags = _bags(op, idx, offsets, include_last_offset)
    num, dim = weight.shape
    pad = None
    if padding_idx is not None:
        pad = int(padding_idx)
        if not -num <= pad < num:
            raise ShapeError(f"padding_idx {pad} must lie within the {num} embeddings", op=op)
    if max_norm is None and not scale_grad_by_freq and not sparse:
        rows = E.index_select(weight, 0, flat)  # (embedding's lookup, without its reshapes)
    else:  # (a sparse gradient leaves the padding positions out, as PyTorch's)
        rows = embedding(
            flat, weight, pad if sparse else None, max_norm, norm_type, scale_grad_by_freq, sparse
        )
    keep = kept = None
    if pad is not None:
        keep = flat != pad % num
        data = concrete(flat)
        kept = None if data is None else data != pad % num
    if psw is not None:
        rows = rows * E.unsqueeze(psw, 1)
    if keep is not None and mode != "max":
        rows = E.where(E.unsqueeze(keep, 1), rows, 0)
    if bounds is not None:
        return _known_bags(mode, rows, keep, bounds, kept)
    if bag is None:
        return _row_bags(mode, rows, keep, idx.shape)
    if mode == "max":
        return _traced_bags_max(rows, bag, keep, bags)
    total = E.index_add(E.zeros((bags, dim), dtype=weight.dtype), 0, bag, rows)
    if mode == "sum":
        return total
    ones = E.ones((flat.shape[0],), dtype=weight.dtype)
    if keep is not None:
        ones = E.where(keep, ones, 0)
    counts = E.index_add(E.zeros((bags,), dtype=weight.dtype), 0, bag, ones)
    return total / E.unsqueeze(E.clamp(counts, min=1), 1)


@export(functional=True, toplevel=False)
def gumbel_softmax(logits, tau: float = 1, hard: bool = False, eps: float = 1e-10, dim: int = -1):
    """A sample of the Gumbel-softmax distribution: ``softmax((logits + g) / tau)`` with ``g``
    standard Gumbel noise drawn from ember's default generator as PyTorch draws it (``-log`` of
    ``exponential_()``), so a seed gives PyTorch's sample. ``hard=True`` returns the one-hot of the
    sample's argmax with the soft sample's gradient (straight through). ``eps`` is unused, as
    in PyTorch (where it is deprecated)."""
    if eps != 1e-10:
        warnings.warn(
            "gumbel_softmax: the eps parameter is deprecated and has no effect",
            DeprecationWarning,
            stacklevel=user_stacklevel(),
        )
    x = float_input("gumbel_softmax", logits, "logits")
    d = dim_arg("gumbel_softmax", dim, x.ndim) if x.ndim else 0
    gumbels = -E.log(standard_exponential(x.shape, x.dtype))  # (PyTorch's draws)
    y_soft = E.softmax((x + gumbels) / tau, d)
    if not hard:
        return y_soft
    index = E.argmax(y_soft, d, keepdim=True)
    shape = [1] * x.ndim
    if x.ndim:
        shape[d] = x.shape[d]
    iota = to_tensor(np.arange(max(int(np.prod(shape)), 1)).reshape(shape))
    y_hard = E.cast(iota == index, x.dtype)
    return y_hard - E.stop_gradient(y_soft) + y_soft
