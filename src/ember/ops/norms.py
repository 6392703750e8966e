"""Norms: the ``vector_norm`` and ``svdvals`` primitives, and the public norms built on them:
``ember.norm`` (``torch.norm``) here, ``ember.linalg.vector_norm``, ``matrix_norm``, ``norm``
and ``svdvals`` (``torch.linalg``; the namespace is ember/linalg.py).

``vector_norm`` is a primitive rather than ``sum(abs(x) ** p) ** (1 / p)`` composed, because
the composite's gradient is NaN where it should be 0 (at a zero norm, at zero elements for
p < 1); its VJP is PyTorch's (``norm_backward``): at a zero norm the gradient is 0, for the
infinity norms it is shared evenly among the elements that reach it.

``svdvals`` (the singular values, descending) has the gradient ``U diag(g) V^T``, with the
factors recomputed in the VJP by ``svd``, an op without a gradient of its own: a second
derivative through singular values raises an `AutogradError` naming ``svd`` instead of
returning a wrong value.
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as dt
from ..errors import ArgumentError, ArgumentTypeError, DTypeError, KernelDTypeError, ShapeError
from ..types import TensorType
from . import _item_scalars as _items
from . import _onnx
from . import api as E
from ._autocast import Autocast, autocasts
from ._half import square_sum
from ._registry import Cost, OpDef, apply, export, register
from ._rules import Complex
from ._util import fmt_shape, io_bytes, normalize_axes, normalize_axis, numel, reduction_cost
from .decompositions import np_svd
from .promotion import to_tensor
from .reduce import _keepdim_shape, reduced_shape

# ------------------------------------------------------------------------------ vector_norm


def _norm_infer(x, *, ord, axes, keepdims):  # noqa: A002
    if not x.dtype.is_floating_point:
        raise DTypeError(
            f"expected a floating-point tensor, got {x.dtype} (as PyTorch, ember computes norms "
            "of floating tensors only; convert first, e.g. x.float())",
            op="vector_norm",
        )
    if math.isinf(ord) or ord < 0:
        for a in axes:
            if x.shape[a] == 0:
                raise ShapeError(
                    f"cannot compute the {ord} norm over dimension {a} of size 0 (tensor shape "
                    f"{fmt_shape(x.shape)}): the reduction has no identity",
                    op="vector_norm",
                )
    return TensorType(reduced_shape(x.shape, axes, keepdims), x.dtype)


def _norm_kernel(x, *, ord, axes, keepdims):  # noqa: A002
    a = x.astype(np.float32) if x.dtype in (dt.float16.np, dt.bfloat16.np) else x
    reduce = {"axis": axes, "keepdims": keepdims}
    if ord == 2 and a.dtype.kind == "f":  # (x * x is |x| * |x| bit for bit: no abs pass)
        return np.asarray(np.sqrt(np.add.reduce(a * a, **reduce))).astype(x.dtype, copy=False)
    mag = np.abs(a)
    if ord == math.inf:
        out = np.max(mag, **reduce)
    elif ord == -math.inf:
        out = np.min(mag, **reduce)
    elif ord == 0:
        out = np.sum(a != 0, **reduce, dtype=a.dtype)
    elif ord == 1:
        out = np.sum(mag, **reduce)
    elif ord == 2:
        out = np.sqrt(np.sum(mag * mag, **reduce))
    else:
        with np.errstate(divide="ignore"):  # a zero to a negative power: inf, as in PyTorch
            out = np.sum(mag**ord, **reduce) ** (1.0 / ord)
    return np.asarray(out).astype(x.dtype, copy=False)


def _norm_vjp(c, g):
    """PyTorch's norm_backward, case by case."""
    x, norm = c.inputs[0], c.outputs[0]
    p, axes = c.attrs["ord"], c.attrs["axes"]
    if not c.attrs["keepdims"]:
        shape = _keepdim_shape(x.shape, axes)
        g, norm = E.reshape(g, shape), E.reshape(norm, shape)
    if p == 0:  # (PyTorch's: an undefined gradient, so x.grad stays None, not zeros)
        return (None,)
    if p == 1:
        return (E.sign(x) * g,)
    # (each masked quotient divides by a safe stand-in where it is masked, so nothing warns)
    zero_norm = norm == 0
    safe_norm = E.where(zero_norm, 1, norm)
    if p == 2:
        return (g * E.where(zero_norm, 0, x / safe_norm),)
    if math.isinf(p):
        mag = E.abs(x)
        hit = E.cast(E.logical_or(mag == norm, E.isnan(mag)), g.dtype)
        return (E.sign(x) * (g / E.sum(hit, axes, keepdim=True)) * hit,)
    if p < 1:
        zero = x == 0
        scaled = E.sign(x) * E.where(zero, 0, E.where(zero, 1, E.abs(x)) ** (p - 1))
        return (scaled * g * norm ** (1 - p),)
    scaled = E.sign(x) * E.abs(x) ** (p - 1) if p < 2 else x * E.abs(x) ** (p - 2)
    return (scaled * E.where(zero_norm, 0, g / safe_norm ** (p - 1)),)


