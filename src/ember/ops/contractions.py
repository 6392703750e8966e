"""PyTorch's tensordot, baddbmm and cdist, written in ember's ops (permute, reshape, matmul,
elementwise, reductions), so they differentiate and capture through them.

cdist follows PyTorch's two algorithms for p = 2: the differences summed directly, or the
expansion ``|a|^2 + |b|^2 - 2 a.b`` as one matrix product (``compute_mode``), and its
gradient is 0 where a distance is 0, as PyTorch's is (the square root's and the power's
gradients are taken away from 0 there, so no 0 * inf makes a NaN).
"""

from __future__ import annotations

import math
import operator

from .. import dtypes as dt
from ..errors import ArgumentError, ArgumentTypeError, DTypeError, KernelDTypeError, ShapeError
from . import _item_scalars as _items
from . import _torch_flops, cdist_direct
from . import api as E
from ._autocast import Autocast, autocasts
from ._node_names import rename_node
from ._registry import apply, export
from ._util import broadcast_shapes, check_scalars, fmt_shape, normalize_axis, truncated_scalars
from .cdist_direct import away_from_zero as _away_from_zero
from .linalg import matmul
from .promotion import to_tensor

# ------------------------------------------------------------------------------- tensordot


def _contracted(a, b, dims) -> tuple[list, list]:
    if isinstance(dims, int) or hasattr(dims, "__index__"):
        k = operator.index(dims)
        if k < 0 or k > min(a.ndim, b.ndim):
            raise ShapeError(
                f"dims={k} must be between 0 and the smaller rank of shapes "
                f"{fmt_shape(a.shape)} and {fmt_shape(b.shape)}",
                op="tensordot",
            )
        return list(range(a.ndim - k, a.ndim)), list(range(k))
    if not isinstance(dims, (list, tuple)) or len(dims) != 2:
        raise ArgumentTypeError(f"tensordot: dims must be an int or a pair of lists, got {dims!r}")
    da, db = ([d] if isinstance(d, int) else list(d) for d in dims)
    if len(da) != len(db):
        raise ShapeError(f"dims {da} and {db} must list as many dimensions", op="tensordot")
    return (
        [normalize_axis("tensordot", d, a.ndim) for d in da],
        [normalize_axis("tensordot", d, b.ndim) for d in db],
    )


def tensordot(a, b, dims=2):
    """Sum of products over the dimensions ``dims`` names: an int k contracts a's last k with
    b's first k; a pair of lists pairs a's dimensions with b's. The result has a's free
    dimensions, then b's. Both tensors must have one dtype, as in PyTorch."""
    a, b = to_tensor(a), to_tensor(b)
    if a.dtype is not b.dtype:
        raise DTypeError(
            f"both inputs must have one dtype, got {a.dtype} and {b.dtype}", op="tensordot"
        )
    if a.dtype is dt.bool_:
        raise KernelDTypeError("not defined for bool tensors (as in PyTorch)", op="tensordot")
    da, db = _contracted(a, b, dims)
    for i, j in zip(da, db):
        # a contracted dimension of size 1 broadcasts against the other's, as PyTorch's: the
        # one element times the other's sum along it
        if a.shape[i] == 1 and b.shape[j] != 1:
            b = E.sum(b, j, True)
        elif b.shape[j] == 1 and a.shape[i] != 1:
            a = E.sum(a, i, True)
        if a.shape[i] != b.shape[j]:
            raise ShapeError(
                f"contracted dimension {i} of shape {fmt_shape(a.shape)} and {j} of shape "
                f"{fmt_shape(b.shape)} differ in size",
                op="tensordot",
            )
    if len(set(da)) != len(da) or len(set(db)) != len(db):
        raise ShapeError(f"dims {da} and {db} repeat a dimension", op="tensordot")
    free_a = [d for d in range(a.ndim) if d not in da]
    free_b = [d for d in range(b.ndim) if d not in db]
    size = math.prod(a.shape[d] for d in da)
    left = E.reshape(E.permute(a, free_a + da), (math.prod(a.shape[d] for d in free_a), size))
    right = E.reshape(E.permute(b, db + free_b), (size, math.prod(b.shape[d] for d in free_b)))
    out_shape = tuple(a.shape[d] for d in free_a) + tuple(b.shape[d] for d in free_b)
    return E.reshape(matmul(left, right), out_shape)


