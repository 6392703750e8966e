"""``torch.linalg.eig`` and ``eigvals``: the eigenvalues and eigenvectors of general (not
symmetric) square matrices, complex whatever the input (float32 in, complex64 out).

The kernel is NumPy's LAPACK ``geev``, the routine PyTorch calls on the CPU, so the
eigenvectors come normalized as PyTorch's (unit 2-norm, each determined up to a phase: a loss
of them should not depend on that phase, as PyTorch warns). The gradient is PyTorch's
``linalg_eig_backward``:

    gA = V^-H (diag(gL) + (V^H gV - V^H V diag(re(V^H gV))) / conj(E)) V^H,
    E[i, j] = L[j] - L[i] off the diagonal (1 on it, whose entries gL replaces),

its real part for a real ``A``. It runs as one NumPy primitive (``eig_backward``, complex
solves included, which ember's linalg ops do not take), so it has no second derivative.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from .. import return_types
from ..errors import DTypeError
from ..types import TensorType
from ._autocast import Autocast, autocasts
from ._registry import apply
from ._rules import Complex
from .decompositions import _linalg_op, require_matrices
from .promotion import to_tensor


def _check(op, a):
    if a.dtype.is_complex:
        require_matrices(op, TensorType(tuple(a.shape), dt.to_real(a.dtype)), square=True)
    else:
        require_matrices(op, a, square=True)


def _eig_infer(a):
    _check("linalg.eig", a)
    c = dt.to_complex(a.dtype)
    return TensorType(tuple(a.shape[:-1]), c), TensorType(tuple(a.shape), c)


def _eig_kernel(a):
    c = dt.to_complex(dt.from_numpy_dtype(a.dtype)).np
    if a.size == 0:
        return np.zeros(a.shape[:-1], c), np.zeros(a.shape, c)
    if not np.all(np.isfinite(a)):  # (LAPACK would fail or loop: PyTorch raises too)
        raise DTypeError("the input holds NaN or infinity", op="linalg.eig")
    w, v = np.linalg.eig(a)
    return w.astype(c, copy=False), v.astype(c, copy=False)


def _eig_vjp(c, gl, gv):
    lam, v = c.outputs
    gl = _zeros_if_none(gl, lam)
    gv = _zeros_if_none(gv, v)
    return (apply(EIG_BACKWARD, lam, v, gl, gv, real=not c.in_types[0].dtype.is_complex),)


def _zeros_if_none(g, like):
    from . import api as E

    return E.zeros(tuple(like.shape), dtype=like.dtype) if g is None else g


EIG = _linalg_op(
    "eig",
    _eig_infer,
    _eig_kernel,
    _eig_vjp,
    "eig(A): the eigenvalues and unit eigenvectors (columns) of general square matrices, complex",
    num_outputs=2,
    save_inputs=(),
    save_outputs=(0, 1),
    autocast=Autocast.FP32,
    complex=Complex.GRADIENT,
)


def _backward_infer(lam, v, gl, gv, *, real):
    dtype = dt.to_real(v.dtype) if real else v.dtype
    return TensorType(tuple(v.shape), dtype)


def _mh(x):
    return np.conj(np.swapaxes(x, -1, -2))


def _backward_kernel(lam, v, gl, gv, *, real):
    if v.size == 0:
        return np.zeros(v.shape, v.real.dtype if real else v.dtype)
    vh = _mh(v)
    vhgv = vh @ gv
    diag = np.real(np.diagonal(vhgv, axis1=-2, axis2=-1))
    inner = vhgv - vh @ (v * diag[..., None, :])
    lconj = np.conj(lam)
    gaps = lconj[..., None, :] - lconj[..., :, None]
    n = lam.shape[-1]
    gaps[..., np.arange(n), np.arange(n)] = 1
    inner = inner / gaps
    inner[..., np.arange(n), np.arange(n)] = gl
    ga = np.linalg.solve(vh, inner @ vh)
    return np.ascontiguousarray(ga.real if real else ga).astype(
        v.real.dtype if real else v.dtype, copy=False
    )


EIG_BACKWARD = _linalg_op(
    "eig_backward",
    _backward_infer,
    _backward_kernel,
    None,
    "eig_backward(L, V, gL, gV; real): linalg.eig's gradient (PyTorch's linalg_eig_backward); "
    "no second derivative",
    complex=Complex.VALUES,
)


EigResult = return_types.linalg_eig


@autocasts(Autocast.FP32)
def eig(A) -> EigResult:  # noqa: N803  (PyTorch's name)
    """``torch.linalg.eig``: the eigenvalues and eigenvectors (unit columns) of each square
    matrix of ``A`` (..., n, n), complex (complex64 for float32). The gradient assumes
    distinct eigenvalues and a loss that does not depend on the eigenvectors' phases, as
    PyTorch's."""
    return EigResult(*apply(EIG, to_tensor(A)))


@autocasts(Autocast.FP32)
def eigvals(A):  # noqa: N803
    """``torch.linalg.eigvals``: the (complex) eigenvalues of each square matrix of ``A``."""
    return apply(EIG, to_tensor(A))[0]