def _onnx_vector_norm(e):
    x, t = e.inputs[0], e.in_types[0]
    p, axes, keep = e.attrs["ord"], e.attrs["axes"], e.attrs["keepdims"]
    mag = e.node("Abs", [x])
    if p == math.inf:
        return _onnx.reduce(e, "ReduceMax", mag, axes, keep)
    if p == -math.inf:
        return _onnx.reduce(e, "ReduceMin", mag, axes, keep)
    if p == 0:
        nonzero = e.cast(
            e.node("Not", [e.node("Equal", [x, _onnx.scalar(e, 0, t.dtype)])]), t.dtype
        )
        return _onnx.reduce(e, "ReduceSum", nonzero, axes, keep)
    if p == 1:
        return _onnx.reduce(e, "ReduceSum", mag, axes, keep)
    if p == 2:
        return e.node("Sqrt", [_onnx.reduce(e, "ReduceSum", e.node("Mul", [mag, mag]), axes, keep)])
    powered = e.node("Pow", [mag, _onnx.scalar(e, p, t.dtype)])
    total = _onnx.reduce(e, "ReduceSum", powered, axes, keep)
    return e.node("Pow", [total, _onnx.scalar(e, 1.0 / p, t.dtype)])


def _norm_fast(x, *, ord, axes, keepdims):  # noqa: A002
    """The 2-norm's squares summed in one compiled pass where that is faster (ops/_half.py
    `square_sum`: the kernel's bits), the root taken as the kernel takes it."""
    if ord != 2:
        return None
    total = square_sum(x, axes)
    if total is None:
        return None
    out = np.sqrt(total)
    if keepdims:
        out = out.reshape(_keepdim_shape(x.shape, axes))
    return np.asarray(out).astype(x.dtype, copy=False)


_norm_fast.declines_complex = True  # (square_sum takes float32/float64 only)


_VECTOR_NORM = register(
    OpDef(
        name="vector_norm",
        grad_fn="LinalgVectorNormBackward0",
        onnx=_onnx_vector_norm,
        kind="reduce",
        infer=_norm_infer,
        kernel=_norm_kernel,
        fast=_norm_fast,
        vjp=_norm_vjp,
        cost=reduction_cost,
        save_outputs=(0,),
        batch=None,
        doc="vector_norm(x, ord, axes, keepdims): the ord-norm of x over axes (0: the count of "
        "non-zeros; inf / -inf: the largest / smallest magnitude)",
    )
)


def _ord_value(op, ord) -> float:  # noqa: A002
    _items.refuse(ord, op, "ord", "the norm's order as a number (it picks the computation)")
    if isinstance(ord, str) or isinstance(ord, bool) or not isinstance(ord, (int, float)):
        raise ArgumentTypeError(f"{op}: ord must be a number (int, float or inf), got {ord!r}")
    return float(ord)


