"""Complex parameters: every optimizer whose step runs the base class's (optim/_complex.py)
updates them as PyTorch's do (the real and imaginary parts as two real parameters), eagerly and
in a captured step, with complex state that round-trips through a checkpoint."""

from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

OPTIMIZERS = [
    ("SGD", dict(lr=0.1, momentum=0.9, weight_decay=0.01, nesterov=True)),
    ("Adam", dict(lr=0.1)),
    ("AdamW", dict(lr=0.1, amsgrad=True)),
    ("Adamax", dict(lr=0.1)),
    ("NAdam", dict(lr=0.1)),
    ("RAdam", dict(lr=0.1)),
    ("RMSprop", dict(lr=0.01, momentum=0.5, centered=True)),
    ("Adagrad", dict(lr=0.1)),
    # each part's sum starts at the value (PyTorch's complex(value, value))
    ("Adagrad", dict(lr=0.1, initial_accumulator_value=0.1, weight_decay=0.1)),
    ("Adadelta", dict(lr=1.0)),
]


def _run(lib, name, kwargs, steps=4, capture=None):
    rng = np.random.default_rng(0)
    w = lib.nn.Parameter(
        lib.tensor((rng.standard_normal(3) + 1j * rng.standard_normal(3)).astype(np.complex64))
    )
    b = lib.nn.Parameter(lib.tensor(rng.standard_normal(2).astype(np.float32)))
    opt = getattr(lib.optim, name)([w, b], **kwargs)

    def step():
        opt.zero_grad()
        loss = (w * w.conj()).real.sum() + w.abs().sum() + (b * b).sum() * w.real.sum()
        loss.backward()
        opt.step()
        return loss

    run = capture(step) if capture else step
    losses = [float(run().item()) for _ in range(steps)]
    return losses, w.detach().numpy().copy(), b.detach().numpy().copy(), opt


@pytest.mark.parametrize(
    "name, kwargs", OPTIMIZERS, ids=[f"{n}{i}" for i, (n, _) in enumerate(OPTIMIZERS)]
)
@pytest.mark.parametrize("capture", [None, ember.function], ids=["eager", "function"])
def test_complex_parameters_move_as_pytorch_moves_them(name, kwargs, capture):
    want = _run(torch, name, kwargs)
    got = _run(ember, name, kwargs, capture=capture)
    np.testing.assert_allclose(got[0], want[0], rtol=2e-5)
    np.testing.assert_allclose(got[1], want[1], rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(got[2], want[2], rtol=2e-5, atol=2e-6)
    ours, theirs = got[3].state_dict()["state"][0], want[3].state_dict()["state"][0]
    assert set(ours) == set(theirs)
    for key, value in theirs.items():
        assert str(ours[key].dtype).split(".")[-1] == str(value.dtype).split(".")[-1], key
        np.testing.assert_allclose(ours[key].numpy(), value.numpy(), rtol=2e-5, atol=2e-6)


def test_complex_state_round_trips_through_a_checkpoint(tmp_path):
    losses, _, _, opt = _run(ember, "Adam", dict(lr=0.1), steps=2)
    ember.save(opt.state_dict(), tmp_path / "opt.ckpt")
    loaded = ember.load(tmp_path / "opt.ckpt")
    state = loaded["state"][0]
    assert state["exp_avg"].dtype == ember.complex64
    np.testing.assert_array_equal(
        state["exp_avg"].numpy(), opt.state_dict()["state"][0]["exp_avg"].numpy()
    )


@pytest.mark.parametrize("line_search", [None, "strong_wolfe"])
def test_lbfgs_moves_complex_parameters_as_pytorch(line_search):
    """LBFGS flattens a complex parameter into its real and imaginary parts, as PyTorch's."""
    rng = np.random.default_rng(1)
    start = rng.standard_normal(3) + 1j * rng.standard_normal(3)
    target = rng.standard_normal(3) + 1j * rng.standard_normal(3)
    results = []
    for lib in (torch, ember):
        w = lib.nn.Parameter(lib.tensor(start.copy()))
        b = lib.nn.Parameter(lib.tensor(np.array([0.5, -0.25])))
        opt = lib.optim.LBFGS([w, b], lr=0.5, max_iter=5, line_search_fn=line_search)
        t = lib.tensor(target)

        def closure():
            opt.zero_grad()
            loss = ((w - t).abs() ** 2).sum() + (b * b).sum() * (w.real.sum() ** 2)
            loss.backward()
            return loss

        for _ in range(3):
            opt.step(closure)
        results.append((w.detach().numpy().copy(), b.detach().numpy().copy()))
    for got, want in zip(results[1], results[0]):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


def test_lbfgs_refuses_integer_parameters():
    w = ember.ones(2, dtype=ember.int64)
    with pytest.raises(ember.optim.optimizer.OptimizerError, match="floating-point or complex"):
        ember.optim.LBFGS([w])
