"""Linear systems and determinants: the primitives ``inv``, ``slogdet``, ``solve``,
``solve_triangular`` and ``cholesky`` behind ``ember.linalg`` (the namespace is ember/linalg.py;
the old top-level names, ``ember.inverse``, ``ember.slogdet``, ... are exported here; ``det``,
whose gradient needs the SVD, is in ops/spectral.py).

Each works on a matrix or a batch of them (the last two dimensions), in float32 or float64 (as
PyTorch on the CPU, which refuses half precision), with a NumPy / SciPy kernel and the VJP of
PyTorch's derivatives written in ember ops. A singular matrix for ``inv`` or ``solve`` (an exact
zero pivot, as LAPACK's LU reports it) and a matrix that is not positive-definite for
``cholesky`` raise `LinAlgError`, naming the op and the batch element.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from .. import return_types
from ..errors import DTypeError, KernelDTypeError, LinAlgError, ShapeError
from ..types import TensorType
from . import api as E
from ._autocast import Autocast, autocasts
from ._registry import Cost, OpDef, apply, export, register
from ._rules import Complex
from ._util import fmt_shape, io_bytes, numel
from .promotion import to_tensor

# ------------------------------------------------------------------------------ helpers


def _linalg():
    # SciPy is imported when a kernel first runs, not with ember (it costs ~0.2 s to import)
    import scipy.linalg

    return scipy.linalg


_MATRIX_DTYPES = (dt.float32, dt.float64, dt.complex64, dt.complex128)


def require_matrices(op, x, *, square=False):
    """Check ``x`` is a (batch of) float32 / float64 / complex matrices (square ones if
    ``square``), as PyTorch's CPU routines take."""
    if x.ndim < 2:
        raise ShapeError(
            f"expected a matrix or a batch of matrices (at least 2 dimensions), got shape "
            f"{fmt_shape(x.shape)}",
            op=op,
        )
    if square and x.shape[-1] != x.shape[-2]:
        raise ShapeError(
            f"expected square matrices, got shape {fmt_shape(x.shape)} (the last two "
            "dimensions differ)",
            op=op,
        )
    if x.dtype not in _MATRIX_DTYPES:
        # (PyTorch has no 16-bit LAPACK kernel: NotImplementedError, as its "lu_cpu" not
        # implemented for 'BFloat16'; integers a RuntimeError)
        error = KernelDTypeError if x.dtype in (dt.float16, dt.bfloat16) else DTypeError
        raise error(
            f"expected a float32, float64 or complex tensor, got {x.dtype} (PyTorch refuses "
            "integers and half precision here too; convert first, e.g. A.double())",
            op=op,
        )


def mT(x):
    """The transpose of the last two dimensions."""
    return E.transpose(x, -2, -1)


def mH(x):
    """The conjugate transpose of the last two dimensions (the transpose of a real matrix):
    the VJPs below are PyTorch's complex formulas, real inputs being their special case."""
    t = E.transpose(x, -2, -1)
    return E.conj(t) if x.dtype.is_complex else t


def real_dtype(d):
    """The NumPy dtype of a (complex) dtype's parts: eigenvalues, singular values, log|det|."""
    return dt.to_real(dt.as_dtype(d)).np if np.dtype(d).kind == "c" else np.dtype(d)


def diag_embed(v):
    """The square matrices (..., n, n) with ``v`` (..., n) on the diagonal, zero elsewhere."""
    n = v.shape[-1]
    return E.where(E.eye(n, dtype=dt.bool_), E.unsqueeze(v, -1), E.zeros((), dtype=v.dtype))


def batch_label(shape, index) -> str:
    """PyTorch's "(Batch element k): " prefix (k the flat index), empty for one matrix."""
    if not shape:
        return ""
    return f"(Batch element {int(np.ravel_multi_index(index, shape))}): "


