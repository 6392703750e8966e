"""Whole training steps match PyTorch: modules, losses, autograd, optimizers and schedulers.

From the same initial weights and data, 5 steps of each optimizer (with a scheduler) leave every
parameter and buffer within 1e-5 relative of PyTorch's, in float32, for a BatchNorm-free model
and for a model with BatchNorm (whose running statistics are compared too).
"""

import numpy as np
import pytest

import ember
from ember import nn, optim

torch = pytest.importorskip("torch", reason="PyTorch is the peer (pip install torch==2.13.0)")


def _mlp(lib):
    return lib.nn.Sequential(
        lib.nn.Linear(12, 16), lib.nn.Tanh(), lib.nn.Linear(16, 16), lib.nn.ReLU(),
        lib.nn.Linear(16, 4),
    )  # fmt: skip


def _bn_cnn(lib):
    # no bias before a BatchNorm: its gradient is zero up to rounding noise, which adaptive
    # optimizers (Adam, RMSprop, Adagrad) would amplify into steps of either sign
    return lib.nn.Sequential(
        lib.nn.Conv2d(2, 4, 3, padding=1, bias=False), lib.nn.BatchNorm2d(4), lib.nn.ReLU(),
        lib.nn.MaxPool2d(2), lib.nn.Flatten(), lib.nn.Linear(4 * 3 * 3, 8, bias=False),
        lib.nn.BatchNorm1d(8), lib.nn.GELU(), lib.nn.Linear(8, 4),
    )  # fmt: skip


MODELS = {"mlp": (_mlp, (16, 12)), "bn-cnn": (_bn_cnn, (8, 2, 6, 6))}

OPTIMIZERS = [
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3), "StepLR"),
    ("Adam", dict(lr=0.01, amsgrad=True), "CosineAnnealingLR"),
    ("AdamW", dict(lr=0.01, weight_decay=0.05), "OneCycleLR"),
    ("RMSprop", dict(lr=0.005, momentum=0.5, centered=True), "ExponentialLR"),
    ("Adagrad", dict(lr=0.05, lr_decay=0.01), "LinearLR"),
]

SCHEDULER_ARGS = {
    "StepLR": dict(step_size=2, gamma=0.5),
    "CosineAnnealingLR": dict(T_max=5, eta_min=1e-3),
    "OneCycleLR": dict(max_lr=0.02, total_steps=5),
    "ExponentialLR": dict(gamma=0.8),
    "LinearLR": dict(start_factor=0.5, total_iters=4),
}


def _torch_twin(ember_model, build):
    twin = build(torch)
    state = {k: torch.from_numpy(v.numpy().copy()) for k, v in ember_model.state_dict().items()}
    twin.load_state_dict(state)
    return twin


def _close(ember_model, torch_model, when):
    e_state = ember_model.state_dict()
    t_state = torch_model.state_dict()
    assert sorted(e_state) == sorted(t_state)
    for key, t_value in t_state.items():
        e_value = e_state[key].numpy()
        assert e_value.dtype == t_value.numpy().dtype, key
        # 1e-5 relative to each element, or to the tensor's scale for elements near zero
        scale = float(np.abs(t_value.numpy()).max(initial=0.0))
        np.testing.assert_allclose(
            e_value, t_value.numpy(), rtol=1e-5, atol=1e-5 * scale, err_msg=f"{key} after {when}"
        )


@pytest.mark.parametrize("model_name", sorted(MODELS))
@pytest.mark.parametrize("opt_case", OPTIMIZERS, ids=[c[0] for c in OPTIMIZERS])
def test_five_training_steps_match_pytorch(model_name, opt_case):
    build, x_shape = MODELS[model_name]
    opt_name, opt_args, sched_name = opt_case
    ember.manual_seed(0)
    model = build(ember)
    twin = _torch_twin(model, build)
    rng = np.random.default_rng(1)
    e_opt = getattr(optim, opt_name)(model.parameters(), **opt_args)
    t_opt = getattr(torch.optim, opt_name)(twin.parameters(), foreach=False, **opt_args)
    e_sched = getattr(optim.lr_scheduler, sched_name)(e_opt, **SCHEDULER_ARGS[sched_name])
    t_sched = getattr(torch.optim.lr_scheduler, sched_name)(t_opt, **SCHEDULER_ARGS[sched_name])
    for step in range(5):
        x = rng.standard_normal(x_shape).astype(np.float32)
        y = rng.integers(0, 4, x_shape[0])
        e_loss = nn.functional.cross_entropy(model(ember.tensor(x)), ember.tensor(y))
        e_opt.zero_grad()
        e_loss.backward()
        e_opt.step()
        e_sched.step()
        t_loss = torch.nn.functional.cross_entropy(twin(torch.tensor(x)), torch.tensor(y))
        t_opt.zero_grad()
        t_loss.backward()
        t_opt.step()
        t_sched.step()
        assert e_loss.item() == pytest.approx(t_loss.item(), rel=1e-5)
        assert e_opt.param_groups[0]["lr"] == pytest.approx(t_opt.param_groups[0]["lr"])
        _close(model, twin, f"step {step + 1}")
    # and the trained models agree in evaluation mode (BatchNorm uses its running statistics)
    model.eval()
    twin.eval()
    x = rng.standard_normal(x_shape).astype(np.float32)
    with ember.no_grad(), torch.no_grad():
        np.testing.assert_allclose(
            model(ember.tensor(x)).numpy(), twin(torch.tensor(x)).numpy(), rtol=1e-5, atol=1e-6
        )
