"""Regressions of hunt52, each compared with PyTorch 2.13:

* A NaN that log, log2, log10, sqrt, logit or ``x ** 0.5`` creates from a negative float32 or
  float64 operand is +NaN, PyTorch's (NumPy and glibc give the x86 default NaN, sign bit set),
  eagerly at every size and in captured graphs' fused loops. ``torch.signbit`` and
  ``copysign`` read it.
"""

import math

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _signs(t) -> list:
    return [math.copysign(1.0, v) for v in t.detach().double().reshape(-1).tolist()]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n", [1, 37, 5000])
def test_created_nan_sign_is_pytorchs(dtype, n):
    values = np.resize(np.array([-2.0, -0.5, -np.inf, 4.0, np.nan], np.float64), n)

    def program(T):
        x = T.tensor(values).to(getattr(T, dtype))
        outs = [
            T.log(x),
            T.log2(x),
            T.log10(x),
            T.sqrt(x),
            x**0.5,
            T.logit(x.float().clamp(min=-5) + 3),
        ]
        outs.append(T.copysign(T.ones(n), T.log(x).float()))
        return outs

    for e, t in zip(program(ember), program(torch)):
        assert _signs(e) == _signs(t)


def test_created_nan_sign_in_a_captured_graph():
    def program(T, x):
        return (x * 2).log() + 1, (x - 1).sqrt() * 3, T.log10(x + x)

    x = -np.linspace(0.5, 4, 3000)
    for dtype in ("float32", "float64"):
        f = ember.function(lambda x: program(ember, x))
        got = f(ember.tensor(x, dtype=getattr(ember, dtype)))
        want = program(torch, torch.tensor(x, dtype=getattr(torch, dtype)))
        for e, t in zip(got, want):
            assert _signs(e) == _signs(t)
