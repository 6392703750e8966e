"""``ember.linalg``: PyTorch's ``torch.linalg`` names. The norms and singular values are
defined in ops/norms.py (``vector_norm``, ``matrix_norm``, ``norm``, ``svdvals``), the systems
and determinants in ops/decompositions.py (``inv``, ``slogdet``, ``solve``,
``solve_triangular``, ``cholesky``), the factorizations in ops/spectral.py (``qr``, ``eigh``,
``eigvalsh``, ``svd``, ``pinv``, and ``det``, whose gradient uses the SVD) and ops/eig.py
(``eig``, ``eigvals``: general matrices, complex results) and the composites
in ops/linalg_composite.py (``lstsq``, ``matrix_power``, ``matrix_rank``, ``multi_dot``,
``cross``, ``vecdot``, ``diagonal``, ``cond``, ``vander``, ``tensorinv``, ``tensorsolve``);
``matrix_exp`` is in ops/matrix_functions.py and ``matmul`` is `ember.matmul`. `LinAlgError`
is what a singular or non-positive-definite input raises; the ``*_ex`` forms (``cholesky_ex``,
``inv_ex``, ``solve_ex``, below) return LAPACK's info instead. ``householder_product`` is
in ops/householder.py, ``ldl_factor``, ``ldl_factor_ex`` and ``ldl_solve`` in ops/ldl.py. The
LU functions (``lu_factor``, ``lu_factor_ex``, ``lu``, ``lu_solve``) are in ops/lu.py.

Not all are also ``ember.<name>``: ``ember.norm`` is ``torch.norm``, whose defaults differ, and
``ember.svd`` / ``ember.qr`` are PyTorch's older functions (``ember.svd`` returns V, not Vh)."""

import math

import numpy as np

from . import return_types
from .dtypes import int32
from .errors import LinAlgError
from .ops import api as _E
from .ops._torch_keywords import with_out as _with_out
from .ops.decompositions import cholesky, inv, slogdet, solve, solve_triangular
from .ops.eig import eig, eigvals
from .ops.householder import householder_product
from .ops.ldl import ldl_factor, ldl_factor_ex, ldl_solve
from .ops.linalg import matmul
from .ops.linalg_composite import (
    cond,
    cross,
    diagonal,
    lstsq,
    matrix_power,
    matrix_rank,
    multi_dot,
    tensorinv,
    tensorsolve,
    vander,
    vecdot,
)
from .ops.lu import lu, lu_factor, lu_factor_ex, lu_solve
from .ops.matrix_functions import matrix_exp
from .ops.norms import linalg_norm as norm
from .ops.norms import matrix_norm, svdvals, vector_norm
from .ops.spectral import det, eigh, eigvalsh, pinv, qr, svd

__all__ = [
    "cholesky_ex",
    "inv_ex",
    "solve_ex",
    "lu",
    "lu_factor",
    "lu_factor_ex",
    "lu_solve",
    "LinAlgError",
    "cholesky",
    "cond",
    "cross",
    "det",
    "diagonal",
    "eig",
    "eigvals",
    "eigh",
    "eigvalsh",
    "householder_product",
    "ldl_factor",
    "ldl_factor_ex",
    "ldl_solve",
    "inv",
    "lstsq",
    "matmul",
    "matrix_exp",
    "matrix_norm",
    "matrix_power",
    "matrix_rank",
    "multi_dot",
    "norm",
    "pinv",
    "qr",
    "slogdet",
    "solve",
    "solve_triangular",
    "svd",
    "svdvals",
    "tensorinv",
    "tensorsolve",
    "vander",
    "vecdot",
    "vector_norm",
]


# ------------------------------------------------------------------------ the *_ex forms
# PyTorch's ``*_ex`` functions return LAPACK's ``info`` (int32, one per matrix: 0 on success,
# else the order of the failing leading minor or the 1-based index of U's zero pivot) instead
# of raising, unless ``check_errors=True``. ember reads the info from its input's data: where
# every matrix succeeds the result is the ordinary function's (with its gradient); where one
# fails the result is LAPACK's for every matrix (scipy's potrf, or getrf and getrs: the partial
# factor, infinities), without a gradient, as PyTorch's values. While a graph is captured the
# data is not at hand: the info is zeros and a failure raises when the graph runs.


