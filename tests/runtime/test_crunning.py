"""kernels/crunning.py: cummax's and cummin's running positions in C equal ops/extra_reduce.py's
NumPy kernel (the specification) along every axis of random shapes, with ties, NaN and
infinities, in float32, float64, int32 and int64, on one thread and two; other dtypes decline;
the public functions' values and gradients equal PyTorch's."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.kernels import ccompile, cpool, crunning
from ember.ops.extra_reduce import _SELECT

needs_cc = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")


@needs_cc
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("kind", ["cummax", "cummin"])
@pytest.mark.parametrize("seed", range(10))
def test_positions_equal_the_numpy_kernel(seed, kind, threads):
    rng = np.random.default_rng(seed)
    shape = tuple(int(s) for s in rng.integers(1, 9, int(rng.integers(1, 5))))
    axis = int(rng.integers(0, len(shape)))
    if seed < 2:  # (enough work for the pool; along the last axis: eight rows side by side)
        shape, axis = (301, 700), 1 - seed
    before = cpool.get_num_threads()
    cpool.set_num_threads(threads)
    try:
        for dtype in (np.float32, np.float64, np.int32, np.int64):
            x = rng.integers(-3, 4, shape).astype(dtype)  # (small values: many ties)
            if x.dtype.kind == "f" and x.size > 3:
                x.reshape(-1)[rng.integers(0, x.size, 3)] = [np.nan, np.inf, -np.inf]
            got = _SELECT.fast(x, kind=kind, axis=axis)
            want = _SELECT.kernel(x, kind=kind, axis=axis)
            assert got is not None and got.dtype == np.int64
            np.testing.assert_array_equal(got, want)
    finally:
        cpool.set_num_threads(before)


@needs_cc
def test_other_dtypes_and_kinds_decline():
    assert crunning.positions(np.ones((2, 3), np.float16), 1, "cummax") is None
    assert _SELECT.fast(np.ones((2, 3), np.float32), kind="median", axis=1) is None


@pytest.mark.parametrize("kind", ["cummax", "cummin"])
def test_public_functions_match_pytorch(kind):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    x = rng.integers(-3, 4, (4, 6, 5)).astype(np.float64)
    for dim in range(3):
        t = torch.tensor(x, requires_grad=True)
        e = ember.tensor(x, requires_grad=True)
        tv, ti = getattr(torch, kind)(t, dim)
        ev, ei = getattr(ember, kind)(e, dim)
        np.testing.assert_array_equal(ev.detach().numpy(), tv.detach().numpy())
        np.testing.assert_array_equal(ei.numpy(), ti.numpy())
        g = rng.standard_normal(x.shape)
        tv.backward(torch.tensor(g))
        ev.backward(ember.tensor(g))
        np.testing.assert_array_equal(e.grad.numpy(), t.grad.numpy())
