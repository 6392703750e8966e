"""Factorizations: the primitives ``qr``, ``eigh``, ``eigvalsh``, ``linalg_svd`` and ``pinv``
behind ``ember.linalg`` (ember/linalg.py), ``det`` (whose gradient is computed from the SVD),
and the old top-level ``ember.qr``, ``ember.svd`` (``V``, not ``Vh``), ``ember.pinverse`` and
``ember.det``.

Kernels are NumPy's LAPACK calls (the same routines PyTorch calls on the CPU, so the signs of
Q, eigenvectors and singular vectors agree with PyTorch's); VJPs are PyTorch's derivatives
written in ember ops. As in PyTorch, the gradients through eigenvectors and singular vectors
assume distinct eigenvalues / singular values (they are not defined otherwise); a cotangent
that is exactly zero there contributes zero rather than NaN.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from .. import return_types
from ..errors import ArgumentError, ArgumentTypeError, AutogradError, TraceError
from ..types import TensorType
from . import _item_scalars as _items
from . import api as E
from ._autocast import Autocast, autocasts
from ._registry import TensorBase, _state, apply, building_graph, export
from ._rules import Complex
from .decompositions import (
    INV,
    SLOGDET,
    SOLVE_TRIANGULAR,
    _linalg_op,
    diag_embed,
    mH,
    np_svd,
    real_dtype,
    require_matrices,
)
from .promotion import to_tensor


def _safe_div(num, den):
    """num / den, but 0 where num is exactly 0 (a cotangent that is absent)."""
    return E.where(num == 0, E.zeros((), dtype=num.dtype), num / E.where(num == 0, 1, den))


# --------------------------------------------------------------------------------------- qr

_QR_MODES = ("reduced", "complete", "r")


def _qr_infer(a, *, mode):
    require_matrices("linalg.qr", a)
    m, n = a.shape[-2:]
    batch = tuple(a.shape[:-2])
    k = m if mode == "complete" else min(m, n)
    r = TensorType(batch + (k, n), a.dtype)
    if mode == "r":
        return TensorType((0,), a.dtype), r
    return TensorType(batch + (m, k), a.dtype), r


def _qr_kernel(a, *, mode):
    m, n = a.shape[-2:]
    k = m if mode == "complete" else min(m, n)
    if a.size == 0:
        q = np.zeros((0,) if mode == "r" else a.shape[:-2] + (m, k), a.dtype)
        r = np.zeros(a.shape[:-2] + (k, n), a.dtype)
        if mode == "complete":
            q[...] = np.eye(m, dtype=a.dtype)
        return q, r
    if mode == "r":
        return np.zeros((0,), a.dtype), np.linalg.qr(a, mode="r").astype(a.dtype, copy=False)
    q, r = np.linalg.qr(a, mode=mode)
    return q.astype(a.dtype, copy=False), r.astype(a.dtype, copy=False)


def _qr_square_grad(q, r, gq, gr):
    """m >= n: gA = (gQ + Q copy_upper(gR R^H - Q^H gQ)) R^-H, copy_upper(M) the Hermitian
    matrix with M's upper triangle."""
    m = E.matmul(gr, mH(r)) - E.matmul(mH(q), gq)
    n_mat = E.triu(m, 1) + mH(E.triu(m, 1))
    diag = E.diagonal(m, 0, -2, -1)
    n_mat = n_mat + diag_embed(E.real(diag) if m.dtype.is_complex else diag)
    z = gq + E.matmul(q, n_mat)
    # Z R^-H: solve Y R^H = Z as R Y^H = Z^H
    return mH(apply(SOLVE_TRIANGULAR, r, mH(z), upper=True, unitriangular=False))


