"""kernels/ccdist.py: cdist's direct algorithm in C against ops/cdist_direct.py's NumPy kernels
(the specification), forward and the gradient op, over random batched shapes with coinciding
rows and coordinates (zero distances and differences), on one thread and two: bit for bit at
p = 0, 1, 2 and inf (the same operations in the same order), within a few ulps at other p
(the C library's pow against NumPy's); other dtypes decline."""

from __future__ import annotations

import numpy as np
import pytest

from ember.kernels import ccdist, ccompile, cpool
from ember.ops.cdist_direct import CDIST_DIRECT, CDIST_DIRECT_BACKWARD

needs_cc = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")
EXACT = (0.0, 1.0, 2.0, float("inf"))


def _case(rng, dtype):
    batch = tuple(int(s) for s in rng.integers(1, 4, int(rng.integers(0, 3))))
    P, R, M = (int(s) for s in rng.integers(1, 12, 3))
    if rng.random() < 0.2:
        P, R, M = 70, 90, 33  # (enough work for the pool)
    x1 = rng.standard_normal((*batch, P, M)).astype(dtype)
    x2 = rng.standard_normal((*batch, R, M)).astype(dtype)
    x2[..., 0, :] = x1[..., -1, :]  # (a zero distance)
    x1[..., 0, 0] = x2[..., -1, 0]  # (a zero difference)
    return x1, x2


@needs_cc
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, float("inf"), 0.5, 1.5, 3.0])
@pytest.mark.parametrize("seed", range(6))
def test_the_c_kernels_equal_the_numpy_kernels(seed, p, threads):
    rng = np.random.default_rng(seed)
    before = cpool.get_num_threads()
    cpool.set_num_threads(threads)
    try:
        for dtype in (np.float32, np.float64):
            x1, x2 = _case(rng, dtype)
            want = CDIST_DIRECT.kernel(x1, x2, p=p)
            got = CDIST_DIRECT.fast(x1, x2, p=p)
            g = rng.standard_normal(want.shape).astype(dtype)
            want_grad = CDIST_DIRECT_BACKWARD.kernel(g, x1, x2, want, p=p)
            got_grad = CDIST_DIRECT_BACKWARD.fast(g, x1, x2, want, p=p)
            assert got.shape == want.shape and got_grad.shape == want_grad.shape == x1.shape
            if p in EXACT:
                np.testing.assert_array_equal(got, want)
                np.testing.assert_array_equal(got_grad, want_grad)
            else:
                ulps = 8 * np.finfo(dtype).eps
                np.testing.assert_allclose(got, want, rtol=ulps, atol=0)
                # (terms of either sign: cancellation bounded by the terms' own size)
                scale = np.abs(want_grad).max() + 1
                np.testing.assert_allclose(got_grad, want_grad, rtol=ulps, atol=ulps * scale)
    finally:
        cpool.set_num_threads(before)


@needs_cc
def test_other_dtypes_decline():
    a = np.ones((1, 2, 3), np.float16)
    assert ccdist.cdist(a, a, 1.0, "one", ()) is None
    assert (
        ccdist.cdist_backward(np.ones((1, 2, 2), np.float16), a, a, a[..., :2], 1.0, "one") is None
    )


@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 3.0, float("inf")])
def test_pdist_through_the_direct_op_matches_pytorch(p):
    # eager pdist: every pair by cdist_direct, then the pairs i < j (a duplicated row: a zero
    # distance, gradient 0 there)
    torch = pytest.importorskip("torch")
    import ember

    rng = np.random.default_rng(int(p * 10) if p < 10 else 99)
    x = rng.standard_normal((9, 4))
    x[5] = x[2]
    t = torch.tensor(x, requires_grad=True)
    e = ember.tensor(x, requires_grad=True)
    y, z = torch.nn.functional.pdist(t, p), ember.nn.functional.pdist(e, p)
    g = rng.standard_normal(tuple(y.shape))
    y.backward(torch.tensor(g))
    z.backward(ember.tensor(g))
    np.testing.assert_allclose(z.detach().numpy(), y.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-12)
