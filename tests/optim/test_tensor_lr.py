"""A Tensor learning rate (``Adam(params, lr=torch.tensor(0.05))``) as PyTorch's: accepted by
every optimizer, kept as the same Tensor in ``param_groups``, filled in place by schedulers, and
read at every step of a compiled training step (an in-place change takes effect, no retrace)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember
from ember.optim import lr_scheduler as EL
from ember.optim.optimizer import OptimizerError

OPTIMIZERS = {
    "SGD": {"momentum": 0.9},
    "Adam": {},
    "AdamW": {"amsgrad": True},
    "Adagrad": {},
    "Adadelta": {},
    "Adamax": {},
    "NAdam": {},
    "RAdam": {},
    "RMSprop": {"centered": True},
    "Rprop": {},
    "ASGD": {},
    "Adafactor": {},
}


def _data():
    rng = np.random.default_rng(0)
    return rng.standard_normal((4, 3)), rng.standard_normal((6, 4)), rng.standard_normal((6, 3))


def _run_torch(name, kwargs, lr, schedule, steps=6):
    w0, x, y = _data()
    w = torch.nn.Parameter(torch.tensor(w0))
    lr_t = torch.tensor(lr, dtype=torch.float64)
    opt = getattr(torch.optim, name)([w], lr=lr_t, **kwargs)
    sched = schedule(torch.optim.lr_scheduler, opt)
    lrs = []
    for _ in range(steps):
        opt.zero_grad()
        ((torch.tensor(x) @ w - torch.tensor(y)) ** 2).mean().backward()
        opt.step()
        sched.step()
        assert opt.param_groups[0]["lr"] is lr_t
        lrs.append(float(lr_t))
    return w.detach().numpy(), lrs


def _run_ember(name, kwargs, lr, schedule, steps=6, compiled=False):
    w0, x, y = _data()
    w = ember.nn.Parameter(ember.tensor(w0))
    lr_t = ember.tensor(lr, dtype=ember.float64)
    opt = getattr(ember.optim, name)([w], lr=lr_t, **kwargs)
    sched = schedule(EL, opt)
    xe, ye = ember.tensor(x), ember.tensor(y)

    def step(x, y):
        opt.zero_grad()
        ((x @ w - y) ** 2).mean().backward()
        opt.step()

    run = ember.function(step) if compiled else step
    lrs = []
    for _ in range(steps):
        run(xe, ye)
        sched.step()
        assert opt.param_groups[0]["lr"] is lr_t
        lrs.append(float(lr_t))
    return w.detach().numpy(), lrs, run


def _step_lr(mod, opt):
    return mod.StepLR(opt, step_size=2, gamma=0.5)


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_a_tensor_lr_steps_as_pytorch_with_a_scheduler_filling_it(name):
    kwargs = OPTIMIZERS[name]
    lr = 0.05 if name != "Adadelta" else 0.5
    expected, expected_lrs = _run_torch(name, kwargs, lr, _step_lr)
    got, lrs, _ = _run_ember(name, kwargs, lr, _step_lr)
    assert lrs == pytest.approx(expected_lrs, rel=1e-15)
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(
    "schedule",
    [
        lambda m, o: m.CosineAnnealingLR(o, T_max=5),
        lambda m, o: m.OneCycleLR(o, max_lr=0.1, total_steps=8, cycle_momentum=False),
        lambda m, o: m.ExponentialLR(o, 0.9),
        lambda m, o: m.CyclicLR(o, 0.01, 0.1, step_size_up=2, cycle_momentum=False),
    ],
    ids=["cosine", "onecycle", "exponential", "cyclic"],
)
def test_schedulers_fill_a_tensor_lr_in_place_as_pytorch(schedule):
    expected, expected_lrs = _run_torch("SGD", {}, 0.05, schedule)
    got, lrs, _ = _run_ember("SGD", {}, 0.05, schedule)
    assert lrs == pytest.approx(expected_lrs, rel=1e-12)
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)


def test_a_compiled_step_reads_the_tensor_lr_without_retracing():
    expected, expected_lrs = _run_torch("Adam", {}, 0.05, _step_lr, steps=8)
    got, lrs, run = _run_ember("Adam", {}, 0.05, _step_lr, steps=8, compiled=True)
    assert lrs == pytest.approx(expected_lrs, rel=1e-15)
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12)
    assert run.stats.traces <= 2, run.stats  # (the first call finds no gradient yet)


def test_get_last_lr_and_base_lrs_are_copies_as_pytorch():
    for mod, lib in ((torch.optim, torch), (ember.optim, ember)):
        w = lib.zeros(2, requires_grad=True)
        lr = lib.tensor(0.1)
        opt = mod.SGD([w], lr=lr)
        sched = mod.lr_scheduler.StepLR(opt, 1, gamma=0.5)
        last, base = sched.get_last_lr()[0], sched.base_lrs[0]
        sched.step()
        assert opt.param_groups[0]["lr"] is lr and float(lr) == pytest.approx(0.05, rel=1e-7)
        assert float(last) == pytest.approx(0.1, rel=1e-7), mod
        assert float(base) == pytest.approx(0.1, rel=1e-7), mod  # not the filled tensor


def test_tensor_lr_rules_as_pytorch():
    w = ember.zeros(2, requires_grad=True)
    tw = torch.zeros(2, requires_grad=True)
    for cls in ("Adam", "AdamW"):
        with pytest.raises(ValueError, match="foreach=True"):
            getattr(torch.optim, cls)([tw], lr=torch.tensor(0.1), foreach=True)
        with pytest.raises(OptimizerError, match="foreach=True"):
            getattr(ember.optim, cls)([w], lr=ember.tensor(0.1), foreach=True)
    with pytest.raises(ValueError, match="1-element"):
        torch.optim.Adam([tw], lr=torch.tensor([0.1, 0.2]))
    with pytest.raises(OptimizerError, match="1-element"):
        ember.optim.Adam([w], lr=ember.tensor([0.1, 0.2]))
    with pytest.raises(OptimizerError, match="lr"):
        ember.optim.SGD([w], lr=ember.tensor(-0.1))
    ember.optim.SGD([w], lr=ember.tensor(0.1), foreach=True)  # SGD allows it (as PyTorch)
    torch.optim.SGD([tw], lr=torch.tensor(0.1), foreach=True)