def _qr_vjp(c, gq, gr):
    mode = c.attrs["mode"]
    if mode == "r":
        raise AutogradError(
            "the derivative of linalg.qr depends on Q, which is not computed when mode='r'; "
            "use mode='reduced'",
            op="linalg.qr",
        )
    q, r = c.outputs
    m, n = q.shape[-2], r.shape[-1]
    if mode == "complete" and m > n:
        raise AutogradError(
            "the QR decomposition is not differentiable when mode='complete' and the matrix "
            "has more rows than columns",
            op="linalg.qr",
        )
    if m >= n:
        return (_qr_square_grad(q, r, gq, gr),)
    # m < n: A = [X | Y], R = [U | V]; X = Q U is square, Y = Q V
    u, v = E.narrow(r, -1, 0, m), E.narrow(r, -1, m, n - m)
    gu, gv = E.narrow(gr, -1, 0, m), E.narrow(gr, -1, m, n - m)
    y = E.matmul(q, v)
    gx = _qr_square_grad(q, u, gq + E.matmul(y, mH(gv)), gu)
    return (E.concat([gx, E.matmul(q, gv)], -1),)


QR = _linalg_op(
    "qr",
    _qr_infer,
    _qr_kernel,
    _qr_vjp,
    "qr(A, mode): Q and R with A = Q R (mode 'reduced', 'complete', or 'r': R only, Q empty)",
    num_outputs=2,
    save_inputs=(),
    save_outputs=(0, 1),
    autocast=Autocast.FP32,
    complex=Complex.GRADIENT,
    grad_fn="LinalgQrBackward0",
)


QRResult = return_types.linalg_qr  # (PyTorch's torch.return_types.linalg_qr)


@autocasts(Autocast.FP32)
def qr(A, mode: str = "reduced") -> QRResult:
    """``torch.linalg.qr``: ``(Q, R)`` with ``A = Q R``, Q with orthonormal columns and R
    upper-triangular, of each matrix of ``A`` (..., m, n). ``mode``: "reduced" (Q m x k, R
    k x n, k = min(m, n)), "complete" (Q m x m, R m x n), "r" (R only; Q is empty and there
    is no gradient). Gradient as PyTorch's (not defined for "complete" with m > n)."""
    if mode not in _QR_MODES:
        raise ArgumentError(f"linalg.qr: mode must be one of {_QR_MODES}, got {mode!r}")
    return QRResult(*apply(QR, to_tensor(A), mode=mode))


@export(name="qr", method="qr")
@autocasts(Autocast.FP32)
def _qr(input, some: bool = True) -> QRResult:
    """``torch.qr`` (deprecated in PyTorch): ``some=True`` is mode "reduced", False
    "complete"."""
    return return_types.qr(*qr(input, "reduced" if some else "complete"))


# ----------------------------------------------------------------------------- eigh, eigvalsh


def _eigh_infer(a, *, uplo):
    require_matrices("linalg.eigh", a, square=True)
    values = TensorType(tuple(a.shape[:-1]), dt.to_real(a.dtype))
    return values, TensorType(tuple(a.shape), a.dtype)


def _eigh_kernel(a, *, uplo):
    if a.size == 0:
        return np.zeros(a.shape[:-1], real_dtype(a.dtype)), np.zeros(a.shape, a.dtype)
    w, v = np.linalg.eigh(a, UPLO=uplo)
    return w.astype(real_dtype(a.dtype), copy=False), v.astype(a.dtype, copy=False)


def _off_diagonal(x):
    """``x`` with its last two dimensions' diagonal zeroed."""
    n = x.shape[-1]
    return E.where(E.eye(n, dtype=dt.bool_), E.zeros((), dtype=x.dtype), x)


def _eigh_vjp(c, gl, gv):
    """PyTorch's: gA = V (skew(V^H gV) / E + diag(gL)) V^H, E[i, j] = L[j] - L[i]. A complex
    eigenvector is defined up to a phase: the diagonal of skew(V^H gV), which a loss depending
    on that phase gives, is dropped (PyTorch raises there)."""
    lam, v = c.outputs
    vgv = E.matmul(mH(v), gv)
    skew = 0.5 * (vgv - mH(vgv))
    if skew.dtype.is_complex:
        skew = _off_diagonal(skew)
    gaps = E.unsqueeze(lam, -2) - E.unsqueeze(lam, -1)
    inner = _safe_div(skew, gaps) + diag_embed(gl)
    return (E.matmul(v, E.matmul(inner, mH(v))),)


