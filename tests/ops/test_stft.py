"""ember.stft / ember.istft against torch's: values, dtypes and gradients (to the signal and to
the window) over window lengths, hops, centring, pad modes, normalization, one- and two-sided
spectra, batched and single signals, in float32 and float64; the errors PyTorch raises."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember

from .complex_torch import CPLX, REAL, compare, random_inputs, torch

CASES = [
    dict(n_fft=8, hop_length=3),
    dict(n_fft=8),  # hop n_fft // 4
    dict(n_fft=7, hop_length=2, win_length=5),  # an odd transform, a window padded to it
    dict(n_fft=7, hop_length=2, center=False),
    dict(n_fft=8, normalized=True, pad_mode="constant"),
    dict(n_fft=6, hop_length=2, onesided=False, pad_mode="replicate"),
    dict(n_fft=9, hop_length=4, pad_mode="circular"),
]


def _window(rng, kw, precision, rectangular):
    if rectangular:
        return None
    (w,) = random_inputs(rng, [((kw.get("win_length", kw["n_fft"]),), REAL)], precision)
    return np.abs(w) + 0.5  # (a window that overlap-adds to no zero)


@pytest.mark.parametrize("precision", ["float32", "float64"])
@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("kw", CASES, ids=[str(i) for i in range(len(CASES))])
def test_stft_equals_torchs(kw, batched, precision):
    rng = np.random.default_rng(len(str(kw)))
    shape = (2, 30) if batched else (31,)
    for rectangular in (False, True):
        (x,) = random_inputs(rng, [(shape, REAL)], precision)
        w = _window(rng, kw, precision, rectangular)
        arrays = [x] if w is None else [x, w]

        def f(m, x, w=None):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # (torch's about the rectangular window)
                return m.stft(x, window=w, return_complex=True, **kw)

        compare(f, arrays, precision, scale=4.0)


@pytest.mark.parametrize("precision", ["float32", "float64"])
@pytest.mark.parametrize("length", [None, 27, 40])
@pytest.mark.parametrize("kw", CASES, ids=[str(i) for i in range(len(CASES))])
def test_istft_of_a_spectrum_equals_torchs(kw, length, precision):
    rng = np.random.default_rng(len(str(kw)) + 7)
    (x,) = random_inputs(rng, [((2, 30), REAL)], precision)
    w = _window(rng, kw, precision, False)
    inverse_kw = {k: v for k, v in kw.items() if k != "pad_mode"}

    def f(m, x, w):
        spectrum = m.stft(x, window=w, return_complex=True, **kw)
        return m.istft(spectrum * 1.5, window=w, length=length, **inverse_kw)

    try:
        torch_fails = None
        f(torch, torch.tensor(x), torch.tensor(w))
    except RuntimeError as exc:  # (a window padded with zeros fails NOLA past the signal)
        torch_fails = exc
    if torch_fails is not None:
        with pytest.raises(RuntimeError, match="overlap"):
            f(ember, ember.tensor(x), ember.tensor(w))
        return
    compare(f, [x, w], precision, scale=4.0)


@pytest.mark.parametrize("precision", ["float32", "float64"])
def test_complex_signals_and_complex_results_equal_torchs(precision):
    rng = np.random.default_rng(11)
    x, w = random_inputs(rng, [((2, 24), CPLX), ((6,), REAL)], precision)
    w = np.abs(w) + 0.5
    compare(lambda m, x, w: m.stft(x, 6, 2, window=w), [x, w], precision, scale=4.0)

    def round_trip(m, x, w):
        spectrum = m.stft(x, 6, 2, window=w, return_complex=True)
        return m.istft(spectrum, 6, 2, window=w, onesided=False, return_complex=True)

    compare(round_trip, [x, w], precision, scale=4.0)


def test_round_trip_recovers_the_signal_and_methods_agree():
    rng = np.random.default_rng(12)
    x = ember.tensor(rng.standard_normal((3, 50)))
    w = ember.tensor(np.hanning(16 + 1)[:-1])  # periodic Hann: NOLA at hop 4
    spectrum = x.stft(16, 4, window=w, return_complex=True)
    back = spectrum.istft(16, 4, window=w, length=50)
    np.testing.assert_allclose(back.numpy(), x.numpy(), atol=1e-12)
    np.testing.assert_allclose(
        ember.stft(x, 16, 4, window=w, return_complex=True).numpy(), spectrum.numpy()
    )


def test_return_complex_false_is_view_as_real_with_a_warning():
    x = np.random.default_rng(13).standard_normal(20)
    with pytest.warns(UserWarning, match="deprecated"):
        got = ember.stft(ember.tensor(x), 8, return_complex=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = torch.stft(torch.tensor(x), 8, return_complex=False)
    assert got.shape == tuple(want.shape)
    np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-12)


def test_errors_as_pytorchs():
    x = ember.randn(30)
    with pytest.raises(RuntimeError, match="return_complex"):
        ember.stft(x, 8)
    with pytest.raises(RuntimeError, match="win_length"):
        ember.stft(x, 8, win_length=9, return_complex=True)
    with pytest.raises(RuntimeError, match="window"):
        ember.stft(x, 8, window=ember.ones(5), return_complex=True)
    with pytest.raises(RuntimeError, match="hop_length"):
        ember.stft(x, 8, hop_length=0, return_complex=True)
    with pytest.raises(RuntimeError, match="complex"):
        ember.istft(x.reshape(5, 6), 8)
    with pytest.raises(RuntimeError, match="onesided"):
        ember.stft(x.to(ember.complex64), 8, onesided=True)
    spectrum = ember.stft(x, 8, return_complex=True)
    with pytest.raises(RuntimeError, match="frequency"):
        ember.istft(spectrum, 10)
