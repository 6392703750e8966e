"""``embedding``: rows of a weight matrix looked up by integer indices (F.embedding).

The lookup is ``index_select`` on the flattened indices, whose gradient scatter-adds into the
weight, so repeated indices accumulate. ``padding_idx`` entries take their row from a detached
weight: the row's value is returned but receives no gradient. ``scale_grad_by_freq`` divides each
position's gradient by how often its index occurs in the batch, by adding ``(rows - rows') /
count`` to detached rows ``rows'``: the value is unchanged and only the gradient is scaled.
``max_norm`` renormalizes the referenced rows of the weight in place (under ``no_grad``) before
the lookup, as PyTorch does.
"""

from __future__ import annotations

from .. import dtypes as dt
from ..autograd import is_grad_enabled, no_grad
from ..errors import DTypeError, ShapeError
from ..ops import _registry as _reg
from ..ops import api as E
from ..ops._node_names import rename_node
from ..ops._registry import export
from ..ops._util import fmt_shape
from ..ops.promotion import to_tensor
from ..ragged import RaggedTensor
from ..tensor import Tensor
from ._common import float_input, refuse_complex_grad
from ._embedding_sparse import EmbeddingSparse, note_captured


def _indices(input):
    idx = to_tensor(input)
    if idx.dtype.name not in ("int64", "int32"):  # (PyTorch's embedding takes these two)
        raise DTypeError(
            "Expected tensor for argument #1 'indices' to have one of the following scalar "
            f"types: Long, Int; but got {idx.dtype} instead (while checking arguments for "
            "embedding); convert them with .long()",
            op="embedding",
        )
    return idx


def _padding_index(padding_idx, num_embeddings: int):
    if padding_idx is None:
        return None
    p = int(padding_idx)
    if not -num_embeddings <= p < num_embeddings:
        raise ShapeError(
            f"padding_idx {p} must lie within the {num_embeddings} embeddings", op="embedding"
        )
    return p % num_embeddings


def _renorm_rows(weight, flat, max_norm: float, norm_type: float) -> None:
    """Scale the rows of ``weight`` referenced by ``flat`` whose norm exceeds ``max_norm`` down
    to ``max_norm`` (in place, not recorded), with PyTorch's 1e-7 guard."""
    with no_grad():
        rows = E.index_select(weight, 0, flat)
        norms = E.reshape(E.pow(E.sum(E.pow(E.abs(rows), norm_type), 1), 1.0 / norm_type), (-1, 1))
        # the scale in double, as PyTorch's (its norm read as a double): in float32 the guard
        # would vanish into the norm's rounding
        wide = E.cast(norms, dt.float64)
        scale = E.where(wide > max_norm, max_norm / (wide + 1e-7), 1.0)
        weight[flat] = rows * E.cast(scale, rows.dtype)


def _sparse_gradient(weight) -> bool:
    """Whether the eager lookup gives ``weight`` a sparse gradient: it needs one, and no graph
    is being built (a graph's gradients are dense)."""
    return (
        isinstance(weight, Tensor)
        and weight._requires_grad
        and is_grad_enabled()
        and _reg.current_mode() is _reg._base_mode[0]
    )


def _is_leaf_needing_grad(weight) -> bool:
    return isinstance(weight, Tensor) and weight._requires_grad and weight.grad_fn is None


@export(functional=True, toplevel=False)
def embedding(
    input,
    weight,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
):
    """``weight[input]``: the rows of the (num_embeddings, embedding_dim) ``weight`` at the
    integer ``input`` indices; the result has shape ``input.shape + (embedding_dim,)``. A
    ragged ``input`` (ember.ragged) gives a ragged result with its rows: the lookup of its
    values. ``sparse=True`` makes a leaf weight's gradient a sparse COO tensor, as PyTorch's
    (functional/_embedding_sparse.py); while a graph is built, or for a weight that is not a
    leaf, the gradient is its dense equivalent."""
    if isinstance(input, RaggedTensor):
        rows = embedding(
            input.values, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse
        )
        return input.with_values(rows)
    idx = _indices(input)
    # (any dtype: a table of integers or bools is looked up as PyTorch's)
    weight = to_tensor(weight)
    refuse_complex_grad("embedding", weight, ": look the rows up under no_grad")
    if weight.ndim != 2:
        raise ShapeError(
            f"weight must be 2-D (num_embeddings, embedding_dim), got shape "
            f"{fmt_shape(weight.shape)}",
            op="embedding",
        )
    num, dim = weight.shape
    pad = _padding_index(padding_idx, num)
    flat = E.reshape(idx, (-1,))
    if max_norm is not None:
        float_input("embedding", weight, "weight with max_norm", complex_ok=True)
        _renorm_rows(weight, flat, float(max_norm), float(norm_type))
    if sparse and _sparse_gradient(weight):
        rows = EmbeddingSparse.apply(flat, weight, pad, bool(scale_grad_by_freq))
        return E.reshape(rows, tuple(idx.shape) + (dim,))
    mode = _reg.current_mode()
    if sparse and mode is not _reg._base_mode[0] and _is_leaf_needing_grad(weight):
        note_captured(weight, mode)  # (a graph's gradient: dense, noted)
    rows = E.index_select(weight, 0, flat)
    if pad is not None and weight.requires_grad and is_grad_enabled():
        # (the padding row's lookups pass no gradient; without one recorded, the rows as read)
        rows = E.where(E.reshape(flat == pad, (-1, 1)), rows.detach(), rows)
    if scale_grad_by_freq and (weight.dtype.is_floating_point or weight.dtype.is_complex):
        # (only a gradient is scaled: integer and bool tables have none)
        ones = E.ones(tuple(flat.shape), dtype=weight.dtype)
        counts = E.scatter_add(E.zeros((num,), dtype=weight.dtype), 0, flat, ones)
        per_position = E.reshape(E.index_select(counts, 0, flat), (-1, 1))
        frozen = rows.detach()
        rows = frozen + (rows - frozen) / per_position
    return rename_node(E.reshape(rows, tuple(idx.shape) + (dim,)), "EmbeddingBackward0")
