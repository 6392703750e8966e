"""The VJPs' building blocks run without dispatches where a backward records nothing
(ops/_unrecorded.py `direct`): the same results, layouts and version counters as the
dispatched ops, and every condition that needs the dispatcher declining."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import ember
from ember.ops import _registry as reg
from ember.ops import _unrecorded as unrecorded
from ember.ops import binary, reduce

torch = pytest.importorskip("torch")

SUM = reg.REGISTRY["sum"]
MUL = reg.REGISTRY["mul"]
RESHAPE = reg.REGISTRY["reshape"]


@pytest.fixture(autouse=True)
def _signatures_not_seen_yet():
    # (`direct` runs only signatures the dispatcher accepted before: an earlier test in the
    # worker may have dispatched these very ones, so each test starts from none; it declines
    # while a meta tensor lives (`_meta.active`): an earlier test's garbage is collected)
    for op in reg.REGISTRY.values():
        if op.infer_cache:
            op.infer_cache.clear()
    gc.collect()


def _arrays(*shapes, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


def test_direct_gives_the_dispatched_result():
    a, b = (ember.tensor(v) for v in _arrays((3, 4), (4,)))
    with ember.no_grad():
        assert unrecorded.direct(MUL, a, b) is None  # (a signature not seen yet)
        want = reg.apply(MUL, a, b)
        got = unrecorded.direct(MUL, a, b)
        assert type(got) is ember.Tensor and got.grad_fn is None
        np.testing.assert_array_equal(got.numpy(), want.numpy())
        s_want = reg.apply(SUM, a, axes=(0,), keepdims=True)
        s_got = unrecorded.direct(SUM, a, axes=(0,), keepdims=True)
        np.testing.assert_array_equal(s_got.numpy(), s_want.numpy())
        assert unrecorded.direct(SUM, a, axes=(0,), keepdims=1) is None  # (another type)


def test_a_direct_view_shares_its_source_version():
    (v,) = _arrays((2, 6))
    a = ember.tensor(v)
    with ember.no_grad():
        reg.apply(RESHAPE, a, shape=(3, 4))
        view = unrecorded.direct(RESHAPE, a, shape=(3, 4))
        assert view._is_view and view._version == a._version
        a.add_(1.0)
        assert view._version == a._version
        np.testing.assert_array_equal(view.numpy(), (v + 1).reshape(3, 4))


def test_direct_declines_where_the_dispatcher_is_needed():
    a, b = (ember.tensor(v) for v in _arrays((3, 4), (3, 4)))
    with ember.no_grad():
        reg.apply(MUL, a, b)
    assert unrecorded.direct(MUL, a, b) is None  # grad mode on: the call may be recorded
    with ember.no_grad():
        assert unrecorded.direct(MUL, a, b) is not None
        with ember.autocast("cpu", dtype=ember.bfloat16):
            assert unrecorded.direct(MUL, a, b) is None
        with ember.profiler.profile():
            assert unrecorded.direct(MUL, a, b) is None  # (the profiler records ops)
        meta = ember.empty((3, 4), device="meta")
        assert unrecorded.direct(MUL, meta, meta) is None
    seen = []
    f = ember.function(lambda x, y: seen.append(unrecorded.direct(MUL, x, y)) or x * y)
    with ember.no_grad():
        f(a, b)
    assert seen == [None]


@pytest.mark.parametrize(
    "program",
    [
        lambda L, x, w, b: (x * w + b).sum(),
        lambda L, x, w, b: ((x / (w * w + 1.0) - b) ** 2).mean(),
        lambda L, x, w, b: (L.relu(x * w + b) * 3.0).sum(dim=0).sum(),
        lambda L, x, w, b: (x - b).sum(dim=1, keepdim=True).sum(),
    ],
)
def test_broadcast_gradients_match_torch(program):
    xs, ws, bs = _arrays((4, 5), (5,), (1, 5), dtype=np.float64)
    grads = []
    for lib in (ember, torch):
        x, w, b = (lib.tensor(v, requires_grad=True) for v in (xs, ws, bs))
        for _ in range(2):  # the second backward takes the kept signatures
            program(lib, x, w, b).backward()
        grads.append([None if t.grad is None else t.grad.numpy() for t in (x, w, b)])
    for got, want in zip(*grads):
        assert (got is None) == (want is None)
        if got is not None:
            np.testing.assert_allclose(got, want, rtol=1e-12)


def test_second_derivatives_and_channels_last_as_dispatched(monkeypatch):
    xs, ws = _arrays((2, 3, 4, 4), (3, 1, 1), dtype=np.float64, seed=1)

    def run():
        x = ember.tensor(xs).contiguous(memory_format=ember.channels_last).requires_grad_()
        w = ember.tensor(ws, requires_grad=True)
        y = (x * w * x).sum()
        (gx,) = ember.autograd.grad(y, x, create_graph=True)
        gx.sum().backward()
        (x * w).sum().backward()
        return x.grad, w.grad

    got = run()
    monkeypatch.setattr(unrecorded, "direct", lambda *a, **k: None)
    monkeypatch.setattr(binary, "direct", lambda *a, **k: None)
    monkeypatch.setattr(reduce, "direct", lambda *a, **k: None)
    want = run()
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.numpy(), w.numpy())
        assert g.stride() == w.stride()
    tx = torch.tensor(xs, requires_grad=True)
    tw = torch.tensor(ws, requires_grad=True)
    (tgx,) = torch.autograd.grad((tx * tw * tx).sum(), tx, create_graph=True)
    tgx.sum().backward()
    (tx * tw).sum().backward()
    np.testing.assert_allclose(got[0].numpy(), tx.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(got[1].numpy(), tw.grad.numpy(), rtol=1e-12)


def test_hooks_and_version_errors_still_apply():
    xs, ws = _arrays((3, 4), (4,), dtype=np.float64, seed=2)
    x = ember.tensor(xs, requires_grad=True)
    w = ember.tensor(ws, requires_grad=True)
    y = x * w
    y.register_hook(lambda g: g.double() * 2)  # (a hook's gradient, then the VJP's products)
    y.sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), 2 * xs.sum(0), rtol=1e-12)
    for _ in range(2):
        x2 = ember.tensor(xs, requires_grad=True)
        w2 = ember.tensor(ws, requires_grad=True) * 1.0
        z = (x2 * w2).sum()
        w2.add_(1.0)  # a saved operand changed in place
        with pytest.raises(ember.errors.EmberError, match="modified by an in-place operation"):
            z.backward()
