"""``x.view(dtype)``: a tensor's bytes as another dtype, against PyTorch (the values are
checked by tests/ops/samples_shape.py and opinfo_shape.py); here what is not a value."""

import numpy as np
import pytest

import ember
from ember.errors import ShapeError

torch = pytest.importorskip("torch")


def test_view_dtype_has_no_gradient_and_keeps_shape_rules():
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    e = ember.tensor(x, requires_grad=True)
    t = torch.tensor(x, requires_grad=True)
    for name in ("int32", "float16", "float64", "float32"):
        got, want = e.view(getattr(ember, name)), t.view(getattr(torch, name))
        assert tuple(got.shape) == tuple(want.shape)
        assert got.requires_grad == want.requires_grad == False  # noqa: E712
    assert tuple(e.view(dtype=ember.uint8).shape) == (2, 16)
    assert tuple(e.view(8).shape) == tuple(t.view(8).shape)
    with pytest.raises(ShapeError, match="multiple of 8"):
        ember.ones(3).view(ember.float64)
    with pytest.raises(ShapeError, match="0-d"):
        ember.ones(()).view(ember.int16)
    with pytest.raises(TypeError, match="shape or a dtype"):
        e.view(2, dtype=ember.int32)


def test_view_dtype_in_a_graph():
    f = ember.function(lambda v: v.view(ember.int32) & 0x7FFFFFFF)
    x = ember.tensor([-1.5, 2.0])
    np.testing.assert_array_equal(f(x).numpy(), np.abs(x.numpy()).view(np.int32))
