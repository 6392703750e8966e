"""nn.FractionalMaxPool2d/3d against PyTorch's modules (given the same ``_random_samples``),
their checks, their own draws, and capture."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("nd", [2, 3])
def test_module_with_fixed_samples_matches_pytorch(nd):
    rng = np.random.default_rng(nd)
    x = rng.standard_normal((2, 3) + (8,) * nd)
    u = rng.random((2, 3, nd))
    kwargs = dict(kernel_size=2, output_ratio=(0.5,) * nd, return_indices=True)
    tm = getattr(torch.nn, f"FractionalMaxPool{nd}d")(**kwargs, _random_samples=torch.tensor(u))
    em = getattr(ember.nn, f"FractionalMaxPool{nd}d")(**kwargs, _random_samples=ember.tensor(u))
    tx, ex = torch.tensor(x, requires_grad=True), ember.tensor(x, requires_grad=True)
    (tv, ti), (ev, ei) = tm(tx), em(ex)
    np.testing.assert_array_equal(ev.detach().numpy(), tv.detach().numpy())
    np.testing.assert_array_equal(ei.detach().numpy(), ti.detach().numpy())
    assert ei.dtype == ember.int64
    tv.sum().backward()
    ev.sum().backward()
    np.testing.assert_array_equal(ex.grad.numpy(), tx.grad.numpy())


def test_own_draws_pick_valid_windows():
    ember.manual_seed(0)
    x = ember.randn(4, 2, 10, 10)
    pool = ember.nn.FractionalMaxPool2d(3, output_size=(4, 4), return_indices=True)
    v, i = pool(x)
    assert tuple(v.shape) == (4, 2, 4, 4)
    flat = x.reshape(4, 2, 100).numpy()
    np.testing.assert_array_equal(
        np.take_along_axis(flat, i.reshape(4, 2, 16).numpy(), 2), v.reshape(4, 2, 16).numpy()
    )
    # every output is the maximum of a 3x3 window of the input
    rows, cols = i.numpy() // 10, i.numpy() % 10
    assert rows.max() <= 9 and cols.max() <= 9


def test_checks_match_pytorch():
    with pytest.raises(ValueError, match="output size, or a pooling ratio"):
        ember.nn.FractionalMaxPool2d(2)
    with pytest.raises(ValueError, match="between 0 and 1"):
        ember.nn.FractionalMaxPool2d(2, output_ratio=1.5)
    with pytest.raises(ValueError, match="output_size or an output_ratio"):
        ember.nn.functional.fractional_max_pool2d(ember.ones(1, 1, 4, 4), 2)
    with pytest.raises(RuntimeError, match="too large"):
        torch.nn.functional.fractional_max_pool2d(torch.ones(1, 1, 4, 4), 3, output_size=3)
    with pytest.raises(RuntimeError, match="fractional_max_pool2d.*too large"):
        ember.nn.functional.fractional_max_pool2d(ember.ones(1, 1, 4, 4), 3, output_size=3)
    with pytest.raises(NotImplementedError):
        ember.nn.functional.fractional_max_pool2d(
            ember.ones(1, 1, 4, 4, dtype=ember.int64), 2, output_size=2
        )


def test_captured_pool_matches_eager():
    u = ember.rand(1, 2, 2)
    x = ember.randn(1, 2, 9, 9)
    pool = ember.nn.FractionalMaxPool2d(2, output_size=4, _random_samples=u)
    f = ember.function(pool)
    np.testing.assert_array_equal(f(x).numpy(), pool(x).numpy())
