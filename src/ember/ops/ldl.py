"""The LDL^T factorization of symmetric (indefinite) matrices, PyTorch's
``torch.linalg.ldl_factor``, ``ldl_factor_ex`` and ``ldl_solve``: LAPACK's sytrf and sytrs
through SciPy, per matrix of a batch, with the lower triangle (``uplo='L'``, PyTorch's).

``LD`` (..., n, n) is LAPACK's packed factor, its strict upper triangle zero (PyTorch zeroes
it); ``pivots`` (..., n) are LAPACK's 1-based int32 ipiv (a negative pair marks a 2x2 block of
D); ``info`` is LAPACK's: i > 0 where D's i-th (1-based) diagonal block is exactly singular.
Only the lower triangle of A is read. As PyTorch's, neither primitive has a derivative, and
``hermitian`` changes nothing for real matrices (ember's linear algebra is real here)."""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from .. import return_types
from ..errors import DTypeError, LinAlgError, ShapeError
from ..types import TensorType
from ._registry import OpDef, apply, building_graph, register
from ._util import broadcast_shapes, fmt_shape
from .decompositions import batch_label, cubic_cost, require_matrices
from .promotion import to_tensor

# ------------------------------------------------------------------------------ ldl_factor


def _factor_infer(a, *, hermitian):
    require_matrices("linalg.ldl_factor", a, square=True)
    batch = tuple(a.shape[:-2])
    return (
        TensorType(tuple(a.shape), a.dtype),
        TensorType(batch + (a.shape[-1],), dt.int32),
        TensorType(batch, dt.int32),
    )


def _factor_kernel(a, *, hermitian):
    from scipy.linalg import get_lapack_funcs

    batch, n = a.shape[:-2], a.shape[-1]
    ld = np.zeros(a.shape, a.dtype)
    pivots = np.zeros(batch + (n,), np.int32)
    info = np.zeros(batch, np.int32)
    if a.size == 0:
        return ld, pivots, info
    (sytrf,) = get_lapack_funcs(("sytrf",), (a,))
    with np.errstate(all="ignore"):
        for index in np.ndindex(*batch):
            f, p, i = sytrf(a[index], lower=1)
            ld[index], pivots[index], info[index] = np.tril(f), p, i
    return ld, pivots, info


LDL_FACTOR = register(
    OpDef(
        name="ldl_factor",
        kind="linalg",
        infer=_factor_infer,
        kernel=_factor_kernel,
        vjp=None,  # PyTorch: "derivative for aten::linalg_ldl_factor_ex is not implemented"
        cost=cubic_cost,
        num_outputs=3,
        batch=None,
        doc="ldl_factor(A; hermitian): LAPACK's sytrf (lower): packed LD, int32 pivots, info",
    )
)


def _check_info(op, info, A):
    if building_graph():
        return  # (the data is not at hand while a graph is built: no check there)
    values = np.asarray(info.numpy(force=True))
    if values.any():
        index = np.unravel_index(int(np.flatnonzero(values)[0]), values.shape)
        k = int(values[index])
        raise LinAlgError(
            f"{batch_label(values.shape, index)}D[{k},{k}] is exactly zero (input of shape "
            f"{fmt_shape(A.shape)}): the factor exists but solving with it would divide by "
            "zero; linalg.ldl_factor_ex returns it with info instead",
            op=op,
        )


def ldl_factor_ex(A, *, hermitian: bool = False, check_errors: bool = False):
    """``torch.linalg.ldl_factor_ex``: ``(LD, pivots, info)`` of each symmetric matrix of A
    (..., n, n), LAPACK's sytrf with the lower triangle; ``check_errors=True`` raises
    `LinAlgError` where an info is not 0 (read from the data; eager only)."""
    A = to_tensor(A)
    LD, pivots, info = apply(LDL_FACTOR, A, hermitian=bool(hermitian))
    if check_errors:
        _check_info("linalg.ldl_factor_ex", info, A)
    return return_types.linalg_ldl_factor_ex(LD, pivots, info)


def ldl_factor(A, *, hermitian: bool = False):
    """``torch.linalg.ldl_factor``: ``(LD, pivots)``; an exactly singular block of D raises
    `LinAlgError` naming the batch element (eagerly)."""
    A = to_tensor(A)
    LD, pivots, info = apply(LDL_FACTOR, A, hermitian=bool(hermitian))
    _check_info("linalg.ldl_factor", info, A)
    return return_types.linalg_ldl_factor(LD, pivots)


# ------------------------------------------------------------------------------- ldl_solve


def _solve_infer(ld, pivots, b, *, hermitian):
    op = "linalg.ldl_solve"
    require_matrices(op, ld, square=True)
    if b.ndim < 2:
        raise ShapeError(
            f"B must be a matrix or a batch of matrices (..., n, k), got shape "
            f"{fmt_shape(b.shape)}",
            op=op,
        )
    if b.dtype is not ld.dtype:
        raise DTypeError(f"LD ({ld.dtype}) and B ({b.dtype}) must have the same dtype", op=op)
    if pivots.dtype is not dt.int32:
        raise DTypeError(f"pivots must be int32 (LAPACK's), got {pivots.dtype}", op=op)
    n = ld.shape[-1]
    if tuple(pivots.shape) != tuple(ld.shape[:-1]):
        raise ShapeError(
            f"pivots of shape {fmt_shape(pivots.shape)} do not match LD of shape "
            f"{fmt_shape(ld.shape)} (expected {fmt_shape(ld.shape[:-1])})",
            op=op,
        )
    if b.shape[-2] != n:
        raise ShapeError(
            f"B {fmt_shape(b.shape)} must have as many rows as LD {fmt_shape(ld.shape)}", op=op
        )
    batch = broadcast_shapes(tuple(ld.shape[:-2]), tuple(b.shape[:-2]))
    return TensorType(tuple(batch) + tuple(b.shape[-2:]), b.dtype)


def _solve_kernel(ld, pivots, b, *, hermitian):
    from scipy.linalg import get_lapack_funcs

    batch = np.broadcast_shapes(ld.shape[:-2], b.shape[:-2])
    out = np.zeros(batch + b.shape[-2:], b.dtype)
    if out.size == 0:
        return out
    ld = np.broadcast_to(ld, batch + ld.shape[-2:])
    pivots = np.broadcast_to(pivots, batch + pivots.shape[-1:])
    b = np.broadcast_to(b, batch + b.shape[-2:])
    (sytrs,) = get_lapack_funcs(("sytrs",), (ld,))
    with np.errstate(all="ignore"):
        for index in np.ndindex(*batch):
            out[index], _ = sytrs(ld[index], pivots[index], b[index], lower=1)
    return out


LDL_SOLVE = register(
    OpDef(
        name="ldl_solve",
        kind="linalg",
        infer=_solve_infer,
        kernel=_solve_kernel,
        vjp=None,  # PyTorch: "derivative for aten::linalg_ldl_solve is not implemented"
        cost=cubic_cost,
        batch=None,
        doc="ldl_solve(LD, pivots, B; hermitian): LAPACK's sytrs on the factor of ldl_factor",
    )
)


def ldl_solve(LD, pivots, B, *, hermitian: bool = False):
    """``torch.linalg.ldl_solve``: X with A X = B from A's factor ``(LD, pivots)``
    (`ldl_factor`); B (..., n, k), batch dimensions broadcasting."""
    return apply(
        LDL_SOLVE, to_tensor(LD), to_tensor(pivots), to_tensor(B), hermitian=bool(hermitian)
    )
