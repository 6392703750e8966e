"""Divergences from PyTorch 2.13 found by the differential fuzzers (seeds 5000-6200, both
profiles), each reduced to its cause."""

import math

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def test_pow_exponent_gradient_multiplies_the_upstream_gradient_outside_the_mask():
    # seed 5526: pow_backward_exponent is g * where(x == 0 & y >= 0, 0, x ** y * log x), so a
    # NaN (or infinite) g gives NaN at a zero base too; ember masked g * ... to 0
    results = []
    for lib in (torch, ember):
        b = lib.tensor([1.0, 0.0, 1.0, 0.0, 2.0, -1.0, 0.0], requires_grad=True)
        e = lib.tensor([0.5, 0.5, -1.0, -1.0, 0.0, 0.5, 0.0], requires_grad=True)
        up = lib.tensor([math.nan, math.nan, 1.0, 1.0, math.inf, 1.0, math.inf])
        gb, ge = lib.autograd.grad(lib.pow(b, e), (b, e), up)
        mask = lib.tensor([True, False, True, False])
        (gm,) = lib.autograd.grad(
            lib.pow(mask, e[:4]), e, lib.tensor([math.nan, math.nan, 1.0, 1.0])
        )
        results.append([t.numpy() for t in (gb, ge, gm)])
    for got, want in zip(results[1], results[0]):
        np.testing.assert_array_equal(got, want)
