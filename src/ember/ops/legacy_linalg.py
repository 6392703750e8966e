"""PyTorch's older linear-algebra functions that programs still call, as composites of the
``torch.linalg`` ops ember has (so they capture and differentiate through them):
``torch.lu`` / ``Tensor.lu`` (LU with LAPACK's info, ops/lu.py's factor), ``torch.lu_solve``,
``torch.triangular_solve`` (``(solution, cloned_coefficient)``), ``torch.ormqr`` (the product
with geqrf's Q, through `householder_product`), ``torch.nuclear_norm`` and
``torch.frobenius_norm``, and torch._lowrank's randomized ``svd_lowrank`` / ``pca_lowrank``
(Halko et al.'s algorithm 5.1, as PyTorch's; ember's random stream, not PyTorch's) and a
basic ``lobpcg`` (largest or smallest k eigenpairs of a symmetric matrix).

The functions PyTorch 2.x removed (``torch.lstsq``, ``torch.matrix_rank``, ``torch.symeig``,
``torch.eig``, ``torch.solve``) exist as PyTorch's do: calling them raises PyTorch's
RuntimeError, which names the replacement."""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from .. import return_types
from ..errors import ArgumentError, ArgumentTypeError, DTypeError, ShapeError
from . import api as E
from ._registry import export
from ._util import fmt_shape
from .decompositions import mH, mT, require_matrices, solve, solve_triangular
from .householder import householder_product
from .lu import lu_factor_ex
from .lu import lu_solve as _linalg_lu_solve
from .norms import matrix_norm, vector_norm
from .promotion import to_tensor
from .spectral import eigh, qr, svd


def _no_out(op, out):
    if out is not None:
        raise ArgumentTypeError(f"{op}: out= is not supported (ember has no out tensors)")


# ------------------------------------------------------------------------------ LU, solves


@export(method=True)
def lu(A, pivot: bool = True, get_infos: bool = False, out=None):
    """``torch.lu``: ``(LU, pivots)``, or ``(LU, pivots, infos)`` with ``get_infos=True``:
    `linalg.lu_factor_ex`. A singular matrix factors without error either way (PyTorch's
    check only refuses invalid arguments). Differentiable in A."""
    _no_out("lu", out)
    LU, pivots, info = lu_factor_ex(A, pivot=pivot)
    if get_infos:
        return return_types._lu_with_info(LU, pivots, info)
    return (LU, pivots)


@export(method=True)
def lu_solve(b, LU_data, LU_pivots, *, out=None):  # noqa: N803  (PyTorch's names)
    """``torch.lu_solve(b, LU_data, LU_pivots)``: X with A X = b from `torch.lu`'s factor
    (`linalg.lu_solve` with its arguments in the older order)."""
    _no_out("lu_solve", out)
    return _linalg_lu_solve(LU_data, LU_pivots, b)


def _same_dtype(op, b, A):
    if b.dtype is not A.dtype:
        raise DTypeError(
            f"Expected b and A to have the same dtype, but found b of type {b.dtype} and A of "
            f"type {A.dtype} instead.",
            op=op,
        )


@export(method=True)
def triangular_solve(
    b, A, upper: bool = True, transpose: bool = False, unitriangular: bool = False, *, out=None
):
    """``torch.triangular_solve(b, A)``: ``(solution, cloned_coefficient)``, X with
    ``op(A) X = b`` reading A's upper (``upper=True``) or lower triangle, ``op(A)`` A's
    transpose when ``transpose``, its diagonal taken as ones when ``unitriangular``; the
    batch dimensions broadcast and ``cloned_coefficient`` is A broadcast to them.
    Differentiable in b and A."""
    _no_out("triangular_solve", out)
    b, A = to_tensor(b), to_tensor(A)
    op = "triangular_solve"
    require_matrices(op, A, square=True)
    require_matrices(op, b)
    _same_dtype(op, b, A)
    n = A.shape[-1]
    if b.shape[-2] != n:
        raise ShapeError(
            f"Incompatible matrix sizes for triangular_solve: each A matrix is {n} by {n} but "
            f"each b matrix is {b.shape[-2]} by {b.shape[-1]}",
            op=op,
        )
    batch = tuple(E.broadcast_shapes(tuple(A.shape[:-2]), tuple(b.shape[:-2])))
    A = E.broadcast_to(A, batch + (n, n))
    b = E.broadcast_to(b, batch + tuple(b.shape[-2:]))
    coefficient = mT(A) if transpose else A
    X = solve_triangular(
        coefficient, b, upper=bool(upper) != bool(transpose), unitriangular=unitriangular
    )
    return return_types.triangular_solve(X, E.clone(A))


