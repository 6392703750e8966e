"""kernels/ctopk.py: PyTorch's topk positions equal the argsort op's NumPy kernel (its
specification, ops/_torch_order.py) exactly (descending and ascending, sorted or not, ties,
NaN above every number, -0.0 equal to 0.0) along every axis of random shapes,
float32/float64/bfloat16 (widened)/int64, on one thread and two; both against PyTorch's
indices; topk's values and gradients against PyTorch; no compiler: it declines."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import ember
from ember.kernels import ccompile, cpool, ctopk
from ember.ops import REGISTRY

try:
    import torch
except ImportError:  # (the kernels are still checked against each other)
    torch = None

needs_cc = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")
ARGSORT = REGISTRY["argsort"]


@needs_cc
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize(
    "dtype", [np.float32, np.float64, ml_dtypes.bfloat16, np.int64], ids=lambda d: np.dtype(d).name
)
@pytest.mark.parametrize("seed", range(5))
def test_first_k_equals_the_kernel(seed, dtype, ties, threads):
    rng = np.random.default_rng(seed)
    shape = tuple(int(s) for s in rng.integers(1, 40, size=int(rng.integers(1, 4))))
    if seed == 0:
        shape = (300, 900)  # (rows for the pool; the partial sorts only: the spec is slow)
    axis = int(rng.integers(0, len(shape)))
    n = shape[axis]
    x = rng.integers(-4, 4, shape) if ties else rng.standard_normal(shape)
    x = x.astype(dtype)
    if x.dtype.kind == "f" or dtype is ml_dtypes.bfloat16:
        flat = x.reshape(-1)
        flat[: min(6, flat.size)] = np.array([np.nan, -0.0, 0.0, np.nan, np.inf, -np.inf])[
            : min(6, flat.size)
        ].astype(dtype)
    before = cpool.get_num_threads()
    cpool.set_num_threads(threads)
    try:
        ks = {1, max(1, n // 70)} if seed == 0 else {1, max(1, n // 3), max(1, n - 1), n}
        for k in sorted(ks):
            for descending, ordered in ((True, True), (False, True), (True, False)):
                attrs = dict(axis=axis, descending=descending, k=k, ordered=ordered)
                want = ARGSORT.kernel(x, **attrs)
                got = ARGSORT.run(x, **attrs)
                np.testing.assert_array_equal(got, want)
                if torch is not None and seed and dtype is not ml_dtypes.bfloat16:
                    t = torch.tensor(x).topk(k, axis, largest=descending, sorted=ordered)
                    np.testing.assert_array_equal(got, t.indices.numpy())
    finally:
        cpool.set_num_threads(before)


@needs_cc
@pytest.mark.parametrize("largest", [True, False])
def test_topk_values_and_gradients_match_pytorch(largest):
    if torch is None:
        pytest.skip("PyTorch (the reference peer) is not installed")
    rng = np.random.default_rng(8)
    x = rng.standard_normal((64, 700))
    ex, tx = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    e_out, t_out = ex.topk(9, 1, largest=largest), tx.topk(9, 1, largest=largest)
    np.testing.assert_array_equal(e_out.indices.numpy(), t_out.indices.numpy())
    (e_out.values * np.arange(9.0)).sum().backward()
    (t_out.values * torch.arange(9.0)).sum().backward()
    np.testing.assert_array_equal(ex.grad.numpy(), tx.grad.numpy())


def test_without_a_compiler_it_declines(monkeypatch):
    monkeypatch.setattr(ccompile, "compiler_available", lambda: False)
    ctopk._function.cache_clear()
    try:
        assert ctopk.torch_k(np.ones((2, 5)), 2, True, True) is None
    finally:
        ctopk._function.cache_clear()


@needs_cc
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.uint8])
def test_unstable_sort_equals_the_kernel_and_pytorch(dtype):
    """Whole rows by std::sort's steps (stable=False): the C loop, the NumPy kernel (stable
    order, the Python steps on tied rows) and PyTorch's indices, along both axes."""
    rng = np.random.default_rng(3)
    x = rng.integers(0, 6, (40, 90)).astype(dtype)
    if x.dtype.kind == "f":
        x[rng.random(x.shape) < 0.1] = np.nan
    for axis in (0, 1):
        for descending in (False, True):
            attrs = dict(axis=axis, descending=descending, stable=False)
            got = ARGSORT.run(x, **attrs)
            np.testing.assert_array_equal(got, ARGSORT.kernel(x, **attrs))
            if torch is not None:
                want = torch.tensor(x).sort(axis, descending=descending).indices.numpy()
                np.testing.assert_array_equal(got, want)