export(tensordot)


# --------------------------------------------------------------------------------- baddbmm


def _same_dtype(name: str, *tensors):
    first = tensors[0].dtype
    if any(t.dtype is not first for t in tensors):
        names = ", ".join(str(t.dtype) for t in tensors)
        raise DTypeError(f"operands must have one dtype, got {names}", op=name)
    if first is dt.bool_:
        raise KernelDTypeError("not defined for bool tensors (as in PyTorch)", op=name)
    return first


@autocasts(Autocast.LOWER)
@_torch_flops.counts_as("aten.baddbmm")
def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """``beta * input + alpha * (batch1 @ batch2)`` for batches of matrices (b, n, m) and
    (b, m, p) and an input that broadcasts to (b, n, p). The three tensors must have one
    dtype, as in PyTorch. With ``beta=0`` the input is ignored (its NaN and infinities too).
    For integer tensors a float beta or alpha is truncated toward zero, as PyTorch's."""
    input, batch1, batch2 = to_tensor(input), to_tensor(batch1), to_tensor(batch2)
    dtype = _same_dtype("baddbmm", input, batch1, batch2)
    if _items.any_item(beta, alpha):
        check_scalars("baddbmm", dtype, beta, alpha)  # (float ones for complex tensors too)
    else:
        beta, alpha = truncated_scalars("baddbmm", dtype, beta, alpha)
    if dtype in (dt.float16, dt.bfloat16):  # as PyTorch: computed in float32, rounded once
        wide = [E.cast(t, dt.float32) for t in (input, batch1, batch2)]
        return E.cast(baddbmm(*wide, beta=beta, alpha=alpha), dtype)
    product = E.bmm(batch1, batch2)
    shape = tuple(product.shape)
    if input.ndim > 3 or broadcast_shapes("baddbmm", tuple(input.shape), shape) != shape:
        raise ShapeError(
            f"input of shape {fmt_shape(input.shape)} does not broadcast to the product's "
            f"shape {fmt_shape(shape)}",
            op="baddbmm",
        )
    if _items.any_item(beta, alpha):  # (traced .item()s: their tensors)
        return _items.add_scaled("baddbmm", input, product, beta, alpha, dtype)
    if alpha != 1:
        product = product * alpha
    if beta != 0:
        product = product + (input if beta == 1 else input * beta)
    return rename_node(product, "BaddbmmBackward0")


export(baddbmm, method=True, inplace=True)


# (PyTorch's baddbmm_ is a product into its input, not an elementwise kernel: it does not
# refuse operands overlapping the input, ops/_overlap.py)
baddbmm.overlap_ok = True


# ----------------------------------------------------------------------------------- cdist

_CDIST_MODES = (
    "use_mm_for_euclid_dist_if_necessary",
    "use_mm_for_euclid_dist",
    "donot_use_mm_for_euclid_dist",
)


def _direct(x1, x2, p: float):
    diff = E.unsqueeze(x1, -2) - E.unsqueeze(x2, -3)  # (..., P, R, M)
    if p == 0:  # (the count carries a zero gradient, as PyTorch's does: diff * 0 at zeros)
        return E.sum(E.where(diff != 0, 1.0, diff * 0.0), -1)
    if p == 1:
        return E.sum(E.abs(diff), -1)
    if p == 2:
        return _away_from_zero(E.sum(diff * diff, -1), E.sqrt)
    if math.isinf(p):
        return E.amax(E.abs(diff), -1)
    powered = _away_from_zero(E.abs(diff), lambda a: a**p)
    return _away_from_zero(E.sum(powered, -1), lambda s: s ** (1.0 / p))