# ----------------------------------------------------------------------------------- ormqr


@export(method=True)
def ormqr(input, input2, input3, left: bool = True, transpose: bool = False, *, out=None):
    """``torch.ormqr(input, tau, other, left=True, transpose=False)``: ``other`` multiplied
    by the Q of `geqrf`'s packed reflectors (``input`` (..., mn, k), ``tau`` (..., t)): Q C
    (``left``) or C Q, Q^T in place of Q when ``transpose``; Q is mn x mn. Q is built by
    `householder_product` over the reflectors with zero ones appended (each the identity),
    so it differentiates in all three operands, as PyTorch's."""
    _no_out("ormqr", out)
    A, tau, C = to_tensor(input), to_tensor(input2), to_tensor(input3)
    op = "torch.ormqr"
    if A.ndim < 2:
        raise ShapeError(
            f"input must have at least 2 dimensions, got shape {fmt_shape(A.shape)}", op=op
        )
    if A.dtype not in (dt.float32, dt.float64):
        raise DTypeError(f"expected float32 or float64 operands, got {A.dtype}", op=op)
    if C.ndim != A.ndim:
        raise ShapeError(
            f"other of shape {fmt_shape(C.shape)} must have as many dimensions as input "
            f"({fmt_shape(A.shape)})",
            op=op,
        )
    if tau.ndim != A.ndim - 1:
        raise ShapeError(
            f"tau of shape {fmt_shape(tau.shape)} must have one dimension less than input "
            f"({fmt_shape(A.shape)})",
            op=op,
        )
    mn = A.shape[-2]
    t = tau.shape[-1]
    if (C.shape[-2] if left else C.shape[-1]) != mn:
        side = "other.shape[-2]" if left else "other.shape[-1]"
        raise ShapeError(
            f"{side} must be equal to input.shape[-2] (input {fmt_shape(A.shape)}, other "
            f"{fmt_shape(C.shape)})",
            op=op,
        )
    if t != min(mn, A.shape[-1]):
        side = "other.shape[-2]" if left else "other.shape[-1]"
        raise ShapeError(
            f"tau.shape[-1] must be equal to min({side}, input.shape[-1]) (input "
            f"{fmt_shape(A.shape)}, tau {fmt_shape(tau.shape)}, other {fmt_shape(C.shape)})",
            op=op,
        )
    if tuple(tau.shape[:-1]) != tuple(A.shape[:-2]) or tuple(C.shape[:-2]) != tuple(A.shape[:-2]):
        raise ShapeError(
            f"batch dimensions of tau {fmt_shape(tau.shape)} and other {fmt_shape(C.shape)} "
            f"must equal input's {fmt_shape(A.shape[:-2])}",
            op=op,
        )
    if C.dtype is not A.dtype or tau.dtype is not A.dtype:
        raise DTypeError(
            f"expected input, tau and other of one dtype, got {A.dtype}, {tau.dtype}, {C.dtype}",
            op=op,
        )
    batch = tuple(A.shape[:-2])
    V = E.narrow(A, -1, 0, t)
    if mn > t:  # zero reflectors (tau 0: the identity) complete Q to mn x mn
        V = E.cat([V, E.zeros(batch + (mn, mn - t), dtype=A.dtype)], -1)
        tau = E.cat([tau, E.zeros(batch + (mn - t,), dtype=A.dtype)], -1)
    Q = householder_product(V, tau)
    if transpose:
        Q = mH(Q)
    return E.matmul(Q, C) if left else E.matmul(C, Q)


# ----------------------------------------------------------------------------------- norms


def _float_norm_input(op, x):
    x = to_tensor(x)
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        raise DTypeError(
            f"Expected a floating point or complex tensor as input. Got {x.dtype}", op=op
        )
    return x


@export
def nuclear_norm(input, dim=None, keepdim: bool = False, *, out=None, dtype=None):
    """``torch.nuclear_norm(input, keepdim=False)`` / ``(input, dim, keepdim=False)``: the
    sum of the singular values of the matrices over ``dim`` (the last two by default):
    `linalg.matrix_norm` with ``ord="nuc"``. ``dim`` may be given positionally as a bool
    (PyTorch's first overload: ``nuclear_norm(x, True)`` is keepdim)."""
    _no_out("nuclear_norm", out)
    if isinstance(dim, bool):
        dim, keepdim = None, dim
    x = _float_norm_input("linalg.matrix_norm", input)
    if dim is None:
        dim = (-2, -1)
    return matrix_norm(x, "nuc", dim=tuple(dim), keepdim=keepdim, dtype=dtype)


