"""The torchnames branch's additions that OpInfos do not reach: Tensor attributes and
new_empty_strided, named result tuples, capture of the composites, the in-place comparisons'
dtype, and torch.range's deprecation warning; each against PyTorch where it has the name."""

import numpy as np
import pytest
import torch

import ember


def test_itemsize_and_output_nr_match_pytorch():
    for name in ("bool", "uint8", "int16", "int64", "float16", "bfloat16", "float32"):
        assert ember.zeros(2, dtype=getattr(ember, name)).itemsize == (
            torch.zeros(2, dtype=getattr(torch, name)).itemsize
        )
    e = ember.randn(4, requires_grad=True)
    t = torch.randn(4, requires_grad=True)
    assert [p.output_nr for p in e.split(2)] == [p.output_nr for p in t.split(2)] == [0, 1]
    assert e.output_nr == t.output_nr == 0


def test_new_empty_strided_layout():
    x = ember.zeros(3, dtype=ember.float16)
    y = x.new_empty_strided((2, 3), (1, 2))
    t = torch.zeros(3, dtype=torch.float16).new_empty_strided((2, 3), (1, 2))
    assert tuple(y.shape) == tuple(t.shape) and y.stride() == t.stride()
    assert y.dtype == ember.float16
    assert x.new_empty_strided((2,), (1,), dtype=ember.int32).dtype == ember.int32


def test_named_tuples():
    r = ember.frexp(ember.tensor([3.0, -0.25]))
    m, e = r
    assert r.mantissa is m and r.exponent is e
    assert type(r).__name__ == "frexp" and r._fields == ("mantissa", "exponent")
    np.testing.assert_array_equal(m.numpy(), [0.75, -0.5])
    np.testing.assert_array_equal(e.numpy(), [2, -1])


def test_quantile_and_scatters_capture():
    x = np.random.default_rng(0).standard_normal((4, 5))

    def f(t):
        q = ember.quantile(t, ember.tensor([0.2, 0.8], dtype=t.dtype), dim=1)
        return q.sum() + ember.slice_scatter(t, t[:, :2] * 2, 1, 0, 2).sum()

    captured = ember.function(f)
    want = f(ember.tensor(x))
    got = captured(ember.tensor(x))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)


def test_inplace_comparisons_keep_the_dtype():
    for name in ("eq_", "ne_", "lt_", "le_", "gt_", "ge_"):
        e = ember.tensor([1.0, 2.0, 3.0])
        t = torch.tensor([1.0, 2.0, 3.0])
        assert getattr(e, name)(2.0) is e
        getattr(t, name)(2.0)
        assert e.dtype == ember.float32
        np.testing.assert_array_equal(e.numpy(), t.numpy())
    e, t = ember.tensor([0, 3, 5]), torch.tensor([0, 3, 5])
    e.logical_and_(ember.tensor([1, 0, 2]))
    t.logical_and_(torch.tensor([1, 0, 2]))
    assert e.dtype == ember.int64
    np.testing.assert_array_equal(e.numpy(), t.numpy())


def test_range_warns_as_pytorch():
    with pytest.warns(UserWarning, match="deprecated"):
        ember.range(1, 3)
