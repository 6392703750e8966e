"""Numerics that differed from PyTorch (issue 18), each checked against torch 2.13 on the CPU
where it is installed and against values worked out by hand or in float64 otherwise. The
op-by-op comparison of every public function is tests/ops/test_opinfo.py."""

import numpy as np
import pytest

import ember

try:
    import torch
    import torch.nn.functional as TF
except ImportError:
    torch = TF = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")


# ------------------------------------------------------------------------- Python data


def test_python_floats_convert_straight_to_the_requested_dtype():
    assert ember.tensor(0.7, dtype=ember.float64).item() == 0.7  # not float32's 0.699999988
    assert ember.as_tensor([0.7], dtype=ember.float64).tolist() == [0.7]
    assert ember.Tensor([[0.1, 0.7]], dtype=ember.float64).tolist() == [[0.1, 0.7]]
    big = ember.tensor([1e300, -1e300], dtype=ember.float64)
    assert np.isfinite(big.numpy()).all() and big.tolist() == [1e300, -1e300]
    assert ember.tensor(2**53 + 1, dtype=ember.int64).item() == 2**53 + 1
    # without a dtype: the default float, rounded once from the Python double
    assert ember.tensor([0.7]).dtype == ember.float32
    assert ember.tensor([0.7]).numpy()[0] == np.float32(0.7)
    assert ember.tensor([1e300]).numpy()[0] == np.inf  # (as PyTorch: float32 overflows)
    assert ember.tensor([0.7], dtype=ember.bfloat16).numpy()[0] == np.asarray(
        0.7, ember.bfloat16.np
    )


# ------------------------------------------------------------------------------ arange


def test_float_arange_rounds_each_value_once():
    # start + i * step in double, rounded once to float32 (NumPy's float32 arange was an
    # ulp off in 41 of these 100 values)
    got = ember.arange(0, 10, 0.1).numpy()
    np.testing.assert_array_equal(got, (np.arange(100) * 0.1).astype(np.float32))
    got = ember.arange(-3.3, 7.1, 0.37, dtype=ember.float64).numpy()
    np.testing.assert_array_equal(got, np.arange(29) * 0.37 + -3.3)
    assert ember.arange(5).dtype == ember.int64 and ember.arange(0, 1, 0.25).shape == (4,)
    assert ember.arange(10, 0, -1.5).tolist() == [10.0, 8.5, 7.0, 5.5, 4.0, 2.5, 1.0]


@needs_torch
def test_float_arange_is_within_an_ulp_of_pytorchs():
    # (PyTorch's vectorized kernel adds j * step to each vector's float32-rounded first value,
    # so some of its values are an ulp of that first value away from the once-rounded ones,
    # which ember keeps: 17 of arange(0, 10, 0.1)'s 100 on an AVX512 machine)
    for args in [(0, 10, 0.1), (0, 1, 0.01), (-3.3, 7.1, 0.37), (0, 100, 0.3)]:
        got = ember.arange(*args).numpy()
        want = torch.arange(*args).numpy()
        assert got.shape == want.shape
        assert np.all(np.abs(got - want) <= np.spacing(np.abs(want).max())), args