EIGH = _linalg_op(
    "eigh",
    _eigh_infer,
    _eigh_kernel,
    _eigh_vjp,
    "eigh(A, uplo): the eigenvalues (ascending) and eigenvectors of symmetric matrices, "
    "reading the lower (uplo 'L') or upper triangle",
    num_outputs=2,
    save_inputs=(),
    save_outputs=(0, 1),
    autocast=Autocast.FP32,
    complex=Complex.GRADIENT,
    grad_fn="LinalgEighBackward0",
)


def _uplo(op, UPLO):
    if UPLO not in ("L", "U"):
        raise ArgumentError(f"{op}: UPLO must be 'L' or 'U', got {UPLO!r}")
    return UPLO


EighResult = return_types.linalg_eigh


@autocasts(Autocast.FP32)
def eigh(A, UPLO: str = "L") -> EighResult:  # noqa: N803  (PyTorch's name)
    """``torch.linalg.eigh``: the eigenvalues (ascending) and orthonormal eigenvectors (the
    columns) of each symmetric matrix of ``A`` (..., n, n), reading only its lower (``UPLO``
    "L") or upper triangle. The gradient assumes distinct eigenvalues, as PyTorch's."""
    return EighResult(*apply(EIGH, to_tensor(A), uplo=_uplo("linalg.eigh", UPLO)))


def _eigvalsh_infer(a, *, uplo):
    require_matrices("linalg.eigvalsh", a, square=True)
    return TensorType(tuple(a.shape[:-1]), dt.to_real(a.dtype))


def _eigvalsh_kernel(a, *, uplo):
    if a.size == 0:
        return np.zeros(a.shape[:-1], real_dtype(a.dtype))
    return np.linalg.eigvalsh(a, UPLO=uplo).astype(real_dtype(a.dtype), copy=False)


def _eigvalsh_vjp(c, g):
    # V diag(g) V^H: defined even where eigenvalues repeat
    _, v = apply(EIGH, c.inputs[0], uplo=c.attrs["uplo"])
    return (E.matmul(v * E.unsqueeze(g, -2), mH(v)),)


EIGVALSH = _linalg_op(
    "eigvalsh",
    _eigvalsh_infer,
    _eigvalsh_kernel,
    _eigvalsh_vjp,
    "eigvalsh(A, uplo): the eigenvalues (ascending) of symmetric matrices",
    autocast=Autocast.FP32,
    complex=Complex.GRADIENT,
    grad_fn="LinalgEighBackward0",
)


@autocasts(Autocast.FP32)
def eigvalsh(A, UPLO: str = "L"):  # noqa: N803
    """``torch.linalg.eigvalsh``: the eigenvalues (ascending) of each symmetric matrix of
    ``A``, reading its lower (``UPLO`` "L") or upper triangle. Gradient ``V diag(g) V^T``."""
    return apply(EIGVALSH, to_tensor(A), uplo=_uplo("linalg.eigvalsh", UPLO))


# -------------------------------------------------------------------------------------- svd


def _svd_infer(a, *, full_matrices):
    require_matrices("linalg.svd", a)
    m, n = a.shape[-2:]
    k, batch = min(m, n), tuple(a.shape[:-2])
    return (
        TensorType(batch + ((m, m) if full_matrices else (m, k)), a.dtype),
        TensorType(batch + (k,), dt.to_real(a.dtype)),
        TensorType(batch + ((n, n) if full_matrices else (k, n)), a.dtype),
    )