@export
def frobenius_norm(input, dim, keepdim: bool = False, *, out=None):
    """``torch.frobenius_norm(input, dim, keepdim=False)``: the square root of the sum of
    squared moduli over ``dim`` (an int or up to two dims; ``()`` is every dimension)."""
    _no_out("frobenius_norm", out)
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    if len(dims) > 2:
        raise ShapeError(
            f"Expected at most 2 dimensions, but got {len(dims)} dimensions instead.",
            op="frobenius_norm",
        )
    x = _float_norm_input("norm", input)
    return vector_norm(x, 2, dim=dims if dims else None, keepdim=keepdim)


# -------------------------------------------------------------------------- low-rank SVD


def _floating(A):
    return A.dtype if (A.dtype.is_floating_point or A.dtype.is_complex) else dt.get_default_dtype()


def _approximate_basis(A, q, niter, M):
    dtype = _floating(A)
    R = E.randn(A.shape[-1], q, dtype=dtype)
    X = E.matmul(A, R)
    if M is not None:
        X = X - E.matmul(M, R)
    Q = qr(X).Q
    for _ in range(niter):
        X = E.matmul(mH(A), Q)
        if M is not None:
            X = X - E.matmul(mH(M), Q)
        Q = qr(X).Q
        X = E.matmul(A, Q)
        if M is not None:
            X = X - E.matmul(M, Q)
        Q = qr(X).Q
    return Q


def _svd_lowrank(A, q, niter, M):
    q = 6 if q is None else int(q)
    niter = 2 if niter is None else int(niter)
    m, n = A.shape[-2:]
    if M is not None:
        M = E.broadcast_to(to_tensor(M), tuple(A.shape))
    if m < n:
        A = mH(A)
        if M is not None:
            M = mH(M)
    Q = _approximate_basis(A, q, niter, M)
    B = E.matmul(mH(Q), A)
    if M is not None:
        B = B - E.matmul(mH(Q), M)
    U, S, Vh = svd(B, full_matrices=False)
    V = mH(Vh)
    U = E.matmul(Q, U)
    if m < n:
        U, V = V, U
    return U, S, V


@export
def svd_lowrank(A, q: int | None = 6, niter: int | None = 2, M=None):
    """``torch.svd_lowrank``: ``(U, S, V)``, a rank-q approximation ``A ~ U diag(S) V^H``
    of A (or of ``A - M``) by randomized subspace iteration (Halko et al. 2009, algorithm 5.1,
    PyTorch's steps): ``niter`` power iterations on a Gaussian sketch, then the SVD of the
    small projected matrix. Exact for matrices of rank at most q. The sketch is drawn from
    ember's generator. Differentiable through qr and svd."""
    A = to_tensor(A)
    require_matrices("svd_lowrank", A)
    return _svd_lowrank(A, q, niter, M)


@export
def pca_lowrank(A, q: int | None = None, center: bool = True, niter: int = 2):
    """``torch.pca_lowrank``: ``(U, S, V)`` of `svd_lowrank` on A with each column's mean
    subtracted (``center``); q defaults to min(6, m, n)."""
    A = to_tensor(A)
    require_matrices("pca_lowrank", A)
    m, n = A.shape[-2:]
    if q is None:
        q = min(6, m, n)
    elif not (0 <= q <= min(m, n)):
        raise ArgumentError(
            f"q(={q}) must be non-negative integer and not greater than min(m, n)={min(m, n)}"
        )
    if not niter >= 0:
        raise ArgumentError(f"niter(={niter}) must be non-negative integer")
    if not center:
        return _svd_lowrank(A, q, niter, None)
    C = E.mean(A, -2, keepdim=True)
    return _svd_lowrank(A - C, q, niter, None)


# ---------------------------------------------------------------------------------- lobpcg


def _orthonormal(S):
    """An orthonormal basis of S's columns, dropping those numerically dependent on the
    ones before them (rank read from R's diagonal: eager)."""
    Q, R = qr(S)
    d = np.abs(np.diagonal(R.numpy(force=True), axis1=-2, axis2=-1))
    if d.size == 0:
        return Q
    keep = np.flatnonzero(d > d.max() * S.shape[-2] * np.finfo(d.dtype).eps * 10)
    return E.index_select(Q, -1, E.tensor(keep.astype(np.int64)))


