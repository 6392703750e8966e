"""Lone reductions whose kernels take the terms one after another (`ReductionRule.sequential`:
products in float32, float64 and int64, integer maxima, minima and sums) run in the C graph runner
(kernels/creduce_step.py) with the NumPy kernel's bits, over random shapes, axes and keepdim,
NaN and infinities among the terms, and agree with PyTorch; float maxima stay on generated
code (NumPy's SIMD maximum picks among equal zeros by its lanes); empty reductions keep the
kernel's identity or its error."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember
from ember.errors import EmberError
from ember.graph import interpreter
from ember.kernels import ccompile
from ember.runtime import cgraph
from ember.runtime.codegen import compile_graph

needs_c = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")


def _case(rng, dtype):
    nd = int(rng.integers(1, 5))
    shape = tuple(int(s) for s in rng.integers(1, 7, size=nd))
    axes = sorted(rng.choice(nd, int(rng.integers(1, nd + 1)), replace=False).tolist())
    if dtype == np.int64:
        x = rng.integers(-9, 10, shape)
        if rng.random() < 0.3:  # (products that overflow wrap, as NumPy's and PyTorch's)
            x = x * 2**40
    else:
        x = (1 + 0.3 * rng.standard_normal(shape)).astype(dtype)
        flat = x.reshape(-1)
        for value in (np.nan, np.inf, -np.inf, 0.0, -0.0):
            if rng.random() < 0.3:
                flat[int(rng.integers(flat.size))] = value
    return x, tuple(axes), bool(rng.integers(2))


def _runs(graph, x):
    steps = cgraph.c_steps(graph)
    assert steps is not None, str(graph)
    got = [cgraph.CGraphProgram(graph, steps, None, t)(x)[0] for t in (1, 2)]
    with np.errstate(all="ignore"):
        want = interpreter.run(graph, [x])[0]
        generated = compile_graph(graph)(x)[0]
    for g in (*got, generated):
        assert g.dtype == want.dtype and g.shape == want.shape
        assert np.array_equal(g.reshape(-1).view(np.uint8), want.reshape(-1).view(np.uint8))
    return got[0]


@needs_c
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_products_take_the_kernels_bits_and_agree_with_torch(dtype):
    rng = np.random.default_rng(int(np.dtype(dtype).num))
    for _ in range(12):
        x, axes, keep = _case(rng, dtype)
        graph = ember.trace(lambda t: ember.prod(t, axes, keep), ember.tensor(x)).graph  # noqa: B023
        got = _runs(graph, x)
        want = torch.tensor(x)
        for a in reversed(axes):
            want = torch.prod(want, a, keepdim=keep)
        want = want.numpy()
        if dtype == np.int64:
            assert np.array_equal(got, want)
        else:  # (PyTorch multiplies in another order: within rounding, NaN and infinities alike)
            np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == np.float32 else 1e-12)


@needs_c
def test_integer_maxima_and_minima_run_in_the_runner_as_torch():
    rng = np.random.default_rng(3)
    for _ in range(8):
        x, axes, keep = _case(rng, np.int64)
        for ours, theirs in ((ember.amax, torch.amax), (ember.amin, torch.amin)):
            graph = ember.trace(lambda t: ours(t, axes, keep), ember.tensor(x)).graph  # noqa: B023
            got = _runs(graph, x)
            assert np.array_equal(got, theirs(torch.tensor(x), axes, keep).numpy())
    x = rng.integers(-100, 100, (5, 7))
    for ours, theirs in ((ember.max, torch.max), (ember.min, torch.min)):  # (every element)
        got = _runs(ember.trace(ours, ember.tensor(x)).graph, x)
        assert np.array_equal(got, theirs(torch.tensor(x)).numpy())


@needs_c
def test_integer_sums_and_float_means_run_in_the_runner_as_torch():
    rng = np.random.default_rng(4)
    for _ in range(8):
        x, axes, keep = _case(rng, np.int64)
        x = x * 2**20  # (sums that overflow wrap, in any order)
        graph = ember.trace(lambda t: ember.sum(t, axes, keep), ember.tensor(x)).graph  # noqa: B023
        got = _runs(graph, x)
        assert np.array_equal(got, torch.sum(torch.tensor(x), axes, keep).numpy())
    # a mean over trailing axes: the lone sum's step, then the division's loop
    x = rng.standard_normal((3, 4, 50)).astype(np.float32)
    for axes in ((2,), (1, 2)):
        graph = ember.trace(lambda t: ember.mean(t, axes), ember.tensor(x)).graph  # noqa: B023
        got = _runs(graph, x)
        np.testing.assert_allclose(got, torch.mean(torch.tensor(x), axes).numpy(), atol=1e-6)


@needs_c
def test_float_maxima_stay_on_generated_code_and_propagate_nan_as_torch():
    x = np.array([[1.0, np.nan, 3.0], [0.0, -0.0, -np.inf]], np.float32)
    for ours, theirs in ((ember.amax, torch.amax), (ember.amin, torch.amin)):
        graph = ember.trace(lambda t: ours(t, 1), ember.tensor(x)).graph  # noqa: B023
        assert cgraph.c_steps(graph) is None
        got = compile_graph(graph)(x)[0]
        np.testing.assert_array_equal(got, theirs(torch.tensor(x), 1).numpy())


@needs_c
def test_empty_reductions_keep_the_kernels_identity_or_error():
    x = np.zeros((3, 0), np.float32)
    graph = ember.trace(lambda t: ember.prod(t, 1), ember.tensor(x)).graph
    assert cgraph.c_steps(graph) is None  # (no terms: the kernel's identity, generated code)
    np.testing.assert_array_equal(compile_graph(graph)(x)[0], torch.ones(3).numpy())
    for fn in (ember.amax, ember.amin):
        with pytest.raises(EmberError, match=r"amax|amin|max|min") as info:
            ember.trace(lambda t: fn(t, 1), ember.tensor(x.astype(np.int64)))  # noqa: B023
        assert "(3, 0)" in str(info.value) or "empty" in str(info.value).lower()