def np_svd(a, full_matrices: bool = False, compute_uv: bool = True):
    """NumPy's SVD; where it does not converge (a non-finite matrix), PyTorch's LinAlgError
    naming the first non-finite batch element (linalg.svd's, which pinv, lstsq, svdvals and
    the spectral norm raise too)."""
    try:
        return np.linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv)
    except np.linalg.LinAlgError:
        batch = a.shape[:-2]
        bad = ~np.isfinite(a).reshape(batch + (-1,)).all(-1)
        index = np.unravel_index(int(np.argmax(bad)), batch) if batch else ()
        raise LinAlgError(
            f"{batch_label(batch, index)}The algorithm failed to converge because the input "
            "matrix contained non-finite values.",
            op="linalg.svd",
        ) from None


def cubic_cost(in_types, out_types, attrs):
    shape = [d if isinstance(d, int) else 1 for d in in_types[0].shape]  # (symbolic: 1)
    n = shape[-1]
    return Cost(2 * numel(shape[:-2]) * n * n * n, io_bytes(in_types, out_types))


def _linalg_op(name, infer, kernel, vjp, doc, **rules):
    return register(
        OpDef(
            name=name,
            kind="linalg",
            infer=infer,
            kernel=kernel,
            vjp=vjp,
            cost=cubic_cost,
            batch=None,
            doc=doc,
            **rules,
        )
    )


# -------------------------------------------------------------------------------------- inv


def _square_infer(op):
    def infer(a):
        require_matrices(op, a, square=True)
        return TensorType(tuple(a.shape), a.dtype)

    return infer


def _first_singular(a):
    """The batch index and 1-based pivot of the first exactly singular matrix in ``a``."""
    for index in np.ndindex(*a.shape[:-2]):
        _, u = _linalg().lu(a[index], permute_l=True)
        zero = np.flatnonzero(np.diagonal(u) == 0)
        if zero.size:
            return index, int(zero[0]) + 1
    return (), 0


def _inv_kernel(a):
    if a.size == 0:
        return np.zeros(a.shape, a.dtype)
    try:
        return np.linalg.inv(a).astype(a.dtype, copy=False)
    except np.linalg.LinAlgError:
        index, pivot = _first_singular(a)
        raise LinAlgError(
            f"{batch_label(a.shape[:-2], index)}The diagonal element {pivot} is zero, the "
            "inversion could not be completed because the input matrix is singular.",
            op="linalg.inv",
        ) from None


def _inv_vjp(c, g):
    inv = mH(c.outputs[0])
    return (-E.matmul(inv, E.matmul(g, inv)),)


INV = _linalg_op(
    "inv",
    _square_infer("linalg.inv"),
    _inv_kernel,
    _inv_vjp,
    "inv(A): the inverses of a (batch of) square matrices",
    save_inputs=(),
    save_outputs=(0,),
    autocast=Autocast.FP32,
    complex=Complex.GRADIENT,
    grad_fn="LinalgInvExBackward0",
)


@autocasts(Autocast.FP32)
def inv(A):
    """``torch.linalg.inv``: the inverse of each square matrix of ``A`` (..., n, n). A singular
    matrix raises `LinAlgError`. Gradient ``-A^-H g A^-H``."""
    return apply(INV, to_tensor(A))


@export(method=True)
@autocasts(Autocast.FP32)
def inverse(input):
    """``torch.inverse``: `ember.linalg.inv`."""
    return inv(input)


# ------------------------------------------------------------------------------ det, slogdet


SlogdetResult = return_types.linalg_slogdet  # (PyTorch's torch.return_types.linalg_slogdet)


def _slogdet_infer(a):
    require_matrices("linalg.slogdet", a, square=True)
    batch = tuple(a.shape[:-2])
    return TensorType(batch, a.dtype), TensorType(batch, dt.to_real(a.dtype))


def _slogdet_kernel(a):
    if a.shape[-1] == 0:
        return np.ones(a.shape[:-2], a.dtype), np.zeros(a.shape[:-2], real_dtype(a.dtype))
    sign, logabs = np.linalg.slogdet(a)
    return np.asarray(sign).astype(a.dtype), np.asarray(logabs).astype(real_dtype(a.dtype))


