"""Householder reflectors: PyTorch's ``torch.geqrf`` (a primitive: LAPACK's geqrf through
SciPy, the QR factorization in its packed form, R on and above the diagonal, the reflectors'
vectors below it, and their scalars ``tau``) and ``torch.linalg.householder_product`` /
``torch.orgqr`` (a composite: the first n columns of ``H_1 H_2 ... H_k``, ``H_i = I - tau_i
v_i v_i^T``, each reflector applied to the identity's columns in ember ops, so it
differentiates in both operands through them).

As PyTorch's, ``geqrf`` has no derivative (backward raises) and both take float32 or float64
matrices (PyTorch also takes complex ones; ember's linear algebra is real here)."""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from .. import return_types
from ..errors import ArgumentTypeError, DTypeError, ShapeError
from ..types import TensorType
from . import api as E
from ._registry import OpDef, apply, export, register
from ._util import fmt_shape
from .decompositions import cubic_cost, require_matrices
from .promotion import to_tensor

# ----------------------------------------------------------------------------------- geqrf


def _geqrf_infer(a):
    require_matrices("geqrf", a)
    k = min(a.shape[-2], a.shape[-1])
    return TensorType(tuple(a.shape), a.dtype), TensorType(tuple(a.shape[:-2]) + (k,), a.dtype)


def _geqrf_kernel(a):
    from scipy.linalg import qr

    k = min(a.shape[-2], a.shape[-1])
    packed = np.zeros(a.shape, a.dtype)
    tau = np.zeros(a.shape[:-2] + (k,), a.dtype)
    if a.size == 0:
        return packed, tau
    for index in np.ndindex(*a.shape[:-2]):
        (p, t), _ = qr(a[index], mode="raw", check_finite=False)
        packed[index], tau[index] = p, t
    return packed, tau


GEQRF = register(
    OpDef(
        name="geqrf",
        kind="linalg",
        infer=_geqrf_infer,
        kernel=_geqrf_kernel,
        vjp=None,  # PyTorch: "the derivative for 'geqrf' is not implemented"
        cost=cubic_cost,
        num_outputs=2,
        batch=None,
        doc="geqrf(A): LAPACK's packed QR factorization (reflectors below R) and its taus",
    )
)


@export(method=True)
def geqrf(input):
    """``torch.geqrf``: ``(a, tau)``, LAPACK's packed QR of each matrix of ``input`` (...,
    m, n): R on and above the diagonal, the Householder vectors (unit leading entry implied)
    below it, and their scalars tau (..., min(m, n)). No gradient (as PyTorch's)."""
    return return_types.geqrf(*apply(GEQRF, to_tensor(input)))


# ----------------------------------------------------------------------- householder_product

_OP = "torch.linalg.householder_product"


def _check(A, tau):
    if A.ndim < 2:
        raise ShapeError(
            f"input must have at least 2 dimensions, got shape {fmt_shape(A.shape)}", op=_OP
        )
    if tau.ndim != A.ndim - 1:
        raise ShapeError(
            "Expected tau to have one dimension less than input, but got tau.ndim equal to "
            f"{tau.ndim} and input.ndim is equal to {A.ndim}",
            op=_OP,
        )
    m, n = A.shape[-2], A.shape[-1]
    if m < n:
        raise ShapeError(
            f"input.shape[-2] must be greater than or equal to input.shape[-1] (input of "
            f"shape {fmt_shape(A.shape)})",
            op=_OP,
        )
    if n < tau.shape[-1]:
        raise ShapeError(
            f"input.shape[-1] must be greater than or equal to tau.shape[-1] (input "
            f"{fmt_shape(A.shape)}, tau {fmt_shape(tau.shape)})",
            op=_OP,
        )
    if tuple(tau.shape[:-1]) != tuple(A.shape[:-2]):
        raise ShapeError(
            "Expected batch dimensions of tau to be equal to input.shape[:-2], but got "
            f"{list(tau.shape[:-1])}",
            op=_OP,
        )
    if A.dtype not in (dt.float32, dt.float64):
        raise DTypeError(f"expected float32 or float64 operands, got {A.dtype}", op=_OP)
    if tau.dtype is not A.dtype:
        raise DTypeError(f"tau dtype {tau.dtype} does not match input dtype {A.dtype}", op=_OP)


def householder_product(A, tau, *, out=None):
    """``torch.linalg.householder_product``: the first n columns of the product of the
    Householder reflectors ``H_i = I - tau_i v_i v_i^T`` (i < k = tau.shape[-1]) whose vectors
    are the columns of A (..., m, n), m >= n, below the diagonal with a unit entry on it.
    Differentiable in A and tau (composed of ember ops)."""
    if out is not None:
        raise ArgumentTypeError(
            "householder_product: out= is not supported (ember has no out tensors)"
        )
    A, tau = to_tensor(A), to_tensor(tau)
    _check(A, tau)
    m, n, k = A.shape[-2], A.shape[-1], tau.shape[-1]
    batch = tuple(A.shape[:-2])
    Q = E.broadcast_to(E.eye(m, n, dtype=A.dtype), batch + (m, n))
    rows = E.arange(m)
    for i in reversed(range(k)):
        column = E.select(A, -1, i)  # (..., m)
        v = E.where(rows > i, column, E.cast(rows == i, A.dtype))
        t = E.unsqueeze(E.unsqueeze(E.select(tau, -1, i), -1), -1)
        vQ = E.unsqueeze(E.sum(E.unsqueeze(v, -1) * Q, -2), -2)  # (..., 1, n): v^T Q
        Q = Q - t * (E.unsqueeze(v, -1) * vQ)
    if k == 0:  # no reflector: the identity's columns, still a result of A (as PyTorch's)
        Q = E.where(E.zeros((), dtype=dt.bool_), A, Q)
    return Q


@export(method=True)
def orgqr(input, input2):
    """``torch.orgqr``: `householder_product` (``input`` the reflectors, ``input2`` tau)."""
    return householder_product(input, input2)
