"""unique's stable order of one column of integers (ops/sorting.py `_stable_int_order`):
sorting the distinct keys (value - min) * n + position gives np.lexsort's stable order, so
the same first positions, inverse and counts, for every integer dtype and bools, negative
values, and spans too wide for int64 keys (which keep lexsort); unique against PyTorch."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.ops import sorting


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64, np.uint8, bool])
@pytest.mark.parametrize("seed", range(4))
def test_the_key_order_is_lexsorts(dtype, seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 3000))
    x = rng.integers(-100, 100, n) if dtype is not bool else rng.integers(0, 2, n)
    rows = x.astype(dtype).reshape(-1, 1)
    got = sorting._stable_int_order(rows)
    np.testing.assert_array_equal(got, np.lexsort(rows.T[::-1]))


def test_wide_spans_and_other_dtypes_decline():
    wide = np.array([[-(2**62)], [2**62], [0]], np.int64)
    assert sorting._stable_int_order(wide) is None
    assert sorting._stable_int_order(np.ones((3, 1), np.float32)) is None
    assert sorting._stable_int_order(np.ones((3, 2), np.int64)) is None
    assert sorting._stable_int_order(np.ones((3, 1), np.uint64)) is None


def test_unique_matches_pytorch():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(5).integers(-50, 50, (300, 40))
    got = ember.unique(ember.tensor(x), return_inverse=True, return_counts=True)
    want = torch.unique(torch.tensor(x), return_inverse=True, return_counts=True)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
