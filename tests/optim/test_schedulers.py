"""ember.optim.lr_scheduler: learning-rate (and momentum) sequences against PyTorch's, state
round trips through a checkpoint, and errors.

Each comparison builds the same two-group optimizer in both frameworks (lrs 0.1 and 0.05), steps
optimizer and scheduler together 40 times, and requires the groups' lr (and momentum / betas where
the scheduler cycles them) and ``get_last_lr()`` to equal PyTorch's after every step.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import ember
from ember import optim
from ember.errors import StateDictError
from ember.optim import OptimizerError
from ember.optim import lr_scheduler as EL

try:
    import torch
    from torch.optim import lr_scheduler as TL
except ImportError:
    torch = TL = None

needs_torch = pytest.mark.skipif(
    torch is None, reason="PyTorch is not installed; it is the peer for learning-rate schedules"
)


def _optimizer(lib, cls_name="SGD", **kwargs):
    make = (
        (lambda: ember.zeros(2, requires_grad=True))
        if lib is ember
        else (lambda: torch.zeros(2, requires_grad=True))
    )
    opt_module = optim if lib is ember else torch.optim
    groups = [{"params": [make()]}, {"params": [make()], "lr": 0.05}]
    return getattr(opt_module, cls_name)(groups, lr=0.1, **kwargs)


def _compare(make_scheduler, steps=40, opt_name="SGD", opt_kwargs=None, metrics=None):
    """``make_scheduler(module, optimizer)`` builds the scheduler from ember's or torch's
    lr_scheduler module; the lr sequences must be identical."""
    e_opt = _optimizer(ember, opt_name, **(opt_kwargs or {}))
    t_opt = _optimizer(torch, opt_name, **(opt_kwargs or {}))
    e_sched = make_scheduler(EL, e_opt)
    t_sched = make_scheduler(TL, t_opt)
    assert e_sched.get_last_lr() == t_sched.get_last_lr()
    seen = []
    for i in range(steps):
        e_opt.step()
        t_opt.step()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's deprecation notices
            if metrics is None:
                e_sched.step()
                t_sched.step()
            else:
                e_sched.step(metrics[i])
                t_sched.step(metrics[i])
        for e_group, t_group in zip(e_opt.param_groups, t_opt.param_groups):
            assert math.isclose(e_group["lr"], t_group["lr"], rel_tol=1e-15), (i, e_group["lr"])
            for key in ("momentum", "betas"):
                if key in t_group:
                    assert e_group[key] == pytest.approx(t_group[key], rel=1e-15), (i, key)
        assert e_sched.get_last_lr() == pytest.approx(t_sched.get_last_lr(), rel=1e-15)
        seen.append(e_sched.get_last_lr()[0])
    return seen


SCHEDULES = {
    "StepLR": lambda m, o: m.StepLR(o, step_size=3, gamma=0.5),
    "MultiStepLR": lambda m, o: m.MultiStepLR(o, milestones=[2, 5, 5, 9], gamma=0.5),
    "ExponentialLR": lambda m, o: m.ExponentialLR(o, gamma=0.9),
    "CosineAnnealingLR": lambda m, o: m.CosineAnnealingLR(o, T_max=10, eta_min=0.001),
    "CosineAnnealingLR-past-T_max": lambda m, o: m.CosineAnnealingLR(o, T_max=7),
    "LinearLR": lambda m, o: m.LinearLR(o, start_factor=0.2, end_factor=0.9, total_iters=7),
    "LinearLR-default": lambda m, o: m.LinearLR(o),
    "ConstantLR": lambda m, o: m.ConstantLR(o, factor=0.5, total_iters=4),
    "PolynomialLR": lambda m, o: m.PolynomialLR(o, total_iters=10, power=2.0),
    "LambdaLR": lambda m, o: m.LambdaLR(o, lr_lambda=[lambda e: 0.95**e, lambda e: 1 / (e + 1)]),
    "MultiplicativeLR": lambda m, o: m.MultiplicativeLR(o, lr_lambda=lambda e: 0.97),
    "CosineAnnealingWarmRestarts": lambda m, o: m.CosineAnnealingWarmRestarts(
        o, T_0=3, T_mult=2, eta_min=0.01
    ),
    "OneCycleLR-cos": lambda m, o: m.OneCycleLR(o, max_lr=[0.5, 0.2], total_steps=40),
    "OneCycleLR-linear-three-phase": lambda m, o: m.OneCycleLR(
        o, max_lr=0.5, epochs=4, steps_per_epoch=10, anneal_strategy="linear", three_phase=True
    ),
    "OneCycleLR-no-momentum": lambda m, o: m.OneCycleLR(
        o, max_lr=0.3, total_steps=40, cycle_momentum=False, pct_start=0.25
    ),
    "SequentialLR": lambda m, o: m.SequentialLR(
        o,
        schedulers=[m.LinearLR(o, start_factor=0.1, total_iters=5), m.CosineAnnealingLR(o, 10)],
        milestones=[5],
    ),
    "SequentialLR-three": lambda m, o: m.SequentialLR(
        o,
        schedulers=[m.ConstantLR(o, 0.5, 3), m.ExponentialLR(o, 0.9), m.StepLR(o, 4)],
        milestones=[4, 12],
    ),
    "ChainedScheduler": lambda m, o: m.ChainedScheduler(
        [m.ExponentialLR(o, gamma=0.95), m.StepLR(o, step_size=5, gamma=0.5)]
    ),
}


@needs_torch
@pytest.mark.parametrize("name", list(SCHEDULES))
def test_lr_sequence_matches_torch(name):
    momentum = {"momentum": 0.9} if name.startswith("OneCycle") else {}
    _compare(SCHEDULES[name], opt_kwargs=momentum)


@needs_torch
@pytest.mark.parametrize("opt_name", ["Adam", "AdamW", "RMSprop"])
def test_one_cycle_cycles_adam_beta1_and_rmsprop_momentum(opt_name):
    schedule = lambda m, o: m.OneCycleLR(  # noqa: E731
        o, max_lr=0.4, total_steps=35, base_momentum=0.8, max_momentum=0.92
    )
    _compare(schedule, steps=35, opt_name=opt_name)
    e_opt = _optimizer(ember, opt_name)
    EL.OneCycleLR(e_opt, max_lr=0.4, total_steps=35)
    key = "betas" if opt_name.startswith("Adam") else "momentum"
    first = e_opt.param_groups[0][key]
    assert (first[0] if key == "betas" else first) == 0.95  # starts at max_momentum


@needs_torch
def test_reduce_lr_on_plateau_matches_torch_on_a_loss_sequence():
    rng = np.random.default_rng(0)
    falling = np.linspace(1.0, 0.5, 6)
    flat = 0.5 + rng.uniform(0.0, 0.01, 34)  # no improvement beyond the threshold
    losses = [float(v) for v in np.concatenate([falling, flat])]
    configs = [
        dict(patience=2, cooldown=1, factor=0.5, min_lr=[0.01, 0.02]),
        dict(patience=0, threshold=0.05, threshold_mode="abs", min_lr=0.004),
        dict(mode="max", patience=3, factor=0.3, eps=1e-3),
        dict(mode="max", threshold_mode="abs", threshold=0.0, patience=1),
    ]
    for config in configs:
        metrics = losses if config.get("mode") != "max" else [-v for v in losses]
        _compare(lambda m, o: m.ReduceLROnPlateau(o, **config), metrics=metrics)


def test_reduce_lr_on_plateau_reads_a_tensor_metric():
    opt = _optimizer(ember)
    sched = EL.ReduceLROnPlateau(opt, patience=0, factor=0.5)
    sched.step(ember.tensor(1.0))
    sched.step(ember.tensor(2.0))  # worse: the lrs halve
    assert sched.get_last_lr() == [0.05, 0.025]


def test_cosine_annealing_reaches_eta_min_at_t_max():
    opt = _optimizer(ember)
    sched = EL.CosineAnnealingLR(opt, T_max=8, eta_min=0.01)
    for _ in range(8):
        opt.step()
        sched.step()
    assert sched.get_last_lr()[0] == pytest.approx(0.01, abs=1e-15)
    assert sched.base_lrs == [0.1, 0.05]
    assert opt.param_groups[0]["initial_lr"] == 0.1


@pytest.mark.parametrize(
    "name",
    ["StepLR", "MultiStepLR", "CosineAnnealingLR", "OneCycleLR-cos", "SequentialLR", "LambdaLR"],
)
def test_state_dict_round_trip_through_a_checkpoint(name, tmp_path):
    """Save optimizer and scheduler mid-run; a fresh pair loaded from the file continues with the
    same learning rates as the uninterrupted run."""
    make = SCHEDULES[name]
    straight_opt = _optimizer(ember, momentum=0.9)
    straight = make(EL, straight_opt)
    expected = []
    for _ in range(20):
        straight_opt.step()
        straight.step()
        expected.append(straight.get_last_lr())

    opt = _optimizer(ember, momentum=0.9)
    sched = make(EL, opt)
    for _ in range(8):
        opt.step()
        sched.step()
    path = tmp_path / "sched.safetensors"
    ember.io.save({"optimizer": opt.state_dict(), "scheduler": sched.state_dict()}, path)
    loaded = ember.io.load(path)

    new_opt = _optimizer(ember, momentum=0.9)
    new_sched = make(EL, new_opt)
    new_opt.load_state_dict(loaded["optimizer"])
    new_sched.load_state_dict(loaded["scheduler"])
    resumed = []
    for _ in range(12):
        new_opt.step()
        new_sched.step()
        resumed.append(new_sched.get_last_lr())
    assert resumed == expected[8:]


def test_reduce_lr_on_plateau_state_round_trip(tmp_path):
    opt = _optimizer(ember)
    sched = EL.ReduceLROnPlateau(opt, patience=1, cooldown=2)
    for loss in [1.0, 0.9, 0.95, 0.97]:
        sched.step(loss)
    path = tmp_path / "plateau.safetensors"
    ember.io.save(sched.state_dict(), path)
    again = EL.ReduceLROnPlateau(_optimizer(ember), patience=1, cooldown=2)
    again.load_state_dict(ember.io.load(path))
    assert again.best == 0.9 and again.cooldown_counter == sched.cooldown_counter
    assert again.state_dict() == sched.state_dict()


def test_scheduler_errors():
    opt = _optimizer(ember)
    with pytest.raises(OptimizerError, match="expected an ember.optim.Optimizer"):
        EL.StepLR(object(), step_size=2)
    with pytest.raises(OptimizerError, match="initial_lr"):
        EL.StepLR(_optimizer(ember), step_size=2, last_epoch=3)
    with pytest.raises(OptimizerError, match="max_lr has 3 values.*2 param groups"):
        EL.OneCycleLR(opt, max_lr=[0.1, 0.2, 0.3], total_steps=10)
    with pytest.raises(OptimizerError, match="total_steps"):
        EL.OneCycleLR(opt, max_lr=0.1)
    with pytest.raises(OptimizerError, match="cycle_momentum"):
        EL.OneCycleLR(optim.Adagrad([ember.zeros(1, requires_grad=True)]), 0.1, total_steps=5)
    cycled = _optimizer(ember, momentum=0.9)
    one_cycle = EL.OneCycleLR(cycled, max_lr=0.1, total_steps=3)
    with pytest.raises(OptimizerError, match="stepped 4 times.*total_steps is 3"):
        for _ in range(4):
            cycled.step()
            one_cycle.step()
    with pytest.raises(OptimizerError, match="factor must be < 1.0"):
        EL.ReduceLROnPlateau(opt, factor=1.5)
    with pytest.raises(OptimizerError, match="mode must be 'min' or 'max'"):
        EL.ReduceLROnPlateau(opt, mode="lowest")
    with pytest.raises(OptimizerError, match="milestone"):
        EL.SequentialLR(opt, [EL.StepLR(opt, 2), EL.StepLR(opt, 3)], milestones=[])
    with pytest.raises(OptimizerError, match="different optimizer"):
        EL.ChainedScheduler([EL.StepLR(opt, 2), EL.StepLR(_optimizer(ember), 2)])
    with pytest.raises(StateDictError, match="different kind of scheduler"):
        EL.StepLR(opt, 2).load_state_dict(EL.CosineAnnealingLR(opt, 5).state_dict())
    with pytest.raises(StateDictError, match="2 param groups"):
        EL.StepLR(opt, 2).load_state_dict({"last_epoch": 1, "base_lrs": [0.1]})


def test_stepping_the_scheduler_before_the_optimizer_warns():
    opt = _optimizer(ember)
    sched = EL.StepLR(opt, step_size=2)
    with pytest.warns(UserWarning, match="before optimizer.step"):
        sched.step()


def test_resumes_from_a_pytorch_checkpoint(tmp_path):
    """A scheduler state written by PyTorch (torch.save of state_dict(), with its bookkeeping
    entries such as _get_lr_called_within_step) loads, and the schedule continues as PyTorch's."""
    torch = pytest.importorskip("torch")

    def make(lib, opt):
        return lib.optim.lr_scheduler.OneCycleLR(opt, 0.1, total_steps=10)

    tp = torch.zeros(1, requires_grad=True)
    t_opt = torch.optim.SGD([tp], lr=0.1, momentum=0.9)
    t_sched = make(torch, t_opt)
    for _ in range(3):
        t_opt.step()
        t_sched.step()
    torch.save({"sched": t_sched.state_dict(), "opt": t_opt.state_dict()}, tmp_path / "ck.pt")
    ck = ember.load(tmp_path / "ck.pt")
    e_opt = ember.optim.SGD([ember.zeros(1, requires_grad=True)], lr=0.1, momentum=0.9)
    e_sched = make(ember, e_opt)
    e_opt.load_state_dict(ck["opt"])
    e_sched.load_state_dict(ck["sched"])
    for _ in range(4):
        t_opt.step()
        t_sched.step()
        e_opt.step()
        e_sched.step()
        assert e_opt.param_groups[0]["lr"] == pytest.approx(t_opt.param_groups[0]["lr"])
        assert e_opt.param_groups[0]["momentum"] == pytest.approx(t_opt.param_groups[0]["momentum"])
