"""Adaptive pooling's routes against PyTorch: max pooling over equal, disjoint windows (its C
kernel in 1-d and 2-d; a global max read as one row per plane), and averages over uneven
windows gathered along each axis; values, indices (ties and NaN) and gradients."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def test_adaptive_max_and_average_pools_equal_torch():
    rng = np.random.default_rng(0)
    cases = [  # (function, input shape, output size)
        ("adaptive_max_pool2d", (2, 3, 8, 8), (2, 4)),
        ("adaptive_max_pool1d", (2, 3, 12), 3),
        ("adaptive_max_pool1d", (2, 3, 10), 3),  # uneven windows: the adaptive kernel
        ("adaptive_max_pool2d", (1, 2, 6, 6), 1),  # global
        ("adaptive_max_pool3d", (1, 2, 4, 4, 4), 2),
        ("adaptive_avg_pool2d", (2, 3, 10, 9), 7),
        ("adaptive_avg_pool1d", (2, 3, 11), 4),
        ("adaptive_avg_pool3d", (1, 2, 5, 7, 6), (3, 2, 4)),
    ]
    for fn, shape, size in cases:
        for dtype in (np.float32, np.float64):
            x = rng.integers(-2, 3, shape).astype(dtype)  # ties everywhere
            # NaN reaches only the windows that hold it (max and average alike)
            x.reshape(-1)[rng.integers(0, x.size, 4)] = np.nan
            ex = ember.tensor(x, requires_grad=True)
            tx = torch.tensor(x, requires_grad=True)
            e_fn, t_fn = getattr(ember.nn.functional, fn), getattr(torch.nn.functional, fn)
            if "max" in fn:
                ev, ei = e_fn(ex, size, return_indices=True)
                tv, ti = t_fn(tx, size, return_indices=True)
                np.testing.assert_array_equal(ei.numpy(), ti.numpy(), err_msg=fn)
            ev, tv = e_fn(ex, size), t_fn(tx, size)
            tol = 1e-6 if dtype == np.float32 else 1e-12
            np.testing.assert_allclose(
                ev.detach().numpy(), tv.detach().numpy(), rtol=tol, atol=tol, equal_nan=True
            )
            g = rng.standard_normal(tuple(tv.shape)).astype(dtype)
            ev.backward(ember.tensor(g))
            tv.backward(torch.tensor(g))
            np.testing.assert_allclose(
                ex.grad.numpy(), tx.grad.numpy(), rtol=tol, atol=tol, equal_nan=True
            )
