"""Small eager ops whose public functions now apply their primitives directly (max/min along
a dim, stack, ``.item()``): values, dtypes, gradients, node names and errors against PyTorch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember


def _pair(a, grad=True):
    return ember.tensor(a, requires_grad=grad), torch.tensor(a, requires_grad=grad)


@pytest.mark.parametrize("fn", ["max", "min"])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_max_min_dim(fn, dim, keepdim):
    a = np.random.default_rng(7).standard_normal((3, 4, 5)).astype(np.float32)
    a[0, 1, :3] = a[0, 1, 3]  # (ties: the first index, and only it, gets the gradient)
    a[2, 2, 1] = np.nan  # (a NaN wins, as PyTorch's)
    e, t = _pair(a)
    ev, ei = getattr(e, fn)(dim, keepdim=keepdim)
    tv, ti = getattr(t, fn)(dim, keepdim=keepdim)
    assert ev.grad_fn.name() == tv.grad_fn.name()
    assert ei.dtype is ember.int64 and not ei.requires_grad
    np.testing.assert_array_equal(ei.numpy(), ti.numpy())
    np.testing.assert_array_equal(ev.detach().numpy(), tv.detach().numpy())
    weights = np.arange(ev.numel(), dtype=np.float32).reshape(tuple(ev.shape))
    (ev * ember.tensor(weights)).nansum().backward()
    (tv * torch.tensor(weights)).nansum().backward()
    np.testing.assert_array_equal(e.grad.numpy(), t.grad.numpy())


def test_max_dim_special_inputs():
    for a in (np.array([True, False, True]), np.array(3.0, np.float32), np.arange(6).reshape(2, 3)):
        for dim in (0, -1):
            ev, ei = ember.tensor(a).max(dim)
            tv, ti = torch.tensor(a).max(dim)
            assert ev.dtype.itemsize == tv.dtype.itemsize and tuple(ev.shape) == tuple(tv.shape)
            np.testing.assert_array_equal(ev.numpy(), tv.numpy())
            np.testing.assert_array_equal(ei.numpy(), ti.numpy())
    with pytest.raises(IndexError):
        ember.ones(2, 3).max(2)
    with pytest.raises(IndexError):
        ember.ones(2, 0).max(1)
    with pytest.raises(IndexError):
        torch.ones(2, 0).max(1)


def test_stack():
    r = np.random.default_rng(8)
    a, b = r.standard_normal((2, 3)).astype(np.float32), r.standard_normal((2, 3))
    ea, ta = _pair(a)
    eb, tb = _pair(b)
    for dim in (0, 1, 2, -1):
        out, ref = ember.stack([ea, eb], dim), torch.stack([ta, tb], dim)
        assert out.dtype is ember.float64 and out.grad_fn.name() == ref.grad_fn.name()
        np.testing.assert_array_equal(out.detach().numpy(), ref.detach().numpy())
        w = np.arange(out.numel(), dtype=np.float64).reshape(tuple(out.shape))
        (out * ember.tensor(w)).sum().backward()
        (ref * torch.tensor(w)).sum().backward()
    np.testing.assert_array_equal(ea.grad.numpy(), ta.grad.numpy())
    np.testing.assert_array_equal(eb.grad.numpy(), tb.grad.numpy())
    single = ember.stack([ember.tensor(a)])
    assert tuple(single.shape) == (1, 2, 3)
    with pytest.raises(RuntimeError, match="one shape"):
        ember.stack([ember.tensor(a), ember.tensor(b[:1])])
    with pytest.raises(RuntimeError):
        torch.stack([torch.tensor(a), torch.tensor(b[:1])])


@pytest.mark.parametrize(
    "dtype", ["bfloat16", "float16", "float32", "float64", "int64", "uint8", "bool", "complex64"]
)
def test_item(dtype):
    e = ember.ones((1, 1), dtype=getattr(ember, dtype))
    t = torch.ones((1, 1), dtype=getattr(torch, dtype))
    assert type(e.item()) is type(t.item()) and e.item() == t.item()
    with pytest.raises(RuntimeError):
        ember.ones(2, dtype=getattr(ember, dtype)).item()
