"""Reparameterized Gamma draws (PyTorch's ``_standard_gamma`` with its gradient), which Gamma,
Chi2, InverseGamma, Beta, Dirichlet and StudentT build their ``rsample`` on.

A draw ``x ~ Gamma(alpha, 1)`` comes from PyTorch's sampler on ember's default generator
(random_streams.standard_gamma, eagerly: a seed gives PyTorch's draws); its derivative in
``alpha`` is the implicit reparameterization gradient ``dx/dalpha = -(dP(alpha, x)/dalpha) /
p(x; alpha)``, ``P`` the regularized lower incomplete
gamma function, ``p`` the density (Figurnov et al., 2018). ``dP/dalpha`` is summed exactly from
P's series ``P = sum_n t_n``, ``t_n = x^(alpha+n) e^-x / Gamma(alpha+n+1)``, whose terms have the
derivatives ``t_n (log x - digamma(alpha+n+1))``, in float64 until the terms no longer count.
The result is ``x + (alpha - alpha.detach()) * dx/dalpha``: the draw's value, with that
derivative on the tape (a first derivative; as PyTorch's, not differentiable again)."""

from __future__ import annotations

import numpy as np

from .. import random_streams as streams
from ..grad_mode import no_grad
from ..random import default_generator
from ._util import E

__all__: list[str] = []


def _lgamma(a):
    from scipy.special import gammaln

    return gammaln(a)


def _digamma(a):
    from scipy.special import psi

    return psi(a)


def dx_dalpha(x: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """``dx/dalpha`` of Gamma(alpha, 1) draws ``x`` (float64 arrays of one shape)."""
    x = np.maximum(x, np.finfo(np.float64).tiny)
    log_x = np.log(x)
    total = np.zeros_like(x)  # P's series, and its derivative in alpha
    deriv = np.zeros_like(x)
    # past n = x - alpha the terms fall at least geometrically; a few hundred terms beyond
    # that point are far below float64's resolution of the sum
    n_max = int(np.max(np.maximum(x - alpha, 0.0)) + 12.0 * np.sqrt(np.max(x)) + 60)
    for n in range(n_max):
        a_n = alpha + n
        term = np.exp(a_n * log_x - x - _lgamma(a_n + 1.0))
        total += term
        deriv += term * (log_x - _digamma(a_n + 1.0))
        if n > np.max(x - alpha) and np.all(term <= 1e-17 * total):
            break
    log_pdf = (alpha - 1.0) * log_x - x - _lgamma(alpha)
    return -deriv / np.exp(log_pdf)


def standard_gamma(concentration, shape: tuple, *, double_draws: bool = False):
    """Gamma(concentration, 1) draws of ``shape`` (``concentration`` broadcast to it),
    differentiable in ``concentration``: PyTorch's ``_standard_gamma`` (or, with
    ``double_draws``, the double draws its Dirichlet sampler makes)."""
    alpha = concentration.expand(*shape)
    with no_grad():
        a = np.array(alpha.detach().numpy(), dtype=np.float64)  # (0-d stays 0-d)
        float32 = not double_draws and concentration.dtype.np != np.float64
        x = streams.standard_gamma(a, default_generator, float32)
    dtype = concentration.dtype.np
    # (a draw rounded to zero would leave log_prob -inf: the smallest positive value instead)
    x = np.maximum(x, np.finfo(dtype).tiny)
    draw = E.tensor(x.astype(dtype))
    if not alpha.requires_grad:
        return draw
    grad = E.tensor(dx_dalpha(x, a).astype(dtype))
    return draw + (alpha - alpha.detach()) * grad


def dirichlet_draws(concentration, shape: tuple) -> np.ndarray:
    """PyTorch's ``_sample_dirichlet`` of ``concentration`` expanded to ``shape``: double
    gamma draws (at least the smallest normal double), each row divided by its sum in double,
    then rounded to the dtype and kept within [its smallest normal value, the float below
    1]."""
    dtype = concentration.dtype.np
    with no_grad():
        a = np.array(concentration.expand(*shape).detach().numpy(), dtype=np.float64)
    g = np.maximum(streams.standard_gamma(a, default_generator, False), np.finfo(np.float64).tiny)
    values = (g / g.sum(-1, keepdims=True)).astype(dtype)
    below_one = np.nextafter(dtype.type(1), dtype.type(0))
    return np.clip(values, np.finfo(dtype).tiny, below_one)
