"""nn.init: every initialiser's distribution checked statistically (bounds, moments,
orthogonality) against the formulas in PyTorch's documentation, and each layer's default
initialisation against PyTorch's (tests/test_random_torch_streams.py checks the values after
the same seed)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ember
from ember import nn
from ember.nn import init


@pytest.fixture(autouse=True)
def _seeded():
    # the statistics below hold for any seed (5 standard errors); seeding makes runs repeatable
    ember.manual_seed(1234)


def empty(*shape, dtype=ember.float32):
    return ember.zeros(*shape, dtype=dtype)


def check_uniform(values: np.ndarray, low: float, high: float) -> None:
    assert values.min() >= low and values.max() <= high
    # the moments are U(low, high)'s within 5 standard errors; large samples reach the bounds
    width, n = high - low, values.size
    if n >= 1000:
        assert values.min() < low + 0.01 * width and values.max() > high - 0.01 * width
    np.testing.assert_allclose(values.mean(), (low + high) / 2, atol=5 * width / math.sqrt(12 * n))
    np.testing.assert_allclose(
        values.std(), width / math.sqrt(12), rtol=max(0.03, 2.3 / math.sqrt(n))
    )


def check_normal(values: np.ndarray, mean: float, std: float) -> None:
    n = values.size  # tolerances: 5 standard errors of each statistic
    np.testing.assert_allclose(values.mean(), mean, atol=5 * std / math.sqrt(n))
    np.testing.assert_allclose(values.std(), std, rtol=max(0.03, 3.6 / math.sqrt(n)))
    # the fraction within one standard deviation is the normal's 68.3%
    inside = np.mean(np.abs(values - mean) < std)
    assert abs(inside - 0.6827) < max(0.02, 2.4 / math.sqrt(n))


def test_calculate_gain_table():
    assert init.calculate_gain("linear") == 1 and init.calculate_gain("conv2d") == 1
    assert init.calculate_gain("sigmoid") == 1
    assert init.calculate_gain("tanh") == pytest.approx(5 / 3)
    assert init.calculate_gain("relu") == pytest.approx(math.sqrt(2))
    assert init.calculate_gain("leaky_relu") == pytest.approx(math.sqrt(2 / (1 + 0.01**2)))
    assert init.calculate_gain("leaky_relu", 0.2) == pytest.approx(math.sqrt(2 / 1.04))
    assert init.calculate_gain("selu") == 0.75
    with pytest.raises(ValueError):
        init.calculate_gain("swish")
    with pytest.raises(ValueError):
        init.calculate_gain("leaky_relu", "steep")


def test_fans():
    assert init._calculate_fan_in_and_fan_out(empty(5, 3)) == (3, 5)
    assert init._calculate_fan_in_and_fan_out(empty(8, 4, 3, 2)) == (24, 48)
    with pytest.raises(ValueError):
        init._calculate_fan_in_and_fan_out(empty(5))
    with pytest.raises(ValueError):
        init.kaiming_uniform_(empty(2, 2), mode="fan_avg")


def test_uniform_normal_constant():
    t = empty(200, 100)
    assert init.uniform_(t, -2.0, 3.0) is t
    check_uniform(t.numpy(), -2.0, 3.0)
    check_normal(init.normal_(t, 1.5, 0.5).numpy(), 1.5, 0.5)
    assert np.all(init.constant_(t, 0.25).numpy() == 0.25)
    assert np.all(init.ones_(t).numpy() == 1) and np.all(init.zeros_(t).numpy() == 0)
    assert t.dtype == ember.float32


def test_xavier():
    t = empty(300, 200)
    bound = 1.3 * math.sqrt(6 / 500)
    check_uniform(init.xavier_uniform_(t, gain=1.3).numpy(), -bound, bound)
    check_normal(init.xavier_normal_(t).numpy(), 0.0, math.sqrt(2 / 500))


@pytest.mark.parametrize("mode", ["fan_in", "fan_out"])
def test_kaiming(mode):
    t = empty(100, 40, 3, 3)
    fan = 40 * 9 if mode == "fan_in" else 100 * 9
    std = math.sqrt(2) / math.sqrt(fan)
    bound = math.sqrt(3) * std
    check_uniform(init.kaiming_uniform_(t, mode=mode, nonlinearity="relu").numpy(), -bound, bound)
    gain = math.sqrt(2 / (1 + 0.1**2))
    check_normal(init.kaiming_normal_(t, a=0.1, mode=mode).numpy(), 0.0, gain / math.sqrt(fan))


def test_trunc_normal_matches_truncated_moments():
    t = empty(200, 200, dtype=ember.float64)
    mean, std, a, b = 0.5, 2.0, -1.0, 4.0
    values = init.trunc_normal_(t, mean, std, a, b).numpy()
    assert values.min() >= a and values.max() <= b
    # moments of the truncated normal (closed form)
    alpha, beta = (a - mean) / std, (b - mean) / std

    def pdf(x):
        return math.exp(-x * x / 2) / math.sqrt(2 * math.pi)

    def cdf(x):
        return 0.5 * (1 + math.erf(x / math.sqrt(2)))

    z = cdf(beta) - cdf(alpha)
    expected_mean = mean + std * (pdf(alpha) - pdf(beta)) / z
    expected_var = std**2 * (
        1 + (alpha * pdf(alpha) - beta * pdf(beta)) / z - ((pdf(alpha) - pdf(beta)) / z) ** 2
    )
    np.testing.assert_allclose(values.mean(), expected_mean, atol=0.02)
    np.testing.assert_allclose(values.var(), expected_var, rtol=0.03)
    # a narrow window far in the tail (sampled through the uniform proposal) stays inside it
    tail = init.trunc_normal_(empty(1000), 0.0, 1.0, 4.0, 4.5).numpy()
    assert tail.min() >= 4.0 and tail.max() <= 4.5 and tail.mean() < 4.25
    with pytest.raises(ValueError):
        init.trunc_normal_(empty(3), a=1.0, b=0.0)


@pytest.mark.parametrize("shape", [(6, 10), (10, 6), (4, 3, 2, 2)])
def test_orthogonal(shape):
    t = empty(*shape, dtype=ember.float64)
    q = init.orthogonal_(t, gain=2.0).numpy().reshape(shape[0], -1)
    rows, cols = q.shape
    if rows <= cols:
        np.testing.assert_allclose(q @ q.T, 4.0 * np.eye(rows), atol=1e-10)
    else:
        np.testing.assert_allclose(q.T @ q, 4.0 * np.eye(cols), atol=1e-10)
    with pytest.raises(ValueError):
        init.orthogonal_(empty(3))


def test_eye_dirac_sparse():
    np.testing.assert_array_equal(init.eye_(empty(3, 4)).numpy(), np.eye(3, 4))
    w = init.dirac_(empty(4, 2, 3, 3, dtype=ember.float64), groups=2).numpy()
    x = np.random.default_rng(0).standard_normal((1, 4, 5, 5))
    # a dirac-initialised convolution is the identity: each output channel copies its input one
    y = ember.nn.functional.conv2d(ember.tensor(x), ember.tensor(w), padding=1, groups=2)
    np.testing.assert_allclose(y.numpy(), x, rtol=1e-12)
    partial = init.dirac_(empty(3, 2, 3, dtype=ember.float64)).numpy()  # more outputs than inputs
    assert partial[0, 0, 1] == 1 and partial[1, 1, 1] == 1 and not np.any(partial[2])
    s = init.sparse_(empty(10, 6), sparsity=0.3).numpy()
    assert np.all((s == 0).sum(axis=0) >= 3)


def test_init_is_not_recorded_and_uses_the_seed():
    p = nn.Parameter(empty(4, 4))
    init.kaiming_uniform_(p)
    assert p.is_leaf and p.grad_fn is None and p.requires_grad
    ember.manual_seed(11)
    first = nn.Linear(6, 5).weight.detach().numpy().copy()
    ember.manual_seed(11)
    np.testing.assert_array_equal(nn.Linear(6, 5).weight.detach().numpy(), first)
    gen = ember.Generator(5)
    a = init.normal_(empty(3), generator=gen).detach().numpy().copy()
    np.testing.assert_array_equal(init.normal_(empty(3), generator=ember.Generator(5)).numpy(), a)


# Default initialisation of every layer with weights: (factory, {param: (kind, scale)}).
# "u" = U(-scale, scale), "n" = N(0, scale^2), "c" = constant scale. Scales are PyTorch's.
DEFAULTS = [
    (lambda: nn.Linear(400, 300), {"weight": ("u", 1 / 20), "bias": ("u", 1 / 20)}),
    (lambda: nn.Bilinear(100, 30, 200), {"weight": ("u", 0.1), "bias": ("u", 0.1)}),
    (
        lambda: nn.Conv2d(16, 64, 5),
        {"weight": ("u", 1 / math.sqrt(400)), "bias": ("u", 1 / math.sqrt(400))},
    ),
    (
        lambda: nn.ConvTranspose2d(64, 32, 4, groups=2),
        {"weight": ("u", 1 / math.sqrt(256)), "bias": ("u", 1 / math.sqrt(256))},
    ),
    (lambda: nn.Embedding(300, 100), {"weight": ("n", 1.0)}),
    (lambda: nn.BatchNorm2d(8), {"weight": ("c", 1.0), "bias": ("c", 0.0)}),
    (lambda: nn.LayerNorm(8), {"weight": ("c", 1.0), "bias": ("c", 0.0)}),
    (lambda: nn.PReLU(), {"weight": ("c", 0.25)}),
    (lambda: nn.LSTM(50, 100), {name: ("u", 0.1) for name in ["weight_ih_l0", "bias_hh_l0"]}),
    (lambda: nn.GRUCell(50, 400), {"weight_hh": ("u", 0.05)}),
    (
        lambda: nn.MultiheadAttention(64, 4),
        {
            "in_proj_weight": ("u", math.sqrt(6 / (64 + 192))),
            "in_proj_bias": ("c", 0.0),
            "out_proj.bias": ("c", 0.0),
            "out_proj.weight": ("u", 1 / 8),
        },
    ),
]


@pytest.mark.parametrize(
    "case", DEFAULTS, ids=lambda c: type(c[0]()).__name__ if callable(c) else ""
)
def test_default_initialisation_matches_pytorch_formulas(case):
    make, expected = case
    params = dict(make().named_parameters())
    for name, (kind, scale) in expected.items():
        values = params[name].detach().numpy().astype(np.float64)
        if kind == "u":
            check_uniform(values, -scale, scale)
        elif kind == "n":
            check_normal(values, 0.0, scale)
        else:
            assert np.all(values == scale), name
