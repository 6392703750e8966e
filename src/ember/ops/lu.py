"""The LU factorization with partial pivoting, PyTorch's ``torch.linalg.lu_factor``,
``lu_factor_ex``, ``lu``, ``lu_solve`` and ``torch.lu_unpack``.

Two primitives: ``lu_factor`` (LAPACK's getrf through SciPy, per matrix of a batch: the packed
factor ``LU`` (..., m, n) with L's unit diagonal implied, the 1-based int32 ``pivots`` (..., k),
k = min(m, n), row i swapped with row pivots[i] in turn, and the int32 ``info``, U's first zero
pivot, 1-based, or 0) and ``lu_permutation`` (the pivots applied to 0..m-1: row i of P^T A is
row perm[i] of A, so P[perm[i], i] = 1). Everything else is written in ember ops on those, so
``lu_solve`` differentiates in B and in LU by the ops' own gradients, and ``lu_unpack`` in LU.
``lu_factor``'s VJP is PyTorch's (linalg_lu_backward) for square and for wide and tall
matrices. As on PyTorch's CPU, only ``pivot=True`` exists (LAPACK has no unpivoted LU)."""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from .. import return_types
from ..errors import ArgumentError, LinAlgError, ShapeError
from ..types import TensorType
from . import api as E
from ._registry import OpDef, apply, building_graph, export, register
from ._rules import Complex
from ._util import fmt_shape
from .decompositions import _linalg_op, batch_label, mH, mT, require_matrices, solve_triangular
from .promotion import to_tensor

# ------------------------------------------------------------------------------- lu_factor


def _lu_infer(a):
    require_matrices("linalg.lu_factor", a)
    batch = tuple(a.shape[:-2])
    k = min(a.shape[-2], a.shape[-1])
    return (
        TensorType(tuple(a.shape), a.dtype),
        TensorType(batch + (k,), dt.int32),
        TensorType(batch, dt.int32),
    )


def _lu_kernel(a):
    from scipy.linalg import get_lapack_funcs

    batch, (m, n) = a.shape[:-2], a.shape[-2:]
    k = min(m, n)
    lu = np.zeros(a.shape, a.dtype)
    pivots = np.ones(batch + (k,), np.int32)
    info = np.zeros(batch, np.int32)
    if a.size == 0:
        return lu, pivots, info
    (getrf,) = get_lapack_funcs(("getrf",), (a,))
    with np.errstate(all="ignore"):
        for index in np.ndindex(*batch):
            f, p, i = getrf(a[index])
            lu[index], pivots[index], info[index] = f, p + 1, i
    return lu, pivots, info


def _unpack_lu(LU):
    """L (..., m, k) with its unit diagonal and U (..., k, n) from the packed factor."""
    m, n = LU.shape[-2], LU.shape[-1]
    k = min(m, n)
    L = E.tril(E.narrow(LU, -1, 0, k), -1) + E.eye(m, k, dtype=LU.dtype)
    U = E.triu(E.narrow(LU, -2, 0, k))
    return L, U


def _lu_vjp(c, g, *_):
    """PyTorch's linalg_lu_backward with gL = tril(g, -1) and gU = triu(g) (the packed
    factor's two parts); a wide or a tall A adds the part of U (or L) past the square. The
    transposes are conjugate transposes (complex matrices; the same for real ones)."""
    LU, pivots = c.outputs[0], c.outputs[1]
    m, n = LU.shape[-2], LU.shape[-1]
    k = min(m, n)
    L, U = _unpack_lu(LU)
    P = permutation_matrix(pivots, m, LU.dtype)
    gL = E.tril(E.narrow(g, -1, 0, k), -1)
    gU = E.triu(E.narrow(g, -2, 0, k))
    if m == n:
        phi = E.tril(E.matmul(mH(L), gL), -1) + E.triu(E.matmul(gU, mH(U)))
        x = solve_triangular(mH(U), phi, upper=False, left=False)
        x = solve_triangular(mH(L), x, upper=True, unitriangular=True)
        return (E.matmul(P, x),)
    if m < n:
        # A = P L [U1 U2]: the square part, then U2's gradient
        U1, gU1 = E.narrow(U, -1, 0, k), E.narrow(gU, -1, 0, k)
        U2, gU2 = E.narrow(U, -1, k, n - k), E.narrow(gU, -1, k, n - k)
        phi = E.tril(E.matmul(mH(L), gL), -1) + E.triu(E.matmul(gU1, mH(U1)))
        phi = phi - E.tril(E.matmul(gU2, mH(U2)), -1)
        x = solve_triangular(mH(U1), phi, upper=False, left=False)
        x = solve_triangular(mH(L), x, upper=True, unitriangular=True)
        return (
            E.matmul(
                P, E.cat([x, solve_triangular(mH(L), gU2, upper=True, unitriangular=True)], -1)
            ),
        )
    # m > n: A = P [L1; L2] U
    L1, gL1 = E.narrow(L, -2, 0, k), E.narrow(gL, -2, 0, k)
    L2, gL2 = E.narrow(L, -2, k, m - k), E.narrow(gL, -2, k, m - k)
    phi = E.tril(E.matmul(mH(L1), gL1), -1) + E.triu(E.matmul(gU, mH(U)))
    phi = phi - E.triu(E.matmul(mH(L2), gL2))
    x = solve_triangular(mH(L1), phi, upper=True, unitriangular=True)
    x = solve_triangular(mH(U), x, upper=False, left=False)
    below = solve_triangular(mH(U), gL2, upper=False, left=False)
    return (E.matmul(P, E.cat([x, below], -2)),)


