"""``F.linear_cross_entropy`` and ``nn.LinearCrossEntropyLoss`` against PyTorch's: class and
probability targets, K-dimensional losses, bias, class weights, ignore_index, smoothing,
reductions, and the gradients of input, weight and bias."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember
import ember.nn.functional as F

CASES = {
    "classes": dict(out=(), target="classes", kw={}),
    "bias_weight_mean": dict(out=(), target="classes", kw={"bias": True, "weight": True}),
    "ignore_sum": dict(out=(), target="classes", kw={"ignore_index": 1, "reduction": "sum"}),
    "smoothing_none": dict(
        out=(), target="classes", kw={"label_smoothing": 0.2, "reduction": "none"}
    ),
    "probabilities": dict(out=(), target="probs", kw={}),
    "k_dim": dict(out=(2, 3), target="classes", kw={"bias": True}),
    "unbatched": dict(out=(), target="classes", kw={}, batch=()),
}


def _inputs(case, rng):
    batch = case.get("batch", (4,))
    c, inf = 5, 6
    x = rng.standard_normal((*batch, inf))
    w = rng.standard_normal((c, *case["out"], inf)) * 0.5
    b = rng.standard_normal((c, *case["out"]))
    if case["target"] == "classes":
        t = rng.integers(0, c, (*batch, *case["out"]))
    else:
        p = rng.random((*batch, c, *case["out"]))
        t = p / p.sum(axis=len(batch), keepdims=True)
    return x, w, b, t, rng.random(c) + 0.5


@pytest.mark.parametrize("name", sorted(CASES))
def test_linear_cross_entropy_matches_pytorch(name):
    case = CASES[name]
    x, w, b, t, cw = _inputs(case, np.random.default_rng(0))
    kw = dict(case["kw"])
    use_bias, use_weight = kw.pop("bias", False), kw.pop("weight", False)
    results = []
    for lib, fn in (
        (torch, torch.nn.functional.linear_cross_entropy),
        (ember, F.linear_cross_entropy),
    ):
        xs = lib.tensor(x, requires_grad=True)
        ws = lib.tensor(w, requires_grad=True)
        bs = lib.tensor(b, requires_grad=True)
        loss = fn(
            xs,
            ws,
            lib.tensor(t),
            linear_bias=bs if use_bias else None,
            weight=lib.tensor(cw) if use_weight else None,
            **kw,
        )
        loss.sum().backward()
        grads = [xs.grad.numpy(), ws.grad.numpy()] + ([bs.grad.numpy()] if use_bias else [])
        results.append([loss.detach().numpy(), *grads])
    for got, expected in zip(results[1], results[0]):
        np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)


def test_the_loss_module_matches_pytorch_and_checks_its_arguments():
    rng = np.random.default_rng(1)
    tm = torch.nn.LinearCrossEntropyLoss(6, 5, out_features=(3,), bias=True, dtype=torch.float64)
    em = ember.nn.LinearCrossEntropyLoss(6, 5, out_features=(3,), bias=True, dtype=ember.float64)
    assert tuple(em.linear.weight.shape) == tuple(tm.linear.weight.shape)
    em.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    x, t = rng.standard_normal((4, 6)), rng.integers(0, 5, (4, 3))
    expected = tm(torch.tensor(x), torch.tensor(t)).item()
    assert em(ember.tensor(x), ember.tensor(t)).item() == pytest.approx(expected, rel=1e-12)
    with pytest.raises(ember.EmberError, match="label_smoothing"):
        ember.nn.LinearCrossEntropyLoss(6, 5, label_smoothing=1.5)
    with pytest.raises(ember.EmberError, match="in_features"):
        F.linear_cross_entropy(
            ember.ones(2, 4), ember.ones(5, 6), ember.zeros(2, dtype=ember.int64)
        )
    with pytest.raises(ember.EmberError, match="ignore_index"):
        F.linear_cross_entropy(
            ember.ones(2, 6), ember.ones(5, 6), ember.ones(2, 5) / 5, ignore_index=0
        )