def _float_input(op, x, dtype, *, complex_ok: bool = False):
    """x (cast to ``dtype`` when given, which may widen x's dtype but not narrow it); a complex
    x is taken where ``complex_ok``."""
    x = to_tensor(x)
    if not (x.dtype.is_floating_point or (complex_ok and x.dtype.is_complex)):
        raise DTypeError(
            f"expected a floating-point tensor, got {x.dtype}; convert it first, e.g. x.float()",
            op=op,
        )
    if dtype is not None:
        dtype = dt.as_dtype(dtype)
        if dt.result_type(x.dtype, dtype) is not dtype:
            raise DTypeError(
                f"the input's dtype {x.dtype} cannot be converted to dtype={dtype} without "
                "narrowing",
                op=op,
            )
        x = E.cast(x, dtype)
    return x


def vector_norm(x, ord=2, dim=None, keepdim: bool = False, *, dtype=None):  # noqa: A002
    """``torch.linalg.vector_norm``: the ``ord``-norm of ``x`` over ``dim`` (None or (): every
    element): ``sum(|x| ** ord) ** (1 / ord)``; ``ord=inf`` / ``-inf`` the largest / smallest
    magnitude, ``ord=0`` the number of non-zero elements. ``dtype`` converts x first (never
    narrowing it). Floating or complex inputs (a complex one's norm is its moduli's, real).
    The gradient is PyTorch's (0 at a zero norm)."""
    x = _moduli(_float_input("vector_norm", x, dtype, complex_ok=True))
    p = _ord_value("vector_norm", ord)
    if isinstance(dim, (tuple, list)) and not dim:
        dim = None
    axes = normalize_axes("vector_norm", dim, x.ndim)
    return apply(_VECTOR_NORM, x, ord=p, axes=axes, keepdims=bool(keepdim))


def _moduli(x):
    """A complex tensor's moduli (real, with their gradient), a real one itself: the norms
    of complex tensors are their moduli's."""
    return E.abs(x) if x.dtype.is_complex else x


# ---------------------------------------------------------------------------------- svdvals


def _require_matrix(op, x):
    if x.ndim < 2:
        raise ShapeError(
            f"expected a matrix or a batch of matrices (at least 2 dimensions), got shape "
            f"{fmt_shape(x.shape)}",
            op=op,
        )
    if x.dtype not in (dt.float32, dt.float64, dt.complex64, dt.complex128):
        # (PyTorch has no 16-bit LAPACK kernel: NotImplementedError, as its "lu_cpu" not
        # implemented for 'BFloat16'; integers a RuntimeError)
        error = KernelDTypeError if x.dtype in (dt.float16, dt.bfloat16) else DTypeError
        raise error(
            f"singular values need a float32, float64 or complex tensor, got {x.dtype} (PyTorch "
            "refuses low precision here too)",
            op=op,
        )


def _svdvals_infer(x):
    _require_matrix("svdvals", x)
    m, n = x.shape[-2:]
    return TensorType(tuple(x.shape[:-2]) + (min(m, n),), dt.to_real(x.dtype))


def _real_np(x):
    """The NumPy dtype of singular values of ``x`` (a complex matrix's are real)."""
    return x.real.dtype if x.dtype.kind == "c" else x.dtype


def _svdvals_kernel(x):
    m, n = x.shape[-2:]
    if min(m, n) == 0 or x.size == 0:
        return np.zeros(x.shape[:-2] + (min(m, n),), _real_np(x))
    return np_svd(x, compute_uv=False).astype(_real_np(x), copy=False)


def _svd_infer(x):
    _require_matrix("svd", x)
    m, n = x.shape[-2:]
    k, batch = min(m, n), tuple(x.shape[:-2])
    return (
        TensorType(batch + (m, k), x.dtype),
        TensorType(batch + (k,), dt.to_real(x.dtype)),
        TensorType(batch + (k, n), x.dtype),
    )


def _svd_kernel(x):
    m, n = x.shape[-2:]
    k, batch = min(m, n), x.shape[:-2]
    if k == 0 or x.size == 0:
        return (
            np.zeros(batch + (m, k), x.dtype),
            np.zeros(batch + (k,), _real_np(x)),
            np.zeros(batch + (k, n), x.dtype),
        )
    u, s, vh = np_svd(x, False)
    return u.astype(x.dtype), s.astype(_real_np(x)), vh.astype(x.dtype)


