"""``ember.nn.utils.parametrizations``: `weight_norm` and `spectral_norm` as parametrizations
(nn/utils/parametrize.py), with PyTorch's formulas and state_dict keys (and `orthogonal`,
defined in nn/utils/_orthogonal.py):

* weight_norm: ``w = g * v / ||v||``, the norm over every dimension but ``dim`` (over all of
  them with ``dim=None``, stored as -1 as PyTorch does); ``parametrizations.weight.original0``
  is ``g``, ``original1`` is ``v``.
* spectral_norm: ``w / sigma(w)``, ``sigma`` estimated by power iteration on the weight seen as
  a matrix (``dim`` first); ``parametrizations.weight.original`` is the weight,
  ``parametrizations.weight.0._u`` / ``_v`` the singular-vector estimates, updated in place by
  ``n_power_iterations`` steps at every read in training mode. Their starting values are random
  (as in PyTorch); load a state_dict to reproduce another run.
"""

from __future__ import annotations

from ...autograd import no_grad
from ...errors import ArgumentError
from ...ops import api as E
from ...tensor import Tensor
from .. import functional as F
from ..conv import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from ..module import Module
from . import parametrize
from ._orthogonal import orthogonal

__all__ = ["orthogonal", "spectral_norm", "weight_norm"]


def _norm_except_dim(v, dim: int):
    """PyTorch's ``norm_except_dim(v, 2, dim)``: dim -1 is the norm of the whole tensor (0-D)."""
    if dim == -1:
        return (v * v).sum().sqrt()
    axes = tuple(d for d in range(v.ndim) if d != dim)
    return (v * v).sum(axes, keepdim=True).sqrt()


class _WeightNorm(Module):
    def __init__(self, dim: int | None = 0) -> None:
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g, weight_v):
        return weight_v * (weight_g / _norm_except_dim(weight_v, self._axis(weight_v)))

    def right_inverse(self, weight):
        return _norm_except_dim(weight, self._axis(weight)), weight

    def _axis(self, v) -> int:
        return self.dim if self.dim >= -1 else self.dim + v.ndim


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Reparametrize ``module.<name>`` as ``g * v / ||v||`` (magnitude ``g`` and direction
    ``v`` trained separately). Returns ``module``."""
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)
    return module


def weight_matrix(weight, dim: int):
    """``weight`` as the matrix spectral normalization takes the norm of: ``dim`` first, the
    other dimensions flattened (both forms of spectral_norm)."""
    if dim != 0:
        weight = weight.permute(dim, *(d for d in range(weight.ndim) if d != dim))
    return weight.reshape((weight.shape[0], -1))


class _SpectralNorm(Module):
    def __init__(
        self, weight: Tensor, n_power_iterations: int = 1, dim: int = 0, eps: float = 1e-12
    ) -> None:
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError(
                f"Dimension out of range (expected to be in range of [-{ndim}, {ndim - 1}] but "
                f"got {dim})"
            )
        if n_power_iterations <= 0:
            raise ArgumentError(
                "Expected n_power_iterations to be positive, but got "
                f"n_power_iterations={n_power_iterations}"
            )
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            matrix = self._matrix(weight.detach())
            h, w = matrix.shape
            u = E.randn(h, dtype=weight.dtype)
            v = E.randn(w, dtype=weight.dtype)
            self.register_buffer("_u", F.normalize(u, dim=0, eps=eps))
            self.register_buffer("_v", F.normalize(v, dim=0, eps=eps))
            # start close to the top singular vectors, as PyTorch does
            self._power_method(matrix, 15)

    def _matrix(self, weight):
        return weight_matrix(weight, self.dim)

    def _power_method(self, matrix, iterations: int) -> None:
        with no_grad():
            matrix = matrix.detach()
            for _ in range(iterations):
                self._u.copy_(F.normalize(E.mv(matrix, self._v), dim=0, eps=self.eps))
                self._v.copy_(F.normalize(E.mv(matrix.T, self._u), dim=0, eps=self.eps))

    def forward(self, weight):
        if weight.ndim == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        matrix = self._matrix(weight)
        if self.training:
            self._power_method(matrix, self.n_power_iterations)
        u, v = self._u.clone(), self._v.clone()
        sigma = (u * E.mv(matrix, v)).sum()
        return weight / sigma

    def right_inverse(self, value):
        # the singular vectors are estimated from the stored weight itself
        return value


def spectral_norm(
    module: Module,
    name: str = "weight",
    n_power_iterations: int = 1,
    eps: float = 1e-12,
    dim: int | None = None,
) -> Module:
    """Reparametrize ``module.<name>`` as ``w / sigma(w)`` (its largest singular value, by power
    iteration). ``dim`` defaults to 1 for transposed convolutions, 0 otherwise. Returns
    ``module``."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ArgumentError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        transposed = (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)
        dim = 1 if isinstance(module, transposed) else 0
    parametrize.register_parametrization(
        module, name, _SpectralNorm(weight, n_power_iterations, dim, eps)
    )
    return module
