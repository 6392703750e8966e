"""Adam/AdamW round as PyTorch 2.13's default CPU step (``_single_tensor_adam``: foreach is
off for CPU tensors): the second moment is its ``addcmul_``'s fused multiply-add
``fma((1 - beta2) g, g, beta2 v)`` and the update its ``addcdiv_``, ``p + (-step_size m) /
denom`` in that order. PyTorch's float32 ``sqrt`` is MKL's, not correctly rounded (one unit in
the last place on a fifth of the values), which no portable kernel reproduces: with PyTorch's
``Tensor.sqrt`` made correctly rounded (the one call of it in its step), ember's steps equal
its steps bit for bit, over tensors long enough for the vector loops and their tails, the C
multi-tensor kernel and the per-tensor ops (no compiler) alike."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch", reason="PyTorch (the reference) is not installed")

_R = np.random.default_rng(60)
_SHAPES = [(5, 7), (37,), (3, 3, 2)]
_W = [_R.standard_normal(s).astype(np.float32) for s in _SHAPES]
_GRADS = [[_R.standard_normal(s).astype(np.float32) for s in _SHAPES] for _ in range(8)]


def _steps(lib, name, kwargs, steps=8):
    params = [lib.nn.Parameter(lib.tensor(w.copy())) for w in _W]
    opt = getattr(lib.optim, name)(params, lr=1e-2, **kwargs)
    for grads in _GRADS[:steps]:
        for p, g in zip(params, grads):
            p.grad = lib.tensor(g.copy())
        opt.step()
    states = [opt.state[p] for p in params]
    return [p.detach().numpy().copy() for p in params] + [
        np.asarray(s[k].detach().numpy()) for s in states for k in ("exp_avg", "exp_avg_sq")
    ]


@pytest.fixture
def rounded_sqrt(monkeypatch):
    """PyTorch's Tensor.sqrt correctly rounded for float32 (computed in float64, rounded once:
    exact, as a float64 square root of a float32 rounds to the float32 one)."""
    plain = torch.Tensor.sqrt

    def sqrt(self):
        if self.dtype == torch.float32:
            return plain(self.double()).float()
        return plain(self)

    monkeypatch.setattr(torch.Tensor, "sqrt", sqrt)


CASES = [
    (name, {"weight_decay": wd, "amsgrad": ams, "maximize": mx})
    for name, wd, ams, mx in itertools.product(
        ["Adam", "AdamW"], [0.0, 0.1], [False, True], [False, True]
    )
]


@pytest.mark.parametrize("name, kwargs", CASES, ids=str)
def test_adam_equals_pytorchs_step_bit_for_bit(rounded_sqrt, name, kwargs):
    want = _steps(torch, name, dict(kwargs, foreach=False))
    got = _steps(ember, name, kwargs)
    for k, (e, t) in enumerate(zip(got, want)):
        np.testing.assert_array_equal(e, t, err_msg=f"value {k}")


def test_adam_without_the_sqrt_patch_agrees_to_an_ulp_or_two():
    """(PyTorch's own sqrt: the steps agree to rounding, not bits.)"""
    for e, t in zip(
        _steps(ember, "Adam", {"amsgrad": True}), _steps(torch, "Adam", {"amsgrad": True})
    ):
        np.testing.assert_allclose(e, t, rtol=2e-6, atol=1e-9)


@pytest.mark.parametrize(
    "name, kwargs",
    [
        ("Adam", {"lr": 0.01, "weight_decay": 0.1, "amsgrad": True}),
        ("Adam", {"lr": 0.01, "betas": (0.3, 0.99)}),  # (lerp's other form: weight 0.7)
        ("AdamW", {"lr": 0.01, "maximize": True}),
        ("SGD", {"lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01}),
        ("SGD", {"lr": 0.05, "momentum": 0.9, "dampening": 0.1}),
    ],
    ids=str,
)
def test_captured_step_rounds_as_the_eager_one(name, kwargs):
    """A step recorded by ember.function (its hyper-parameters graph values) takes the same
    single roundings as the eager step (ops/add_scaled.py), bit for bit over five steps. (SGD's
    final ``p - lr * g`` is recorded as a product then a difference, optim/sgd.py: two
    roundings, each half an ulp of the operands per step.)"""

    def run(capture):
        params = [ember.nn.Parameter(ember.tensor(w.copy())) for w in _W]
        opt = getattr(ember.optim, name)(params, **kwargs)

        def step(*grads):
            for p, g in zip(params, grads):
                p.grad = g
            opt.step()

        step = ember.function(step) if capture else step
        for grads in _GRADS[:5]:
            step(*(ember.tensor(g) for g in grads))
        return [p.detach().numpy().copy() for p in params]

    start = [np.abs(w) for w in _W]
    for e, c, w in zip(run(False), run(True), start):
        if name != "SGD":
            np.testing.assert_array_equal(c, e)
        else:  # (five steps of two extra roundings, on values of the weights' size)
            bound = 5 * 2 * np.finfo(e.dtype).eps * (w + np.abs(e))
            assert np.all(np.abs(c.astype(np.float64) - e) <= bound)