def _lobpcg_block(A, X, iK, niter, tol, largest):
    """LOBPCG (Knyazev's) on detached values: Rayleigh-Ritz on span[X, R, P] with an
    orthonormal basis each step (R and P orthogonalized against X first, the "ortho"
    method); returns the final orthonormal block (m, n)."""
    n = X.shape[-1]
    X = qr(X).Q
    P = None
    sign = -1.0 if largest else 1.0
    for _ in range(niter):
        AX = E.matmul(A, X)
        theta = E.sum(X * AX, 0)
        residual = AX - X * theta
        if bool(E.all(vector_norm(residual, 2, dim=0) <= tol * E.clamp(E.abs(theta), min=1.0))):
            break
        if iK is not None:
            residual = E.matmul(iK, residual)
        rest = residual if P is None else E.cat([residual, P], -1)
        for _ in range(2):  # (twice is enough: Kahan's "twice is enough")
            rest = rest - E.matmul(X, E.matmul(mT(X), rest))
        S = E.cat([X, _orthonormal(rest)], -1)
        T = E.matmul(mT(S), E.matmul(A, S))
        w, W = eigh((T + mT(T)) * 0.5)
        X_new = E.matmul(S, E.index_select(W, -1, E.argsort(w * sign)[:n]))
        P = X_new - E.matmul(X, E.matmul(mT(X), X_new))  # the step outside the old block
        X = qr(X_new).Q
    return X


@export
def lobpcg(
    A,
    k: int | None = None,
    B=None,
    X=None,
    n: int | None = None,
    iK=None,
    niter: int | None = None,
    tol: float | None = None,
    largest: bool | None = None,
    method: str | None = None,
    tracker=None,
    ortho_iparams=None,
    ortho_fparams=None,
    ortho_bparams=None,
):
    """``torch.lobpcg``: ``(E, X)``, the k largest (``largest=True``, the default) or
    smallest eigenvalues of a symmetric matrix A (m, m) and their eigenvectors (m, k), by
    LOBPCG: Rayleigh-Ritz over the current block, its residuals (preconditioned by ``iK``)
    and the previous search directions, orthonormalized each step (the "ortho" method;
    "basic" computes the same pairs). ``X`` (m, n) is the starting block (random by default,
    n = max(k, n)); ``niter`` caps the iterations (default: until convergence, a relative
    residual of ``tol``, default the dtype's eps ** 0.5). The iteration reads the data, so it
    runs eagerly. Differentiable in A: the result is one more Rayleigh-Ritz step in ember ops
    on the converged block, plus the first-order correction from outside it (exact where the
    k eigenvalues are separated from the rest of the spectrum). Not supported (refused): the
    generalized problem ``B``, batches, ``tracker``; the ``ortho_*params`` are accepted and
    unused."""
    A = to_tensor(A)
    require_matrices("lobpcg", A, square=True)
    if B is not None:
        raise ArgumentError(
            "the generalized eigenproblem (B) is not supported; pass B=None", op="lobpcg"
        )
    if tracker is not None:
        raise ArgumentError("tracker is not supported", op="lobpcg")
    if method not in (None, "ortho", "basic"):
        raise ArgumentError(f"lobpcg: method must be 'ortho' or 'basic', got {method!r}")
    if A.ndim != 2:
        raise ShapeError(
            f"expected one matrix, got shape {fmt_shape(A.shape)} (batches are not supported)",
            op="lobpcg",
        )
    m = A.shape[-1]
    k = 1 if k is None else int(k)
    largest = True if largest is None else bool(largest)
    if X is None:
        n = k if n is None else max(int(n), k)
    else:
        X = to_tensor(X)
        if X.ndim != 2 or X.shape[0] != m:
            raise ShapeError(
                f"X of shape {fmt_shape(X.shape)} must be ({m}, n) for A of shape "
                f"{fmt_shape(A.shape)}",
                op="lobpcg",
            )
        n = X.shape[-1]
    if m < 3 * n:
        raise ArgumentError(
            f"LPBPCG algorithm is not applicable when the number of A rows (={m}) is smaller "
            f"than 3 x the number of requested eigenpairs (={n})"
        )
    if k > n:
        raise ArgumentError(f"lobpcg: k (={k}) must be at most n (={n})")
    dtype = _floating(A)
    tol = float(np.finfo(dtype.np).eps) ** 0.5 if tol is None else float(tol)
    niter = 1000 if niter is None or niter < 0 else int(niter)
    A0 = E.detach(A)
    X0 = E.randn(m, n, dtype=dtype) if X is None else E.detach(X)
    iK0 = None if iK is None else E.detach(to_tensor(iK))
    Xc = _lobpcg_block(A0, X0, iK0, niter, tol, largest)
    # the differentiable result: Rayleigh-Ritz on the converged block (its value the
    # eigenpairs; T not symmetrized: eigh reads its lower triangle, and its gradient then has
    # PyTorch's form, that of eigh on A) ...
    w, W = eigh(E.matmul(mT(Xc), E.matmul(A, Xc)))
    order = E.argsort(E.detach(w) * (-1.0 if largest else 1.0))[:k]
    values = E.index_select(w, 0, order)
    vectors = E.matmul(Xc, E.index_select(W, -1, order))
    # ... plus, per vector x_i, -M_i P A x_i, M_i = (P (A - l_i I) P + X X^T)^-1 P with P the
    # projector off the block X, all constants but A: its value ~ the residual, its
    # derivative the eigenvector's change outside the block (A's symmetric part, whose value
    # is A's, so that the gradient is symmetric, as PyTorch's)
    basis, lam = E.detach(vectors), E.detach(values)
    inside = E.matmul(Xc, mT(Xc))
    proj = E.eye(m, dtype=dtype) - inside
    A_sym = (A + mT(A)) * 0.5
    corrections = []
    for i in range(k):
        shifted = A0 - lam[i] * E.eye(m, dtype=dtype)
        solver = solve(E.matmul(proj, E.matmul(shifted, proj)) + inside, proj)
        corrections.append(-E.matmul(solver, E.matmul(A_sym, E.select(basis, -1, i))))
    return values, vectors + E.stack(corrections, -1)