LU_FACTOR = _linalg_op(
    "lu_factor",
    _lu_infer,
    _lu_kernel,
    _lu_vjp,
    "lu_factor(A): LAPACK's getrf: the packed LU, 1-based int32 pivots and int32 info",
    num_outputs=3,
    save_inputs=(),
    save_outputs=(0, 1),
    complex=Complex.GRADIENT,
)

# -------------------------------------------------------------------------- lu_permutation


def _perm_infer(pivots, *, m):
    if pivots.dtype is not dt.int32:
        raise ShapeError(f"pivots must be int32, got {pivots.dtype}", op="lu_unpack")
    if pivots.ndim < 1 or pivots.shape[-1] > m:
        raise ShapeError(
            f"pivots of shape {fmt_shape(pivots.shape)} do not fit matrices of {m} rows",
            op="lu_unpack",
        )
    return TensorType(tuple(pivots.shape[:-1]) + (m,), dt.int64)


def _perm_kernel(pivots, *, m):
    batch, k = pivots.shape[:-1], pivots.shape[-1]
    perm = np.broadcast_to(np.arange(m, dtype=np.int64), batch + (m,)).copy()
    if perm.size == 0:
        return perm
    if np.any(pivots < 1) or np.any(pivots > m):
        raise ArgumentError(f"pivots must lie in 1..{m} (1-based)", op="lu_unpack")
    flat = perm.reshape(-1, m)
    swaps = pivots.reshape(-1, k).astype(np.int64) - 1
    rows = np.arange(len(flat))
    for i in range(k):
        j = swaps[:, i]
        a, b = flat[:, i].copy(), flat[rows, j].copy()
        flat[:, i], flat[rows, j] = b, a
    return flat.reshape(perm.shape)


LU_PERMUTATION = register(
    OpDef(
        name="lu_permutation",
        kind="index",
        infer=_perm_infer,
        kernel=_perm_kernel,
        vjp=None,
        doc="lu_permutation(pivots, m): LAPACK's 1-based row swaps applied to 0..m-1",
    )
)


def permutation_matrix(pivots, m: int, dtype):
    """P (..., m, m) of A = P L U from LAPACK's pivots."""
    perm = apply(LU_PERMUTATION, pivots, m=m)
    return mT(E.cast(E.eq(E.unsqueeze(perm, -1), E.arange(m)), dtype))


# --------------------------------------------------------------------------- public names


def _no_pivot(op):
    raise ArgumentError(
        "LU without pivoting is not implemented on the CPU (as PyTorch's; pass pivot=True)",
        op=op,
    )


def lu_factor_ex(A, *, pivot: bool = True, check_errors: bool = False):
    """``torch.linalg.lu_factor_ex``: ``(LU, pivots, info)``: the packed factor of each
    matrix of A (..., m, n), the 1-based int32 pivots (..., min(m, n)) and LAPACK's int32
    info (the 1-based index of U's first zero pivot, else 0). ``check_errors=True`` raises
    `LinAlgError` where an info is not 0 (read from the data; eager only)."""
    if not pivot:
        _no_pivot("linalg.lu_factor_ex")
    LU, pivots, info = apply(LU_FACTOR, to_tensor(A))
    if check_errors:
        _check_info("linalg.lu_factor_ex", info, A)
    return return_types.linalg_lu_factor_ex(LU, pivots, info)


