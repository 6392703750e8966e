"""The negative log-likelihood loss as one op each way (ops/nll_loss.py): F.nll_loss against
PyTorch in values and gradients (class weights, ignore_index, every reduction, (C,), (N, C) and
(N, C, d...) inputs, float32/float64 and 16-bit), the composite's values kept bit for bit,
special values, every target ignored, second derivatives, errors, and graphs keeping the
composite."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.ops import nll_loss as nll
from ember.ops._registry import apply

torch = pytest.importorskip("torch")
F = ember.nn.functional
TF = torch.nn.functional
REDUCTIONS = ("none", "mean", "sum")


def _case(r, dtype, ignore: bool):
    """Random log-probabilities ((C,), (N, C) or (N, C, d...)), targets (a fifth ignored when
    asked), class weights and the class count."""
    c = int(r.integers(1, 30))
    lead = [(), (int(r.integers(1, 9)),)][int(r.integers(0, 2))]
    trail = tuple(int(s) for s in r.integers(1, 6, r.integers(0, 3))) if lead else ()
    shape = lead[:1] + (c,) + trail
    x = (r.standard_normal(shape) * 3).astype(dtype)
    t = r.integers(0, c, lead + trail)
    if ignore and t.ndim:
        t.reshape(-1)[::5] = -100
    w = (r.random(c) + 0.1).astype(dtype)
    return x, t, w, c


def _tol(dtype, n: int) -> float:
    """A few eps per summed term (the 'mean' and 'sum' reductions add n of them)."""
    return 8 * float(np.finfo(dtype).eps) * max(1, n)


@pytest.mark.parametrize("dtype", (np.float32, np.float64))
@pytest.mark.parametrize("seed", range(5))
def test_matches_torch_in_values_and_gradients(dtype, seed):
    r = np.random.default_rng(seed)
    x, t, w, c = _case(r, dtype, ignore=True)
    for weight in (None, w):
        for reduction in REDUCTIONS:
            for ignore_index in (-100, 1):
                tt = t if ignore_index == -100 else np.where(t == -100, 1, t)
                ex, tx = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
                ew = None if weight is None else ember.tensor(weight)
                tw = None if weight is None else torch.tensor(weight)
                kw = dict(reduction=reduction, ignore_index=ignore_index)
                ey = F.nll_loss(ex, ember.tensor(tt), ew, **kw)
                ty = TF.nll_loss(tx, torch.tensor(tt), tw, **kw)
                g = r.standard_normal(tuple(ty.shape)).astype(dtype)
                ey.backward(ember.tensor(g))
                ty.backward(torch.tensor(g))
                tol = _tol(dtype, t.size)
                message = f"{x.shape} {reduction} {ignore_index} {weight is None}"
                assert ey.dtype == ember.tensor(x).dtype and tuple(ey.shape) == tuple(ty.shape)
                np.testing.assert_allclose(
                    ey.detach().numpy(), ty.detach().numpy(), rtol=tol, atol=tol, err_msg=message
                )
                np.testing.assert_allclose(
                    ex.grad.detach().numpy(),
                    tx.grad.detach().numpy(),
                    rtol=tol,
                    atol=tol,
                    err_msg=message,
                )


@pytest.mark.parametrize("seed", range(3))
def test_the_op_gives_the_composites_bits(seed, monkeypatch):
    """Eagerly the op replaces the composite: the same values, bit for bit, in every case."""
    r = np.random.default_rng(20 + seed)
    x, t, w, _ = _case(r, np.float32, ignore=True)
    for weight in (None, w):
        for reduction in REDUCTIONS:
            args = (ember.tensor(x), ember.tensor(t), None if weight is None else ember.tensor(w))
            fused = F.nll_loss(*args, reduction=reduction).numpy()
            with monkeypatch.context() as m:
                m.setattr(nll, "applies", lambda *a: False)
                composite = F.nll_loss(*args, reduction=reduction).numpy()
            np.testing.assert_array_equal(fused, composite)


@pytest.mark.parametrize("dtype", ("bfloat16", "float16"))
def test_half_precision_matches_torch(dtype):
    r = np.random.default_rng(4)
    x = r.standard_normal((6, 5, 3)).astype(np.float32)
    t = r.integers(0, 5, (6, 3))
    t[0, 0] = -100
    ex = ember.tensor(x, dtype=getattr(ember, dtype), requires_grad=True)
    tx = torch.tensor(x, dtype=getattr(torch, dtype), requires_grad=True)
    ey, ty = F.nll_loss(ex, ember.tensor(t)), TF.nll_loss(tx, torch.tensor(t))
    ey.backward()
    ty.backward()
    assert ey.dtype == ex.dtype and ex.grad.dtype == ex.dtype
    tol = 8 * float(torch.finfo(getattr(torch, dtype)).eps)
    np.testing.assert_allclose(ey.float().detach().numpy(), ty.float().detach().numpy(), rtol=tol)
    np.testing.assert_allclose(
        ex.grad.float().detach().numpy(), tx.grad.float().detach().numpy(), rtol=tol
    )


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_special_values_match_torch(reduction):
    x = np.array(
        [[-1.0, np.nan, -2.0], [-np.inf, 0.0, -1.0], [np.nan, np.nan, np.nan], [-3.0, -3, -3]],
        dtype=np.float32,
    )
    t = np.array([0, 0, -100, 2])  # the ignored NaN row contributes nothing
    ex, tx = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ey = F.nll_loss(ex, ember.tensor(t), reduction=reduction)
    ty = TF.nll_loss(tx, torch.tensor(t), reduction=reduction)
    np.testing.assert_allclose(ey.detach().numpy(), ty.detach().numpy())
    ey.sum().backward()
    ty.sum().backward()
    np.testing.assert_allclose(ex.grad.detach().numpy(), tx.grad.detach().numpy())


def test_every_target_ignored_gives_nan_mean_as_torch():
    x = -np.ones((3, 4), np.float32)
    t = np.full(3, -100)
    ey = F.nll_loss(ember.tensor(x), ember.tensor(t))
    ty = TF.nll_loss(torch.tensor(x), torch.tensor(t))
    assert np.isnan(ey.item()) and np.isnan(ty.item())
    assert F.nll_loss(ember.tensor(x), ember.tensor(t), reduction="sum").item() == 0.0


def test_second_derivatives_match_torch():
    """Through log_softmax: the gradient recorded (create_graph) is the composite's."""
    r = np.random.default_rng(2)
    x = r.standard_normal((5, 4, 3))
    t = r.integers(0, 4, (5, 3))
    t[0, 0] = -100
    w = r.random(4) + 0.5
    ex, tx = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ey = F.nll_loss(F.log_softmax(ex, 1), ember.tensor(t), ember.tensor(w))
    ty = TF.nll_loss(TF.log_softmax(tx, 1), torch.tensor(t), torch.tensor(w))
    (gx,) = ember.autograd.grad(ey, ex, create_graph=True)
    (tgx,) = torch.autograd.grad(ty, tx, create_graph=True)
    np.testing.assert_allclose(gx.detach().numpy(), tgx.detach().numpy(), rtol=1e-10, atol=1e-12)
    (gx * gx).sum().backward()
    (tgx * tgx).sum().backward()
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_out_of_range_targets_and_bad_shapes_are_refused_naming_the_op():
    x = ember.tensor(-np.ones((2, 3), np.float32))
    with pytest.raises(ember.EmberError, match="out of bounds"):
        F.nll_loss(x, ember.tensor(np.array([0, 3])))
    with pytest.raises(ember.EmberError, match="nll_loss"):
        apply(nll.NLL_LOSS, x, ember.tensor(np.array([0, -1])), ignore_index=-100, reduction="mean")
    with pytest.raises(ember.ShapeError, match="nll_loss"):
        F.nll_loss(x, ember.tensor(np.array([0, 1, 2])))
    with pytest.raises(ember.ShapeError, match="nll_loss"):
        apply(nll.NLL_LOSS, x, ember.tensor(np.array([0, 1, 2])), ignore_index=-1, reduction="sum")


def test_eager_calls_run_one_op_and_graphs_keep_the_composite():
    x = ember.tensor(np.log(np.full((4, 3), 1 / 3, np.float32)), requires_grad=True)
    t = ember.tensor(np.array([0, 1, 2, 1]))
    loss = F.nll_loss(x, t)
    assert loss.grad_fn.name() == "NllLossBackward0"  # one op, as PyTorch names its node
    graph = ember.trace(lambda a, b: F.nll_loss(a, b), x.detach(), t).graph
    names = {n.op.name for n in graph.nodes if n.kind == "call"}
    assert "nll_loss" not in names and "gather" in names
    np.testing.assert_allclose(loss.item(), np.log(3), rtol=1e-6)