def _slogdet_vjp(c, g_sign, g_log):
    # d log det = tr(A^-1 dA) = d logabsdet + i d(angle): a real loss's gradient is
    # (g_log - i Im(conj(g_sign) sign)) A^-H; a real sign is piecewise constant (g_log A^-T)
    a = c.inputs[0]
    if g_log is None:
        g_log = E.zeros(tuple(a.shape[:-2]), dtype=dt.to_real(a.dtype))
    scale = g_log
    if a.dtype.is_complex and g_sign is not None:
        turn = E.imag(E.conj(g_sign) * c.outputs[0])
        scale = E.complex(scale, -turn)
    scale = E.unsqueeze(E.unsqueeze(scale, -1), -1)
    return (scale * mH(apply(INV, c.inputs[0])),)


SLOGDET = _linalg_op(
    "slogdet",
    _slogdet_infer,
    _slogdet_kernel,
    _slogdet_vjp,
    "slogdet(A): the signs and the logarithms of the absolute determinants",
    num_outputs=2,
    save_outputs=(0,),  # (the sign: a complex one's angle has a gradient)
    complex=Complex.GRADIENT,
    grad_fn="LinalgSlogdetBackward0",
)


def slogdet(A) -> SlogdetResult:
    """``torch.linalg.slogdet``: ``(sign, logabsdet)`` of each square matrix of ``A``, with
    ``det = sign * exp(logabsdet)`` (sign 0 and logabsdet -inf for a singular matrix). For a
    complex ``A`` the sign is a complex number of modulus 1 and logabsdet is real. A real sign
    has no gradient; logabsdet's is ``g A^-T`` (a singular matrix raises there)."""
    return SlogdetResult(*apply(SLOGDET, to_tensor(A)))


@export(name="slogdet", method="slogdet")
def _slogdet(input):
    """``torch.slogdet``: `ember.linalg.slogdet`."""
    return return_types.slogdet(*slogdet(input))


@export(method=True)
def logdet(input):
    """``torch.logdet``: the logarithm of the determinant: NaN where it is negative, -inf
    where it is 0 (computed as slogdet's logabsdet, masked by its sign)."""
    sign, logabs = apply(SLOGDET, to_tensor(input))
    if sign.dtype.is_complex:  # the complex logarithm: log|det| + i angle(det)
        return E.log(sign) + logabs
    return E.where(sign < 0, E.full((), float("nan"), dtype=logabs.dtype), logabs)


# ------------------------------------------------------------------------------------ solve


def _solve_infer(a, b):
    require_matrices("linalg.solve", a, square=True)
    require_matrices("linalg.solve", b)
    if tuple(a.shape[:-2]) != tuple(b.shape[:-2]) or a.shape[-1] != b.shape[-2]:
        raise ShapeError(
            f"A of shape {fmt_shape(a.shape)} and B of shape {fmt_shape(b.shape)} do not "
            "form a system (same batch dimensions and n rows in B)",
            op="linalg.solve",
        )
    if a.dtype is not b.dtype:
        raise DTypeError(f"A is {a.dtype} but B is {b.dtype}", op="linalg.solve")
    return TensorType(tuple(b.shape), b.dtype)


def _solve_kernel(a, b):
    if a.size == 0 or b.size == 0:
        return np.zeros(b.shape, b.dtype)
    try:
        return np.linalg.solve(a, b).astype(b.dtype, copy=False)
    except np.linalg.LinAlgError:
        index, _ = _first_singular(a)
        raise LinAlgError(
            f"{batch_label(a.shape[:-2], index)}The solver failed because the input matrix "
            "is singular.",
            op="linalg.solve",
        ) from None


def _solve_vjp(c, g):
    a, x = c.inputs[0], c.outputs[0]
    gb = apply(SOLVE, mH(a), g)
    return -E.matmul(gb, mH(x)), gb


SOLVE = _linalg_op(
    "solve",
    _solve_infer,
    _solve_kernel,
    _solve_vjp,
    "solve(A, B): X with A X = B, for (batches of) square A and matrices B of one batch shape",
    save_inputs=(0,),
    save_outputs=(0,),
    autocast=Autocast.FP32,
    complex=Complex.GRADIENT,
    grad_fn="LinalgSolveExBackward0",
)