def _info(A, factor: str) -> np.ndarray | None:
    """LAPACK's info per matrix of ``A``'s data (None while capturing)."""
    from .tensor import Tensor

    if not isinstance(A, Tensor):
        return None

    a = A.detach().numpy()
    batch = a.shape[:-2]
    flat, (potrf, getrf, _) = _wide(a)
    info = np.zeros(len(flat), np.int32)
    for i, m in enumerate(flat):
        if factor == "potrf":
            info[i] = potrf(np.tril(m), lower=1)[1] if m.size else 0
        else:
            info[i] = getrf(m)[2] if m.size else 0
    return info.reshape(batch)


def _wide(a):
    """``a``'s matrices in double precision (complex128 for a complex ``a``), and LAPACK's
    potrf, getrf and getrs for that type."""
    import scipy.linalg.lapack as lapack

    # (the batch's count spelled out: -1 is ambiguous for empty matrices)
    shape = (math.prod(a.shape[:-2]),) + a.shape[-2:]
    if a.dtype.kind == "c":
        flat = a.reshape(shape).astype(np.complex128)
        return flat, (lapack.zpotrf, lapack.zgetrf, lapack.zgetrs)
    flat = a.reshape(shape).astype(np.float64)
    return flat, (lapack.dpotrf, lapack.dgetrf, lapack.dgetrs)


def _lapack_results(A, B, factor: str):
    """LAPACK's result for every matrix (used where one fails): the partial Cholesky factor,
    or ``A^-1 B`` through getrf and getrs."""
    a = A.detach().numpy()
    out = []
    flat, (potrf, getrf, getrs) = _wide(a)
    if factor == "potrf":
        for m in flat:
            out.append(np.tril(potrf(np.tril(m), lower=1)[0]))
        result = np.stack(out).reshape(a.shape)
    else:
        b = np.broadcast_to(B.detach().numpy(), a.shape[:-2] + B.shape[-2:])
        flat_b = b.reshape((-1,) + b.shape[-2:]).astype(flat.dtype)
        with np.errstate(all="ignore"):
            for m, rhs in zip(flat, flat_b):
                lu, piv, _ = getrf(m)
                out.append(getrs(lu, piv, rhs)[0])
        result = np.stack(out).reshape(b.shape)
    return _E.tensor(result.astype(a.dtype))


def _ex(name: str, A, B, factor: str, run, check_errors: bool):
    info = _info(A, factor)
    if info is None or not info.any():
        result = run()
        batch = tuple(A.shape[:-2])
        return result, _E.zeros(batch, dtype=int32) if info is None else _E.tensor(info)
    if check_errors:
        bad = int(np.flatnonzero(info.reshape(-1))[0])
        raise LinAlgError(
            f"the factorization of batch element {bad} failed (info = "
            f"{int(info.reshape(-1)[bad])}) for input of shape {tuple(A.shape)}",
            op=f"linalg.{name}",
        )
    return _lapack_results(A, B, factor), _E.tensor(info)


def cholesky_ex(A, *, upper: bool = False, check_errors: bool = False):
    """``torch.linalg.cholesky_ex``: ``(L, info)``; see the comment above for ``info``."""
    L, info = _ex("cholesky_ex", A, None, "potrf", lambda: cholesky(A), check_errors)
    if upper:  # (U = L^H: conjugated too, for complex matrices)
        L = L.mH
    return return_types.linalg_cholesky_ex(L, info)


def inv_ex(A, *, check_errors: bool = False):
    """``torch.linalg.inv_ex``: ``(inverse, info)``; see the comment above for ``info``."""
    n = A.shape[-1]
    eye = _E.eye(n, dtype=A.dtype)
    result, info = _ex("inv_ex", A, eye, "getrf", lambda: inv(A), check_errors)
    return return_types.linalg_inv_ex(result, info)


def solve_ex(A, B, *, left: bool = True, check_errors: bool = False):
    """``torch.linalg.solve_ex``: ``(result, info)``; see the comment above for ``info``."""
    if not left:
        result, info = solve_ex(A.mT, B.mT, check_errors=check_errors)
        return return_types.linalg_solve_ex(result.mT, info)
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))
    rhs = B.unsqueeze(-1) if vector else B
    result, info = _ex("solve_ex", A, rhs, "getrf", lambda: solve(A, B), check_errors)
    if vector and result.ndim == rhs.ndim:  # LAPACK's (..., n, 1) result
        result = result.squeeze(-1)
    return return_types.linalg_solve_ex(result, info)


# PyTorch's ``out=`` on each function without its own (ops/_out.py)
globals().update(_with_out({_name: globals()[_name] for _name in __all__}))
