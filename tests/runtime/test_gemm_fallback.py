"""kernels/cgemm.py and gemm_tune.py where the C kernels may not apply (no compiler: run with
``CC=/bin/false``): products still equal NumPy's, and the tuning keeps every product whole."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ember.kernels import cgemm, gemm_tune


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize("m,k,n", [(1, 300, 200), (8, 64, 700), (200, 150, 130)])
def test_gemm_equals_numpy_with_or_without_the_compiled_kernels(dtype, m, k, n):
    rng = np.random.default_rng(m)
    a = (rng.standard_normal((m, k)) * 4).astype(dtype)
    b = (rng.standard_normal((n, k)) * 4).astype(dtype).T
    want = a.astype(np.float64) @ b.astype(np.float64)
    got = cgemm.gemm(a, b)
    assert got.dtype == np.result_type(a, b) and got.shape == (m, n)
    if np.issubdtype(dtype, np.integer):
        np.testing.assert_array_equal(got, want.astype(dtype))
    else:
        scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
        tol = 8 * np.finfo(dtype).eps * math.sqrt(k) * scale
        assert np.all(np.abs(got - want) <= tol)


def test_the_tuning_without_kernels_never_splits_nor_takes_skinny(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(gemm_tune, "_loaded", {})
    monkeypatch.setattr(gemm_tune, "_current", None)
    monkeypatch.setattr(gemm_tune, "_kernels", ())  # what a machine without a compiler measures
    tuning = gemm_tune.calibrate()
    assert tuning.split_flops(2) >= 1 << 62 and tuning.split_bytes(8) >= 1 << 62
    assert tuning.skinny_rows("float32") == 0 and tuning.few_rows("float32", 1) is None
    assert not gemm_tune.calibration_path().exists()  # nothing measured, nothing cached
    assert cgemm.available(np.float32) or cgemm.matmul(np.ones((64, 64)), np.ones((64, 64))) is None
