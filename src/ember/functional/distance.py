"""Distances and the losses built on them, with PyTorch's signatures and numerics:
``cosine_similarity``, ``pairwise_distance``, ``triplet_margin_loss``, ``margin_ranking_loss``
and ``cosine_embedding_loss``.

``cosine_similarity`` follows PyTorch 2.x: each input is divided by its own 2-norm clamped below
at ``eps`` (the clamp changes the value only: the gradient is the unclamped norm's, as PyTorch
clamps under ``no_grad``). Norms of zero vectors have gradient 0 (PyTorch's norm backward masks
them), which the ``where`` around the square root below encodes.
"""

from __future__ import annotations

from .. import dtypes as dt
from ..errors import DTypeError, ShapeError
from ..ops import _item_scalars as _items
from ..ops import api as E
from ..ops._autocast import Autocast, autocasts
from ..ops._node_names import renames
from ..ops._registry import export
from ..ops._util import fmt_shape
from ..ops.promotion import promote, to_tensor
from ._common import dim_arg, float_input, reduce_loss, reduction_arg


def _l2_norm(x, dim: int, keepdim: bool):
    """``sqrt(sum(x * x))`` whose gradient at a zero vector is 0, not NaN."""
    sq = E.sum(x * x, dim, keepdim=keepdim)
    zero = sq == 0
    return E.where(zero, 0, E.sqrt(E.where(zero, 1, sq)))


def _p_norm(d, p: float, dim: int, keepdim: bool):
    """The p-norm of ``d`` along ``dim`` as PyTorch's ``norm`` computes it (p = 0 counts the
    nonzero entries, p = inf is the largest magnitude); of complex values, their moduli's."""
    if d.dtype.is_complex:
        d = E.abs(d)
    if p == 2:
        return _l2_norm(d, dim, keepdim)
    a = E.abs(d)
    if p == 1:
        return E.sum(a, dim, keepdim=keepdim)
    if p == float("inf"):
        return E.amax(a, dim, keepdim=keepdim)
    if p == float("-inf"):
        return E.amin(a, dim, keepdim=keepdim)
    if p == 0:
        # (through a * 0, so the count is differentiable with gradient 0, as PyTorch's is)
        return E.sum(E.where(a != 0, 1.0, a * 0), dim, keepdim=keepdim)
    s = E.sum(E.pow(a, p), dim, keepdim=keepdim)
    zero = s == 0
    return E.where(zero, 0, E.pow(E.where(zero, 1, s), 1.0 / p))


@export(functional=True, toplevel=False)
def cosine_similarity(x1, x2, dim: int = 1, eps: float = 1e-8):
    """``sum(x1 / max(|x1|, eps) * x2 / max(|x2|, eps))`` along ``dim``, after broadcasting
    the inputs (PyTorch 2.x's formula: each vector is normalised by its own clamped norm)."""
    a, b = to_tensor(x1), to_tensor(x2)
    if not (a.dtype.is_floating_point or b.dtype.is_floating_point):
        raise DTypeError(
            f"expected a floating-point operand, got {a.dtype} and {b.dtype} (as PyTorch)",
            op="cosine_similarity",
        )
    a, b = E.broadcast_tensors(*promote(a, b, floating=True))
    d = dim_arg("cosine_similarity", dim, a.ndim)
    eps = _items.number(eps)

    def normalized(x):
        n = _l2_norm(x, d, True)
        clamped = n + E.stop_gradient(E.maximum(n, eps) - n)  # the value clamped, not the grad
        return x / clamped

    return E.sum(normalized(a) * normalized(b), d)


@export(functional=True, toplevel=False)
@renames("NormBackward1")
def pairwise_distance(x1, x2, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False):
    """``norm(x1 - x2 + eps, p)`` over the last dimension (PyTorch adds ``eps`` to the
    difference, so equal inputs are ``eps`` apart and the norm stays differentiable)."""
    # (integer operands subtract in their dtype, wrapping as PyTorch's, before eps, a float,
    # promotes the difference)
    a, b = promote(to_tensor(x1), to_tensor(x2))
    ndim = max(a.ndim, b.ndim)
    if ndim == 0:
        raise ShapeError(
            "expected inputs of at least 1 dimension, got 0-d ones", op="pairwise_distance"
        )
    diff = _floating(a - b + _items.number(eps))
    return _p_norm(diff, float(p), ndim - 1, keepdim)


