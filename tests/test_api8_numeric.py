"""torch.gradient and torch.histogramdd beyond the OpInfo database
(tests/ops/opinfo_api8_numeric.py): captured under ember.function, result types, a smooth
function's derivative."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

R = np.random.default_rng(3)


def test_gradient_captured_matches_eager_and_torch():
    x = R.standard_normal((5, 6))
    c = np.cumsum(R.uniform(0.5, 1.5, 6))

    def step(x, c):
        gx, gy = ember.gradient(x, spacing=[2.0, 1.0])
        (gc,) = ember.gradient(x, spacing=(c,), dim=1, edge_order=2)
        return gx, gy, gc

    args = (ember.tensor(x), ember.tensor(c))
    eager = step(*args)
    f = ember.function(step)
    for _ in range(2):
        for e, g in zip(eager, f(*args)):
            np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-12)
    ref = (
        *torch.gradient(torch.tensor(x), spacing=[2.0, 1.0]),
        *torch.gradient(torch.tensor(x), spacing=(torch.tensor(c),), dim=1, edge_order=2),
    )
    for e, t in zip(eager, ref):
        np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-12)


def test_gradient_of_a_quadratic_is_exact_with_order_2():
    t = np.sort(R.uniform(0, 3, 9))
    (g,) = ember.gradient(ember.tensor(t**2), spacing=(ember.tensor(t),), edge_order=2)
    np.testing.assert_allclose(g.numpy(), 2 * t, rtol=1e-10)
    assert type(ember.gradient(ember.tensor(t))) is tuple


def test_histogramdd_captured_and_types():
    pts = R.standard_normal((50, 3))
    w = R.uniform(size=50)

    def step(p, w):
        return ember.histogramdd(p, [2, 3, 4], range=[-2, 2, -2, 2, -2, 2], weight=w)

    e = step(ember.tensor(pts), ember.tensor(w))
    assert type(e).__name__ == "histogramdd" and type(e.bin_edges) is tuple
    c = ember.function(step)(ember.tensor(pts), ember.tensor(w))
    t = torch.histogramdd(
        torch.tensor(pts), [2, 3, 4], range=[-2.0, 2, -2, 2, -2, 2], weight=torch.tensor(w)
    )
    for got in (e, c):
        np.testing.assert_allclose(got.hist.numpy(), t.hist.numpy(), rtol=1e-12)
        for a, b in zip(got.bin_edges, t.bin_edges):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12)
    assert e.hist.sum().item() == pytest.approx(w[(np.abs(pts) <= 2).all(1)].sum())
