"""The transforms of ``torch.distributions.transforms`` ember gained, against PyTorch's:
forward, inverse, log-Jacobian, shapes and the forward's gradient (float64), on batched
inputs; ``biject_to`` / ``transform_to`` against PyTorch's registries (the transform chosen,
and values landing in the constraint); and TransformedDistribution log_prob through them."""

import numpy as np
import pytest
import torch
import torch.distributions as TD
import torch.distributions.transforms as TT

import ember
import ember.distributions as ED

R = np.random.default_rng(11)


def _both(make):
    return make(ED), make(TD)


def _check(e_t, t_t, x, *, ladj=True, inverse=True, rtol=1e-10):
    ex = ember.tensor(x, requires_grad=True)
    tx = torch.tensor(x, requires_grad=True)
    ey, ty = e_t(ex), t_t(tx)
    np.testing.assert_allclose(ey.detach().numpy(), ty.detach().numpy(), rtol=rtol, atol=1e-12)
    w = R.standard_normal(tuple(ty.shape))
    (ey * ember.tensor(w)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-8, atol=1e-10)
    if inverse:
        back_e = e_t.inv(ey.detach())
        back_t = t_t.inv(ty.detach())
        np.testing.assert_allclose(back_e.numpy(), back_t.numpy(), rtol=1e-8, atol=1e-10)
    if ladj:
        e_l = e_t.log_abs_det_jacobian(ex.detach(), ey.detach())
        t_l = t_t.log_abs_det_jacobian(tx.detach(), ty.detach())
        np.testing.assert_allclose(e_l.numpy(), t_l.numpy(), rtol=1e-9, atol=1e-10)
    assert tuple(e_t.forward_shape(x.shape)) == tuple(t_t.forward_shape(torch.Size(x.shape)))
    assert e_t.bijective == t_t.bijective
    assert e_t.domain.event_dim == t_t.domain.event_dim
    assert e_t.codomain.event_dim == t_t.codomain.event_dim


X = R.standard_normal((4, 3))
POS = np.abs(X) + 0.1


