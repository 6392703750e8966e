"""Schedulers under ``ember.function``: hyper-parameters are runtime inputs of a compiled
training step, so a scheduler stepped every iteration neither retraces nor recompiles it, and
the compiled steps equal eager ones."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ember
from ember import nn
from ember.kernels import ccompile
from ember.optim import lr_scheduler as EL

STEPS = 1000


def _model(dtype=ember.float32):
    ember.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    return model.double() if dtype == ember.float64 else model


def _batches(dtype=ember.float32):
    """A new batch per step: trained on one batch the model would converge, leaving gradients
    of rounding noise that the suite's check of compiled code against the interpreter (to a
    thousandth of each output's scale) cannot compare."""
    rng = np.random.default_rng(0)
    while True:
        x = ember.tensor(rng.standard_normal((5, 6)), dtype=dtype)
        yield x, ember.tensor(rng.standard_normal((5, 3)), dtype=dtype)


def _step(model, opt):
    # (a regression: a classifier trained long on one batch grows probabilities near 1, where
    # the loss's gradient cancels and the suite's per-call check of its fused C loops against
    # NumPy's, which allows for another order of the sums but not for the ulps by which C's exp
    # differs from NumPy's, would fail the run for that reason alone)
    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return step


SCHEDULES = {
    # OneCycle changes lr and, by default, the momentum (Adam's betas[0]) at every step
    "onecycle": lambda opt: EL.OneCycleLR(opt, max_lr=0.05, total_steps=STEPS + 1),
    "cosine_warmup": lambda opt: EL.SequentialLR(
        opt,
        [
            EL.LinearLR(opt, start_factor=0.01, total_iters=50),
            EL.CosineAnnealingLR(opt, T_max=STEPS - 50),
        ],
        milestones=[50],
    ),
    "lambda": lambda opt: EL.LambdaLR(opt, lambda k: min(1.0, (k + 1) / 20) / math.sqrt(k + 1)),
}
OPTIMIZERS = {
    "sgd_momentum": lambda ps: ember.optim.SGD(ps, lr=0.01, momentum=0.9, weight_decay=1e-3),
    "adam": lambda ps: ember.optim.Adam(ps, lr=1e-3),
    "adamw": lambda ps: ember.optim.AdamW(ps, lr=1e-3, amsgrad=True),
    "rmsprop": lambda ps: ember.optim.RMSprop(ps, lr=1e-3, momentum=0.5, centered=True),
    "adagrad": lambda ps: ember.optim.Adagrad(ps, lr=1e-2, lr_decay=1e-3, weight_decay=1e-4),
}
PAIRS = [("onecycle", "adam"), ("cosine_warmup", "sgd_momentum"), ("lambda", "adamw")]


def _libraries() -> int:
    """C libraries this process has built or loaded from disk so far (memory hits excluded)."""
    return ccompile.stats.compiles + ccompile.stats.disk_hits


@pytest.mark.parametrize("schedule, optimizer", PAIRS)
def test_a_scheduler_stepped_every_iteration_compiles_the_step_once(schedule, optimizer):
    model = _model()
    opt = OPTIMIZERS[optimizer](model.parameters())
    scheduler = SCHEDULES[schedule](opt)
    step = ember.function(_step(model, opt))
    lrs = set()
    for k, (x, y) in zip(range(STEPS), _batches()):
        step(x, y)
        scheduler.step()
        lrs.add(opt.param_groups[0]["lr"])
        if k == 1:  # the first call finds no gradients and no optimizer buffers; then one graph
            warm = (step.stats.traces, _libraries())
    assert len(lrs) > STEPS // 2  # the schedule did change the learning rate
    assert step.stats.traces == 2, step.stats
    assert (step.stats.traces, _libraries()) == warm  # no trace and no C compile after that


@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
def test_scheduled_compiled_steps_equal_eager_steps(optimizer):
    steps = 30
    eager_model, model = _model(ember.float64), _model(ember.float64)
    eager_opt = OPTIMIZERS[optimizer](eager_model.parameters())
    opt = OPTIMIZERS[optimizer](model.parameters())
    cycle = optimizer != "adagrad"  # (Adagrad has no momentum to cycle)
    schedule = lambda o: EL.OneCycleLR(o, 0.05, total_steps=steps + 1, cycle_momentum=cycle)  # noqa: E731
    eager_scheduler, scheduler = schedule(eager_opt), schedule(opt)
    eager_step, step = _step(eager_model, eager_opt), ember.function(_step(model, opt))
    for _, (x, y) in zip(range(steps), _batches(ember.float64)):
        expected, got = eager_step(x, y), step(x, y)
        eager_scheduler.step()
        scheduler.step()
        np.testing.assert_allclose(got.detach().numpy(), expected.detach().numpy(), rtol=1e-12)
        for p, q in zip(model.parameters(), eager_model.parameters()):
            # the compiled update rounds in another order (fused C loops): the difference grows
            # by a few ulps of the parameter's scale a step, in absolute terms, so an entry
            # that passed near zero keeps it (RMSprop: 7.5e-15 on -7.1e-4 after 30 steps on an
            # Intel Xeon)
            scale = max(1.0, float(np.abs(q.detach().numpy()).max()))
            atol = 16 * steps * np.finfo(np.float64).eps * scale
            np.testing.assert_allclose(
                p.detach().numpy(), q.detach().numpy(), rtol=1e-12, atol=atol
            )
    assert step.stats.traces <= 2, step.stats


def test_a_changed_branch_retraces_with_its_reason():
    # weight decay switched on adds ops to the update: that decision is baked into the graph
    model = _model()
    opt = ember.optim.SGD(model.parameters(), lr=0.1)
    step = ember.function(_step(model, opt))
    x, y = next(_batches())
    step(x, y)
    step(x, y)  # (the first call found no gradients: this one traces again, with them)
    opt.param_groups[0]["lr"] = 0.05  # a runtime value: no retrace
    step(x, y)
    assert step.stats.traces == 2
    opt.param_groups[0]["weight_decay"] = 0.01
    step(x, y)
    assert step.stats.traces == 3
    assert "hyper-parameters the graph bakes in" in step.stats.retrace_reasons[1]


def test_a_session_training_op_reads_the_current_learning_rate():
    x_data = np.ones((2, 3), np.float32)
    with ember.Graph() as g:
        x = ember.placeholder((None, 3), name="x")
        W = ember.Variable(np.zeros((3, 1), np.float32), name="W")
        opt = ember.optim.SGD([W], lr=0.1)
        train = opt.minimize((x @ W).sum())
    with ember.Session(g) as sess:
        sess.run(train, {x: x_data})
        np.testing.assert_allclose(W.detach().numpy(), -0.2 * np.ones((3, 1)), rtol=1e-6)
        opt.param_groups[0]["lr"] = 0.5
        sess.run(train, {x: x_data})
        np.testing.assert_allclose(W.detach().numpy(), -1.2 * np.ones((3, 1)), rtol=1e-6)
