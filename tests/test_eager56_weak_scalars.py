"""Weak scalars' tensors kept per value while eager (ops/promotion.py `_weak_scalar`): calls
that use one value share its tensor, and one that something changed is made anew, so no
program sees another's change. Values and gradients against PyTorch."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.ops import promotion

torch = pytest.importorskip("torch")


def _x(seed=0, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal((3, 4)).astype(dtype)


def test_calls_share_the_kept_tensor():
    x = ember.tensor(_x())
    a = promotion._weak_scalar(0.75, x.dtype)
    assert promotion._weak_scalar(0.75, x.dtype) is a
    assert promotion._weak_scalar(0.75, ember.float64) is not a  # (another dtype)
    assert promotion._weak_scalar(0.0, x.dtype) is not promotion._weak_scalar(0.0, x.dtype)
    np.testing.assert_array_equal((x * 0.75).numpy(), _x() * np.float32(0.75))


def _saved_scalar(value):
    """The weak scalar's tensor as a saved-tensor hook sees it (the one way a program can
    reach it)."""
    seen = []
    x = ember.tensor(_x(1), requires_grad=True)

    def pack(t):
        seen.append(t)
        return t

    with ember.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = x * value
    return [t for t in seen if t.ndim == 0][0], x, y


@pytest.mark.parametrize("change", ["requires_grad", "data", "grad_fn"])
def test_a_changed_tensor_is_not_handed_out_again(change):
    kept, _, _ = _saved_scalar(1.25)
    if change == "requires_grad":
        kept.requires_grad_()
    elif change == "data":
        kept.data = ember.tensor(np.float32(7.0))
    else:
        kept.requires_grad_()
        kept = kept * 1.0  # (a copy with history: the kept one itself now requires grad)
    x = ember.tensor(_x(2), requires_grad=True)
    y = x * 1.25
    y.sum().backward()
    tx = torch.tensor(_x(2), requires_grad=True)
    (tx * 1.25).sum().backward()
    np.testing.assert_array_equal(y.detach().numpy(), (tx * 1.25).detach().numpy())
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())
    fresh = promotion._weak_scalar(1.25, ember.float32)
    assert not fresh.requires_grad and float(fresh) == 1.25


def test_inference_mode_scalars_do_not_leak_out():
    with ember.inference_mode():
        ember.tensor(_x(3)) * 2.5  # (made in inference mode: an inference counter)
    x = ember.tensor(_x(3), requires_grad=True)
    (x * 2.5).sum().backward()  # (saved for backward: must not be an inference tensor)
    np.testing.assert_array_equal(x.grad.numpy(), np.full((3, 4), 2.5, np.float32))
    with ember.inference_mode():
        y = ember.tensor(_x(3)) * 2.5
    assert y.is_inference()


def test_in_place_write_to_a_kept_scalar_is_refused_and_changes_nothing():
    kept, _, _ = _saved_scalar(3.5)
    with pytest.raises((ember.errors.EmberError, ValueError)):
        with ember.no_grad():
            kept.add_(1.0)
    assert float(kept) == 3.5
    np.testing.assert_array_equal((ember.tensor(_x(4)) * 3.5).numpy(), _x(4) * np.float32(3.5))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_chain_matches_torch(dtype):
    got, want = ember.tensor(_x(5, dtype)), torch.tensor(_x(5, dtype))
    for i in range(40):
        got = [got + 0.5, got * 0.9, got - 0.25, ember.sin(got)][i % 4]
        want = [want + 0.5, want * 0.9, want - 0.25, torch.sin(want)][i % 4]
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
