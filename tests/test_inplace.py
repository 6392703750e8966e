"""In-place methods: the direct route (one ufunc into the tensor's memory, when no gradient is
recorded) gives exactly what the general route (compute, then copy in) gives."""

import numpy as np
import pytest

import ember

CASES = [
    ("add_", (3, 4), np.float32, lambda: ember.randn(3, 4)),
    ("sub_", (3, 4), np.float32, lambda: ember.randn(4)),  # broadcast operand
    ("mul_", (3, 4), np.float32, lambda: 0.37),  # weak Python scalar keeps float32
    ("div_", (3, 4), np.float64, lambda: ember.randn(3, 1, dtype=ember.float64)),
    ("maximum_", (3, 4), np.float32, lambda: ember.randn(1, 4)),
    ("mul_", (5,), np.int64, lambda: 3),
    ("add_", (2, 2), np.float16, lambda: 1.5),
    ("exp_", (3, 4), np.float32, None),
    ("neg_", (6,), np.int32, None),
    ("sqrt_", (3,), np.float64, None),
]


def _general_route(method, x, arg):
    """What an in-place method means: the out-of-place op, written back in x's dtype."""
    out = getattr(ember, method[:-1])(x, *(() if arg is None else (arg,)))
    return out.numpy().astype(x.numpy().dtype)


@pytest.mark.parametrize("method, shape, dtype, make_arg", CASES, ids=[c[0] for c in CASES])
def test_direct_route_equals_the_general_route(method, shape, dtype, make_arg):
    ember.manual_seed(0)
    base = np.abs(np.random.default_rng(0).standard_normal(shape)) * 3 + 0.5
    x = ember.tensor(base.astype(dtype))
    arg = None if make_arg is None else make_arg()
    if dtype == np.int32 or dtype == np.int64:
        x = ember.tensor(np.arange(int(np.prod(shape))).reshape(shape).astype(dtype))
    expected = _general_route(method, x, arg)
    memory, version = x.numpy(), x._vc[0]
    with ember.no_grad():
        out = getattr(x, method)(*(() if arg is None else (arg,)))
    assert out is x and x.numpy() is memory  # written into the same memory
    assert x._vc[0] == version + 1
    assert x.numpy().dtype == dtype
    np.testing.assert_array_equal(x.numpy(), expected)


def test_views_see_the_write_and_aliasing_is_safe():
    x = ember.arange(6).float()
    view = x[2:]
    with ember.no_grad():
        x.add_(x)
    assert view.tolist() == [4.0, 6.0, 8.0, 10.0]
    x.mul_(x.flip(0))  # overlapping operand: the values read are the old ones
    assert x.tolist() == [0.0, 16.0, 24.0, 24.0, 16.0, 0.0]


def test_general_route_still_refuses_and_records():
    w = ember.ones(3, requires_grad=True)
    with pytest.raises(ember.AutogradError, match="leaf"):
        w.add_(1.0)
    y = w * 2
    y.mul_(3.0)  # recorded: the gradient sees the in-place multiply
    y.sum().backward()
    assert w.grad.tolist() == [6.0, 6.0, 6.0]


def test_promotions_the_target_cannot_hold_are_errors_or_general():
    x = ember.arange(3)  # int64
    with pytest.raises(ember.DTypeError):
        x.mul_(2.5)
    f = ember.ones(3)
    f.add_(ember.ones(3, dtype=ember.float64))  # float64 operand: general route, stays float32
    assert f.dtype == ember.float32 and f.tolist() == [2.0, 2.0, 2.0]
    with pytest.raises(ember.EmberError):
        f.add_(ember.ones(2, 3))  # would enlarge the target
