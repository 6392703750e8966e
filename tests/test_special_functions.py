"""ops/special_functions.py beyond the OpInfos: ember's Bessel values are SciPy's, accurate to
float64 against mpmath (PyTorch's own approximations are not: airy_ai is 3e-5 off near its
zeros); NaN propagates through the polynomials (PyTorch 2.13 returns uninitialized memory);
the functions PyTorch gives no gradient give none here either (their results do not require
grad); igamma's gradient in its second argument against finite differences, and captured."""

import numpy as np
import pytest
import torch

import ember

mpmath = pytest.importorskip("mpmath")

_MPMATH = {
    "airy_ai": lambda x: mpmath.airyai(x),
    "bessel_j0": lambda x: mpmath.besselj(0, x),
    "bessel_j1": lambda x: mpmath.besselj(1, x),
    "bessel_y0": lambda x: mpmath.bessely(0, x),
    "bessel_y1": lambda x: mpmath.bessely(1, x),
    "modified_bessel_k0": lambda x: mpmath.besselk(0, x),
    "modified_bessel_k1": lambda x: mpmath.besselk(1, x),
    "i0e": lambda x: mpmath.besseli(0, x) * mpmath.exp(-abs(x)),
    "i1e": lambda x: mpmath.besseli(1, x) * mpmath.exp(-abs(x)),
    "erfcx": lambda x: mpmath.exp(x * x) * mpmath.erfc(x),
}


@pytest.mark.parametrize("name", sorted(_MPMATH))
def test_values_are_accurate_to_float64(name):
    x = np.array([-2.30213286, -4.59026476, 0.37, 1.5, 4.35072424, 7.9])
    if name.startswith(("bessel_y", "modified_bessel_k")):
        x = np.abs(x)
    got = getattr(ember.special, name)(ember.tensor(x)).numpy()
    with mpmath.workdps(40):
        want = np.array([float(_MPMATH[name](mpmath.mpf(float(v)))) for v in x])
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize(
    "name",
    ["chebyshev_polynomial_u", "laguerre_polynomial_l", "legendre_polynomial_p",
     "shifted_chebyshev_polynomial_w", "hermite_polynomial_h"],
)  # fmt: skip
def test_polynomials_propagate_nan(name):
    out = getattr(ember.special, name)(ember.tensor([np.nan, 0.5]), 7).numpy()
    assert np.isnan(out[0])
    want = getattr(torch.special, name)(torch.tensor([0.5], dtype=torch.float64), 7)
    np.testing.assert_allclose(out[1], want.item(), rtol=1e-6)


def test_functions_without_a_derivative_give_results_that_need_no_grad():
    x = ember.tensor([0.3, 0.7], requires_grad=True)
    for lib, t in ((ember, x), (torch, torch.tensor([0.3, 0.7], requires_grad=True))):
        assert not lib.special.bessel_j0(t).requires_grad
        assert not lib.special.chebyshev_polynomial_t(t, 3).requires_grad
        assert lib.special.i0e(t).requires_grad
    f = ember.function(lambda t: ember.special.modified_bessel_k1(t + 1) + t)
    y = f(x)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 1.0])  # only through "+ t"


def test_igamma_gradient_in_its_second_argument():
    a = ember.tensor([0.7, 2.5, 4.0], dtype=ember.float64)
    x = ember.tensor([0.4, 1.7, 6.0], dtype=ember.float64, requires_grad=True)
    assert ember.autograd.gradcheck(lambda x: ember.igamma(a, x), (x,))
    assert ember.autograd.gradcheck(lambda x: ember.special.gammaincc(a, x), (x,))
    captured = ember.function(lambda x: ember.grad(lambda x: ember.igamma(a, x).sum())(x))
    eager = ember.autograd.grad(ember.igamma(a, x).sum(), x)[0]
    np.testing.assert_allclose(captured(x).detach().numpy(), eager.detach().numpy(), rtol=1e-12)
    # in place, as a method (torch.Tensor.igamma_)
    b = ember.tensor([1.0, 2.0], dtype=ember.float64)
    b.igamma_(ember.tensor([0.5, 0.5], dtype=ember.float64))
    np.testing.assert_allclose(
        b.numpy(), torch.special.gammainc(torch.tensor([1.0, 2.0]), torch.tensor(0.5)).numpy()
    )