# ------------------------------------------------- functions PyTorch removed (they raise)

_REMOVED = {
    "lstsq": (
        "`torch.lstsq` is deprecated in favor of `torch.linalg.lstsq`.\n`torch.linalg.lstsq` "
        "has reversed arguments and does not return the QR decomposition in the returned tuple "
        "(although it returns other information about the problem).\n\nTo get the QR "
        "decomposition consider using `torch.linalg.qr`.\n\nThe returned solution in "
        "`torch.lstsq` stored the residuals of the solution in the last m - n columns of the "
        "returned value whenever m > n. In torch.linalg.lstsq, the residuals are in the field "
        "'residuals' of the returned named tuple.\n\nThe unpacking of the solution, as in\n"
        "X, _ = torch.lstsq(B, A).solution[:A.size(1)]\nshould be replaced with:\n"
        "X = torch.linalg.lstsq(A, B).solution"
    ),
    "matrix_rank": (
        "\nPlease use the `torch.linalg.matrix_rank` function instead. The parameter 'symmetric' "
        "was renamed in `torch.linalg.matrix_rank()` to 'hermitian'."
    ),
    "symeig": (
        "The default behavior has changed from using the upper triangular portion of the "
        "matrix by default to using the lower triangular portion.\n\nL, _ = torch.symeig(A, "
        "upper=upper) should be replaced with:\nL = torch.linalg.eigvalsh(A, UPLO='U' if upper "
        "else 'L')\n\nand\n\nL, V = torch.symeig(A, eigenvectors=True) should be replaced "
        "with:\nL, V = torch.linalg.eigh(A, UPLO='U' if upper else 'L')"
    ),
    "eig": (
        "`torch.linalg.eig` returns complex tensors of dtype `cfloat` or `cdouble` rather than "
        "real tensors mimicking complex tensors.\n\nL, _ = torch.eig(A) should be replaced "
        "with:\nL_complex = torch.linalg.eigvals(A)\n\nand\n\nL, V = torch.eig(A, "
        "eigenvectors=True) should be replaced with:\nL_complex, V_complex = "
        "torch.linalg.eig(A)"
    ),
    "solve": (
        "`torch.solve` is deprecated in favor of `torch.linalg.solve`. `torch.linalg.solve` has "
        "its arguments reversed and does not return the LU factorization.\n\nTo get the LU "
        "factorization see `torch.lu`, which can be used with `torch.lu_solve` or "
        "`torch.lu_unpack`.\nX = torch.solve(B, A).solution should be replaced with:\n"
        "X = torch.linalg.solve(A, B)"
    ),
}


def _removed(name):
    def removed(*args, **kwargs):
        raise RuntimeError(
            "This function was deprecated since version 1.9 and is now removed."
            + ("" if _REMOVED[name].startswith("\n") else " ")
            + _REMOVED[name]
        )

    removed.__name__ = removed.__qualname__ = name
    removed.__doc__ = f"``torch.{name}``: removed in PyTorch 1.9; raises PyTorch's RuntimeError."
    return removed


# (plain functions, not ops: ember.<name> and Tensor.<name>, as PyTorch still has them)
REMOVED = {name: _removed(name) for name in _REMOVED}
