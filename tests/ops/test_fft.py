"""ember.fft against torch.fft: values, dtypes and gradients of every transform over random
shapes, odd and even sizes, padded and trimmed ``n`` / ``s``, every ``dim`` form and every
norm, in float32 and float64; the frequency helpers and shifts; the errors."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

import ember

from .complex_torch import CPLX, REAL, compare, random_inputs, torch

NORMS = [None, "backward", "ortho", "forward"]
PRECISIONS = ["float32", "float64"]
ONE_D = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"]
MULTI = ["fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn", "rfftn", "irfftn"]
MULTI += ["hfft2", "hfftn", "ihfft2", "ihfftn"]
_REAL_ONLY = ("rfft", "rfft2", "rfftn", "ihfft", "ihfft2", "ihfftn")


def _kind(name):
    return REAL if name in _REAL_ONLY else CPLX


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("name", ONE_D)
def test_one_dimensional_transforms_equal_torchs(name, norm, precision):
    rng = np.random.default_rng(zlib.crc32(repr((name, norm, precision)).encode()))
    for shape, n, dim in [
        ((7,), None, -1),
        ((8,), None, 0),
        ((3, 6), 9, 1),  # padded, odd
        ((3, 9), 4, -1),  # trimmed, even
        ((5, 4, 3), 5, 0),
        ((2, 5), 1, -1),
    ]:
        if name in ("irfft", "hfft") and n is None and shape[dim] == 1:
            continue
        (a,) = random_inputs(rng, [(shape, _kind(name))], precision)
        compare(
            lambda m, x: getattr(m.fft, name)(x, n=n, dim=dim, norm=norm),
            [a],
            precision,
            scale=np.log2(np.prod(shape) + 1),
        )


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("name", MULTI)
def test_multi_dimensional_transforms_equal_torchs(name, norm, precision):
    rng = np.random.default_rng(zlib.crc32(repr((name, norm, precision, 2)).encode()))
    two = name.endswith("2")
    cases = [
        ((4, 6), None, None),
        ((3, 5, 7), None, None),
        ((3, 5, 7), (6, 4), None),  # padded and trimmed
        ((2, 3, 5, 4), None, (0, 2)),
        ((2, 3, 5, 4), (3, 7), (-1, 1)),
    ]
    if not two:
        cases += [((3, 4, 5), (5,), None), ((4, 3, 5), None, (1,)), ((2, 3, 4), (3, 5, 6), None)]
    for shape, s, dim in cases:
        kwargs = {"norm": norm}
        if s is not None:
            kwargs["s"] = s
        if dim is not None:
            kwargs["dim"] = dim
        (a,) = random_inputs(rng, [(shape, _kind(name))], precision)
        compare(
            lambda m, x: getattr(m.fft, name)(x, **kwargs),
            [a],
            precision,
            scale=np.log2(np.prod(shape) + 1),
        )


@pytest.mark.parametrize("name", ["fft", "ifft", "fft2", "fftn", "ifftn"])
def test_complex_transforms_of_real_inputs_equal_torchs(name):
    rng = np.random.default_rng(3)
    for precision in PRECISIONS:
        (a,) = random_inputs(rng, [((4, 5), REAL)], precision)
        compare(lambda m, x: getattr(m.fft, name)(x), [a], precision, scale=20.0)


def test_integer_inputs_give_the_default_complex_dtype():
    x = [[1, 2, 3], [4, 5, 7]]
    for name in ("fft", "rfft", "fftn", "rfft2"):
        got = getattr(ember.fft, name)(ember.tensor(x))
        want = getattr(torch.fft, name)(torch.tensor(x))
        assert got.dtype == ember.complex64 and want.dtype == torch.complex64
        np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-5)


@pytest.mark.parametrize("n", [1, 2, 5, 8])
@pytest.mark.parametrize("d", [1.0, 0.25])
def test_frequencies_equal_torchs(n, d):
    for name in ("fftfreq", "rfftfreq"):
        got = getattr(ember.fft, name)(n, d)
        want = getattr(torch.fft, name)(n, d)
        assert got.dtype == ember.float32
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
        got64 = getattr(ember.fft, name)(n, d, dtype=ember.float64)
        np.testing.assert_allclose(
            got64.numpy(), getattr(torch.fft, name)(n, d, dtype=torch.float64)
        )


@pytest.mark.parametrize("shape", [(5,), (4, 6), (3, 4, 5)])
def test_shifts_equal_torchs(shape):
    rng = np.random.default_rng(len(shape))
    for precision in PRECISIONS:
        (a,) = random_inputs(rng, [(shape, CPLX)], precision)
        for dim in (None, 0, -1, (0, -1)):
            for name in ("fftshift", "ifftshift"):
                compare(lambda m, x: getattr(m.fft, name)(x, dim=dim), [a], precision)


def test_round_trips_and_double_gradients():
    rng = np.random.default_rng(5)
    x = ember.tensor(rng.standard_normal((3, 10)), requires_grad=True)
    back = ember.fft.irfft(ember.fft.rfft(x), n=10)
    np.testing.assert_allclose(back.detach().numpy(), x.detach().numpy(), atol=1e-12)
    # a second derivative through the transforms (their VJPs are transforms again)
    (g,) = ember.autograd.grad((ember.fft.rfft(x).abs() ** 2).sum(), x, create_graph=True)
    (gg,) = ember.autograd.grad(g.sum(), x)
    t = torch.tensor(x.detach().numpy(), requires_grad=True)
    (tg,) = torch.autograd.grad((torch.fft.rfft(t).abs() ** 2).sum(), t, create_graph=True)
    (tgg,) = torch.autograd.grad(tg.sum(), t)
    np.testing.assert_allclose(g.detach().numpy(), tg.detach().numpy(), atol=1e-9)
    np.testing.assert_allclose(gg.numpy(), tgg.numpy(), atol=1e-9)


def test_transforms_inside_a_captured_function_equal_eager():
    rng = np.random.default_rng(6)
    x = ember.tensor(rng.standard_normal((4, 8)).astype(np.float32), requires_grad=True)

    def loss(x):
        spectrum = ember.fft.rfft2(x, norm="ortho")
        return ember.fft.irfft2(spectrum * spectrum, s=(4, 8)).pow(2).sum()

    eager = loss(x)
    eager.backward()
    want = x.grad.numpy().copy()
    x.grad = None
    captured = ember.function(loss)
    got = captured(x)
    got.backward()
    np.testing.assert_allclose(got.detach().numpy(), eager.detach().numpy(), rtol=1e-5)
    np.testing.assert_allclose(x.grad.detach().numpy(), want, rtol=1e-5, atol=1e-6)
    grad = ember.grad(loss)(x)
    np.testing.assert_allclose(grad.numpy(), want, rtol=1e-5, atol=1e-6)


def test_errors_name_the_function():
    x = ember.randn(4, 6)
    z = ember.fft.fft(x)
    with pytest.raises(ember.DTypeError, match="rfft"):
        ember.fft.rfft(z)
    with pytest.raises(ValueError, match="normalization"):
        ember.fft.fft(x, norm="unitary")
    with pytest.raises(ValueError, match="data points"):
        ember.fft.fft(x, n=0)
    with pytest.raises(ValueError, match="same length"):
        ember.fft.fftn(x, s=(3,), dim=(0, 1))
    with pytest.raises(IndexError):
        ember.fft.fft(x, dim=2)
    with pytest.raises(ember.DTypeError, match="float32 and float64"):
        ember.fft.fft(x.half())
