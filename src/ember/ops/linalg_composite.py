"""``ember.linalg`` functions composed of other ops (so they differentiate and capture through
them): ``lstsq``, ``matrix_power``, ``matrix_rank``, ``multi_dot``, ``cross``, ``vecdot``,
``diagonal``, ``cond``, ``vander``, ``tensorinv``, ``tensorsolve``; and the top-level
``ember.matrix_power`` (``cholesky_solve`` and ``cholesky_inverse`` are ops/cholesky_solve.py's).
The namespace is ember/linalg.py."""

from __future__ import annotations

import math
import operator

import numpy as np

from .. import dtypes as dt
from .. import return_types
from ..errors import ArgumentError, DTypeError, ShapeError
from . import api as E
from ._autocast import Autocast, autocasts
from ._registry import TensorBase, apply, building_graph, export
from ._util import fmt_shape, normalize_axis
from .decompositions import INV, require_matrices, solve
from .promotion import to_tensor
from .spectral import EIGVALSH, PINV, default_tolerances

# ----------------------------------------------------------------------------------- lstsq


LstsqResult = return_types.linalg_lstsq


@autocasts(Autocast.FP32)
def lstsq(A, B, rcond=None, *, driver=None) -> LstsqResult:
    """``torch.linalg.lstsq``: the least-squares (minimum-norm) solution X of ``A X = B`` for
    A (..., m, n), B (..., m, k) or, with one dimension fewer, (..., m), batch dimensions
    broadcasting, as a named tuple
    ``(solution, residuals, rank, singular_values)``. ember computes the solution as
    ``pinv(A, rtol=rcond) @ B`` (its gradient is PyTorch's, which differentiates the same
    expression). The other fields follow PyTorch's CPU drivers: ``rank`` (int64) the
    numerical rank except for "gels" (empty); ``singular_values`` A's for "gelsd" and
    "gelss", else empty (no gradient, as PyTorch's); ``residuals`` the squared residual norms
    of each column when A has more rows than columns and full rank (every matrix of the batch;
    "gels" assumes it; under capture the rank cannot be read and the residuals are given), for
    every driver but the default "gelsy". Every driver gives the same solution for a
    well-posed problem."""
    if driver not in (None, "gels", "gelsy", "gelsd", "gelss"):
        raise ArgumentError(f"linalg.lstsq: unknown driver {driver!r}")
    A, B = to_tensor(A), to_tensor(B)
    require_matrices("linalg.lstsq", A)
    if not 0 <= A.ndim - B.ndim <= 1:
        raise ShapeError(
            f"B must have as many dimensions as A {fmt_shape(A.shape)} or one fewer (a "
            f"vector right-hand side), got {fmt_shape(B.shape)}",
            op="linalg.lstsq",
        )
    vector = B.ndim == A.ndim - 1
    if vector:
        B = E.unsqueeze(B, -1)
    require_matrices("linalg.lstsq", B)
    if A.shape[-2] != B.shape[-2]:
        raise ShapeError(
            f"A {fmt_shape(A.shape)} and B {fmt_shape(B.shape)} must have the same number of rows",
            op="linalg.lstsq",
        )
    atol, rtol = default_tolerances("linalg.lstsq", A, None, rcond)
    X = E.matmul(apply(PINV, A, atol=atol, rtol=rtol, hermitian=False), B)
    driver = driver or "gelsy"
    real = dt.to_real(A.dtype) if A.dtype.is_complex else A.dtype
    m, n = A.shape[-2], A.shape[-1]
    if driver == "gels":
        rank = E.zeros((0,), dtype=dt.int64)
    else:
        rank = matrix_rank(A, rtol=rtol)
    residuals = E.zeros((0,), dtype=real)
    if m > n and driver != "gelsy":
        full = driver == "gels" or building_graph() or bool(E.all(E.eq(rank, n)))
        if full:
            residuals = E.sum(E.pow(E.abs(E.sub(E.matmul(A, X), B)), 2), -2)
    if driver in ("gelsd", "gelss"):
        from .norms import svdvals

        # PyTorch's lstsq gives them without a gradient
        singular_values = E.detach(svdvals(A))
    else:
        singular_values = E.zeros((0,), dtype=real)
    if vector:
        X = E.squeeze(X, -1)
    return LstsqResult(X, residuals, rank, singular_values)


