"""Cross-entropy as one op each way (ops/cross_entropy.py) and its C kernels
(kernels/ccross_entropy.py): the kernels against the NumPy reference, F.cross_entropy against
PyTorch in values and gradients (class weights, ignore_index, label smoothing, every
reduction, (C,), (N, C) and (N, C, d...) logits), special values, second derivatives, the
fallback without a compiler, and graphs keeping the composite."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.kernels import ccompile, ccross_entropy
from ember.ops import cross_entropy as ce
from ember.ops._registry import apply

torch = pytest.importorskip("torch")
F = ember.nn.functional
TF = torch.nn.functional
DTYPES = (np.float32, np.float64)
REDUCTIONS = ("none", "mean", "sum")
needs_cc = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")


def _tol(dtype, classes: int) -> float:
    """A few eps, growing with the square root of the row sums' length."""
    return 32 * np.finfo(dtype).eps * np.sqrt(classes)


def _case(r, dtype, ignore: bool):
    """Random logits ((C,), (N, C) or (N, C, d...)), targets (a fifth ignored when asked),
    class weights and the class count."""
    c = int(r.integers(1, 40))
    lead = [(), (int(r.integers(1, 9)),)][int(r.integers(0, 2))]
    trail = tuple(int(s) for s in r.integers(1, 6, r.integers(0, 3))) if lead else ()
    shape = lead[:1] + (c,) + trail
    x = (r.standard_normal(shape) * 4).astype(dtype)
    t = r.integers(0, c, lead + trail)
    if ignore and t.ndim:
        t.reshape(-1)[::5] = -100
    w = (r.random(c) + 0.1).astype(dtype)
    return x, t, w, c


@needs_cc
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("seed", range(6))
def test_c_kernels_match_the_reference(dtype, seed):
    r = np.random.default_rng(seed)
    for _ in range(4):
        x, t, w, c = _case(r, dtype, ignore=True)
        for weight in (None, w):
            for smoothing in (0.0, 0.3):
                for reduction in REDUCTIONS:
                    args = (x, t) if weight is None else (x, t, weight)
                    attrs = dict(ignore_index=-100, reduction=reduction, smoothing=smoothing)
                    want = ce._kernel(*args, **attrs)
                    got = ce._fast(*args, **attrs)
                    assert got is not None and got.dtype == want.dtype
                    assert got.shape == want.shape
                    tol = _tol(dtype, c) * max(1, t.size)
                    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
                    g = r.standard_normal(want.shape).astype(dtype)
                    want = ce._grad_kernel(*args, g, **attrs)
                    got = ce._grad_fast(*args, g, **attrs)
                    assert got is not None and got.shape == x.shape and got.dtype == x.dtype
                    np.testing.assert_allclose(got, want, rtol=_tol(dtype, c), atol=_tol(dtype, c))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("seed", range(4))
def test_matches_torch_in_values_and_gradients(dtype, seed):
    r = np.random.default_rng(10 + seed)
    x, t, w, c = _case(r, dtype, ignore=True)
    for weight in (None, w):
        for smoothing in (0.0, 0.2):
            for reduction in REDUCTIONS:
                for ignore_index in (-100, 1):
                    ex, tx = (
                        ember.tensor(x, requires_grad=True),
                        torch.tensor(x, requires_grad=True),
                    )
                    kw = dict(reduction=reduction, label_smoothing=smoothing)
                    kw["ignore_index"] = ignore_index
                    tt = t if ignore_index == -100 else np.where(t == -100, 1, t)
                    ey = F.cross_entropy(
                        ex, ember.tensor(tt), None if weight is None else ember.tensor(weight), **kw
                    )
                    ty = TF.cross_entropy(
                        tx, torch.tensor(tt), None if weight is None else torch.tensor(weight), **kw
                    )
                    g = r.standard_normal(tuple(ty.shape)).astype(dtype)
                    ey.backward(ember.tensor(g))
                    ty.backward(torch.tensor(g))
                    tol = _tol(dtype, c) * 4
                    message = f"{x.shape} {reduction} {smoothing} {ignore_index} {weight is None}"
                    np.testing.assert_allclose(
                        ey.detach().numpy(),
                        ty.detach().numpy(),
                        rtol=tol,
                        atol=tol,
                        err_msg=message,
                    )
                    np.testing.assert_allclose(
                        ex.grad.numpy(), tx.grad.numpy(), rtol=tol, atol=tol, err_msg=message
                    )


@pytest.mark.parametrize("shape", [(300, 1000), (2, 5, 40, 40), (4096, 3)])
def test_large_cases_match_torch(shape):
    """Shapes large enough that the kernels share rows (or planes) over ember's threads."""
    r = np.random.default_rng(3)
    x = r.standard_normal(shape).astype(np.float32) * 3
    t = r.integers(0, shape[1], (shape[0],) + shape[2:])
    t.reshape(-1)[::7] = -100
    ex, tx = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    F.cross_entropy(ex, ember.tensor(t), label_smoothing=0.1).backward()
    TF.cross_entropy(tx, torch.tensor(t), label_smoothing=0.1).backward()
    tol = _tol(np.float32, shape[1]) * 4
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=tol, atol=tol * 1e-3)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_special_values_match_torch(reduction):
    x = np.array(
        [
            [1.0, np.nan, 2.0],
            [np.inf, 0.0, 1.0],
            [-np.inf, 0.0, 1.0],
            [1e30, -1e30, 0.0],
            [np.nan, np.nan, np.nan],  # ignored: contributes nothing
            [3.0, 3.0, 3.0],
        ],
        dtype=np.float32,
    )
    t = np.array([0, 0, 0, 1, -100, 2])
    for rows in (slice(None), slice(2, 6)):
        ex, tx = (
            ember.tensor(x[rows], requires_grad=True),
            torch.tensor(x[rows], requires_grad=True),
        )
        ey = F.cross_entropy(ex, ember.tensor(t[rows]), reduction=reduction)
        ty = TF.cross_entropy(tx, torch.tensor(t[rows]), reduction=reduction)
        np.testing.assert_allclose(ey.detach().numpy(), ty.detach().numpy(), rtol=1e-6, atol=1e-6)
        ey.sum().backward()
        ty.sum().backward()
        np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-6, atol=1e-6)