def _broadcast_system(op, A, B):
    """A (..., n, n) and B (..., n, k) broadcast to one batch shape."""
    try:
        batch = np.broadcast_shapes(tuple(A.shape[:-2]), tuple(B.shape[:-2]))
    except ValueError:
        raise ShapeError(
            f"the batch dimensions of A {fmt_shape(A.shape)} and B {fmt_shape(B.shape)} do "
            "not broadcast",
            op=op,
        ) from None
    if tuple(A.shape[:-2]) != batch:
        A = E.broadcast_to(A, batch + tuple(A.shape[-2:]))
    if tuple(B.shape[:-2]) != batch:
        B = E.broadcast_to(B, batch + tuple(B.shape[-2:]))
    return A, B


def _as_system(op, A, B):
    """PyTorch's reading of B: a (batch of) vector(s) when B is 1-D or has A's shape less the
    last dimension, else a (batch of) matrices; returns A, B as matrices and whether B was a
    vector."""
    A, B = to_tensor(A), to_tensor(B)
    require_matrices(op, A, square=True)
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))
    if vector:
        B = E.unsqueeze(B, -1)
    require_matrices(op, B)
    A, B = _broadcast_system(op, A, B)
    return A, B, vector


@autocasts(Autocast.FP32)
def solve(A, B, *, left: bool = True):
    """``torch.linalg.solve``: X with ``A X = B`` (``X A = B`` when ``left=False``) for square
    ``A`` (..., n, n); B is (..., n, k), or a vector (n,) / (..., n) as PyTorch reads it; batch
    dimensions broadcast. A singular matrix raises `LinAlgError`."""
    if not left:
        # X A = B  <=>  A^T X^T = B^T
        return mT(solve(mT(to_tensor(A)), mT(to_tensor(B))))
    A, B, vector = _as_system("linalg.solve", A, B)
    X = apply(SOLVE, A, B)
    return E.squeeze(X, -1) if vector else X


# ------------------------------------------------------------------------- solve_triangular


def _solve_triangular_infer(a, b, *, upper, unitriangular):
    require_matrices("linalg.solve_triangular", a, square=True)
    require_matrices("linalg.solve_triangular", b)
    if tuple(a.shape[:-2]) != tuple(b.shape[:-2]) or a.shape[-1] != b.shape[-2]:
        raise ShapeError(
            f"A of shape {fmt_shape(a.shape)} and B of shape {fmt_shape(b.shape)} do not "
            "form a system (same batch dimensions and n rows in B)",
            op="linalg.solve_triangular",
        )
    if a.dtype is not b.dtype:
        raise DTypeError(f"A is {a.dtype} but B is {b.dtype}", op="linalg.solve_triangular")
    return TensorType(tuple(b.shape), b.dtype)


def _solve_triangular_kernel(a, b, *, upper, unitriangular):
    out = np.zeros(b.shape, b.dtype)
    if a.size == 0 or b.size == 0:
        return out
    (trsm,) = _linalg().get_blas_funcs(("trsm",), (a, b))
    # BLAS's trsm, as PyTorch: no check for a zero diagonal (it gives inf / NaN, never raises)
    for index in np.ndindex(*a.shape[:-2]):
        out[index] = trsm(1.0, a[index], b[index], lower=not upper, diag=int(unitriangular), side=0)
    return out


def _triangle(x, upper, unitriangular):
    if upper:
        return E.triu(x, 1 if unitriangular else 0)
    return E.tril(x, -1 if unitriangular else 0)


def _solve_triangular_vjp(c, g):
    a, x = c.inputs[0], c.outputs[0]
    upper, unit = c.attrs["upper"], c.attrs["unitriangular"]
    gb = apply(SOLVE_TRIANGULAR, mH(a), g, upper=not upper, unitriangular=unit)
    return _triangle(-E.matmul(gb, mH(x)), upper, unit), gb


SOLVE_TRIANGULAR = _linalg_op(
    "solve_triangular",
    _solve_triangular_infer,
    _solve_triangular_kernel,
    _solve_triangular_vjp,
    "solve_triangular(A, B, upper, unitriangular): X with A X = B, reading only A's upper "
    "(or lower) triangle, its diagonal taken as ones when unitriangular",
    save_inputs=(0,),
    save_outputs=(0,),
    complex=Complex.GRADIENT,
    grad_fn="LinalgSolveTriangularBackward0",
)


