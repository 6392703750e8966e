"""Muon against torch.optim.Muon: the same parameters after several steps (its Newton-Schulz
iteration in bfloat16 included), each option, a captured step, and its refusals."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

rng = np.random.default_rng(0)
W1 = rng.standard_normal((16, 8)).astype(np.float32) * 0.3
W2 = rng.standard_normal((4, 16)).astype(np.float32) * 0.3
X = rng.standard_normal((32, 8)).astype(np.float32)
Y = rng.standard_normal((32, 4)).astype(np.float32)


def _train(lib, steps=4, compiled=False, **options):
    w1, w2 = lib.nn.Parameter(lib.tensor(W1)), lib.nn.Parameter(lib.tensor(W2))
    opt = lib.optim.Muon([w1, w2], lr=0.02, **options)
    x, y = lib.tensor(X), lib.tensor(Y)

    def step():
        opt.zero_grad()
        loss = ((lib.tanh(x @ w1.T) @ w2.T - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    run = ember.function(step) if compiled else step
    for _ in range(steps):
        run()
    return w1.detach().numpy(), w2.detach().numpy(), opt


@pytest.mark.parametrize(
    "options",
    [{}, {"nesterov": False, "weight_decay": 0.0}, {"adjust_lr_fn": "match_rms_adamw"}],
    ids=["default", "plain-momentum", "match-rms-adamw"],
)
def test_muon_follows_pytorch(options):
    want = _train(torch, **options)
    got = _train(ember, **options)
    for g, w, start in zip(got[:2], want[:2], (W1, W2)):
        assert np.abs(w - start).max() > 1e-2  # (the steps moved the weights)
        # (bfloat16 products summed in another order than PyTorch's round an intermediate
        # value of the Newton-Schulz iteration the other way now and then, and the iteration's
        # polynomial carries that into the orthogonalized update, whose entries are at most
        # about 1: one bfloat16 ulp (2 ** -7) of an update entry per step, the update scaled
        # by lr and Muon's shape factor, at most sqrt(16 / 8) here; a ulp's fraction held on
        # one CPU's oneDNN kernels and not another's)
        np.testing.assert_allclose(g, w, atol=4 * 0.02 * 2**0.5 * 2**-7)


def test_a_captured_muon_step_equals_the_eager_one_and_the_state_round_trips():
    eager = _train(ember)
    captured = _train(ember, compiled=True)
    for a, b in zip(eager[:2], captured[:2]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    opt = eager[2]
    state = opt.state_dict()
    again = ember.optim.Muon(
        [ember.nn.Parameter(ember.tensor(W1)), ember.nn.Parameter(ember.tensor(W2))]
    )
    again.load_state_dict(state)
    assert again.param_groups[0]["lr"] == 0.02
    assert "momentum_buffer" in again.state_dict()["state"][0]


def test_muon_refuses_what_pytorch_refuses():
    with pytest.raises(ember.optim.OptimizerError, match="2D parameters"):
        ember.optim.Muon([ember.nn.Parameter(ember.zeros(3))])
    with pytest.raises(ember.optim.OptimizerError, match="not supported"):
        ember.optim.Muon([ember.nn.Parameter(ember.zeros(3, 2))], adjust_lr_fn="other")
