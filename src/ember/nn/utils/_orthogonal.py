"""``parametrizations.orthogonal``: PyTorch's orthogonal parametrization of a matrix (or a batch
of them), with its three maps and its "dynamic trivialization".

The original tensor X (..., n, k), taken transposed when wide, maps to an orthogonal Q:

* ``matrix_exp`` / ``cayley``: ``A = Y - Y^T`` with Y the lower triangle of X padded to n x n;
  ``Q = exp(A)`` or the Cayley retraction ``(I - A/2)^{-1} (I + A/2)``, its first k columns;
* ``householder``: the reflectors below X's diagonal with ``tau = 2 / (1 + |v|^2)``
  (linalg.householder_product), the columns' signs X's diagonal truncated to integers.

With ``use_trivialization=True`` (the default) Q is ``base @ map(X)``: ``base`` (a buffer,
``parametrizations.<name>[0].base``) holds the orthogonal starting point, and
``right_inverse`` (run when the parametrization is registered and when the tensor is
assigned) sets ``base`` to the given matrix, orthogonalized by QR with diag(R) >= 0 if it is
not orthogonal (a tall one completed by random columns first), and X to ``-I``, so the map
starts at the identity. Without it, only the Householder map can be assigned (X from geqrf).
The state_dict keys and the arithmetic are PyTorch's; only the random completion's numbers
differ.
"""

from __future__ import annotations

from ... import dtypes as dt
from ...autograd import no_grad
from ...errors import ArgumentError
from ...ops import api as E
from ...ops.decompositions import solve
from ...ops.householder import geqrf, householder_product
from ...tensor import Tensor
from ...typeinfo import finfo
from ..module import Module
from . import parametrize

_MAPS = ("matrix_exp", "cayley", "householder")


def _is_orthogonal(Q) -> bool:
    n, k = Q.shape[-2], Q.shape[-1]
    eye = E.eye(k, dtype=Q.dtype)
    eps = 10.0 * n * finfo(Q.dtype).eps
    return bool(E.allclose(Q.mT @ Q, eye, atol=eps))


def _make_orthogonal(A):
    """The Q of A = QR (A tall) with diag(R) >= 0 (PyTorch's: geqrf, householder_product)."""
    X, tau = geqrf(A)
    Q = householder_product(X, tau)
    return Q * E.unsqueeze(E.sgn(E.diagonal(X, 0, -2, -1)), -2)


def _with_diagonal(A, d):
    """A (..., n, k) with its diagonal replaced by d (..., k)."""
    on = E.eye(A.shape[-2], A.shape[-1], dtype=dt.bool_)
    return E.where(on, E.unsqueeze(d, -2), A)


class _Orthogonal(Module):
    def __init__(self, weight, orthogonal_map: str, *, use_trivialization: bool = True) -> None:
        super().__init__()
        if weight.is_complex() and orthogonal_map == "householder":
            raise ArgumentError("The householder parametrization does not support complex tensors.")
        self.shape = tuple(weight.shape)
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def _trivialized(self) -> bool:
        return "base" in self._buffers

    def forward(self, X):
        n, k = X.shape[-2], X.shape[-1]
        transposed = n < k
        if transposed:
            X = X.mT
            n, k = k, n
        if self.orthogonal_map in ("matrix_exp", "cayley"):
            X = E.tril(X)
            if n != k:
                pad = E.zeros(X.shape[:-2] + (n, n - k), dtype=X.dtype)
                X = E.cat([X, pad], -1)
            A = X - X.mH
            if self.orthogonal_map == "matrix_exp":
                Q = E.matrix_exp(A)
            else:
                eye = E.eye(n, dtype=A.dtype)
                Q = solve(eye - 0.5 * A, eye + 0.5 * A)
            if n != k:
                Q = Q[..., :k]
        else:
            A = E.tril(X, -1)
            tau = 2.0 / (1.0 + (A * A).sum(-2))
            Q = householder_product(A, tau)
            signs = E.diagonal(X, 0, -2, -1).detach().to(dt.int32)
            Q = Q * E.unsqueeze(signs, -2)
        if self._trivialized():
            Q = self.base @ Q
        return Q.mT if transposed else Q

    def right_inverse(self, Q):
        with no_grad():
            return self._right_inverse(Q)

    def _right_inverse(self, Q):
        if tuple(Q.shape) != self.shape:
            raise ArgumentError(
                f"Expected a matrix or batch of matrices of shape {self.shape}. "
                f"Got a tensor of shape {tuple(Q.shape)}."
            )
        Q_init = Q
        n, k = Q.shape[-2], Q.shape[-1]
        transpose = n < k
        if transpose:
            Q = Q.mT
            n, k = k, n
        if not self._trivialized():
            if self.orthogonal_map in ("matrix_exp", "cayley"):
                raise NotImplementedError(
                    "It is not possible to assign to the matrix exponential or the Cayley "
                    "parametrizations when use_trivialization=False."
                )
            A, tau = geqrf(Q)
            d = E.sgn(E.diagonal(A, 0, -2, -1))
            d = E.where(tau == 0.0, -d, d)
            A = _with_diagonal(A, d)
            return A.mT if transpose else A
        if n == k:
            Q = Q.clone() if _is_orthogonal(Q) else _make_orthogonal(Q)
        else:
            N = E.randn(*(tuple(Q.shape[:-2]) + (n, n - k)), dtype=Q.dtype)
            Q = _make_orthogonal(E.cat([Q, N], -1))
        self.base = Q
        neg_eye = -E.eye(Q_init.shape[-2], Q_init.shape[-1], dtype=Q_init.dtype)
        return E.broadcast_to(neg_eye, tuple(Q_init.shape)).clone()


def orthogonal(
    module: Module,
    name: str = "weight",
    orthogonal_map: str | None = None,
    *,
    use_trivialization: bool = True,
) -> Module:
    """``torch.nn.utils.parametrizations.orthogonal``: ``module.<name>`` (a matrix or a batch
    of them) becomes orthogonal: orthonormal columns if tall, rows if wide. ``orthogonal_map``:
    ``"matrix_exp"``, ``"cayley"`` or ``"householder"`` (default: matrix_exp for square or
    complex matrices, householder otherwise). Returns ``module``."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ArgumentError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ArgumentError(
            f"Expected a matrix or batch of matrices. Got a tensor of {weight.ndim} dimensions."
        )
    if orthogonal_map is None:
        square = weight.shape[-2] == weight.shape[-1]
        orthogonal_map = "matrix_exp" if square or weight.is_complex() else "householder"
    if orthogonal_map not in _MAPS:
        raise ArgumentError(
            'orthogonal_map has to be one of "matrix_exp", "cayley", "householder". '
            f"Got: {orthogonal_map}"
        )
    orth = _Orthogonal(weight, orthogonal_map, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module
