"""Regressions hunt53 found, each compared with PyTorch 2.13: xlogy's and xlog1py's gradients
where x is 0 (the masked log for x, PyTorch's 0 / 0 NaN for y), native_group_norm of an empty
batch, unique over a dim when another dim is empty, cholesky_solve's and cholesky_inverse's
gradient of the full factor."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _both(fn):
    """fn(lib) on PyTorch and on ember, as NumPy arrays (or the exception's type)."""
    out = []
    for lib in (torch, ember):
        try:
            values = fn(lib)
        except Exception as e:  # (compared by kind below)
            out.append(type(e))
            continue
        out.append([v.detach().numpy() if hasattr(v, "detach") else v for v in values])
    return out


def _assert_same(want, got):
    assert len(want) == len(got)
    for w, g in zip(want, got):
        assert isinstance(g, np.ndarray) and w.shape == g.shape and w.dtype == g.dtype
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7, equal_nan=True)


@pytest.mark.parametrize("name", ["xlogy", "xlog1py"])
def test_xlogy_gradients_where_x_is_zero(name):
    def program(lib):
        f = lib.xlogy if name == "xlogy" else lib.special.xlog1py
        shift = 0.0 if name == "xlogy" else 1.0
        x = lib.tensor([0.0, 0.0, 0.0, 0.0, -0.0, 1.0, 2.0, 0.0, 3.0], requires_grad=True)
        y = lib.tensor([0.0, 2.0, -1.0, np.nan, 0.5, 0.0, -1.0, 1.0, 4.0], requires_grad=True)
        z = f(x, y - shift)
        gx, gy = lib.autograd.grad((z * lib.arange(1.0, 10.0)).sum(), [x, y])
        return [z, gx, gy]

    want, got = _both(program)
    _assert_same(want, got)
    # captured: the same graph of wheres
    f = ember.function(lambda x, y: program_captured(name, x, y))
    x = ember.tensor([0.0, 0.0, 1.0], requires_grad=True)
    y = ember.tensor([0.0, 2.0, 3.0], requires_grad=True)
    gx, gy = f(x, y)
    ex, ey = program_captured(name, x, y)
    np.testing.assert_allclose(gx.numpy(), ex.numpy(), equal_nan=True)
    np.testing.assert_allclose(gy.numpy(), ey.numpy(), equal_nan=True)
    assert np.isnan(gy.numpy()[0]) == (name == "xlogy")


def program_captured(name, x, y):
    f = ember.xlogy if name == "xlogy" else ember.special.xlog1py
    return ember.autograd.grad(f(x, y).sum(), [x, y])


def test_native_group_norm_of_an_empty_batch():
    def program(lib):
        x = lib.zeros(0, 4, 3, requires_grad=True)
        w, b = lib.ones(4), lib.zeros(4)
        out, mean, rstd = lib.native_group_norm(x, w, b, 0, 4, 3, 2, 1e-5)
        return [out, mean, rstd]

    want, got = _both(program)
    _assert_same(want, got)


@pytest.mark.parametrize("fn", ["unique", "unique_consecutive"])
@pytest.mark.parametrize("shape, dim", [((3, 0), 0), ((2, 0, 3), 2), ((0, 3), 0), ((3, 0), 1)])
def test_unique_along_a_dim_with_another_dim_empty(fn, shape, dim):
    def program(lib):
        x = lib.zeros(shape)
        return list(getattr(lib, fn)(x, dim=dim, return_inverse=True, return_counts=True))

    want, got = _both(program)
    if isinstance(want, type):
        assert isinstance(got, type) and issubclass(got, ember.EmberError), got
        with pytest.raises(ember.EmberError, match="0-sized dimension"):
            program(ember)
    else:
        _assert_same(want, got)


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_solve_and_inverse_gradients_are_the_full_factors(upper):
    def program(lib):
        g = np.random.default_rng(0)
        # (a factor with values in the triangle neither reads: PyTorch's gradient uses them)
        factor = lib.tensor(g.standard_normal((2, 3, 3)) + 3 * np.eye(3), requires_grad=True)
        b = lib.tensor(g.standard_normal((3, 2)), requires_grad=True)
        x = lib.cholesky_solve(b, factor, upper=upper)
        inv = lib.cholesky_inverse(factor[0], upper=upper)
        loss = (x * lib.arange(12.0, dtype=lib.float64).reshape(2, 3, 2)).sum() + inv.sin().sum()
        return [x, inv, *lib.autograd.grad(loss, [factor, b])]

    want, got = _both(program)
    _assert_same(want, got)


@pytest.mark.parametrize("interpolation", ["linear", "lower", "higher", "midpoint", "nearest"])
@pytest.mark.parametrize("fn", ["quantile", "nanquantile"])
def test_quantile_is_differentiable_in_a_tensor_q(fn, interpolation):
    def program(lib):
        x = lib.tensor(
            [[1.0, 5.0, np.nan, 8.0, 3.0], [0.0, 1.0, 2.0, 3.0, 9.0]], requires_grad=True
        )
        q = lib.tensor([0.0, 0.4, 0.85, 1.0], requires_grad=True)
        y = getattr(lib, fn)(x, q, dim=1, keepdim=True, interpolation=interpolation)
        weights = lib.arange(8.0).reshape(4, 1, 2)
        gx, gq = lib.autograd.grad((y * weights).sum(), [x, q], allow_unused=True)
        # (the rounded modes and midpoint are constant in q: PyTorch's q is unused there)
        return [y, gx] + ([] if gq is None else [gq])

    want, got = _both(program)
    _assert_same(want, got)


@pytest.mark.parametrize("reduce", ["max", "min", "amax", "amin"])
def test_max_of_all_elements_shares_its_gradient_among_the_nans(reduce):
    """max()/min() over every element: PyTorch's evenly_distribute_backward (the ties, or the
    NaNs where there is one); amax/amin: NaN everywhere where the result is NaN."""

    def program(lib):
        out = []
        for data in ([[1.0, 3.0, 3.0], [2.0, 3.0, 0.0]], [[1.0, np.nan, 3.0], [np.nan, 2.0, 0.0]]):
            x = lib.tensor(data, requires_grad=True)
            y = getattr(x, reduce)()
            out += [y, lib.autograd.grad(y * 6.0, x)[0]]
        return out

    want, got = _both(program)
    _assert_same(want, got)
    f = ember.function(lambda x: ember.autograd.grad(getattr(x, reduce)(), x)[0])
    x = ember.tensor([[1.0, np.nan, 3.0], [np.nan, 2.0, 0.0]], requires_grad=True)
    np.testing.assert_allclose(f(x).numpy(), want[3] / 6.0, equal_nan=True)