@export(functional=True, toplevel=False)
@autocasts(Autocast.FP32)
def triplet_margin_loss(
    anchor,
    positive,
    negative,
    margin: float = 1.0,
    p: float = 2,
    eps: float = 1e-6,
    swap: bool = False,
    size_average=None,
    reduce=None,
    reduction: str = "mean",
):
    """``max(d(a, p) - d(a, n) + margin, 0)`` with ``d`` the `pairwise_distance`; ``swap``
    uses ``min(d(a, n), d(p, n))`` as the negative distance."""
    red = reduction_arg("triplet_margin_loss", reduction, size_average, reduce)
    a = float_input("triplet_margin_loss", anchor, "anchor", complex_ok=True, integers=True)
    pos = float_input("triplet_margin_loss", positive, "positive", complex_ok=True, integers=True)
    neg = float_input("triplet_margin_loss", negative, "negative", complex_ok=True, integers=True)
    if not (a.ndim == pos.ndim == neg.ndim) or a.ndim not in (1, 2):
        raise ShapeError(
            f"anchor, positive and negative must all be 1-D or all 2-D, got shapes "
            f"{fmt_shape(a.shape)}, {fmt_shape(pos.shape)} and {fmt_shape(neg.shape)}",
            op="triplet_margin_loss",
        )
    d_pos = pairwise_distance(a, pos, p, eps)
    d_neg = pairwise_distance(a, neg, p, eps)
    if swap:
        d_neg = E.minimum(d_neg, pairwise_distance(pos, neg, p, eps))
    loss = E.clamp(d_pos - d_neg + _items.number(margin), min=0)
    return reduce_loss(loss, red)


@export(functional=True, toplevel=False)
@autocasts(Autocast.FP32)
def margin_ranking_loss(
    input1, input2, target, margin: float = 0.0, size_average=None, reduce=None, reduction="mean"
):
    """``max(-target * (input1 - input2) + margin, 0)``, target holding 1 or -1."""
    red = reduction_arg("margin_ranking_loss", reduction, size_average, reduce)
    return margin_ranking_terms(input1, input2, target, margin, red, same_ndim=True)


def margin_ranking_terms(input1, input2, target, margin, reduction: str, *, same_ndim: bool):
    """The margin ranking loss reduced by ``reduction``; ``same_ndim``: F's check that the
    three operands have one rank (``torch.margin_ranking_loss``, aten's op, broadcasts them)."""
    x1 = float_input("margin_ranking_loss", input1, "input1", integers=True)
    x2 = float_input("margin_ranking_loss", input2, "input2", integers=True)
    y = to_tensor(target)
    if same_ndim and not (x1.ndim == x2.ndim == y.ndim):
        raise ShapeError(
            f"input1, input2 and target must have the same number of dimensions, got shapes "
            f"{fmt_shape(x1.shape)}, {fmt_shape(x2.shape)} and {fmt_shape(y.shape)}",
            op="margin_ranking_loss",
        )
    loss = E.clamp(_floating(-y * (x1 - x2) + _items.number(margin)), min=0)
    return reduce_loss(loss, reduction)


def _floating(x):
    """``x`` in the default float dtype where it is an integer tensor: PyTorch's margin and
    eps are doubles, which promote the integer terms they are added to even when given as an
    int (margin=0)."""
    return E.cast(x, dt.get_default_dtype()) if x.dtype.is_integer else x


_EPSILON = 1e-12  # PyTorch's cosine_embedding_loss guard on the squared magnitudes


@export(functional=True, toplevel=False)
@autocasts(Autocast.FP32)
def cosine_embedding_loss(
    input1, input2, target, margin: float = 0.0, size_average=None, reduce=None, reduction="mean"
):
    """``1 - cos(x1, x2)`` where target is 1, ``max(cos(x1, x2) - margin, 0)`` where it is -1
    (0 elsewhere), the cosine over the last dimension with PyTorch's ``1e-12`` added to each
    squared magnitude."""
    red = reduction_arg("cosine_embedding_loss", reduction, size_average, reduce)
    # (integers and bools as PyTorch's: their products summed in int64, and/or for bools)
    x1, x2 = (
        x if x.dtype.is_bool else float_input("cosine_embedding_loss", x, what, integers=True)
        for x, what in ((to_tensor(input1), "input1"), (to_tensor(input2), "input2"))
    )
    y = to_tensor(target)
    if y.ndim not in (0, 1) or x1.ndim != y.ndim + 1 or tuple(x1.shape) != tuple(x2.shape):
        raise ShapeError(
            f"expected 1-D inputs with a 0-D target or 2-D inputs with a 1-D target, the inputs "
            f"of one shape; got {fmt_shape(x1.shape)}, {fmt_shape(x2.shape)} and target "
            f"{fmt_shape(y.shape)}",
            op="cosine_embedding_loss",
        )
    d = y.ndim
    prod = E.sum(x1 * x2, d)
    mag1 = E.sum(x1 * x1, d) + _EPSILON
    mag2 = E.sum(x2 * x2, d) + _EPSILON
    cos = prod / E.sqrt(mag1 * mag2)
    pos = E.where(y == 1, 1 - cos, 0)
    neg = E.where(y == -1, E.clamp(cos - _items.number(margin), min=0), 0)
    return reduce_loss(pos + neg, red)