def _by_products(x1, x2):
    """PyTorch's _euclidean_dist: one product of [-2 x1, |x1|^2, 1] and [x2, 1, |x2|^2]."""
    n1 = E.sum(x1 * x1, -1, keepdim=True)
    n2 = E.sum(x2 * x2, -1, keepdim=True)
    left = E.concat([x1 * -2.0, n1, E.ones_like(n1)], -1)
    right = E.concat([x2, E.ones_like(n2), n2], -1)
    squared = E.clamp(matmul(left, E.transpose(right, -2, -1)), min=0.0)
    return _away_from_zero(squared, E.sqrt)


@autocasts(Autocast.FP32)
def cdist(x1, x2, p: float = 2.0, compute_mode: str = "use_mm_for_euclid_dist_if_necessary"):
    """The p-norm distance between each row of x1 (..., P, M) and each row of x2 (..., R, M):
    (..., P, R), leading dimensions broadcast. p = 0 counts the differing coordinates, p = inf
    takes the largest difference. For p = 2 the distances come from a matrix product where
    ``compute_mode`` says so (by default when P or R exceeds 25, or is a symbolic size of a
    captured function), as in PyTorch. Floating tensors of one dtype, float32 or float64
    (PyTorch's CPU cdist has no half precision).

    The products' form rounds like PyTorch's, but not bit for bit: where two rows coincide its
    distance is the square root of a rounding error (~1e-8 in float64), in either library.
    The gradient is 0 where a distance is 0, as PyTorch's. Eagerly the direct algorithm is one
    op each way (ops/cdist_direct.py: PyTorch's formulas, each tied coordinate of p = inf
    taking all of the gradient, as PyTorch's); a captured graph keeps the composite, whose
    ties at p = inf share it (amax's gradient)."""
    _items.refuse(p, "cdist", "p", "the norm's order as a number (it picks the computation)")
    x1, x2 = to_tensor(x1), to_tensor(x2)
    for name, t in (("x1", x1), ("x2", x2)):
        if not t.dtype.is_floating_point or t.dtype in (dt.float16, dt.bfloat16):
            raise DTypeError(
                f"supports float32 and float64 tensors only, {name} is {t.dtype}", op="cdist"
            )
        if t.ndim < 2:
            raise ShapeError(
                f"{name} must have at least 2 dimensions, got shape {fmt_shape(t.shape)}",
                op="cdist",
            )
    if x1.dtype is not x2.dtype:
        raise DTypeError(f"x1 is {x1.dtype} but x2 is {x2.dtype}", op="cdist")
    if x1.shape[-1] != x2.shape[-1]:
        raise ShapeError(
            f"x1 of shape {fmt_shape(x1.shape)} and x2 of shape {fmt_shape(x2.shape)} must "
            "have as many columns",
            op="cdist",
        )
    p = float(p)
    if p < 0 or math.isnan(p):
        raise ArgumentError(f"cdist: p must be non-negative, got {p}")
    if compute_mode not in _CDIST_MODES:
        raise ArgumentError(
            f"cdist: compute_mode must be one of {_CDIST_MODES}, got {compute_mode!r}"
        )
    batch = broadcast_shapes("cdist", tuple(x1.shape[:-2]), tuple(x2.shape[:-2]))
    x1 = E.broadcast_to(x1, (*batch, *x1.shape[-2:]))
    x2 = E.broadcast_to(x2, (*batch, *x2.shape[-2:]))
    # (a symbolic row count, a batch of unknown size, counts as more than 25)
    many = any(not isinstance(r, int) or r > 25 for r in (x1.shape[-2], x2.shape[-2]))
    products = p == 2 and (
        compute_mode == "use_mm_for_euclid_dist" or (compute_mode == _CDIST_MODES[0] and many)
    )
    if products:
        return _by_products(x1, x2)
    if cdist_direct.applies(x1, x2):
        return rename_node(apply(cdist_direct.CDIST_DIRECT, x1, x2, p=p), "CdistBackward0")
    return _direct(x1, x2, p)


export(cdist)