def _check_info(op, info, A):
    if building_graph():
        return  # (the data is not at hand while a graph is built: no check there)
    values = np.asarray(info.numpy(force=True))
    if values.any():
        index = np.unravel_index(int(np.flatnonzero(values)[0]), values.shape)
        k = int(values[index])
        raise LinAlgError(
            f"{batch_label(values.shape, index)}U[{k},{k}] is zero (input of shape "
            f"{fmt_shape(A.shape)}); using it in lu_solve would divide by zero. "
            "linalg.lu_factor_ex and linalg.lu factor it anyway",
            op=op,
        )


def lu_factor(A, *, pivot: bool = True):
    """``torch.linalg.lu_factor``: ``(LU, pivots)``; a singular matrix (a zero pivot) raises
    `LinAlgError` naming the batch element, as PyTorch's (eagerly: while a graph is built the
    data is not known and no check is made)."""
    if not pivot:
        _no_pivot("linalg.lu_factor")
    LU, pivots, info = apply(LU_FACTOR, to_tensor(A))
    _check_info("linalg.lu_factor", info, A)
    return return_types.linalg_lu_factor(LU, pivots)


@export
def lu_unpack(LU_data, LU_pivots, unpack_data: bool = True, unpack_pivots: bool = True):
    """``torch.lu_unpack``: ``(P, L, U)`` from a packed factor (..., m, n) and its 1-based
    pivots; A = P L U. A part not unpacked is an empty tensor, as PyTorch's. Differentiable in
    LU_data."""
    LU, pivots = to_tensor(LU_data), to_tensor(LU_pivots)
    if LU.ndim < 2:
        raise ShapeError(
            f"expected a matrix or a batch of matrices, got shape {fmt_shape(LU.shape)}",
            op="lu_unpack",
        )
    m = LU.shape[-2]
    if tuple(pivots.shape[:-1]) != tuple(LU.shape[:-2]) or pivots.shape[-1] != min(LU.shape[-2:]):
        raise ShapeError(
            f"pivots of shape {fmt_shape(pivots.shape)} do not match LU of shape "
            f"{fmt_shape(LU.shape)} (expected {fmt_shape(LU.shape[:-2] + (min(LU.shape[-2:]),))})",
            op="lu_unpack",
        )
    # (parts not unpacked: empty, L and U still connected to LU, as PyTorch's)
    empty = E.narrow(E.reshape(LU, (-1,)), 0, 0, 0)
    L, U = _unpack_lu(LU) if unpack_data else (empty, empty)
    P = permutation_matrix(pivots, m, LU.dtype) if unpack_pivots else E.zeros(0, dtype=LU.dtype)
    return return_types.lu_unpack(P, L, U)


def lu(A, *, pivot: bool = True):
    """``torch.linalg.lu``: ``(P, L, U)`` with A = P L U for A (..., m, n): P (..., m, m), L
    (..., m, k) unit lower-triangular, U (..., k, n) upper, k = min(m, n). A singular matrix
    factors without error. Gradient as PyTorch's."""
    if not pivot:
        _no_pivot("linalg.lu")
    LU, pivots, _ = apply(LU_FACTOR, to_tensor(A))
    P, L, U = lu_unpack(LU, pivots)
    return return_types.linalg_lu(P, L, U)


def lu_solve(LU, pivots, B, *, left: bool = True, adjoint: bool = False):
    """``torch.linalg.lu_solve``: X with A X = B (``X A = B`` when ``left=False``; A^H for A
    when ``adjoint``) from A's packed factor and pivots; B (..., n, k), batches broadcast.
    Differentiable in B and LU."""
    LU, pivots, B = to_tensor(LU), to_tensor(pivots), to_tensor(B)
    require_matrices("linalg.lu_solve", LU, square=True)
    require_matrices("linalg.lu_solve", B)
    n = LU.shape[-1]
    if (B.shape[-2] if left else B.shape[-1]) != n:
        raise ShapeError(
            f"B of shape {fmt_shape(B.shape)} does not fit LU of shape {fmt_shape(LU.shape)} "
            f"({'rows' if left else 'columns'} must be {n})",
            op="linalg.lu_solve",
        )
    if not left:  # X A = B  <=>  A^H X^H = B^H
        return mH(lu_solve(LU, pivots, mH(B), adjoint=not adjoint))
    L, U = _unpack_lu(LU)
    P = permutation_matrix(pivots, n, LU.dtype)
    if adjoint:
        # A^H X = U^H L^H P^T X = B
        y = solve_triangular(mH(U), B, upper=False)
        y = solve_triangular(mH(L), y, upper=True, unitriangular=True)
        return E.matmul(P, y)
    y = solve_triangular(L, E.matmul(mT(P), B), upper=False, unitriangular=True)
    return solve_triangular(U, y, upper=True)
