"""Reparameterized Dirichlet draws (and Beta's, a two-part Dirichlet), with PyTorch's
gradient estimator.

The draw is PyTorch's ``_sample_dirichlet`` (`dirichlet_draws`: a seed gives PyTorch's
values). Its gradient is the one PyTorch's ``_Dirichlet`` function gives: each part ``x_i`` is
marginally ``Beta(alpha_i, total - alpha_i)``, ``total`` the sum of the concentrations, and

    d loss / d alpha_i = D_i * (g_i - sum_j x_j g_j),   D_i = (dx_i / dalpha_i) / (1 - x_i),

``g`` the gradient of the draw and ``dx_i / dalpha_i`` the implicit reparameterization
derivative of that Beta draw with its second parameter held (``-(dI_x(a, b)/da) / p(x; a, b)``,
``I`` the regularized incomplete beta function, ``p`` the density). For a Beta draw (the first
part of two) this is exactly that derivative times ``g``, and the second parameter's gradient
the first part's derivative in it. PyTorch approximates ``D`` by fitted
series and rational functions, to about 1e-3 relative; here it is computed to float64 accuracy
from SciPy's incomplete beta function, by a five-point difference in ``a`` of the smaller of
``I`` and ``1 - I`` (``I_{1-x}(b, a)``), whichever is accurate at ``x``.

Differentiating the normalized gamma draws instead (what a composite ``g / g.sum()`` gives) is
another unbiased estimator, but it is not PyTorch's: its per-draw gradients differed from
PyTorch's by up to tens of percent."""

from __future__ import annotations

import numpy as np

from ..grad_mode import no_grad
from ._gamma_rsample import dirichlet_draws
from ._util import E

__all__: list[str] = []

_STEP = 1e-3  # the difference's step, relative to a (its error is O(step^4))


def beta_dx_da(x: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``dx/da`` of Beta(a, b) draws ``x`` with ``b`` held (float64 arrays of one shape);
    0 where it is not finite (a one-part Dirichlet's ``b = 0``, a density that underflows)."""
    from scipy.special import betainc, betaln

    with np.errstate(all="ignore"):
        lower = betainc(a, b, x) <= 0.5

        def smaller(at):  # I where it is at most 1/2, else I - 1 = -I_{1-x}(b, a): one slope
            return np.where(lower, betainc(at, b, x), -betainc(b, at, 1.0 - x))

        h = _STEP * a
        slope = (
            smaller(a - 2 * h) - 8 * smaller(a - h) + 8 * smaller(a + h) - smaller(a + 2 * h)
        ) / (12 * h)
        log_pdf = (a - 1) * np.log(x) + (b - 1) * np.log1p(-x) - betaln(a, b)
        derivative = -slope / np.exp(log_pdf)
    return np.where(np.isfinite(derivative) & (b > 0), derivative, 0.0)


def dirichlet_rsample(concentration, shape: tuple):
    """Dirichlet(concentration) draws of ``shape`` (the concentration broadcast to it),
    differentiable in ``concentration`` with PyTorch's estimator (module docstring)."""
    draw = E.tensor(dirichlet_draws(concentration, shape))
    if not concentration.requires_grad:
        return draw
    alpha = concentration.expand(*shape)
    with no_grad():
        a = np.array(alpha.detach().numpy(), dtype=np.float64)
        x = np.array(draw.numpy(), dtype=np.float64)
    b = a.sum(-1, keepdims=True) - a
    with np.errstate(all="ignore"):  # (x = 1: a one-part Dirichlet, whose gradient is 0)
        d = np.where(x < 1, beta_dx_da(x, a, b) / (1 - x), 0.0)
    slope = E.tensor(d.astype(concentration.dtype.np))
    # zero-valued, carrying d/dalpha_j = D_j: out_i = x_i + s_i - x_i * sum_j s_j has the
    # Jacobian diag(D) - x D^T, whose transpose gives the gradient above
    s = (alpha - alpha.detach()) * slope
    return draw + s - draw.detach() * s.sum(-1, keepdim=True)