def _svd_kernel(a, *, full_matrices):
    m, n = a.shape[-2:]
    if a.size == 0:
        k, batch = min(m, n), a.shape[:-2]
        u = np.zeros(batch + ((m, m) if full_matrices else (m, k)), a.dtype)
        vh = np.zeros(batch + ((n, n) if full_matrices else (k, n)), a.dtype)
        if full_matrices:
            u[...], vh[...] = np.eye(m, dtype=a.dtype), np.eye(n, dtype=a.dtype)
        return u, np.zeros(batch + (k,), real_dtype(a.dtype)), vh
    u, s, vh = np_svd(a, full_matrices)
    return u.astype(a.dtype), s.astype(real_dtype(a.dtype)), vh.astype(a.dtype)


def _svd_vjp(c, gu, gs, gvh):
    """PyTorch's svd_backward (with full_matrices, the extra columns of U and rows of Vh
    carry no gradient: both are narrowed to the reduced factors first). For complex inputs
    the conjugate transposes, and the term i Im(diag(U^H gU)) / S on the diagonal; a phase
    that a pair of singular vectors shares is free, and what a loss depending on it gives
    on the diagonal of the skew parts is dropped (PyTorch raises there)."""
    u, s, vh = c.outputs
    m, n = u.shape[-2], vh.shape[-1]
    k = s.shape[-1]
    if k == 0:
        return (E.zeros((*u.shape[:-2], m, n), dtype=u.dtype),)
    if c.attrs["full_matrices"]:
        u, gu = E.narrow(u, -1, 0, k), E.narrow(gu, -1, 0, k)
        vh, gvh = E.narrow(vh, -2, 0, k), E.narrow(gvh, -2, 0, k)
    v, gv = mH(vh), mH(gvh)
    ugu = E.matmul(mH(u), gu)
    vgv = E.matmul(mH(v), gv)
    complex_ = u.dtype.is_complex
    phase = E.imag(E.diagonal(ugu, 0, -2, -1)) if complex_ else None
    ugu, vgv = ugu - mH(ugu), vgv - mH(vgv)
    if complex_:
        ugu, vgv = _off_diagonal(ugu), _off_diagonal(vgv)
    s2 = s * s
    gaps = E.unsqueeze(s2, -2) - E.unsqueeze(s2, -1)  # [i, j] = s_j^2 - s_i^2
    inner = _safe_div(ugu * E.unsqueeze(s, -2) + E.unsqueeze(s, -1) * vgv, gaps)
    inner = inner + diag_embed(gs)
    if complex_:
        inner = inner + diag_embed(E.complex(E.zeros_like(phase), _safe_div(phase, s)))
    if m > k:
        # U [inner V^H] + (I - U U^H) gU S^-1 V^H
        gu_s = _safe_div(gu, E.unsqueeze(s, -2))
        ga = E.matmul(u, inner) + gu_s - E.matmul(u, E.matmul(mH(u), gu_s))
        return (E.matmul(ga, vh),)
    if n > k:
        # U [inner V^H + S^-1 gV^H (I - V V^H)]
        s_gvh = _safe_div(gvh, E.unsqueeze(s, -1))
        ga = E.matmul(inner, vh) + s_gvh - E.matmul(E.matmul(s_gvh, v), vh)
        return (E.matmul(u, ga),)
    return (E.matmul(u, E.matmul(inner, vh)),)


LINALG_SVD = _linalg_op(
    "linalg_svd",
    _svd_infer,
    _svd_kernel,
    _svd_vjp,
    "linalg_svd(A, full_matrices): U, S (descending), Vh with A = U diag(S) Vh",
    num_outputs=3,
    save_inputs=(),
    save_outputs=(0, 1, 2),
    autocast=Autocast.FP32,
    complex=Complex.GRADIENT,
    grad_fn="LinalgSvdBackward0",
)


SVDResult = return_types.linalg_svd


