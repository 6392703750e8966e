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


VIEWS = [
    ("view -1", lambda x: x.view(-1)),
    ("view 3,-1", lambda x: x.view(3, -1)),
    ("reshape", lambda x: x.reshape(4, 6)),
    ("unsqueeze 0", lambda x: x.unsqueeze(0)),
    ("unsqueeze -1", lambda x: x.unsqueeze(-1)),
    ("squeeze", lambda x: x[:1].squeeze()),
    ("squeeze 0", lambda x: x[:1].squeeze(0)),
    ("squeeze 1", lambda x: x[:1].squeeze(1)),
    ("t", lambda x: x[0].t()),
    ("expand", lambda x: x[:1].expand(5, -1, -1)),
    ("expand lead", lambda x: x[:1].expand(2, 5, -1, 4)),
]


@pytest.mark.parametrize("name,fn", VIEWS, ids=[v[0] for v in VIEWS])
def test_views(name, fn):
    """Shapes, node names, shared memory and version counters, gradients against PyTorch."""
    a = np.random.default_rng(9).standard_normal((3, 2, 4)).astype(np.float32)
    e, t = _pair(a)
    ev, tv = fn(e), fn(t)
    assert tuple(ev.shape) == tuple(tv.shape)
    assert ev.grad_fn.name() == tv.grad_fn.name()
    np.testing.assert_array_equal(ev.detach().numpy(), tv.detach().numpy())
    w = np.arange(ev.numel(), dtype=np.float32).reshape(tuple(ev.shape))
    (ev * ember.tensor(w)).sum().backward()
    (tv * torch.tensor(w)).sum().backward()
    np.testing.assert_array_equal(e.grad.numpy(), t.grad.numpy())
    base = ember.tensor(a)
    view = fn(base)
    assert view._version == base._version and np.shares_memory(view.numpy(), base.numpy())
    base.add_(1.0)  # (one version counter for a tensor and its views)
    assert view._version == base._version == 1


def test_view_errors():
    x, t = ember.ones(2, 1, 3), torch.ones(2, 1, 3)
    for bad in (lambda a: a.view(4, -1), lambda a: a.view(-1, -1), lambda a: a.unsqueeze(4)):
        with pytest.raises((RuntimeError, IndexError)):
            bad(t)
        with pytest.raises((RuntimeError, IndexError)):
            bad(x)
    # -1 in a new leading dimension: refused (it names no existing size)
    with pytest.raises(RuntimeError, match="leading"):
        torch.ones(2, 1, 3).expand(-1, 2, 1, 3)
    with pytest.raises(RuntimeError, match="leading"):
        x.expand(-1, 2, 1, 3)
    with pytest.raises(RuntimeError):
        ember.ones(2, 3, 4).t()
    with pytest.raises(RuntimeError):
        torch.ones(2, 3, 4).t()
    assert ember.ones(3).t().shape == torch.ones(3).t().shape
