"""An in-place write under no_grad to a graph value that requires grad (F.embedding's max_norm on
a non-leaf weight) changes its value only, as PyTorch's eager write: captured results and
gradients equal PyTorch's."""

import numpy as np
import torch

import ember

W0 = np.arange(15, dtype=np.float64).reshape(5, 3) / 4
IDX = np.array([1, 3, 1])
MIX = np.arange(15.0).reshape(5, 3)


def _run(lib, capture=False):
    F = lib.nn.functional

    def f(w, i, mix):
        v = w * 1
        out = F.embedding(i, v, max_norm=1.0)
        loss = out.sum() + (v * mix).sum()
        loss.backward()
        return out, v

    if capture:
        f = ember.function(f)
    w = lib.tensor(W0, requires_grad=True)
    out, v = f(w, lib.tensor(IDX), lib.tensor(MIX))
    return out.detach().numpy(), v.detach().numpy(), w.grad.numpy()


def test_captured_max_norm_on_a_non_leaf_weight_matches_pytorch_eager():
    want = _run(torch)
    for got in (_run(ember), _run(ember, capture=True)):
        for g, t in zip(got, want):
            np.testing.assert_allclose(g, t, rtol=1e-12, atol=1e-12)


def test_captured_no_grad_clamp_keeps_the_history():
    def run(lib, capture=False):
        def f(x):
            h = x * 2
            with lib.no_grad():
                h.clamp_(max=1.0)
            (h * h).sum().backward()
            return h

        if capture:
            f = ember.function(f)
        x = lib.tensor(np.array([0.2, 0.9, -3.0]), requires_grad=True)
        h = f(x)
        return h.detach().numpy(), x.grad.numpy()

    want = run(torch)
    for g, t in zip(run(ember, capture=True), want):
        np.testing.assert_allclose(g, t, rtol=1e-12)