@pytest.mark.parametrize(
    "name, make, x, kwargs",
    [
        ("abs", lambda D: D.AbsTransform(), X, {"ladj": False, "inverse": False}),
        ("power", lambda D: D.PowerTransform(2.5), POS, {}),
        ("power-neg", lambda D: D.PowerTransform(-0.5), POS, {}),
        ("softplus", lambda D: D.SoftplusTransform(), X, {}),
        ("softmax", lambda D: D.SoftmaxTransform(), X, {"ladj": False, "inverse": False}),
        ("stick-breaking", lambda D: D.StickBreakingTransform(), X, {}),
        ("corr-cholesky", lambda D: D.CorrCholeskyTransform(), R.standard_normal((2, 6)), {}),
        (
            "lower-cholesky",
            lambda D: D.LowerCholeskyTransform(),
            R.standard_normal((2, 3, 3)),
            {"ladj": False},
        ),  # fmt: skip
        (
            "positive-definite",
            lambda D: D.PositiveDefiniteTransform(),
            R.standard_normal((2, 3, 3)),
            {"ladj": False},
        ),  # fmt: skip
        ("reshape", lambda D: D.ReshapeTransform((3,), (3, 1)), X, {}),
        ("independent", lambda D: D.IndependentTransform(D.ExpTransform(), 1), X, {}),
        (
            "cat",
            lambda D: D.CatTransform([D.ExpTransform(), D.SoftplusTransform()], 1, [1, 2]),
            X,
            {},
        ),  # fmt: skip
        (
            "cat-dim0",
            lambda D: D.CatTransform([D.ExpTransform(), D.AffineTransform(1.0, 3.0)], 0, [3, 1]),
            X,
            {},
        ),  # fmt: skip
        (
            "stack",
            lambda D: D.StackTransform(
                [D.ExpTransform(), D.SoftplusTransform(), D.TanhTransform()], 1
            ),
            X,
            {},
        ),  # fmt: skip
        ("cdf", lambda D: D.CumulativeDistributionTransform(D.Normal(0.5, 2.0)), X, {}),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_transform_matches_torch(name, make, x, kwargs):
    e_t, t_t = _both(make)
    _check(e_t, t_t, x, **kwargs)


def test_corr_cholesky_lands_on_correlation_factors():
    y = ED.CorrCholeskyTransform()(ember.tensor(R.standard_normal((5, 10))))
    corr = (y @ y.transpose(-2, -1)).numpy()
    np.testing.assert_allclose(np.diagonal(corr, axis1=-2, axis2=-1), 1.0, rtol=1e-12)
    assert bool(ED.constraints.corr_cholesky.check(y).all())


def test_tril_vector_helpers_match_torch():
    from torch.distributions.utils import tril_matrix_to_vec, vec_to_tril_matrix

    m = R.standard_normal((2, 4, 4))
    for diag in (0, -1, -2):
        e = ED.transforms_extra.tril_matrix_to_vec(ember.tensor(m), diag)
        t = tril_matrix_to_vec(torch.tensor(m), diag)
        np.testing.assert_array_equal(e.numpy(), t.numpy())
        back_e = ED.transforms_extra.vec_to_tril_matrix(e, diag)
        back_t = vec_to_tril_matrix(t, diag)
        np.testing.assert_array_equal(back_e.numpy(), back_t.numpy())


def _desc(t):
    parts = getattr(t, "parts", None)
    name = type(t).__name__
    return name + str([_desc(p) for p in parts]) if parts is not None else name


CONSTRAINTS = [
    ("real", lambda C: C.real),
    ("real_vector", lambda C: C.real_vector),
    ("positive", lambda C: C.positive),
    ("nonnegative", lambda C: C.nonnegative),
    ("greater_than", lambda C: C.greater_than(2.0)),
    ("less_than", lambda C: C.less_than(-1.0)),
    ("unit_interval", lambda C: C.unit_interval),
    ("interval", lambda C: C.interval(-1.0, 3.0)),
    ("half_open_interval", lambda C: C.half_open_interval(0.0, 2.0)),
    ("simplex", lambda C: C.simplex),
    ("lower_cholesky", lambda C: C.lower_cholesky),
    ("positive_definite", lambda C: C.positive_definite),
    ("corr_cholesky", lambda C: C.corr_cholesky),
    ("independent", lambda C: C.independent(C.positive, 1)),
    ("cat", lambda C: C.cat([C.positive, C.real], 1, [1, 2])),
    ("stack", lambda C: C.stack([C.positive, C.unit_interval, C.real], 1)),
]


@pytest.mark.parametrize("registry", ["biject_to", "transform_to"])
@pytest.mark.parametrize("name, make", CONSTRAINTS, ids=[c[0] for c in CONSTRAINTS])
def test_registries_match_torch(registry, name, make):
    try:
        want = getattr(TD, registry)(make(TD.constraints))
    except NotImplementedError:
        with pytest.raises(NotImplementedError):
            getattr(ED, registry)(make(ED.constraints))
        return
    got = getattr(ED, registry)(make(ED.constraints))
    assert _desc(got) == _desc(want)
    shape = {"lower_cholesky": (2, 3, 3), "positive_definite": (2, 3, 3),
             "corr_cholesky": (2, 3)}.get(name, (4, 3))  # fmt: skip
    x = R.standard_normal(shape)
    y_e, y_t = got(ember.tensor(x)), want(torch.tensor(x))
    np.testing.assert_allclose(y_e.numpy(), y_t.numpy(), rtol=1e-9, atol=1e-12)
    assert bool(make(ED.constraints).check(y_e).all())


def test_transformed_distribution_through_new_transforms():
    base_e, base_t = ED.Normal(ember.zeros(3), ember.ones(3)), TD.Normal(torch.zeros(3), 1.0)
    e = ED.TransformedDistribution(ED.Independent(base_e, 1), [ED.StickBreakingTransform()])
    t = TD.TransformedDistribution(TD.Independent(base_t, 1), [TT.StickBreakingTransform()])
    v = np.array([[0.1, 0.2, 0.3, 0.4], [0.25, 0.25, 0.25, 0.25]])
    np.testing.assert_allclose(
        e.log_prob(ember.tensor(v, dtype=ember.float32)).numpy(),
        t.log_prob(torch.tensor(v, dtype=torch.float32)).numpy(),
        rtol=1e-5,
    )
    assert tuple(e.sample((5,)).shape) == (5, 4)
