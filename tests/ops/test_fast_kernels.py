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
