"""F.cross_entropy's eager path without its slower checks: the class-index check as one
comparison of the unsigned view (a negative index is past any class), the mean's division as
Python's IEEE division where the weight total is not zero, a single block's totals read as
they are. Values, gradients and refusals against PyTorch on both sides of each condition."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.ops._index_plan import IndexOutOfRangeError

torch = pytest.importorskip("torch")


def _logits(shape, dtype, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _both(x, t, **kwargs):
    results = []
    for lib in (ember, torch):
        xt = lib.tensor(x, requires_grad=True)
        target = lib.tensor(t)  # (int64 or uint8: both libraries' class-index dtypes)
        loss = lib.nn.functional.cross_entropy(xt, target, **kwargs)
        loss.sum().backward()
        results.append((loss.detach().numpy(), xt.grad.numpy()))
    return results


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize(
    "shape, target_dtype",
    [((6, 5), np.int64), ((6, 5), np.uint8), ((3, 4, 7), np.int64), ((2, 3, 2, 2), np.int64)],
)
def test_values_and_gradients_match_torch(dtype, reduction, shape, target_dtype):
    x = _logits(shape, dtype)
    t_shape = (shape[0], *shape[2:])
    t = np.random.default_rng(1).integers(0, shape[1], t_shape).astype(target_dtype)
    if target_dtype != np.uint8:
        t.reshape(-1)[0] = -100  # (PyTorch's default ignore_index: negative and allowed)
    (loss, grad), (want_loss, want_grad) = _both(x, t, reduction=reduction)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(loss, want_loss, rtol=tol, atol=tol)
    np.testing.assert_allclose(grad, want_grad, rtol=tol, atol=tol)


def test_weighted_strided_targets_and_all_ignored():
    x = _logits((8, 4), np.float64, seed=2)
    t = np.random.default_rng(3).integers(0, 4, 16)[::2]  # (not contiguous)
    w = np.array([0.5, 1.0, 2.0, 0.25])
    (loss, grad), (want, want_grad) = [
        (r[0], r[1])
        for r in [
            _one(lib, x, t, weight=lib.tensor(w), label_smoothing=0.1) for lib in (ember, torch)
        ]
    ]
    np.testing.assert_allclose(loss, want, rtol=1e-12)
    np.testing.assert_allclose(grad, want_grad, rtol=1e-12)
    ignored = np.full(8, 2)  # every target ignored: the mean is 0/0, NaN as PyTorch's
    got = ember.nn.functional.cross_entropy(ember.tensor(x), ember.tensor(ignored), ignore_index=2)
    want = torch.nn.functional.cross_entropy(torch.tensor(x), torch.tensor(ignored), ignore_index=2)
    assert np.isnan(got.item()) and np.isnan(want.item())
    zero = np.zeros(4)  # every class weight zero: also 0/0
    got = ember.nn.functional.cross_entropy(
        ember.tensor(x), ember.tensor(t), weight=ember.tensor(zero)
    )
    want = torch.nn.functional.cross_entropy(
        torch.tensor(x), torch.tensor(t), weight=torch.tensor(zero)
    )
    assert np.isnan(got.item()) and np.isnan(want.item())


def _one(lib, x, t, **kwargs):
    xt = lib.tensor(x, requires_grad=True)
    loss = lib.nn.functional.cross_entropy(xt, lib.tensor(t), **kwargs)
    loss.backward()
    return loss.detach().numpy(), xt.grad.numpy()


@pytest.mark.parametrize("bad", [-1, -101, 4, 2**40])
@pytest.mark.parametrize("target_dtype", [np.int64, np.uint8])
def test_out_of_range_targets_refused_as_torch(bad, target_dtype):
    if bad < 0 and target_dtype == np.uint8 or abs(bad) >= np.iinfo(target_dtype).max:
        pytest.skip("the value does not fit the dtype")
    x = _logits((3, 4), np.float32)
    t = np.array([0, bad, 1]).astype(target_dtype)
    with pytest.raises(IndexOutOfRangeError, match=f"target {bad} is out of bounds"):
        ember.nn.functional.cross_entropy(ember.tensor(x), ember.tensor(t))
    with pytest.raises((IndexError, RuntimeError)):
        torch.nn.functional.cross_entropy(torch.tensor(x), torch.tensor(t))
    ok = np.array([0, 3, 1]).astype(target_dtype)  # (the same dtype in range: accepted)
    got = ember.nn.functional.cross_entropy(ember.tensor(x), ember.tensor(ok))
    want = torch.nn.functional.cross_entropy(torch.tensor(x), torch.tensor(ok))
    np.testing.assert_allclose(got.item(), want.item(), rtol=1e-6)


def test_meta_logits_keep_their_shape_rule():
    x = ember.empty((3, 4), device="meta")
    t = ember.empty(3, dtype=ember.int64, device="meta")
    assert ember.nn.functional.cross_entropy(x, t).is_meta


@pytest.mark.parametrize("weighted", [False, True])
def test_undispatched_backward_is_the_dispatched_one(weighted, monkeypatch):
    from ember.ops import cross_entropy

    x = _logits((5, 3), np.float32, seed=4)
    t = np.array([0, 2, -100, 1, 2])
    w = np.array([0.5, 2.0, 1.0], np.float32)

    def grads():
        xt = ember.tensor(x, requires_grad=True)
        kwargs = {"weight": ember.tensor(w)} if weighted else {}
        for _ in range(2):  # (the second backward takes the kept signature: three operands)
            ember.nn.functional.cross_entropy(xt, ember.tensor(t), **kwargs).backward()
        return xt.grad.numpy()

    got = grads()
    monkeypatch.setattr(cross_entropy, "direct", lambda *a, **k: None)
    np.testing.assert_array_equal(got, grads())
    xt = torch.tensor(x, requires_grad=True)
    kwargs = {"weight": torch.tensor(w)} if weighted else {}
    for _ in range(2):
        torch.nn.functional.cross_entropy(xt, torch.tensor(t), **kwargs).backward()
    np.testing.assert_allclose(got, xt.grad.numpy(), rtol=1e-6)


def test_target_shape_and_dtype_refusals_as_torch():
    x = _logits((4, 3), np.float32, seed=5)
    for target, error in [
        (np.array([0, 1, 2]), ember.errors.ShapeError),  # (N - 1 targets)
        (np.array([[0], [1], [2], [0]]), ember.errors.ShapeError),  # (N, 1)
        (np.array([True, False, True, True]), ember.errors.DTypeError),
    ]:
        with pytest.raises(error):
            ember.nn.functional.cross_entropy(ember.tensor(x), ember.tensor(target))
        with pytest.raises((RuntimeError, ValueError)):
            torch.nn.functional.cross_entropy(torch.tensor(x), torch.tensor(target))