# ---------------------------------------------------------------------------- matrix_power


def matrix_power(A, n: int):
    """``torch.linalg.matrix_power``: ``A`` (..., m, m) to the integer power ``n`` by repeated
    squaring (n = 0: the identity; n < 0: powers of the inverse, which must exist)."""
    A = to_tensor(A)
    n = operator.index(n)
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise ShapeError(
            f"expected square matrices, got shape {fmt_shape(A.shape)}", op="linalg.matrix_power"
        )
    if n == 0:
        # the identity, as a function of A with a zero gradient (a select, so that inf or NaN
        # in A stays out of it)
        never = E.zeros(tuple(A.shape), dtype=dt.bool_)
        zero = E.where(never, A, E.zeros((), dtype=A.dtype))
        return E.where(E.eye(A.shape[-1], dtype=dt.bool_), E.ones((), dtype=A.dtype), zero)
    if n < 0:
        A, n = apply(INV, A), -n
    result, square = None, A
    while True:
        if n & 1:
            result = square if result is None else E.matmul(result, square)
        n >>= 1
        if not n:
            return result
        square = E.matmul(square, square)


@export(name="matrix_power", method="matrix_power")
def _matrix_power(input, n: int):
    """``torch.matrix_power``: `ember.linalg.matrix_power`."""
    return matrix_power(input, n)


# ----------------------------------------------------------------------------- matrix_rank


@autocasts(Autocast.FP32)
def matrix_rank(A, *, atol=None, rtol=None, hermitian: bool = False):
    """``torch.linalg.matrix_rank``: the number of singular values (eigenvalue magnitudes when
    ``hermitian``) of each matrix of ``A`` above ``max(atol, rtol * the largest)``; rtol
    defaults to eps * max(m, n) when atol is unset or 0. int64, no gradient. Tolerances are
    numbers or tensors (broadcast with A's batch, as PyTorch's)."""
    from .norms import svdvals

    A = to_tensor(A)
    require_matrices("linalg.matrix_rank", A)
    tensors = isinstance(atol, TensorBase) or isinstance(rtol, TensorBase)
    if not tensors:
        atol, rtol = default_tolerances("linalg.matrix_rank", A, atol, rtol)
    if hermitian:
        values = E.abs(apply(EIGVALSH, A, uplo="L"))
    else:
        values = svdvals(A)
    values = E.stop_gradient(values)
    if tensors:  # (per matrix, broadcast with A's batch, as PyTorch's)
        atol, rtol = _tensor_tolerances(A, values.dtype, atol, rtol)
        atol, rtol = E.unsqueeze(atol, -1), E.unsqueeze(rtol, -1)
    else:
        atol = E.full((), atol, dtype=values.dtype)
    if values.shape[-1] == 0:
        shape = np.broadcast_shapes(tuple(values.shape[:-1]), tuple(atol.shape[:-1]))
        return E.zeros(shape, dtype=dt.int64)
    cutoff = E.maximum(E.amax(values, -1, True) * rtol, atol)
    return E.sum(E.cast(values > cutoff, dt.int64), -1)


def _tensor_tolerances(A, dtype, atol, rtol):
    """PyTorch's tolerances given as tensors (or one a number): atol 0 where unset; rtol,
    where unset, eps * max(m, n) wherever atol is not positive, else 0."""
    eps = float(np.finfo(dtype.np).eps) * max(A.shape[-2:])
    atol = E.zeros((), dtype=dtype) if atol is None else E.cast(to_tensor(atol), dtype)
    if rtol is None:
        rtol = E.where(atol > 0, 0.0, eps)
    return atol, E.cast(to_tensor(rtol), dtype)


# ------------------------------------------------------------------------------- multi_dot