@autocasts(Autocast.FP32)
def svd(A, full_matrices: bool = True, *, driver: str | None = None) -> SVDResult:
    """``torch.linalg.svd``: ``(U, S, Vh)`` with ``A = U diag(S) Vh`` for each matrix of ``A``
    (..., m, n), S descending; ``full_matrices`` (the default, as PyTorch) makes U m x m and
    Vh n x n, else m x k and k x n (k = min(m, n)). The gradient through U and Vh assumes
    distinct singular values (and, with full_matrices, ignores the extra columns), as
    PyTorch's. ``driver`` names a cuSOLVER method: as PyTorch on the CPU, giving one is
    refused."""
    if driver is not None:
        raise ArgumentError(
            "linalg.svd: driver= names a cuSOLVER method, for CUDA inputs only; ember runs on "
            "the CPU (as PyTorch with a CPU tensor, it refuses one)"
        )
    return SVDResult(*apply(LINALG_SVD, to_tensor(A), full_matrices=bool(full_matrices)))


OldSVDResult = return_types.svd  # (torch.svd's: V, not Vh)


@export(name="svd", method="svd")
@autocasts(Autocast.FP32)
def _svd(input, some: bool = True, compute_uv: bool = True) -> OldSVDResult:
    """``torch.svd`` (deprecated in PyTorch): ``(U, S, V)`` with ``A = U diag(S) V^T`` (V, not
    Vh); ``some=False`` gives the full U and V; ``compute_uv=False`` returns zero-filled U
    (m x m) and V (n x n) beside S, as PyTorch does."""
    A = to_tensor(input)
    if not compute_uv:
        from .norms import svdvals

        require_matrices("svd", A)
        m, n = A.shape[-2:]
        batch = tuple(A.shape[:-2])
        zeros = E.zeros(batch + (m, m), dtype=A.dtype), E.zeros(batch + (n, n), dtype=A.dtype)
        return OldSVDResult(zeros[0], svdvals(A), zeros[1])
    u, s, vh = apply(LINALG_SVD, A, full_matrices=not some)
    return OldSVDResult(u, s, mH(vh))


# ------------------------------------------------------------------------------------- pinv


def _pinv_infer(a, *, atol, rtol, hermitian):
    require_matrices("linalg.pinv", a)
    return TensorType(tuple(a.shape[:-2]) + (a.shape[-1], a.shape[-2]), a.dtype)


def _pinv_kernel(a, *, atol, rtol, hermitian):
    m, n = a.shape[-2:]
    if a.size == 0:
        return np.zeros(a.shape[:-2] + (n, m), a.dtype)

    def conj_t(x):
        return np.swapaxes(x, -1, -2).conj()

    if hermitian:
        w, v = np.linalg.eigh(a)
        mag = np.abs(w)
        cutoff = np.maximum(atol, rtol * mag.max(-1, keepdims=True))
        inv_w = np.where(mag > cutoff, 1 / np.where(mag > cutoff, w, 1), 0)
        return ((v * inv_w[..., None, :]) @ conj_t(v)).astype(a.dtype)
    u, s, vh = np_svd(a, False)
    cutoff = np.maximum(atol, rtol * s[..., :1])
    inv_s = np.where(s > cutoff, 1 / np.where(s > cutoff, s, 1), 0)
    return (conj_t(vh) * inv_s[..., None, :] @ conj_t(u)).astype(a.dtype)


def _pinv_vjp(c, g):
    """PyTorch's pinv_backward, in terms of A and its pseudo-inverse P."""
    a, p = c.inputs[0], c.outputs[0]
    m, n = a.shape[-2:]
    ph, gh = mH(p), mH(g)
    if m <= n:
        k = E.matmul(gh, p)
        kph = E.matmul(k, ph)
        return (
            -mH(E.matmul(p, k))
            + kph
            - E.matmul(E.matmul(a, p), kph)
            + E.matmul(E.matmul(ph, p), gh - E.matmul(k, a)),
        )
    k = E.matmul(p, gh)
    phk = E.matmul(ph, k)
    return (
        -mH(E.matmul(k, p))
        + E.matmul(E.matmul(gh - E.matmul(a, k), p), ph)
        + phk
        - E.matmul(E.matmul(phk, p), a),
    )


