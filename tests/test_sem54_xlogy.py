"""xlogy and xlog1py (ops/extra_math.py, one op each) against PyTorch 2.13: values in every
float dtype, the gradients' special cases (x = 0 with y = 0, -1, inf, NaN; infinite upstream
gradients; signed zeros) bit for bit in float64, second derivatives, broadcasting and numbers."""

import math

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

INF, NAN = math.inf, math.nan
VALUES = [0.0, -0.0, 1.5, -2.0, -1.0, 1e-30, INF, -INF, NAN]
XS = np.repeat(VALUES, len(VALUES))
YS = np.tile(VALUES, len(VALUES))


def _fn(lib, name):
    return getattr(lib.special, name)


def _same(got, want):
    np.testing.assert_array_equal(
        np.signbit(got) | np.isnan(got), np.signbit(want) | np.isnan(want)
    )
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", ["xlogy", "xlog1py"])
@pytest.mark.parametrize("upstream", [1.0, INF, -0.5])
def test_gradients_at_special_points_as_pytorch(name, upstream):
    results = []
    for lib in (torch, ember):
        x = lib.tensor(XS, dtype=lib.float64, requires_grad=True)
        y = lib.tensor(YS, dtype=lib.float64, requires_grad=True)
        out = _fn(lib, name)(x, y)
        grads = lib.autograd.grad(out, (x, y), lib.full_like(out, upstream))
        results.append([out.detach().numpy()] + [g.numpy() for g in grads])
    for want, got in zip(*results):
        _same(got, want)


@pytest.mark.parametrize("name", ["xlogy", "xlog1py"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_values_in_each_float_dtype(name, dtype):
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(-3, 3, 64), [0.0, 0.0, 2.0]])
    y = np.concatenate([rng.uniform(-0.5, 5, 64), [0.0, -1.0, INF]])
    want = _fn(torch, name)(
        torch.tensor(x, dtype=getattr(torch, dtype)), torch.tensor(y, dtype=getattr(torch, dtype))
    )
    got = _fn(ember, name)(
        ember.tensor(x, dtype=getattr(ember, dtype)), ember.tensor(y, dtype=getattr(ember, dtype))
    )
    assert str(got.dtype).split(".")[-1] == dtype
    # (PyTorch's vectorized log is within an ulp of NumPy's, not its bits)
    rtol = {"float32": 3e-7, "float16": 1e-3, "bfloat16": 8e-3}[dtype]
    np.testing.assert_allclose(got.float().numpy(), want.float().numpy(), rtol=rtol, atol=1e-30)


@pytest.mark.parametrize("name", ["xlogy", "xlog1py"])
def test_second_derivatives_broadcasting_and_numbers(name):
    x0 = np.array([[0.0, 1.5, -2.0]])
    y0 = np.array([[0.5], [2.0]])
    results = []
    for lib in (torch, ember):
        x = lib.tensor(x0, requires_grad=True)
        y = lib.tensor(y0, requires_grad=True)
        out = _fn(lib, name)(x, y)
        gx, gy = lib.autograd.grad(out.sum(), (x, y), create_graph=True)
        second = lib.autograd.grad((gx * gx).sum() + (gy * 3).sum(), (x, y))
        by_number = lib.autograd.grad(_fn(lib, name)(2.0, y).sum(), y)[0]
        of_number = lib.autograd.grad(_fn(lib, name)(x, 3.0).sum(), x)[0]
        results.append([t.detach().numpy() for t in (out, gx, gy, *second, by_number, of_number)])
    for want, got in zip(*results):
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_xlogy_in_place_and_names():
    for lib in (torch, ember):
        a = lib.tensor([0.0, 2.0, 3.0])
        a.xlogy_(lib.tensor([0.0, 0.5, 4.0]))
        np.testing.assert_allclose(a.numpy(), [0.0, 2.0 * math.log(0.5), 3.0 * math.log(4.0)])
    for name in ("xlogy", "xlog1py"):
        names = []
        for lib in (torch, ember):
            x = lib.tensor([1.0], requires_grad=True)
            fn = _fn(lib, name)
            names.append([type(fn(*a).grad_fn).__name__ for a in [(x, x), (x, 2.0), (2.0, x)]])
        assert names[0] == names[1]


def test_complex_operands_refused_with_pytorchs_error_type():
    # (fuzz seed 5083 wide: PyTorch's "xlogy_cpu" not implemented for 'ComplexDouble')
    for lib in (torch, ember):
        z = lib.tensor([1 + 2j])
        for fn in (lib.xlogy, lib.special.xlog1py):
            with pytest.raises(NotImplementedError):
                fn(z, lib.tensor(2.0, dtype=lib.float64))