def multi_dot(tensors):
    """``torch.linalg.multi_dot``: the product of two or more matrices, the first of which may
    be a vector (1-D, as a row) and the last a vector (as a column); no batch dimensions.
    ember multiplies left to right (PyTorch picks the cheapest order: the values agree up to
    rounding)."""
    tensors = [to_tensor(t) for t in tensors]
    if len(tensors) < 2:
        raise ShapeError(f"expected at least 2 tensors, got {len(tensors)}", op="linalg.multi_dot")
    for i, t in enumerate(tensors):
        allowed = (1, 2) if i in (0, len(tensors) - 1) else (2,)
        if t.ndim not in allowed:
            raise ShapeError(
                f"tensor {i} has shape {fmt_shape(t.shape)}: the first and last must be 1-D or "
                "2-D, the others 2-D",
                op="linalg.multi_dot",
            )
    out = tensors[0]
    for t in tensors[1:]:
        out = E.matmul(out, t)
    return out


# ------------------------------------------------------------------------- cross, vecdot


def cross(input, other, *, dim: int = -1):
    """``torch.linalg.cross``: the cross product of the 3-vectors along ``dim`` of ``input``
    and ``other`` (which broadcast)."""
    a, b = to_tensor(input), to_tensor(other)
    if a.ndim != b.ndim:
        raise ShapeError(
            f"input {fmt_shape(a.shape)} and other {fmt_shape(b.shape)} must have the same "
            "number of dimensions",
            op="linalg.cross",
        )
    d = normalize_axis("linalg.cross", dim, a.ndim)
    if a.shape[d] != 3 or b.shape[d] != 3:
        raise ShapeError(
            f"dimension {dim} must have size 3 in both, got {fmt_shape(a.shape)} and "
            f"{fmt_shape(b.shape)}",
            op="linalg.cross",
        )

    def part(x, i):
        return E.narrow(x, d, i, 1)

    parts = [
        part(a, (i + 1) % 3) * part(b, (i + 2) % 3) - part(a, (i + 2) % 3) * part(b, (i + 1) % 3)
        for i in range(3)
    ]
    return E.concat(parts, d)


@autocasts(Autocast.LOWER)
def vecdot(x, y, *, dim: int = -1):
    """``torch.linalg.vecdot``: the dot product of ``x`` and ``y`` (which broadcast) along
    ``dim``, ``sum(conj(x) * y)`` (a real ``x`` is its own conjugate)."""
    x, y = to_tensor(x), to_tensor(y)
    for t in (x, y):
        if not (t.dtype.is_floating_point or t.dtype.is_complex):
            raise DTypeError(
                f"expected floating-point or complex tensors, got {t.dtype} (as PyTorch)",
                op="linalg.vecdot",
            )
    prod = E.conj(x) * y
    return E.sum(prod, normalize_axis("linalg.vecdot", dim, prod.ndim))


def diagonal(A, *, offset: int = 0, dim1: int = -2, dim2: int = -1):
    """``torch.linalg.diagonal``: `ember.diagonal` with the last two dimensions as default."""
    return E.diagonal(A, offset, dim1, dim2)


# ------------------------------------------------------------------------------------ cond


@autocasts(Autocast.FP32)
def cond(A, p=None):
    """``torch.linalg.cond``: the condition number of each matrix of ``A`` in the ``p`` norm:
    p None / 2 / -2 from the singular values (largest / smallest, or its inverse), others
    ("fro", "nuc", inf, -inf, 1, -1; square, invertible matrices) as
    ``matrix_norm(A, p) * matrix_norm(inv(A), p)``."""
    from .norms import matrix_norm, svdvals

    A = to_tensor(A)
    require_matrices("linalg.cond", A)
    if p is None or (not isinstance(p, str) and p in (2, -2)):
        s = svdvals(A)
        ratio = E.amax(s, -1) / E.amin(s, -1)
        return 1 / ratio if p == -2 else ratio
    if isinstance(p, str) and p not in ("fro", "nuc"):
        raise ArgumentError(f"linalg.cond: p must be None, 'fro', 'nuc' or a number, got {p!r}")
    if not isinstance(p, str) and p not in (1, -1, math.inf, -math.inf):
        raise ArgumentError(f"linalg.cond: p must be one of None, 2, -2, 1, -1, inf, -inf, got {p}")
    if A.shape[-1] != A.shape[-2]:
        raise ShapeError(
            f"norm {p!r} needs square matrices, got shape {fmt_shape(A.shape)}", op="linalg.cond"
        )
    return matrix_norm(A, p) * matrix_norm(apply(INV, A), p)


