"""The direct in-place routes (ops/_pointwise_inplace.py: addcmul_, addcdiv_, lerp_ written
into the tensor's memory where nothing is recorded; Tensor._ufunc_inplace's shape checks on
arrays) against the general route's bits, against PyTorch, and keeping its refusals."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember

RNG = np.random.default_rng(60)


def _arrays(dtype, shape=(7, 5)):
    x, a, b = (RNG.standard_normal(shape).astype(dtype) for _ in range(3))
    return x, a, b + np.sign(b) * 2  # (a divisor away from zero)


CASES = [
    ("addcmul_", (), {}),
    ("addcmul_", (), {"value": 0.3}),
    ("addcmul_", (), {"value": -3}),
    ("addcdiv_", (), {}),
    ("addcdiv_", (), {"value": -2.5}),
    ("lerp_", (0.3,), {}),
    ("lerp_", (0.7,), {}),
    ("lerp_", (-0.5,), {}),
]


def _call(lib, name, x, a, b, args, kwargs):
    operands = (a,) if name == "lerp_" else (a, b)
    return getattr(x, name)(*operands, *args, **kwargs)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,args,kwargs", CASES)
def test_direct_route_has_the_general_routes_bits(dtype, name, args, kwargs):
    x, a, b = _arrays(dtype)
    e = ember.tensor(x.copy())
    ea, eb = ember.tensor(a), ember.tensor(b)
    with ember.no_grad():
        out = _call(ember, name, e, ea, eb, args, kwargs)
    assert out is e and e._version == 1
    # the out-of-place composite (the specification the direct route follows op by op)
    operands = (ea,) if name == "lerp_" else (ea, eb)
    ref = getattr(ember, name[:-1])(ember.tensor(x), *operands, *args, **kwargs)
    np.testing.assert_array_equal(e.numpy().view(np.uint8), ref.numpy().view(np.uint8))
    # PyTorch: its own order of roundings, a few ulps of the operands' magnitude apart
    t = torch.tensor(x.copy())
    with torch.no_grad():
        _call(torch, name, t, torch.tensor(a), torch.tensor(b), args, kwargs)
    scale = (np.abs(x) + np.abs(a) * 3 + np.abs(b)).max()
    eps = np.finfo(dtype).eps
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=0, atol=8 * eps * scale)


def test_direct_route_without_a_compiler_shape(monkeypatch):
    """lerp_'s fused multiply-add without the C kernel (its NumPy op), and a strided self
    (the C call takes contiguous memory only): the same bits."""
    from ember.kernels import cadd_alpha

    x, a, _ = _arrays(np.float32, (6, 8))
    ref = ember.lerp(ember.tensor(x), ember.tensor(a), 0.3).numpy()
    monkeypatch.setattr(cadd_alpha, "add_alpha", lambda *args, **kwargs: None)
    e = ember.tensor(x.copy())
    with ember.no_grad():
        e.lerp_(ember.tensor(a), 0.3)
    np.testing.assert_array_equal(e.numpy(), ref)
    monkeypatch.undo()
    base = ember.tensor(x.T.copy())
    strided = base.t()  # (a view, not contiguous: written through to base)
    with ember.no_grad():
        strided.lerp_(ember.tensor(a), 0.3)
    np.testing.assert_array_equal(base.numpy().T, ref)
    assert base._version == 1


def test_general_route_where_the_direct_one_declines():
    """Broadcast operands, other dtypes, a tensor weight, recording: the composite's results
    and PyTorch's errors and gradients."""
    x, a, b = _arrays(np.float32)
    row = b[:1]
    e, t = ember.tensor(x.copy()), torch.tensor(x.copy())
    with ember.no_grad(), torch.no_grad():
        e.addcmul_(ember.tensor(a), ember.tensor(row), value=0.5)
        t.addcmul_(torch.tensor(a), torch.tensor(row), value=0.5)
        e.lerp_(ember.tensor(a), ember.tensor(np.float32(0.25)))
        t.lerp_(torch.tensor(a), torch.tensor(np.float32(0.25)))
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-6, atol=1e-6)
    # a leaf that requires grad refuses the update while gradients are recorded
    leaf = ember.tensor(x, requires_grad=True)
    with pytest.raises(ember.EmberError, match="leaf"):
        leaf.addcmul_(ember.tensor(a), ember.tensor(b))
    with pytest.raises(RuntimeError):
        torch.tensor(x, requires_grad=True).addcmul_(torch.tensor(a), torch.tensor(b))
    # a non-leaf records its history through the general route: PyTorch's gradients
    ex, tx = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ea, ta = ember.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    for lib, leaf_x, leaf_a in ((ember, ex, ea), (torch, tx, ta)):
        y = leaf_x * 1.0
        y.addcdiv_(leaf_a, lib.tensor(b), value=0.5).lerp_(leaf_a, 0.75)
        (y * y).sum().backward()
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ea.grad.numpy(), ta.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_direct_route_refusals():
    """A value beyond the dtype's range (PyTorch's refusal), overlapping windows, read-only
    memory: refused as the general route refuses them."""
    x, a, b = _arrays(np.float32)
    e = ember.tensor(x.copy())
    with ember.no_grad():
        with pytest.raises(ember.EmberError):
            e.addcmul_(ember.tensor(a), ember.tensor(b), value=1e300)
        with pytest.raises(ember.EmberError, match="overflow"):
            e.lerp_(ember.tensor(a), 1e300)
    with torch.no_grad(), pytest.raises(RuntimeError, match="overflow"):
        torch.tensor(x).lerp_(torch.tensor(a), 1e300)
    assert e._version == 0
    np.testing.assert_array_equal(e.numpy(), x)
    windows = ember.tensor(np.arange(6, dtype=np.float32)).unfold(0, 2, 1)  # (overlapping)
    ones = ember.tensor(np.ones((5, 2), np.float32))
    # (the direct route declines memory that repeats; the general route refuses the update,
    # as ember refuses it for mul_, which PyTorch refuses too)
    with pytest.raises(RuntimeError, match="single memory location"):
        windows.addcmul_(ones, ones)
    expanded = ember.tensor(np.ones((1, 5), np.float32)).expand(7, 5)  # (read-only repeats)
    with ember.no_grad(), pytest.raises(RuntimeError):
        expanded.lerp_(ember.tensor(a), 0.5)


def test_ufunc_inplace_broadcast_and_refusal():
    """mul_/div_ by a row (the direct ufunc route: its shape check on arrays), by a larger
    operand (refused, as PyTorch's)."""
    x, a, b = _arrays(np.float64)
    e, t = ember.tensor(x.copy()), torch.tensor(x.copy())
    e.mul_(ember.tensor(b[:1])).div_(ember.tensor(b[:, :1]))
    t.mul_(torch.tensor(b[:1])).div_(torch.tensor(b[:, :1]))
    np.testing.assert_array_equal(e.numpy(), t.numpy())
    assert e._version == 2
    with pytest.raises(RuntimeError):
        ember.tensor(x[:1].copy()).mul_(ember.tensor(x))
    with pytest.raises(RuntimeError):
        torch.tensor(x[:1].copy()).mul_(torch.tensor(x))
