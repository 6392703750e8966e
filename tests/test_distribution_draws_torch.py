"""Every distribution's ``sample`` draws PyTorch's values from the same seed (the samplers run
PyTorch's algorithms on ember's PyTorch-compatible generator), in float32 and float64, with a
sample shape and batched parameters."""

import numpy as np
import pytest
import torch

import ember

# (name, parameters as nested lists / numbers); batched parameters broadcast as PyTorch's
CASES = [
    ("Normal", ([0.0, 1.0], [1.0, 2.0])),
    ("Uniform", ([0.0, -1.0], [1.0, 3.0])),
    ("Gamma", ([2.0, 0.5], [1.0, 3.0])),
    ("Beta", ([2.0, 0.3], [3.0, 0.7])),
    ("Exponential", ([1.5, 0.2],)),
    ("Laplace", ([0.0, 1.0], [1.0, 0.5])),
    ("Cauchy", ([0.0, 1.0], [1.0, 0.5])),
    ("Gumbel", ([0.0, 1.0], [1.0, 0.5])),
    ("LogNormal", ([0.0, 1.0], [1.0, 0.5])),
    ("Chi2", ([3.0, 0.7],)),
    ("StudentT", ([4.0, 1.5],)),
    ("Poisson", ([4.0, 0.3, 60.0],)),
    ("Binomial", (10, [0.3, 0.9])),
    ("Geometric", ([0.3, 0.8],)),
    ("Bernoulli", ([0.3, 0.8],)),
    ("NegativeBinomial", ([5.0, 0.5], [0.4, 0.1])),
    ("VonMises", ([0.0, 1.0], [2.0, 0.1])),
    ("Weibull", ([1.0, 2.0], [2.0, 0.5])),
    ("Pareto", ([1.0, 2.0], [2.0, 0.5])),
    ("HalfNormal", ([1.0, 0.3],)),
    ("HalfCauchy", ([1.0, 0.3],)),
    ("InverseGamma", ([2.0, 0.6], [1.0, 2.0])),
    ("Kumaraswamy", ([2.0, 0.6], [3.0, 1.0])),
    ("FisherSnedecor", ([3.0, 7.0], [5.0, 2.0])),
    ("ContinuousBernoulli", ([0.3, 0.5],)),
    ("LogisticNormal", ([0.0, 1.0, -1.0], [1.0, 0.5, 2.0])),
    ("Dirichlet", ([[1.0, 2.0, 0.5], [0.2, 0.2, 3.0]],)),
    ("Categorical", ([[0.2, 0.3, 0.5], [0.9, 0.05, 0.05]],)),
    ("Multinomial", (10, [0.2, 0.3, 0.5])),
    ("OneHotCategorical", ([0.2, 0.3, 0.5],)),
    ("RelaxedBernoulli", (0.5, [0.3, 0.7])),
    ("RelaxedOneHotCategorical", (0.5, [0.2, 0.3, 0.5])),
    ("GeneralizedPareto", ([0.0, 1.0], [1.0, 2.0], [0.2, -0.1])),
]


def _build(lib, name, params, dtype):
    args = [lib.tensor(p, dtype=dtype) if isinstance(p, list) else p for p in params]
    return getattr(lib.distributions, name)(*args)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name, params", CASES, ids=[c[0] for c in CASES])
def test_samples_are_pytorchs(name, params, dtype):
    torch.manual_seed(11)
    want = _build(torch, name, params, getattr(torch, dtype)).sample((5,))
    ember.manual_seed(11)
    got = _build(ember, name, params, getattr(ember, dtype)).sample((5,))
    assert tuple(got.shape) == tuple(want.shape)
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    # the same algorithm on the same bits; transcendental functions may round differently
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=tol, atol=tol)