PINV = _linalg_op(
    "pinv",
    _pinv_infer,
    _pinv_kernel,
    _pinv_vjp,
    "pinv(A, atol, rtol, hermitian): the pseudo-inverse, singular values at most "
    "max(atol, rtol * the largest) taken as zero",
    save_inputs=(0,),
    save_outputs=(0,),
    autocast=Autocast.FP32,
    complex=Complex.GRADIENT,
    grad_fn="LinalgPinvBackward0",
)


def _tolerance(op, value, name):
    if value is None:
        return None
    _items.refuse(value, op, name, "the tolerance as a number")
    if isinstance(value, (bool, str)) or not isinstance(value, (int, float)):
        raise ArgumentTypeError(
            f"{op}: {name} must be a Python number (ember does not take tensor tolerances), "
            f"got {type(value).__name__}"
        )
    return float(value)


def default_tolerances(op, A, atol, rtol):
    """PyTorch's rule: rtol defaults to eps * max(m, n) when atol is None or 0, else to 0."""
    atol, rtol = _tolerance(op, atol, "atol"), _tolerance(op, rtol, "rtol")
    if rtol is None:
        inexact = A.dtype.is_floating_point or A.dtype.is_complex
        eps = float(np.finfo(A.dtype.np).eps) if inexact else 0.0  # (a complex one's parts')
        rtol = eps * max(A.shape[-2:]) if not atol else 0.0
    return (0.0 if atol is None else atol), rtol


@autocasts(Autocast.FP32)
def pinv(A, *, atol=None, rtol=None, hermitian: bool = False):
    """``torch.linalg.pinv``: the Moore-Penrose pseudo-inverse of each matrix of ``A``
    (..., m, n), treating singular values at most ``max(atol, rtol * the largest)`` as zero
    (rtol defaults to eps * max(m, n) when atol is unset or 0). ``hermitian=True`` reads A's
    lower triangle as a symmetric matrix. ember takes the tolerances as Python numbers only.
    Gradient PyTorch's ``pinv_backward``."""
    A = to_tensor(A)
    require_matrices("linalg.pinv", A)
    if isinstance(atol, TensorBase) or isinstance(rtol, TensorBase):
        return _pinv_tensor_tolerances(A, atol, rtol, bool(hermitian))
    atol, rtol = default_tolerances("linalg.pinv", A, atol, rtol)
    return apply(PINV, A, atol=atol, rtol=rtol, hermitian=bool(hermitian))


def _pinv_tensor_tolerances(A, atol, rtol, hermitian):
    """pinv with tensor tolerances, PyTorch's per matrix (broadcast with A's batch): each
    matrix's pinv with its tolerances' numbers, read from the tensors' data, so eagerly only."""
    op = "linalg.pinv"
    values = [tensor_values(op, t, name) for t, name in ((atol, "atol"), (rtol, "rtol"))]
    batch = np.broadcast_shapes(tuple(A.shape[:-2]), *(v.shape for v in values if v is not None))
    A = E.broadcast_to(A, batch + tuple(A.shape[-2:]))
    atols, rtols = (None if v is None else np.broadcast_to(v, batch).ravel() for v in values)
    flat = E.reshape(A, (int(np.prod(batch)),) + tuple(A.shape[-2:]))  # (-1: empty matrices)
    out = []
    for i in range(flat.shape[0]):
        a_i = None if atols is None else float(atols[i])
        r_i = None if rtols is None else float(rtols[i])
        out.append(pinv(flat[i], atol=a_i, rtol=r_i, hermitian=hermitian))
    if not out:  # (no matrices: A's transpose has the result's shape, and its history)
        return E.clone(E.transpose(A, -2, -1))
    return E.reshape(E.stack(out), batch + (A.shape[-1], A.shape[-2]))


