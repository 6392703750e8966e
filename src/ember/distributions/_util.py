"""Helpers the distributions share, written in ember ops (so they carry gradients eagerly and
record under capture): broadcasting parameters, probabilities <-> logits, ``lgamma`` /
``digamma`` for positive arguments, the Cholesky factorization and triangular solve (ember's
linalg ops, with the distributions' error).
"""

from __future__ import annotations

import math

import numpy as np

from ..dtypes import get_default_dtype
from ..errors import EmberError, LinAlgError, ShapeError
from ..ops import PUBLIC as _PUBLIC
from ..ops._registry import TensorBase
from ..ops.decompositions import cholesky as _cholesky
from ..ops.decompositions import solve_triangular as _solve_triangular


class _Ops:
    """``E.exp(x)`` is ``ember.exp(x)``: the ops by their public names."""

    def __getattr__(self, name):
        return _PUBLIC[name]


E = _Ops()


class ConstraintError(EmberError, ValueError):
    """A distribution's parameter or value is outside its constraint (PyTorch: ValueError)."""


def is_tensor(x) -> bool:
    return isinstance(x, TensorBase)


def is_eager(*values) -> bool:
    """Whether every tensor holds data (validation reads values; under capture it cannot)."""
    return all(hasattr(v, "_data") for v in values if is_tensor(v))


def as_tensor(x, like=None):
    if is_tensor(x):
        return x
    dtype = like.dtype if like is not None else get_default_dtype()
    return E.tensor(np.asarray(x, dtype=dtype.np))


def broadcast_all(*values):
    """Tensors and numbers broadcast to one shape; numbers take the tensors' dtype (else the
    default dtype), as ``torch.distributions.utils.broadcast_all``."""
    like = next((v for v in values if is_tensor(v)), None)
    if like is not None and not like.dtype.is_floating_point:
        like = None
    tensors = [as_tensor(v, like) for v in values]
    try:
        shape = np.broadcast_shapes(*[tuple(t.shape) for t in tensors])
    except ValueError:
        raise ShapeError(
            f"the parameters' shapes {[tuple(t.shape) for t in tensors]} do not broadcast",
            op="distributions",
        ) from None
    return tuple(t if tuple(t.shape) == shape else E.broadcast_to(t, shape) for t in tensors)


def sum_rightmost(x, dim: int):
    if dim == 0:
        return x
    return x.reshape(*x.shape[: x.ndim - dim], -1).sum(-1)


def finfo_eps(dtype) -> float:
    return float(np.finfo(dtype.np).eps)


def clamp_probs(probs):
    eps = finfo_eps(probs.dtype)
    return probs.clamp(eps, 1 - eps)


def logits_to_probs(logits, is_binary: bool = False):
    if is_binary:
        return logits.sigmoid()
    return E.softmax(logits, -1)


def probs_to_logits(probs, is_binary: bool = False):
    ps = clamp_probs(probs)
    if is_binary:
        return ps.log() - (-ps).log1p()
    return ps.log()


def xlogy(x, y):
    """``x * log(y)``, 0 where ``x == 0``."""
    return E.where(x == 0, E.zeros_like(x * y), x * y.log())


# Stirling series after shifting the argument up by _SHIFT with the recurrences
# lgamma(x) = lgamma(x + 1) - log(x), digamma(x) = digamma(x + 1) - 1/x: at x + _SHIFT >= 10 the
# truncated series are accurate to about 1e-15.
_SHIFT = 10
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def lgamma(x):
    """``log|Gamma(x)|`` for ``x > 0``, in ember ops (differentiable: its derivative is the
    series' derivative, a digamma as accurate)."""
    shift = 0
    for k in range(_SHIFT):
        shift = shift + (x + k).log()
    z = x + _SHIFT
    r = z.reciprocal()
    r2 = r * r
    series = r * (
        1 / 12
        + r2
        * (-1 / 360 + r2 * (1 / 1260 + r2 * (-1 / 1680 + r2 * (1 / 1188 + r2 * (-691 / 360360)))))
    )
    return (z - 0.5) * z.log() - z + _HALF_LOG_2PI + series - shift


def digamma(x):
    """``d/dx lgamma(x)`` for ``x > 0``, in ember ops."""
    shift = 0
    for k in range(_SHIFT):
        shift = shift + (x + k).reciprocal()
    z = x + _SHIFT
    r = z.reciprocal()
    r2 = r * r
    series = r2 * (
        1 / 12
        + r2 * (-1 / 120 + r2 * (1 / 252 + r2 * (-1 / 240 + r2 * (1 / 132 + r2 * (-691 / 32760)))))
    )
    return z.log() - 0.5 * r - series - shift


_GILES_CENTRAL = (
    2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
    -0.00125372503, -0.00417768164, 0.246640727, 1.50140941,
)  # fmt: skip
_GILES_TAIL = (
    -0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
    -0.0076224613, 0.00943887047, 1.00167406, 2.83297682,
)  # fmt: skip


def _horner(coefficients, w):
    p = coefficients[0]
    for c in coefficients[1:]:
        p = p * w + c
    return p


def erfinv(y):
    """The inverse of ``erf`` on (-1, 1), in ember ops: M. Giles' single-precision
    approximation refined by two Newton steps on ``erf`` (each roughly doubles the correct
    digits); differentiable, its derivative converging to ``sqrt(pi)/2 exp(x^2)``."""
    w = -((1 - y) * (1 + y)).log()
    central = _horner(_GILES_CENTRAL, w - 2.5)
    tail = _horner(_GILES_TAIL, w.clamp(min=5.0).sqrt() - 3.0)
    x = E.where(w < 5.0, central, tail) * y
    for _ in range(2):
        x = x - (E.erf(x) - y) / ((2 / math.sqrt(math.pi)) * (-x * x).exp())
    return x


# ------------------------------------------------------------------------ linear algebra


def _eye_like(a, n: int):
    return E.eye(n, dtype=a.dtype)


def diagonal(a):
    """The diagonal of the last two dimensions."""
    return (a * _eye_like(a, a.shape[-1])).sum(-1)


def cholesky(a):
    """The lower Cholesky factor of symmetric positive-definite matrices ``(..., n, n)``
    (`ember.linalg.cholesky`); a matrix that is not positive-definite is a `ConstraintError`,
    as a distribution's parameter outside its constraint."""
    try:
        return _cholesky(a)
    except LinAlgError as error:
        raise ConstraintError(
            f"the matrix is not positive-definite: {error.detail}", op="cholesky"
        ) from error


def solve_lower(lower, b):
    """``X`` with ``lower @ X == b`` for lower-triangular ``lower (..., n, n)`` and
    ``b (..., n, k)`` (batch dimensions broadcast)."""
    return _solve_triangular(lower, b, upper=False)


def batch_mahalanobis(lower, x):
    """``x^T (L L^T)^{-1} x`` over the last dimension."""
    return solve_lower(lower, x.unsqueeze(-1)).squeeze(-1).pow(2).sum(-1)


def precision_to_scale_tril(p):
    lf = cholesky(p.flip((-2, -1)))
    l_inv = lf.flip((-2, -1)).transpose(-2, -1)
    return solve_lower(l_inv, _eye_like(p, p.shape[-1]))