def _svd_cost(in_types, out_types, attrs):
    shape = [d if isinstance(d, int) else 1 for d in in_types[0].shape]  # (symbolic: 1)
    m, n = shape[-2:]
    batch = numel(shape[:-2])
    return Cost(4 * batch * m * n * min(m, n), io_bytes(in_types, out_types))


_SVD = register(
    OpDef(
        name="svd",
        kind="linalg",
        infer=_svd_infer,
        kernel=_svd_kernel,
        cost=_svd_cost,
        num_outputs=3,
        batch=None,
        complex=Complex.VALUES,
        doc="svd(x): the reduced singular value decomposition U, S, Vh of a (batch of) "
        "matrices; no gradient (svdvals' VJP uses it)",
    )
)


def _svdvals_vjp(c, g):
    u, _, vh = apply(_SVD, c.inputs[0])
    return (E.matmul(u * E.unsqueeze(g, -2), vh),)


_SVDVALS = register(
    OpDef(
        name="svdvals",
        grad_fn="LinalgSvdBackward0",  # (PyTorch's svdvals is its svd without vectors)
        autocast=Autocast.FP32,
        kind="linalg",
        infer=_svdvals_infer,
        kernel=_svdvals_kernel,
        vjp=_svdvals_vjp,
        cost=_svd_cost,
        batch=None,
        complex=Complex.GRADIENT,  # (U diag(g) V^H: d s_i = Re(u_i^H dA v_i))
        doc="svdvals(x): the singular values of a (batch of) matrices, descending",
    )
)


@autocasts(Autocast.FP32)
def svdvals(A):
    """``torch.linalg.svdvals``: the singular values of ``A`` (..., m, n), descending, in
    float32, float64 or complex (real values). Gradient ``U diag(g) V^H``; a second derivative
    raises."""
    return apply(_SVDVALS, to_tensor(A))


# ------------------------------------------------------------------------------ matrix_norm


def _matrix_dims(op, A, dim):
    if A.ndim < 2:
        raise ShapeError(
            f"expected a tensor of at least 2 dimensions, got shape {fmt_shape(A.shape)}", op=op
        )
    if not isinstance(dim, (tuple, list)) or len(dim) != 2:
        raise ShapeError(f"dim must be a pair of dimensions, got {dim!r}", op=op)
    d0, d1 = (normalize_axis(op, d, A.ndim) for d in dim)
    if d0 == d1:
        raise ShapeError(f"dim {tuple(dim)} names one dimension twice", op=op)
    return d0, d1


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim: bool = False, *, dtype=None):  # noqa: A002
    """``torch.linalg.matrix_norm``: the ``ord``-norm of the matrices ``A`` holds in ``dim``:
    "fro" (Frobenius), "nuc" (the sum of singular values), 2 / -2 (the largest / smallest
    singular value), 1 / -1 (the largest / smallest column sum of magnitudes), inf / -inf
    (the largest / smallest row sum). "nuc" and +-2 need float32 or float64."""
    A = _float_input("matrix_norm", A, dtype, complex_ok=True)
    d0, d1 = _matrix_dims("matrix_norm", A, dim)
    if not (ord == "nuc" or (not isinstance(ord, str) and abs(ord) == 2)):
        A = _moduli(A)  # (the entrywise norms read moduli only; the spectral ones need A)
    if isinstance(ord, str):
        if ord == "fro":
            return apply(_VECTOR_NORM, A, ord=2.0, axes=tuple(sorted((d0, d1))), keepdims=keepdim)
        if ord != "nuc":
            raise ArgumentError(f"matrix_norm: ord must be 'fro', 'nuc' or a number, got {ord!r}")
    elif _ord_value("matrix_norm", ord) not in (1.0, -1.0, 2.0, -2.0, math.inf, -math.inf):
        raise ArgumentError(f"matrix_norm: ord must be one of 1, -1, 2, -2, inf, -inf, got {ord}")
    keep_shape = _keepdim_shape(A.shape, (d0, d1))
    if ord == "nuc" or abs(ord) == 2:
        values = svdvals(E.movedim(A, (d0, d1), (-2, -1)))
        if ord == "nuc":
            out = E.sum(values, -1)
        else:
            out = _largest(values, -1, False) if ord > 0 else E.amin(values, -1)
        return E.reshape(out, keep_shape) if keepdim else out
    # the 1-norms reduce the magnitudes over dim[0] then take the extreme over dim[1]; the
    # infinity norms are the 1-norms of the transpose
    if math.isinf(ord):
        d0, d1 = d1, d0
    sums = apply(_VECTOR_NORM, A, ord=1.0, axes=(d0,), keepdims=keepdim)
    if not keepdim and d0 < d1:
        d1 -= 1
    return _largest(sums, d1, keepdim) if ord > 0 else E.amin(sums, d1, keepdim)


