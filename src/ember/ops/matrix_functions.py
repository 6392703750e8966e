"""The matrix exponential: the primitive ``matrix_exp`` behind ``ember.linalg.matrix_exp``,
``ember.matrix_exp`` and ``Tensor.matrix_exp`` (the namespace is ember/linalg.py).

The kernel is SciPy's ``expm`` (scaling and squaring with Pade approximants, as PyTorch's);
the VJP is PyTorch's: the gradient ``G`` of ``exp(A)`` is the upper-right block of
``exp([[A^T, G], [0, A^T]])``, computed by the same op, so it differentiates again."""

from __future__ import annotations

import numpy as np

from ..errors import DTypeError, ShapeError
from ..types import TensorType
from . import api as E
from ._registry import apply, export
from ._rules import Complex
from ._util import fmt_shape
from .decompositions import _linalg, _linalg_op, mH
from .promotion import to_tensor


def _infer(a):
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ShapeError(
            f"expected square matrices (at least 2 dimensions), got shape {fmt_shape(a.shape)}",
            op="linalg.matrix_exp",
        )
    if not (a.dtype.is_floating_point or a.dtype.is_complex):
        raise DTypeError(
            f"expected a floating-point or complex tensor, got {a.dtype} (as PyTorch)",
            op="linalg.matrix_exp",
        )
    return TensorType(tuple(a.shape), a.dtype)


def _kernel(a):
    out = np.empty(a.shape, a.dtype)
    # (half precision computed in float64, then rounded once)
    work = a if a.dtype in (np.float32, np.float64) or a.dtype.kind == "c" else a.astype(np.float64)
    for index in np.ndindex(*a.shape[:-2]):
        out[index] = _linalg().expm(work[index])
    return out


def _vjp(c, g):
    a = c.inputs[0]
    n = a.shape[-1]
    at = mH(a)  # (PyTorch's: the exponential's derivative at A^H applied to g)
    top = E.concat([at, g], -1)
    bottom = E.concat([E.zeros_like(at), at], -1)
    block = apply(MATRIX_EXP, E.concat([top, bottom], -2))
    return (E.narrow(E.narrow(block, -2, 0, n), -1, n, n),)


MATRIX_EXP = _linalg_op(
    "matrix_exp",
    _infer,
    _kernel,
    _vjp,
    "matrix_exp(A): the matrix exponential of a (batch of) square matrices",
    complex=Complex.GRADIENT,
)


def matrix_exp(A):
    """``torch.linalg.matrix_exp``: the exponential ``sum_k A^k / k!`` of each square matrix
    of ``A`` (..., n, n). Gradient as PyTorch's (a block-matrix exponential). float16 and
    bfloat16 are computed in float64 and rounded once (where ember differs: PyTorch computes
    them in half precision, which returns inf for results of a few units)."""
    return apply(MATRIX_EXP, to_tensor(A))


@export(name="matrix_exp", method="matrix_exp")
def _matrix_exp(input):
    """``torch.matrix_exp``: `ember.linalg.matrix_exp`."""
    return matrix_exp(input)
