"""CyclicLR and optim.swa_utils against PyTorch: learning rates and momenta after every step
(every mode, custom scale functions, SGD's momentum and Adam's beta1), state round trips, and
SWA / EMA averaged models (parameters, buffers, update_bn) with SWALR."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn as nn
from ember.optim import OptimizerError, swa_utils
from ember.optim.lr_scheduler import CyclicLR

torch = pytest.importorskip("torch", reason="PyTorch (the reference peer) is not installed")


def _cyclic_run(lib, opt_name, steps=25, **kwargs):
    params = [lib.nn.Parameter(lib.ones(2)), lib.nn.Parameter(lib.ones(1))]
    groups = [{"params": [params[0]]}, {"params": [params[1]], "lr": 0.05}]
    extra = {"momentum": 0.9} if opt_name == "SGD" else {}
    opt = getattr(lib.optim, opt_name)(groups, lr=0.1, **extra)
    sched = lib.optim.lr_scheduler.CyclicLR(opt, **kwargs)
    out = []
    for _ in range(steps):
        opt.step()
        sched.step()
        for g in opt.param_groups:
            mom = g["momentum"] if "momentum" in g else g["betas"][0]
            out.append((g["lr"], mom))
        out.append(tuple(sched.get_last_lr()))
    return out, sched, opt


def _scale(x):
    return 0.5**x


_CASES = [
    {"base_lr": 0.01, "max_lr": 0.1, "step_size_up": 4},
    {"base_lr": 0.01, "max_lr": [0.1, 0.2], "step_size_up": 3, "step_size_down": 5},
    {"base_lr": 0.01, "max_lr": 0.1, "step_size_up": 3, "mode": "triangular2"},
    {"base_lr": [0.01, 0.02], "max_lr": 0.1, "step_size_up": 4, "mode": "exp_range", "gamma": 0.9},
    {"base_lr": 0.01, "max_lr": 0.1, "step_size_up": 2, "scale_fn": _scale},
    {
        "base_lr": 0.01,
        "max_lr": 0.1,
        "step_size_up": 2,
        "scale_fn": _scale,
        "scale_mode": "iterations",
    },
    {"base_lr": 0.01, "max_lr": 0.1, "step_size_up": 4, "cycle_momentum": False},
    {"base_lr": 0.01, "max_lr": 0.1, "base_momentum": 0.7, "max_momentum": [0.95, 0.9]},
]


@pytest.mark.parametrize("opt_name", ["SGD", "Adam"])
@pytest.mark.parametrize("kwargs", _CASES)
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_cyclic_lr_matches_torch(opt_name, kwargs):
    e, _, _ = _cyclic_run(ember, opt_name, **kwargs)
    t, _, _ = _cyclic_run(torch, opt_name, **kwargs)
    np.testing.assert_allclose(np.array(e, float), np.array(t, float), rtol=1e-12)


def test_cyclic_lr_state_round_trip_resumes_the_sequence():
    kwargs = {"base_lr": 0.01, "max_lr": 0.1, "step_size_up": 3, "mode": "triangular2"}
    full, _, _ = _cyclic_run(ember, "SGD", steps=12, **kwargs)
    _, sched, opt = _cyclic_run(ember, "SGD", steps=5, **kwargs)
    state = sched.state_dict()
    resumed = CyclicLR(opt, last_epoch=4, **kwargs)
    resumed.load_state_dict(state)
    for _ in range(7):
        opt.step()
        resumed.step()
    assert resumed.get_last_lr() == list(full[-1])


def test_cyclic_lr_errors():
    opt = ember.optim.Adagrad([nn.Parameter(ember.ones(1))], lr=0.1)
    with pytest.raises(OptimizerError, match="momentum"):
        CyclicLR(opt, 0.01, 0.1)
    with pytest.raises(OptimizerError, match="mode"):
        CyclicLR(opt, 0.01, 0.1, mode="sine", cycle_momentum=False)


def _model(lib):
    torch.manual_seed(0)
    t = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 1))
    t = t.double()
    if lib is torch:
        return t
    e = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 1)).double()
    e.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in t.state_dict().items()})
    return e


def _swa_run(lib, kind):
    rng = np.random.default_rng(0)
    data = [rng.standard_normal((8, 3)) for _ in range(5)]
    model = _model(lib)
    opt = lib.optim.SGD(model.parameters(), lr=0.1)
    su = lib.optim.swa_utils
    kwargs = {
        "swa": {},
        "ema": {"multi_avg_fn": su.get_ema_multi_avg_fn(0.9), "use_buffers": True},
        "avg_fn": {"avg_fn": su.get_ema_avg_fn(0.8)},
    }[kind]
    averaged = su.AveragedModel(model, **kwargs)
    strategy = "linear" if kind == "ema" else "cos"
    sched = su.SWALR(opt, swa_lr=0.05, anneal_epochs=3, anneal_strategy=strategy)
    lrs = []
    for x in data:
        opt.zero_grad()
        (model(lib.tensor(x)) ** 2).mean().backward()
        opt.step()
        averaged.update_parameters(model)
        sched.step()
        lrs.append(sched.get_last_lr()[0])
    su.update_bn([lib.tensor(x) for x in data], averaged)
    state = {k: v.detach().numpy() for k, v in averaged.state_dict().items()}
    return state, lrs, averaged(lib.tensor(data[0])).detach().numpy()


@pytest.mark.parametrize("kind", ["swa", "ema", "avg_fn"])
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_averaged_model_swalr_and_update_bn_match_torch(kind):
    e_state, e_lrs, e_out = _swa_run(ember, kind)
    t_state, t_lrs, t_out = _swa_run(torch, kind)
    assert list(e_state) == list(t_state)
    for key in e_state:
        np.testing.assert_allclose(e_state[key], t_state[key], rtol=1e-10, atol=1e-12, err_msg=key)
    np.testing.assert_allclose(e_lrs, t_lrs, rtol=1e-12)
    np.testing.assert_allclose(e_out, t_out, rtol=1e-9)


def test_averaging_function_errors():
    with pytest.raises(ValueError, match="decay"):
        swa_utils.get_ema_multi_avg_fn(1.5)
    with pytest.raises(ember.errors.EmberError, match="Only one"):
        swa_utils.AveragedModel(
            nn.Linear(1, 1),
            avg_fn=swa_utils.get_swa_avg_fn(),
            multi_avg_fn=swa_utils.get_swa_multi_avg_fn(),
        )