def solve_triangular(A, B, *, upper: bool, left: bool = True, unitriangular: bool = False):
    """``torch.linalg.solve_triangular``: X with ``A X = B`` (``X A = B`` when ``left=False``)
    reading only the upper (``upper=True``) or lower triangle of ``A`` (..., n, n), its
    diagonal taken as ones when ``unitriangular``; B (..., n, k) (k, n when not left); batch
    dimensions broadcast. As in PyTorch, a zero on the diagonal gives inf / NaN, no error."""
    A, B = to_tensor(A), to_tensor(B)
    if not left:
        return mT(solve_triangular(mT(A), mT(B), upper=not upper, unitriangular=unitriangular))
    require_matrices("linalg.solve_triangular", A, square=True)
    require_matrices("linalg.solve_triangular", B)
    A, B = _broadcast_system("linalg.solve_triangular", A, B)
    return apply(SOLVE_TRIANGULAR, A, B, upper=bool(upper), unitriangular=bool(unitriangular))


# --------------------------------------------------------------------------------- cholesky


def _cholesky_kernel(a):
    if a.size == 0:
        return np.zeros(a.shape, a.dtype)
    try:
        return np.tril(np.linalg.cholesky(a)).astype(a.dtype, copy=False)
    except np.linalg.LinAlgError:
        pass
    for index in np.ndindex(*a.shape[:-2]):
        m = a[index]
        for k in range(1, m.shape[-1] + 1):
            try:
                np.linalg.cholesky(m[:k, :k])
            except np.linalg.LinAlgError:
                raise LinAlgError(
                    f"{batch_label(a.shape[:-2], index)}The factorization could not be "
                    "completed because the input is not positive-definite (the leading minor "
                    f"of order {k} is not positive-definite).",
                    op="linalg.cholesky",
                ) from None
    raise LinAlgError("the factorization failed", op="linalg.cholesky")


def _cholesky_vjp(c, g):
    """PyTorch's cholesky_backward: gA = L^-H Phi(L^H gL) L^-1, Phi(X) the Hermitian matrix
    whose lower triangle is tril(X) with the diagonal halved, halved again off it."""
    L = c.outputs[0]
    phi = E.tril(E.matmul(mH(L), g))
    phi = 0.5 * (phi + mH(E.tril(phi, -1)))
    ga = apply(SOLVE_TRIANGULAR, mH(L), phi, upper=True, unitriangular=False)
    # ga L^-1: solve X L = ga as L^T X^T = ga^T
    return (mT(apply(SOLVE_TRIANGULAR, mT(L), mT(ga), upper=True, unitriangular=False)),)


CHOLESKY = _linalg_op(
    "cholesky",
    _square_infer("linalg.cholesky"),
    _cholesky_kernel,
    _cholesky_vjp,
    "cholesky(A): the lower-triangular L with A = L L^T, reading A's lower triangle",
    save_inputs=(),
    save_outputs=(0,),
    autocast=Autocast.FP32,
    complex=Complex.GRADIENT,
    grad_fn="LinalgCholeskyExBackward0",
)


@autocasts(Autocast.FP32)
def cholesky(A, *, upper: bool = False):
    """``torch.linalg.cholesky``: the lower-triangular ``L`` with ``A = L L^T`` for symmetric
    positive-definite ``A`` (..., n, n), reading only A's lower triangle; ``upper=True``
    returns ``L^T``. A matrix that is not positive-definite raises `LinAlgError` naming the
    batch element and the order of the failing leading minor. A complex ``A`` is read as a
    Hermitian matrix (``A = L L^H``; ``upper=True`` returns ``L^H``). Gradient as PyTorch's.
    (PyTorch's LAPACK call reads the upper triangle for ``upper=True``, its gradient is the
    lower one's: ember reads the lower triangle throughout, so the two agree on every
    Hermitian input, values and gradients.)"""
    L = apply(CHOLESKY, to_tensor(A))
    return mH(L) if upper else L


@export(name="cholesky", method="cholesky")
@autocasts(Autocast.FP32)
def _cholesky(input, upper: bool = False):
    """``torch.cholesky`` (deprecated in PyTorch): `ember.linalg.cholesky`."""
    return cholesky(input, upper=upper)
