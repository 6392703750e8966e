"""``ember.distributions``: PyTorch's probability distributions (``torch.distributions``), with
its names, signatures and semantics.

Everything differentiable (``log_prob``, ``entropy``, ``rsample``, moments, ``kl_divergence``)
is written in ember ops, so it carries gradients on the tape and records under
``ember.function`` capture. Where ember differs from PyTorch:

* Gamma, Beta, Dirichlet and StudentT have no ``rsample`` (PyTorch's implicit
  reparameterization is not implemented); they, Poisson and Binomial ``sample`` with NumPy's
  samplers on ember's default generator, eagerly only.
* Categorical samples by inverting the cumulative probabilities, so a seed gives other draws
  than PyTorch's multinomial sampler (same distribution).
* ``lgamma``/``digamma`` (Gamma, Beta, Poisson, Binomial) and MultivariateNormal's Cholesky
  factor and triangular solves are composites of ember ops in ``_util.py`` (ember has no such
  primitives yet). Normal's ``icdf`` (needs ``erfinv``) and Cauchy's ``cdf`` (needs ``atan``)
  are not implemented.
* Validation errors are `ConstraintError` (an ember error and a ``ValueError``, which PyTorch
  raises); validation reads values, so under capture it is skipped.
"""

from . import constraints, utils
from ._util import ConstraintError
from .continuous import Beta, Exponential, Gamma, Laplace, Normal, StudentT, Uniform
from .discrete import Bernoulli, Binomial, Categorical, OneHotCategorical, Poisson
from .distribution import Distribution
from .kl import kl_divergence, register_kl
from .mixture import Cauchy, Dirichlet, MixtureSameFamily
from .multivariate import Independent, MultivariateNormal
from .relaxed import (
    ExpRelaxedCategorical,
    Geometric,
    Gumbel,
    HalfNormal,
    LogitRelaxedBernoulli,
    RelaxedBernoulli,
    RelaxedOneHotCategorical,
)
from .transforms import (
    AffineTransform,
    ComposeTransform,
    ExpTransform,
    LogNormal,
    SigmoidTransform,
    TanhTransform,
    Transform,
    TransformedDistribution,
)

__all__ = [
    "AffineTransform",
    "Bernoulli",
    "Beta",
    "Binomial",
    "Categorical",
    "Cauchy",
    "ComposeTransform",
    "ConstraintError",
    "Dirichlet",
    "Distribution",
    "Exponential",
    "ExpRelaxedCategorical",
    "ExpTransform",
    "Gamma",
    "Geometric",
    "Gumbel",
    "HalfNormal",
    "Independent",
    "Laplace",
    "LogitRelaxedBernoulli",
    "LogNormal",
    "MixtureSameFamily",
    "MultivariateNormal",
    "Normal",
    "OneHotCategorical",
    "Poisson",
    "RelaxedBernoulli",
    "RelaxedOneHotCategorical",
    "SigmoidTransform",
    "StudentT",
    "TanhTransform",
    "Transform",
    "TransformedDistribution",
    "Uniform",
    "constraints",
    "kl_divergence",
    "register_kl",
    "utils",
]
