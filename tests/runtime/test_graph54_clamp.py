"""clamp with one or two constant bounds against PyTorch 2.13, bit for bit: a value equal to a
bound stays itself (-0.0 against 0 is -0.0, 0.0 against -0.0 is 0.0) with one bound as with
two, NaN in x stays NaN, a NaN bound gives NaN everywhere, lo > hi gives hi. Eagerly (the NumPy
kernel or the half-precision loop), in a fused C loop, in a convolution's store, and for
integer dtypes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember
import ember.nn.functional as F
from ember.ops._registry import REGISTRY

NAN, INF = float("nan"), float("inf")
SPECIAL = [-0.0, 0.0, NAN, -1.0, 1.0, 2.0, 0.5, INF, -INF, 6.0, -6.0]
BOUNDS = [
    (0.0, None),
    (None, 0.0),
    (-0.0, None),
    (None, -0.0),
    (0.0, 0.0),
    (-0.0, 6.0),
    (0.0, 1.0),
    (NAN, None),
    (None, NAN),
    (0.0, NAN),
    (1.0, 0.0),
]


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.dtype(f"u{a.dtype.itemsize}"))


def _want(x: np.ndarray, lo, hi) -> np.ndarray:
    return torch.clamp(torch.from_numpy(x.copy()), lo, hi).numpy()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("lo,hi", BOUNDS)
def test_kernel_eager_and_fused_loop_match_torch(dtype, lo, hi):
    x = np.array(SPECIAL * 13, dtype)  # (past a vector's worth, with a remainder)
    want = _want(x, lo, hi)
    kernel = REGISTRY["clip"].kernel(x, lo=lo, hi=hi)
    assert np.array_equal(_bits(kernel), _bits(want))
    eager = ember.clamp(ember.tensor(x), lo, hi).numpy()
    assert np.array_equal(_bits(eager), _bits(want))
    fused = ember.function(lambda a: ember.clamp(a * 1.0, lo, hi))(ember.tensor(x)).numpy()
    assert np.array_equal(_bits(fused), _bits(want))


@pytest.mark.parametrize("lo,hi", [(0.0, None), (None, 0.0), (-0.0, 6.0)])
def test_convolution_store_keeps_signed_zeros(lo, hi):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 2, 6, 6)).astype(np.float32)
    w = np.zeros((3, 2, 3, 3), np.float32)
    w[0, 0, 1, 1] = -1.0  # (channel 0: -x, ties at the bounds where x is 0.0)
    x[0, 0, 2, :] = 0.0
    w[1] = rng.standard_normal((2, 3, 3))
    want = torch.clamp(torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w)), lo, hi)
    got = ember.function(lambda a, b: ember.clamp(F.conv2d(a, b), lo, hi))(
        ember.tensor(x), ember.tensor(w)
    )
    unclamped = F.conv2d(ember.tensor(x), ember.tensor(w)).numpy()
    assert np.array_equal(_bits(got.numpy()), _bits(_want(unclamped, lo, hi)))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8, np.int8])
@pytest.mark.parametrize("lo,hi", [(0, None), (None, 2), (1, 3), (3, 1)])
def test_integer_dtypes(dtype, lo, hi):
    x = np.array([0, 1, 2, 3, 5, 7, 100], dtype)
    if np.dtype(dtype).kind == "i":
        x = np.concatenate([x, -x])
    want = _want(x, lo, hi)
    got = ember.clamp(ember.tensor(x), lo, hi).numpy()
    assert got.dtype == want.dtype and np.array_equal(got, want)
    fused = ember.function(lambda a: ember.clamp(a + 0, lo, hi))(ember.tensor(x)).numpy()
    assert np.array_equal(fused, want)


def test_store_blocks_of_bounds_differing_only_in_a_zeros_sign_are_apart():
    # (the stores' clamp blocks are cached by bounds; -0.0 == 0.0 must not share one)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 2, 6, 6)).astype(np.float32)
    w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    unclamped = F.conv2d(ember.tensor(x), ember.tensor(w)).numpy()
    for lo in (-0.0, 0.0, -0.0):
        f = ember.function(lambda a, b: ember.clamp(F.conv2d(a, b), lo, 6.0))  # noqa: B023
        got = f(ember.tensor(x), ember.tensor(w)).numpy()
        assert np.array_equal(_bits(got), _bits(_want(unclamped, lo, 6.0))), lo


def test_eager_16_bit_clamps_with_bounds_of_either_zero_sign_keep_their_own_loops():
    """The eager half-precision loops were cached by attributes' equality (0.0 == -0.0): after
    clamp(x, 0.0) a clamp(x, -0.0) ran the first one's loop and gave +0.0 for -0.0."""
    values = np.array([-1.0, -0.0, 0.0, 2.0, -3.0], np.float32)
    for dtype in ("bfloat16", "float16"):
        x = ember.tensor(values).to(getattr(ember, dtype))
        tx = torch.tensor(values).to(getattr(torch, dtype))
        for lo in (0.0, -0.0, 0.0):
            got = ember.clamp(x * 2.0, lo, None).float().numpy()
            want = torch.clamp(tx * 2.0, lo, None).float().numpy()
            assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), (dtype, lo)
