"""ember.amp against torch.amp: GradScaler's dynamic loss scaling step for step, and autocast's
disabled and absent-device behaviour."""

import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _pair(lib, seed=0):
    rng = np.random.default_rng(seed)
    w = lib.tensor(rng.standard_normal((3, 2)), requires_grad=True)
    opt = lib.optim.SGD([w], lr=0.1)
    return w, opt


@pytest.mark.parametrize("overflow_at", [None, 2])
def test_grad_scaler_matches_torch_step_for_step(overflow_at):
    runs = {}
    for name, lib in (("ember", ember), ("torch", torch)):
        w, opt = _pair(lib)
        scaler = lib.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=2)
        scales, weights = [], []
        for step in range(6):
            opt.zero_grad()
            loss = (w * w).sum()
            if step == overflow_at:
                loss = loss * float("inf")
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            lib.nn.utils.clip_grad_norm_([w], 10.0)
            scaler.step(opt)
            scaler.update()
            scales.append(float(scaler.get_scale()))
            weights.append(w.detach().numpy().copy())
        runs[name] = (scales, weights, scaler.state_dict())
    assert runs["ember"][0] == runs["torch"][0]
    np.testing.assert_allclose(runs["ember"][1], runs["torch"][1], rtol=1e-12)
    ours, theirs = runs["ember"][2], runs["torch"][2]
    assert set(ours) == set(theirs)
    assert ours["scale"] == float(theirs["scale"]) and ours["_growth_tracker"] == int(
        theirs["_growth_tracker"]
    )


def test_grad_scaler_state_dict_round_trip_and_misuse():
    w, opt = _pair(ember)
    scaler = ember.amp.GradScaler("cpu", init_scale=8.0)
    scaler.scale((w * 2).sum()).backward()
    scaler.step(opt)
    with pytest.raises(RuntimeError, match="already been called"):
        scaler.step(opt)
    scaler.update()
    other = ember.amp.GradScaler("cpu")
    other.load_state_dict(scaler.state_dict())
    assert other.get_scale() == scaler.get_scale()
    with pytest.raises(RuntimeError, match="empty"):
        other.load_state_dict({})


def test_disabled_scaler_and_autocast_pass_through():
    w, opt = _pair(ember)
    scaler = ember.amp.GradScaler(enabled=False)
    loss = (w * w).sum()
    assert scaler.scale(loss) is loss and scaler.get_scale() == 1.0
    loss.backward()
    before = w.detach().numpy().copy()
    scaler.step(opt)
    scaler.update()
    assert not np.array_equal(before, w.detach().numpy())
    with ember.autocast("cpu", enabled=False):
        y = ember.ones(2) @ ember.ones(2)
    assert y.dtype == ember.float32


def test_gpu_spellings_disable_themselves_with_a_warning_as_torch_does_without_a_gpu():
    with pytest.warns(UserWarning, match="Disabling"):
        scaler = ember.cuda.amp.GradScaler()
    assert not scaler.is_enabled()
    with pytest.warns(UserWarning, match="Disabling"):
        with ember.autocast("cuda"):
            pass
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ember.amp.GradScaler("cuda", enabled=False)


def test_an_unknown_device_type_is_refused():
    with pytest.raises(ember.EmberError, match="device type"):
        ember.autocast("tpu9")