def _largest(values, axis: int, keepdim: bool):
    """The largest of non-negative ``values`` along ``axis``: 0 over none, as PyTorch's
    matrix norms of an empty matrix (the smallest of none stays an error, as PyTorch's)."""
    n = values.shape[axis]
    if isinstance(n, int) and n == 0:  # (a sum of none: 0, with the empty gradient path)
        return E.sum(values, axis, keepdim=keepdim)
    return E.amax(values, axis, keepdim)


def linalg_norm(A, ord=None, dim=None, keepdim: bool = False, *, dtype=None):  # noqa: A002
    """``torch.linalg.norm``: a matrix norm (`matrix_norm`) when ``ord`` is given and ``dim``
    names two dimensions (or A is 2-D and dim is None), else a vector norm (`vector_norm`,
    the 2-norm when ord is None; dim None flattens)."""
    A = to_tensor(A)
    if isinstance(dim, int):
        dim = (dim,)
    if dim is not None:
        if len(dim) not in (1, 2):
            raise ShapeError(f"dim must name 1 or 2 dimensions, got {tuple(dim)}", op="norm")
    elif ord is not None and A.ndim not in (1, 2):
        raise ShapeError(
            f"with ord given and dim None the input must be 1-D or 2-D, got shape "
            f"{fmt_shape(A.shape)}",
            op="norm",
        )
    if isinstance(ord, str):
        if dim is None and A.ndim not in (1, 2):
            raise ShapeError(
                f"with ord {ord!r} and dim None the input must be 1-D or 2-D, got shape "
                f"{fmt_shape(A.shape)}",
                op="norm",
            )
        return matrix_norm(A, ord, (0, 1) if dim is None else dim, keepdim, dtype=dtype)
    if ord is not None and ((dim is not None and len(dim) == 2) or (dim is None and A.ndim == 2)):
        return matrix_norm(A, ord, (0, 1) if dim is None else dim, keepdim, dtype=dtype)
    return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)


# ------------------------------------------------------------------------------- torch.norm


@export(method=True)
def norm(x, p="fro", dim=None, keepdim: bool = False, dtype=None):
    """``torch.norm`` (which PyTorch keeps for compatibility; ``ember.linalg`` has the current
    functions): ``p`` "fro" with at most two dims is the vector 2-norm over them; "nuc" (or
    "fro" over more dims) a `matrix_norm` (dim None: every dimension); a number ``p`` the
    vector ``p``-norm over ``dim`` (None: every element)."""
    x = to_tensor(x)
    dims = [dim] if isinstance(dim, int) else dim
    if isinstance(p, str):
        if p == "fro" and (dim is None or isinstance(dim, int) or len(dim) <= 2):
            return vector_norm(x, 2, dims, keepdim, dtype=dtype)
        return matrix_norm(
            x, p, list(range(x.ndim)) if dims is None else dims, keepdim, dtype=dtype
        )
    return vector_norm(x, 2.0 if p is None else p, dims, keepdim, dtype=dtype)