# ------------------------------------------------------------------------------------ vander


def vander(x, *, N: int | None = None):  # noqa: N803  (PyTorch's name)
    """``torch.linalg.vander``: the Vandermonde matrices of ``x`` (..., n): (..., n, N) with
    columns ``x ** 0, x ** 1, ..., x ** (N - 1)`` (N > 1, default n), built as PyTorch builds
    them, a cumulative product (so the gradient at x = 0 is finite)."""
    x = to_tensor(x)
    if x.ndim < 1:  # (PyTorch's: a 0-d x is one value, (1,))
        x = E.reshape(x, (1,))
    if x.dtype in (dt.bool_, dt.float16, dt.bfloat16):
        raise DTypeError(
            f"supports float32, float64 and integer tensors, got {x.dtype} (as PyTorch)",
            op="linalg.vander",
        )
    n = x.shape[-1] if N is None else operator.index(N)
    if n < 2:
        raise ArgumentError(f"linalg.vander: N must be greater than 1, got {n} (as PyTorch)")
    ones = E.ones_like(E.unsqueeze(x, -1))
    repeated = E.broadcast_to(E.unsqueeze(x, -1), (*x.shape, n - 1))
    return E.cumprod(E.concat([ones, repeated], -1), -1)


# ------------------------------------------------------------------------ tensorinv, tensorsolve


@autocasts(Autocast.FP32)
def tensorinv(A, ind: int = 2):
    """``torch.linalg.tensorinv``: the tensor X with ``tensordot(X, A, ind)`` the identity:
    A's first ``ind`` dimensions and its others must hold as many elements; the result's
    shape is A's other dimensions then its first ``ind``."""
    A = to_tensor(A)
    ind = operator.index(ind)
    if ind <= 0:
        raise ArgumentError(f"linalg.tensorinv: ind must be a positive integer, got {ind}")
    rows = math.prod(A.shape[:ind])
    if rows != math.prod(A.shape[ind:]):
        raise ShapeError(
            f"the product of the first {ind} dimensions of {fmt_shape(A.shape)} must equal "
            "the product of the others",
            op="linalg.tensorinv",
        )
    square = E.reshape(A, (rows, rows))
    return E.reshape(apply(INV, square), (*A.shape[ind:], *A.shape[:ind]))


@autocasts(Autocast.FP32)
def tensorsolve(A, B, dims=None):
    """``torch.linalg.tensorsolve``: X with ``tensordot(A, X, X.ndim) = B``; X has A's shape
    past B's dimensions (after ``dims`` of A, if given, are moved to the end)."""
    A, B = to_tensor(A), to_tensor(B)
    if dims is not None:
        dims = [normalize_axis("linalg.tensorsolve", d, A.ndim) for d in dims]
        A = E.movedim(A, dims, list(range(A.ndim - len(dims), A.ndim)))
    # (as NumPy's and PyTorch's: A's leading B.ndim dimensions hold B's elements in any shape)
    x_shape = tuple(A.shape[B.ndim :])
    rows = math.prod(B.shape)
    if math.prod(A.shape[: B.ndim]) != rows:
        raise ShapeError(
            f"A {fmt_shape(A.shape)} must hold B's {rows} elements {fmt_shape(B.shape)} in its "
            f"first {B.ndim} dimensions",
            op="linalg.tensorsolve",
        )
    if rows != math.prod(x_shape):
        raise ShapeError(
            f"A {fmt_shape(A.shape)} is not square when read as B's {rows} elements by the "
            f"solution's {math.prod(x_shape)}",
            op="linalg.tensorsolve",
        )
    square = E.reshape(A, (rows, rows))
    return E.reshape(E.squeeze(solve(square, E.reshape(B, (rows, 1))), -1), x_shape)
