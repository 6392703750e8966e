"""``ember.distributions``: PyTorch's probability distributions (``torch.distributions``), with
its names, signatures and semantics.

Everything differentiable (``log_prob``, ``entropy``, ``rsample``, moments, ``kl_divergence``)
is written in ember ops, so it carries gradients on the tape and records under
``ember.function`` capture. Where ember differs from PyTorch:

* Every ``sample`` runs PyTorch's algorithm on ember's PyTorch-compatible generator, so a seed
  gives PyTorch's draws (tests/test_distribution_draws_torch.py). VonMises' rejection loop
  reads its draws, so it samples eagerly only; ``rsample``'s gradient is Gamma's implicit
  reparameterization (`_gamma_rsample.py`), Beta's and Dirichlet's PyTorch's estimator
  (`_dirichlet_rsample.py`).
* Validation errors are `ConstraintError` (an ember error and a ``ValueError``, which PyTorch
  raises); validation reads values, so under capture it is skipped.

PyTorch keeps one module per distribution (``from torch.distributions.normal import Normal``);
those paths name the ember module that holds the class (``_TORCH_MODULES`` below).
"""

import sys as _sys

from . import (
    constraint_registry,
    constraints,
    continuous,
    continuous_extra,
    discrete,
    extra,
    extra_discrete,
    kl,
    kl_extra,
    low_rank_mvn,
    matrix,
    mixture,
    multivariate,
    relaxed,
    transforms,
    transforms_extra,
    utils,
)
from . import distribution as _distribution
from ._util import ConstraintError
from .constraint_registry import biject_to, transform_to
from .continuous import Beta, Exponential, Gamma, Laplace, Normal, StudentT, Uniform
from .continuous_extra import (
    ContinuousBernoulli,
    FisherSnedecor,
    GeneralizedPareto,
    LogisticNormal,
    OneHotCategoricalStraightThrough,
)
from .discrete import Bernoulli, Binomial, Categorical, OneHotCategorical, Poisson
from .distribution import Distribution
from .exp_family import ExponentialFamily
from .extra import (
    Chi2,
    HalfCauchy,
    InverseGamma,
    Kumaraswamy,
    Pareto,
    VonMises,
    Weibull,
)
from .extra_discrete import Multinomial, NegativeBinomial
from .kl import kl_divergence, register_kl
from .low_rank_mvn import LowRankMultivariateNormal
from .matrix import LKJCholesky, Wishart
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
from .transforms_extra import (
    AbsTransform,
    CatTransform,
    CorrCholeskyTransform,
    CumulativeDistributionTransform,
    IndependentTransform,
    LowerCholeskyTransform,
    PositiveDefiniteTransform,
    PowerTransform,
    ReshapeTransform,
    SoftmaxTransform,
    SoftplusTransform,
    StackTransform,
    StickBreakingTransform,
    identity_transform,
)

__all__ = [
    "ExponentialFamily",
    "ContinuousBernoulli",
    "FisherSnedecor",
    "GeneralizedPareto",
    "LKJCholesky",
    "LogisticNormal",
    "OneHotCategoricalStraightThrough",
    "Wishart",
    "AbsTransform",
    "CatTransform",
    "CorrCholeskyTransform",
    "CumulativeDistributionTransform",
    "IndependentTransform",
    "LowerCholeskyTransform",
    "PositiveDefiniteTransform",
    "PowerTransform",
    "ReshapeTransform",
    "SoftmaxTransform",
    "SoftplusTransform",
    "StackTransform",
    "StickBreakingTransform",
    "biject_to",
    "constraint_registry",
    "transform_to",
    "Weibull",
    "VonMises",
    "Pareto",
    "NegativeBinomial",
    "Multinomial",
    "LowRankMultivariateNormal",
    "Kumaraswamy",
    "InverseGamma",
    "HalfCauchy",
    "Chi2",
    "AffineTransform",
    "Bernoulli",
    "Beta",
    "Binomial",
    "Categorical",
    "Cauchy",
    "ComposeTransform",
    "identity_transform",
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

_TORCH_MODULES = {
    "distribution": _distribution,
    "normal": continuous,
    "uniform": continuous,
    "laplace": continuous,
    "exponential": continuous,
    "gamma": continuous,
    "beta": continuous,
    "studentT": continuous,
    "bernoulli": discrete,
    "categorical": discrete,
    "one_hot_categorical": discrete,
    "poisson": discrete,
    "binomial": discrete,
    "multivariate_normal": multivariate,
    "independent": multivariate,
    "dirichlet": mixture,
    "cauchy": mixture,
    "mixture_same_family": mixture,
    "gumbel": relaxed,
    "half_normal": relaxed,
    "geometric": relaxed,
    "relaxed_bernoulli": relaxed,
    "relaxed_categorical": relaxed,
    "transformed_distribution": transforms,
    "log_normal": transforms,
    "chi2": extra,
    "half_cauchy": extra,
    "inverse_gamma": extra,
    "kumaraswamy": extra,
    "lowrank_multivariate_normal": low_rank_mvn,
    "multinomial": extra_discrete,
    "negative_binomial": extra_discrete,
    "pareto": extra,
    "von_mises": extra,
    "weibull": extra,
    "continuous_bernoulli": continuous_extra,
    "fishersnedecor": continuous_extra,
    "generalized_pareto": continuous_extra,
    "logistic_normal": continuous_extra,
    "wishart": matrix,
    "lkj_cholesky": matrix,
}
for _name, _module in _TORCH_MODULES.items():
    globals().setdefault(_name, _module)
    _sys.modules.setdefault(f"{__name__}.{_name}", _module)

# PyTorch's module paths for the names defined in the newer modules: torch.distributions.
# transforms holds every transform, .utils the triangle packing, .one_hot_categorical the
# straight-through variant
for _name in transforms_extra.__all__:
    setattr(transforms, _name, getattr(transforms_extra, _name))
utils.tril_matrix_to_vec = transforms_extra.tril_matrix_to_vec
utils.vec_to_tril_matrix = transforms_extra.vec_to_tril_matrix
discrete.OneHotCategoricalStraightThrough = OneHotCategoricalStraightThrough
