"""`ExponentialFamily`, PyTorch's base of the distributions whose density is
``exp(<t(x), theta> - F(theta) + k(x))``: a member gives its natural parameters theta
(``_natural_params``), its log normalizer F (``_log_normalizer``) and the expected carrier
measure E[k(x)] (``_mean_carrier_measure``); the base derives the entropy from them through the
Bregman divergence of F (its gradient by autograd), and `kl_expfamily_expfamily`, which kl.py
registers, the KL between two members of one family the same way (Nielsen and Nock, Entropies
and Cross-entropies of Exponential Families), as ``torch.distributions.ExponentialFamily``.
"""

from __future__ import annotations

from ..autograd_grad import grad
from ..grad_mode import enable_grad
from ._util import sum_rightmost
from .distribution import Distribution

__all__ = ["ExponentialFamily", "kl_expfamily_expfamily"]


class ExponentialFamily(Distribution):
    """A distribution of an exponential family (see the module docstring)."""

    @property
    def _natural_params(self) -> tuple:
        raise NotImplementedError(f"{type(self).__name__} does not give its natural parameters")

    def _log_normalizer(self, *natural_params):
        raise NotImplementedError(f"{type(self).__name__} does not give its log normalizer")

    @property
    def _mean_carrier_measure(self):
        raise NotImplementedError(
            f"{type(self).__name__} does not give its expected carrier measure"
        )

    def entropy(self):
        """``-E[k(x)] + F(theta) - <theta, grad F(theta)>``, summed over each parameter's
        event dimensions."""
        result = -self._mean_carrier_measure
        with enable_grad():
            params = [p.detach().requires_grad_() for p in self._natural_params]
            normalizer = self._log_normalizer(*params)
            gradients = grad(normalizer.sum(), params, create_graph=True)
        result = result + normalizer
        for p, g in zip(params, gradients):
            result = result - (p * g).reshape(*self._batch_shape, -1).sum(-1)
        return result


def kl_expfamily_expfamily(p, q):
    """``F(theta_q) - F(theta_p) - <theta_q - theta_p, grad F(theta_p)>``, for p and q of one
    family (registered for every pair of members by kl.py)."""
    if type(p) is not type(q):
        raise NotImplementedError(
            "the KL divergence between different exponential families "
            f"({type(p).__name__}, {type(q).__name__}) cannot be computed with Bregman "
            "divergences"
        )
    with enable_grad():
        p_params = [t.detach().requires_grad_() for t in p._natural_params]
        normalizer = p._log_normalizer(*p_params)
        gradients = grad(normalizer.sum(), p_params, create_graph=True)
    q_params = q._natural_params
    result = q._log_normalizer(*q_params) - normalizer
    for pp, qp, g in zip(p_params, q_params, gradients):
        result = result - sum_rightmost((qp - pp) * g, len(q.event_shape))
    return result