def tensor_values(op, t, name):
    """The data of a tensor argument whose numbers ``op`` needs (None for None); refused while
    a graph is built, where a tensor has no values."""
    if t is None or not isinstance(t, TensorBase):
        return None if t is None else np.asarray(t)
    if _state.modes or not hasattr(t, "_data") or t.is_meta:
        raise TraceError(
            f"{name} is a tensor, whose numbers the op needs while the graph is built; pass a "
            "Python number",
            op=op,
        )
    return np.asarray(t.numpy(force=True))


@export(method=True)
@autocasts(Autocast.FP32)
def pinverse(input, rcond: float = 1e-15):
    """``torch.pinverse``: `ember.linalg.pinv` with ``rtol=rcond``."""
    return pinv(input, rtol=rcond)


# -------------------------------------------------------------------------------------- det


def _det_infer(a):
    require_matrices("linalg.det", a, square=True)
    return TensorType(tuple(a.shape[:-2]), a.dtype)


def _det_kernel(a):
    if a.shape[-1] == 0:
        return np.ones(a.shape[:-2], a.dtype)
    return np.asarray(np.linalg.det(a)).astype(a.dtype, copy=False)


def _det_vjp(c, g):
    """g times the conjugate cofactor matrix: eagerly where every determinant is finite and
    nonzero ``conj(det(A)) A^-H`` (PyTorch's), else from the SVD A = U diag(S) Vh:
    conj(det(U) det(Vh)) U diag(the product of the other singular values) Vh, which holds for
    singular matrices as well (where ``A^-H`` does not exist; PyTorch 2.13 returns 0 there)."""
    a, d = c.inputs[0], c.outputs[0]
    n = a.shape[-1]
    if n == 0:
        return (E.zeros(tuple(a.shape), dtype=g.dtype),)
    if (
        not building_graph()
        and hasattr(d, "_data")
        and np.all(np.isfinite(d._data) & (d._data != 0))
    ):
        # eagerly, every matrix invertible: PyTorch's conj(det) A^-H, one inverse where the
        # SVD took 6x PyTorch's backward (the same matrix there, differentiable again alike)
        scale = E.unsqueeze(E.unsqueeze(g * E.conj(d), -1), -1)
        return (scale * mH(apply(INV, a)),)
    u, s, vh = apply(LINALG_SVD, a, full_matrices=False)
    others = E.where(E.eye(n, dtype=dt.bool_), E.ones((), dtype=s.dtype), E.unsqueeze(s, -2))
    products = E.prod(others, -1)  # [i]: the product of every singular value but the i-th
    sign = apply(SLOGDET, u)[0] * apply(SLOGDET, vh)[0]
    scale = E.unsqueeze(E.unsqueeze(g * E.conj(sign), -1), -1)
    return (scale * E.matmul(u * E.unsqueeze(products, -2), vh),)


DET = _linalg_op(
    "det",
    _det_infer,
    _det_kernel,
    _det_vjp,
    "det(A): the determinants of a (batch of) square matrices",
    onnx=lambda e: e.node("Det", e.inputs),
    complex=Complex.GRADIENT,
    save_outputs=(0,),  # (the eager gradient's conj(det))
    grad_fn="LinalgDetBackward0",
)


def det(A):
    """``torch.linalg.det``: the determinant of each square matrix of ``A`` (..., n, n). The
    gradient is the cofactor matrix, computed from the SVD, so that exactly singular matrices
    get theirs too (where ember differs: PyTorch 2.13's gradient there is 0); eagerly, where
    every matrix is invertible, PyTorch's ``conj(det) A^-H``."""
    return apply(DET, to_tensor(A))


@export(name="det", method="det")
def _det(input):
    """``torch.det``: `ember.linalg.det`."""
    return det(input)
