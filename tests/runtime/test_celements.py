"""kernels/celements.py: gather and scatter_add along an axis in one pass equal the NumPy
kernels of ops/gather.py bit for bit (a copy; the additions in np.add.at's order) over random
shapes, axes and dtypes, negative indices included, on one thread and two; an out-of-range
index falls back to NumPy, which names it; an index smaller than the input outside the axis
stays NumPy's; without a compiler both decline."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import ember
from ember.errors import EmberError
from ember.kernels import ccompile, celements, cpool
from ember.ops import REGISTRY

needs_cc = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")
GATHER, SCATTER_ADD = REGISTRY["gather"], REGISTRY["scatter_add"]
FLOATS = [np.float32, np.float64, ml_dtypes.bfloat16, np.float16]


def _case(rng, dtype):
    shape = tuple(int(s) for s in rng.integers(1, 7, size=int(rng.integers(1, 5))))
    axis = int(rng.integers(0, len(shape)))
    index_shape = list(shape)
    index_shape[axis] = int(rng.integers(1, 9))
    x = (rng.standard_normal(shape) * 5).astype(dtype)
    index = rng.integers(-shape[axis], shape[axis], index_shape)
    return x, index, axis


@needs_cc
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize(
    "dtype", FLOATS + [np.int64, np.int8, np.bool_, np.complex64], ids=lambda d: np.dtype(d).name
)
@pytest.mark.parametrize("seed", range(6))
def test_gather_and_scatter_add_equal_numpy_bit_for_bit(seed, dtype, threads):
    rng = np.random.default_rng(seed)
    x, index, axis = _case(rng, dtype)
    if seed == 0:  # (enough rows for the pool)
        x = (rng.standard_normal((600, 700)) * 5).astype(dtype)
        index, axis = rng.integers(-700, 700, (600, 900)), 1
    before = cpool.get_num_threads()
    cpool.set_num_threads(threads)
    try:
        got = GATHER.fast(x, index, axis=axis)
        want = GATHER.kernel(x, index, axis=axis)
        assert got is not None and got.dtype == want.dtype
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
        if dtype in FLOATS:
            src = (rng.standard_normal(index.shape) * 3).astype(dtype)
            got = SCATTER_ADD.fast(x, index, src, axis=axis)
            want = SCATTER_ADD.kernel(x, index, src, axis=axis)
            assert got is not None and got.dtype == want.dtype
            np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    finally:
        cpool.set_num_threads(before)


@needs_cc
def test_out_of_range_indices_fall_back_to_numpys_error():
    x = np.ones((3, 4), np.float32)
    bad = np.array([[0, 4], [1, 2], [0, 0]])
    assert GATHER.fast(x, bad, axis=1) is None
    assert SCATTER_ADD.fast(x, bad, np.ones((3, 2), np.float32), axis=1) is None
    with pytest.raises(EmberError, match="index 4 is out of bounds"):
        ember.gather(ember.tensor(x), 1, ember.tensor(bad))
    with pytest.raises(EmberError, match="out of bounds"):
        ember.tensor(x).scatter_add(1, ember.tensor(bad), ember.ones(3, 2))


@needs_cc
def test_an_index_smaller_outside_the_axis_stays_numpys():
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    index = np.array([[0, 5], [1, 1]])  # (2 of the 4 rows)
    assert celements.gather(x, index, 1) is None
    np.testing.assert_array_equal(
        ember.gather(ember.tensor(x), 1, ember.tensor(index)).numpy(), [[0, 5], [7, 7]]
    )


@needs_cc
def test_gradients_through_gather_are_scatter_adds():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    x = rng.standard_normal((5, 7))
    index = rng.integers(0, 7, (5, 9))
    ex, tx = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    (ember.gather(ex, 1, ember.tensor(index)) ** 2).sum().backward()
    (torch.gather(tx, 1, torch.tensor(index)) ** 2).sum().backward()
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-12)


def test_without_a_compiler_both_decline(monkeypatch):
    monkeypatch.setattr(ccompile, "compiler_available", lambda: False)
    celements._gather_function.cache_clear()
    celements._scatter_function.cache_clear()
    try:
        x = np.ones((2, 3), np.float32)
        index = np.zeros((2, 3), np.int64)
        assert celements.gather(x, index, 1) is None
        assert not celements.scatter_add(x.copy(), index, x, 1)
    finally:
        celements._gather_function.cache_clear()
        celements._scatter_function.cache_clear()
