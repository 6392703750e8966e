"""kernels/cglu.py: the gated linear unit and its gradient in C equal ops/glu.py's NumPy
kernels to a few ulps (the vector exp), along every axis, on non-contiguous inputs, with NaN,
infinities and large |b| (no overflow; the gradient's s (1 - s) without cancelling)."""

import numpy as np
import pytest

from ember.kernels import ccompile, cglu
from ember.ops import glu as ops

pytestmark = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")


def test_glu_and_its_gradient_equal_the_numpy_kernels():
    rng = np.random.default_rng(0)
    for shape, axis in [((4, 10), 1), ((6, 3, 5), 0), ((2, 3, 8, 5), 2), ((3, 40), 1)]:
        for dtype in (np.float32, np.float64):
            x = (rng.standard_normal(shape) * 4).astype(dtype)
            x.reshape(-1)[:5] = [np.nan, np.inf, -np.inf, 90.0, -90.0]
            x = np.flip(x, axis=0)  # (non-contiguous)
            half = list(shape)
            half[axis] //= 2
            g = rng.standard_normal(half).astype(dtype)
            tol = 1e-5 if dtype == np.float32 else 1e-13
            with np.errstate(all="ignore"):
                pairs = [
                    (cglu.glu(x, axis), ops._glu_kernel(x, axis=axis)),
                    (cglu.glu_backward(x, g, axis), ops._backward_kernel(x, g, axis=axis)),
                ]
            for got, want in pairs:
                assert got.dtype == want.dtype and got.shape == want.shape
                np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    assert cglu.glu(np.ones((2, 4), np.float16), 1) is None  # (NumPy's)
