"""Helpers the distributions share, written in ember ops (so they carry gradients eagerly and
record under capture): broadcasting parameters, probabilities <-> logits, and the ops they
use by name (``lgamma``, ``digamma``, ``erfinv``, ``xlogy``, the Cholesky factorization and
triangular solve, which raise the distributions' error).
"""

from __future__ import annotations

import numpy as np

from ..dtypes import get_default_dtype
from ..errors import EmberError, LinAlgError, ShapeError
from ..ops import PUBLIC as _PUBLIC
from ..ops._registry import TensorBase, building_graph
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
    """Whether every tensor holds data and ops on them run now (validation reads values; under
    capture it cannot: even an eager tensor, a parameter, gives a graph value there)."""
    if building_graph():
        return False
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


def finfo_tiny(dtype) -> float:
    return float(np.finfo(dtype.np).tiny)


def clipped_sigmoid(x):
    """PyTorch's ``_clipped_sigmoid``: the sigmoid kept inside (0, 1), bounded below by the
    dtype's smallest normal number (not its eps: the small probabilities stay distinct, so a
    log-density far in the tail is the value's, not eps's) and above by ``1 - eps``."""
    return x.sigmoid().clamp(min=finfo_tiny(x.dtype), max=1 - finfo_eps(x.dtype))


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
    """``x * log(y)``, 0 where ``x == 0`` (`ember.xlogy`)."""
    return E.xlogy(x, y)


def lgamma(x):
    """``log|Gamma(x)|`` (`ember.lgamma`)."""
    return E.lgamma(x)


def digamma(x):
    """``d/dx lgamma(x)`` (`ember.digamma`)."""
    return E.digamma(x)


def erfinv(y):
    """The inverse of ``erf`` (`ember.erfinv`)."""
    return E.erfinv(y)


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
