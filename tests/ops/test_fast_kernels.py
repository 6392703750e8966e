"""Kernels that take a faster route than the obvious NumPy call are bit-identical to it."""

import ml_dtypes
import numpy as np
import pytest

from ember.ops.where import _where_kernel

SHAPES = [((3, 4), (3, 4), (3, 4)), ((3, 4), (4,), ()), ((3, 1), (), (1, 4)), ((), (2,), (2,))]


@pytest.mark.parametrize(
    "dtype",
    [np.float32, np.float64, np.float16, ml_dtypes.bfloat16, np.int64, np.int8, np.uint8, np.bool_],
)
@pytest.mark.parametrize("shapes", SHAPES)
def test_where_kernel_equals_numpy_where_bit_for_bit(dtype, shapes):
    r = np.random.default_rng(0)
    cond_shape, x_shape, y_shape = shapes
    cond = np.asarray(r.random(cond_shape) > 0.5)
    x = np.asarray((r.standard_normal(x_shape) * 10).astype(dtype))
    y = np.asarray((r.standard_normal(y_shape) * 10).astype(dtype))
    for a in (x, np.zeros(x_shape, dtype)):
        for b in (y, np.zeros(y_shape, dtype)):
            expected = np.where(cond, a, b)
            got = np.asarray(_where_kernel(cond, a, b))
            assert got.dtype == expected.dtype and got.shape == expected.shape
            assert got.tobytes() == expected.tobytes()


def test_where_kernel_keeps_special_values():
    x = np.array([np.nan, np.inf, -0.0, 1.0, -np.inf], np.float32)
    cond = np.array([True, True, True, False, True])
    got = _where_kernel(cond, x, np.zeros((), np.float32))
    assert np.isnan(got[0]) and got[1] == np.inf and np.signbit(got[2]) and got[3] == 0
    assert got[4] == -np.inf
    mixed = _where_kernel(cond, x, np.array([5.0, 5, 5, 5, 5], np.float64))  # falls back
    assert mixed.dtype == np.float64 and mixed[3] == 5.0


def test_scatter_add_of_whole_slices_takes_index_adds_kernel_with_its_bits():
    """An index that varies only along the scatter's axis (``idx[:, None].expand(-1, d)``, a
    graph network's message sum) adds whole slices: kernels/cindex.py's accumulate_slices, in
    np.add.at's order, so the result equals NumPy's bit for bit; out-of-range indices still
    get the NumPy kernel's error."""
    import ember

    rng = np.random.default_rng(0)
    for dtype in (np.float32, np.float64):
        x = rng.standard_normal((50, 8)).astype(dtype)
        src = rng.standard_normal((300, 8)).astype(dtype)
        idx = rng.integers(0, 50, 300)
        index = ember.tensor(idx)[:, None].expand(300, 8)
        got = ember.tensor(x).scatter_add(0, index, ember.tensor(src)).numpy()
        want = x.copy()
        np.add.at(want, (np.broadcast_to(idx[:, None], (300, 8)), np.arange(8)[None, :]), src)
        np.testing.assert_array_equal(got, want)
        # along the last axis
        got = ember.tensor(x.T.copy()).scatter_add(1, index.t(), ember.tensor(src.T.copy()))
        np.testing.assert_array_equal(got.numpy(), want.T)
    for shape, axis in (((0, 3), 0), ((2, 0), 0), ((2, 0), 1)):  # (empty: nothing to add)
        empty = ember.zeros(*shape, dtype=ember.int64)
        np.testing.assert_array_equal(
            ember.ones(*shape).scatter_add(axis, empty, ember.ones(*shape)).numpy(),
            np.ones(shape),
        )
    bad = ember.tensor(np.full(300, 50))[:, None].expand(300, 8)
    with pytest.raises(IndexError):
        ember.zeros(50, 8).scatter_add(0, bad, ember.ones(300, 8))