def test_every_target_ignored_gives_nan_mean_as_torch():
    x = np.ones((3, 4), np.float32)
    t = np.full(3, -100)
    ey = F.cross_entropy(ember.tensor(x), ember.tensor(t))
    ty = TF.cross_entropy(torch.tensor(x), torch.tensor(t))
    assert np.isnan(ey.item()) and np.isnan(ty.item())
    assert F.cross_entropy(ember.tensor(x), ember.tensor(t), reduction="sum").item() == 0.0


def test_second_derivatives_match_torch():
    r = np.random.default_rng(2)
    x = r.standard_normal((5, 4, 3))
    t = r.integers(0, 4, (5, 3))
    t[0, 0] = -100
    w = r.random(4) + 0.5
    ex, tx = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    (gx,) = ember.autograd.grad(
        F.cross_entropy(ex, ember.tensor(t), ember.tensor(w), label_smoothing=0.1),
        ex,
        create_graph=True,
    )
    (tgx,) = torch.autograd.grad(
        TF.cross_entropy(tx, torch.tensor(t), torch.tensor(w), label_smoothing=0.1),
        tx,
        create_graph=True,
    )
    np.testing.assert_allclose(gx.detach().numpy(), tgx.detach().numpy(), rtol=1e-10, atol=1e-12)
    (gx * gx).sum().backward()
    (tgx * tgx).sum().backward()
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_out_of_range_targets_are_refused():
    x = ember.tensor(np.zeros((2, 3), np.float32))
    with pytest.raises(ember.EmberError, match="out of bounds"):
        F.cross_entropy(x, ember.tensor(np.array([0, 3])))
    # the op itself (no functional check before it): the reference raises, named
    with pytest.raises(ember.EmberError, match="softmax_cross_entropy"):
        apply(
            ce.SOFTMAX_CROSS_ENTROPY,
            x,
            ember.tensor(np.array([0, -1])),
            ignore_index=-100,
            reduction="mean",
            smoothing=0.0,
        )


def test_errors_name_the_op():
    x = ember.ones((2, 3))
    with pytest.raises(ember.ShapeError, match="softmax_cross_entropy"):
        apply(
            ce.SOFTMAX_CROSS_ENTROPY,
            x,
            ember.tensor(np.array([0, 1, 2])),
            ignore_index=-100,
            reduction="mean",
            smoothing=0.0,
        )
    with pytest.raises(ember.DTypeError, match="softmax_cross_entropy"):
        apply(ce.SOFTMAX_CROSS_ENTROPY, x, x, ignore_index=-100, reduction="mean", smoothing=0.0)


def test_without_a_compiler_the_reference_runs(monkeypatch):
    monkeypatch.setattr(ccross_entropy, "_functions", lambda dtype: None)
    r = np.random.default_rng(4)
    x = r.standard_normal((6, 5))
    t = r.integers(0, 5, 6)
    t[2] = -100
    assert ccross_entropy.forward(x, t, None, -100, 0.0, False) is None
    ex, tx = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    F.cross_entropy(ex, ember.tensor(t), label_smoothing=0.1).backward()
    TF.cross_entropy(tx, torch.tensor(t), label_smoothing=0.1).backward()
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_half_precision_and_strided_logits_match_torch():
    r = np.random.default_rng(6)
    x = r.standard_normal((7, 12)).astype(np.float32)
    t = r.integers(0, 6, 7)
    strided = ember.tensor(x)[:, ::2]
    ey = F.cross_entropy(strided, ember.tensor(t))
    ty = TF.cross_entropy(torch.tensor(x)[:, ::2], torch.tensor(t))
    np.testing.assert_allclose(ey.numpy(), ty.numpy(), rtol=1e-6)
    half = F.cross_entropy(ember.tensor(x[:, :6]).half(), ember.tensor(t))
    assert half.dtype == ember.float16
    want = TF.cross_entropy(torch.tensor(x[:, :6]), torch.tensor(t))
    np.testing.assert_allclose(half.float().numpy(), want.numpy(), rtol=2e-3)


def test_graphs_keep_the_composite():
    """A traced or compiled loss is the composite (its loops fuse); eager runs the op."""
    x = ember.tensor(np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32))
    t = ember.tensor(np.array([0, 2, 1, 1]))
    graph = ember.trace(lambda a, b: F.cross_entropy(a, b), x, t).graph
    ops = {node.op for node in graph.nodes if hasattr(node, "op")}
    assert ops - {None} and ce.SOFTMAX_CROSS_ENTROPY not in ops
    eager = F.cross_entropy(x, t)
    assert eager.grad_fn is None  # nothing requires grad
    x.requires_grad_()
    assert F.cross_entropy(x, t).grad_fn.op is ce.SOFTMAX_CROSS_ENTROPY
    np.testing.assert_allclose(
        ember.trace(lambda a, b: F.cross_entropy(a, b), x, t)(x, t).detach().numpy(),
        eager.numpy(),
        rtol=1e-6,
    )
