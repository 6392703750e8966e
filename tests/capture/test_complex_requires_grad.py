"""A traced op's complex results require grad where an operand does, as eagerly (eager.py's
floating and complex dtypes): user code that branches on ``requires_grad`` sees the same
answer in a captured function."""

import numpy as np

import ember


def test_complex_results_of_a_traced_op_require_grad_as_eagerly():
    x = ember.tensor(np.random.default_rng(0).standard_normal(64), requires_grad=True)
    window = ember.hann_window(16, dtype=ember.float64)
    seen = []

    def f(t):
        spectrum = ember.stft(t, 16, window=window, return_complex=True)
        seen.append((ember.fft.fft(t).requires_grad, spectrum.requires_grad))
        return spectrum.abs().sum()

    eager = (
        ember.fft.fft(x).requires_grad,
        ember.stft(x, 16, window=window, return_complex=True).requires_grad,
    )
    assert eager == (True, True)
    ember.function(f)(x)
    assert seen == [eager]
