"""``torch.cholesky_solve`` and ``torch.cholesky_inverse`` as one op, ``cholesky_solve``: X
with ``A X = B`` given A's Cholesky factor, lower (``A = L L^H``) or upper (``A = U^H U``).

The value reads only the factor's triangle (two triangular solves, BLAS's trsm as PyTorch's
LAPACK potrs). The gradient is PyTorch's formula, that of the full matrix ``L`` in ``A = L L^H``:
``-(C + C^H) L`` with ``C = A^{-1} G X^H`` (``-U (C + C^H)`` for an upper factor), nonzero in the
triangle the value never reads, and through the other triangle's values too when the factor
holds any there. This is why it is an op and not two `solve_triangular` calls, whose gradient is
the read triangle's alone. cholesky_inverse is the solve of the identity, so its gradient is
PyTorch's ``-(X (G + G^H) X) L`` too."""

from __future__ import annotations

import numpy as np

from ..errors import DTypeError, ShapeError
from ..types import TensorType
from . import api as E
from ._autocast import Autocast, autocasts
from ._registry import apply, export
from ._rules import Complex
from ._util import fmt_shape
from .decompositions import (
    _broadcast_system,
    _linalg_op,
    _solve_triangular_kernel,
    mH,
    require_matrices,
)
from .promotion import to_tensor


def _infer(b, factor, *, upper):
    require_matrices("cholesky_solve", factor, square=True)
    require_matrices("cholesky_solve", b)
    if tuple(factor.shape[:-2]) != tuple(b.shape[:-2]) or factor.shape[-1] != b.shape[-2]:
        raise ShapeError(
            f"the factor of shape {fmt_shape(factor.shape)} and B of shape "
            f"{fmt_shape(b.shape)} do not form a system (same batch dimensions, n rows in B)",
            op="cholesky_solve",
        )
    if factor.dtype is not b.dtype:
        raise DTypeError(
            f"the factor is {factor.dtype} but B is {b.dtype}; they must have one dtype",
            op="cholesky_solve",
        )
    return TensorType(tuple(b.shape), b.dtype)


def _kernel(b, factor, *, upper):
    lower = np.conj(np.swapaxes(factor, -1, -2)) if upper else factor
    y = _solve_triangular_kernel(lower, b, upper=False, unitriangular=False)
    return _solve_triangular_kernel(
        np.conj(np.swapaxes(lower, -1, -2)), y, upper=True, unitriangular=False
    )


def _vjp(c, g):
    factor, x = c.inputs[1], c.outputs[0]
    upper = c.attrs["upper"]
    gb = apply(CHOLESKY_SOLVE, g, factor, upper=upper)
    common = E.matmul(gb, mH(x))
    common = common + mH(common)
    gf = -E.matmul(factor, common) if upper else -E.matmul(common, factor)
    return gb, gf


CHOLESKY_SOLVE = _linalg_op(
    "cholesky_solve",
    _infer,
    _kernel,
    _vjp,
    "cholesky_solve(B, factor, upper): X with A X = B, A = L L^H from its lower Cholesky factor "
    "(U^H U from an upper one), reading only that triangle; the gradient is PyTorch's, the full "
    "factor's",
    save_inputs=(1,),
    save_outputs=(0,),
    complex=Complex.GRADIENT,
)


@export(method=True)
@autocasts(Autocast.FP32)
def cholesky_solve(input, input2, upper: bool = False):
    """``torch.cholesky_solve``: X with ``A X = input`` (..., n, k), given A's Cholesky factor
    ``input2`` (lower, ``A = L L^H``, or upper with ``upper=True``, ``A = U^H U``); batch
    dimensions broadcast. Only the factor's triangle is read; the gradient is PyTorch's, that
    of a full matrix ``L`` in ``A = L L^H`` (nonzero in the other triangle too)."""
    factor, b = to_tensor(input2), to_tensor(input)
    require_matrices("cholesky_solve", factor, square=True)
    require_matrices("cholesky_solve", b)
    factor, b = _broadcast_system("cholesky_solve", factor, b)
    return apply(CHOLESKY_SOLVE, b, factor, upper=bool(upper))


@export(method=True)
@autocasts(Autocast.FP32)
def cholesky_inverse(input, upper: bool = False):
    """``torch.cholesky_inverse``: the inverse of ``A = L L^H`` (``U^H U`` with ``upper``) from
    its Cholesky factor ``input`` (..., n, n): the solve of the identity, as `cholesky_solve`
    (only the triangle read, PyTorch's gradient of the full factor)."""
    factor = to_tensor(input)
    require_matrices("cholesky_inverse", factor, square=True)
    n = factor.shape[-1]
    eye = E.broadcast_to(E.eye(n, dtype=factor.dtype), tuple(factor.shape))
    return apply(CHOLESKY_SOLVE, eye, factor, upper=bool(upper))
