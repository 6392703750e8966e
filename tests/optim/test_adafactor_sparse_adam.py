"""Adafactor and SparseAdam against PyTorch 2.13, step for step (float64 within 1e-12), their
state layout and a PyTorch state_dict loaded mid-run, float32 within rounding, the argument
checks, and each step recorded by ``ember.function`` under a learning-rate schedule equal to
the eager step (one trace after the first)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember
from ember import nn, optim
from ember.optim import lr_scheduler as EL

torch = pytest.importorskip("torch", reason="PyTorch is the peer these tests compare with")

_rng = np.random.default_rng(77)
W0 = _rng.standard_normal((3, 4))
B0 = _rng.standard_normal(4)
T0 = _rng.standard_normal((2, 3, 5))  # a 3-d parameter: factored over its last two dims
X = _rng.standard_normal((3, 4))
Y = _rng.standard_normal((3, 4))
F64 = dict(rtol=1e-12, atol=1e-14)
STEPS = 20


def _loss(w, b, t, x, y):
    return (((w * x + b).tanh() - y) ** 2).sum() + (b**2).sum() + (t.sin() * t).sum()


def _pair(dtype=np.float64, init=(W0, B0, T0)):
    e = [ember.tensor(a.astype(dtype), requires_grad=True) for a in init]
    t = [torch.tensor(a.astype(dtype), requires_grad=True) for a in init]
    return e, t


def _step(lib, opt, params):
    opt.zero_grad()
    _loss(*params, lib.tensor(X), lib.tensor(Y)).backward()
    opt.step()


ADAFACTOR = [
    dict(),
    dict(lr=0.05, weight_decay=0.1),
    dict(lr=0.05, maximize=True, d=2.0),
    dict(eps=(1e-4, 1e-2), beta2_decay=-0.5),
]


@pytest.mark.parametrize("kwargs", ADAFACTOR, ids=str)
def test_adafactor_twenty_float64_steps_match_torch(kwargs):
    e_params, t_params = _pair()
    e_opt = optim.Adafactor(e_params, foreach=False, **kwargs)
    t_opt = torch.optim.Adafactor(t_params, foreach=False, **kwargs)
    for step in range(1, STEPS + 1):
        _step(ember, e_opt, e_params)
        _step(torch, t_opt, t_params)
        for e, t in zip(e_params, t_params):
            np.testing.assert_allclose(
                e.detach().numpy(), t.detach().numpy(), **F64, err_msg=str(step)
            )
    e_sd, t_sd = e_opt.state_dict(), t_opt.state_dict()
    for idx, t_state in t_sd["state"].items():
        assert sorted(e_sd["state"][idx]) == sorted(t_state)
        for key, t_val in t_state.items():
            e_val = e_sd["state"][idx][key]
            assert tuple(e_val.shape) == tuple(t_val.shape), key
            assert str(e_val.dtype) == str(t_val.dtype).replace("torch.", "ember."), key
            np.testing.assert_allclose(e_val.numpy(), t_val.numpy(), rtol=1e-11, err_msg=key)
    assert e_sd["param_groups"] == t_sd["param_groups"]


def test_adafactor_float32_and_a_torch_state_dict():
    e_params, t_params = _pair(np.float32)
    t_opt = torch.optim.Adafactor(t_params, lr=0.05, weight_decay=0.01)
    for _ in range(5):
        _step(torch, t_opt, t_params)
    e_params, _ = _pair(np.float32, init=[t.detach().numpy() for t in t_params])
    e_opt = optim.Adafactor(e_params, lr=0.05, weight_decay=0.01)
    e_opt.load_state_dict(
        {
            "state": {
                k: {n: ember.tensor(v.numpy()) for n, v in s.items()}
                for k, s in t_opt.state_dict()["state"].items()
            },
            "param_groups": t_opt.state_dict()["param_groups"],
        }
    )
    for step in range(6, 16):
        _step(ember, e_opt, e_params)
        _step(torch, t_opt, t_params)
        for e, t in zip(e_params, t_params):
            assert e.dtype is ember.float32
            np.testing.assert_allclose(
                e.detach().numpy(), t.detach().numpy(), rtol=2e-5, atol=2e-6, err_msg=str(step)
            )


def _model():
    ember.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3)).double()


def _batches():
    rng = np.random.default_rng(0)
    while True:
        yield ember.tensor(rng.standard_normal((5, 6))), ember.tensor(rng.standard_normal((5, 3)))


def _train_step(model, opt):
    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return step


@pytest.mark.parametrize(
    "make",
    [
        lambda p: optim.Adafactor(p, lr=0.05, weight_decay=0.01),
        lambda p: optim.Adafactor(p, lr=0.05, d=1.5, maximize=False),
    ],
    ids=["weight_decay", "clipping"],
)
def test_adafactor_compiled_scheduled_step_equals_eager(make):
    steps = 10
    eager_model, model = _model(), _model()
    eager_opt, opt = make(eager_model.parameters()), make(model.parameters())
    eager_sched = EL.OneCycleLR(eager_opt, 0.05, total_steps=steps + 1, cycle_momentum=False)
    sched = EL.OneCycleLR(opt, 0.05, total_steps=steps + 1, cycle_momentum=False)
    eager_step, step = _train_step(eager_model, eager_opt), ember.function(_train_step(model, opt))
    for _, (x, y) in zip(range(steps), _batches()):
        expected, got = eager_step(x, y), step(x, y)
        eager_sched.step()
        sched.step()
        np.testing.assert_allclose(got.detach().numpy(), expected.detach().numpy(), rtol=1e-12)
        for p, q in zip(model.parameters(), eager_model.parameters()):
            np.testing.assert_allclose(
                p.detach().numpy(), q.detach().numpy(), rtol=1e-11, atol=1e-13
            )
    assert step.stats.traces == 2, step.stats


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(lr=-1.0),
        dict(beta2_decay=0.5),
        dict(eps=(-1.0, 1e-3)),
        dict(eps=(None, -1.0)),
        dict(d=0.5),
        dict(weight_decay=-0.1),
    ],
    ids=str,
)
def test_adafactor_refuses_what_torch_refuses(kwargs):
    with pytest.raises(ValueError):
        torch.optim.Adafactor([torch.nn.Parameter(torch.ones(2))], **kwargs)
    with pytest.raises(ValueError):
        optim.Adafactor([nn.Parameter(ember.ones(2))], **kwargs)


# -------------------------------------------------------------------------------- SparseAdam
def _embedding_pair(rows=10, dim=3):
    w = np.random.default_rng(5).standard_normal((rows, dim))
    e = nn.Embedding(rows, dim, sparse=True).double()
    e.weight.data = ember.tensor(w)
    t = torch.nn.Embedding(rows, dim, sparse=True).double()
    with torch.no_grad():
        t.weight.copy_(torch.tensor(w))
    return e, t


def _index_batches(rows=10):
    rng = np.random.default_rng(6)
    while True:  # a few rows per batch, repeated ones included: the others stay put
        yield rng.integers(0, rows // 2 + 2, size=(4, 2))


@pytest.mark.parametrize(
    "kwargs", [dict(), dict(lr=0.05, betas=(0.5, 0.8), eps=1e-6), dict(lr=0.1, maximize=True)],
    ids=str,
)  # fmt: skip
def test_sparse_adam_on_an_embedding_matches_torch(kwargs):
    e_emb, t_emb = _embedding_pair()
    e_opt = optim.SparseAdam(e_emb.parameters(), **kwargs)
    t_opt = torch.optim.SparseAdam(t_emb.parameters(), **kwargs)
    target = np.random.default_rng(7).standard_normal(3)
    for step, idx in zip(range(1, STEPS + 1), _index_batches()):
        e_opt.zero_grad()
        ((e_emb(ember.tensor(idx)) - ember.tensor(target)) ** 2).sum().backward()
        e_opt.step()
        t_opt.zero_grad()
        ((t_emb(torch.tensor(idx)) - torch.tensor(target)) ** 2).sum().backward()
        t_opt.step()
        np.testing.assert_allclose(
            e_emb.weight.detach().numpy(), t_emb.weight.detach().numpy(), **F64,
            err_msg=str(step),
        )  # fmt: skip
    untouched = slice(7, 10)  # rows no batch looks up keep their value and zero moments
    state = e_opt.state[e_emb.weight]
    assert not state["exp_avg"].numpy()[untouched].any()
    t_state = t_opt.state_dict()["state"][0]
    np.testing.assert_allclose(state["exp_avg"].numpy(), t_state["exp_avg"].numpy(), **F64)
    np.testing.assert_allclose(state["exp_avg_sq"].numpy(), t_state["exp_avg_sq"].numpy(), **F64)
    assert float(state["step"]) == t_state["step"] == STEPS


def test_sparse_adam_loads_torchs_int_step_and_continues():
    e_emb, t_emb = _embedding_pair()
    t_opt = torch.optim.SparseAdam(t_emb.parameters(), lr=0.05)
    batches = _index_batches()
    for _ in range(5):
        t_opt.zero_grad()
        t_emb(torch.tensor(next(batches))).pow(2).sum().backward()
        t_opt.step()
    e_emb.weight.data = ember.tensor(t_emb.weight.detach().numpy().copy())
    e_opt = optim.SparseAdam(e_emb.parameters(), lr=0.05)
    sd = t_opt.state_dict()
    e_opt.load_state_dict(
        {
            "state": {
                k: {
                    n: (ember.tensor(v.numpy()) if isinstance(v, torch.Tensor) else v)
                    for n, v in s.items()
                }  # fmt: skip
                for k, s in sd["state"].items()
            },
            "param_groups": sd["param_groups"],
        }
    )
    for _ in range(5):
        idx = next(batches)
        e_opt.zero_grad()
        e_emb(ember.tensor(idx)).pow(2).sum().backward()
        e_opt.step()
        t_opt.zero_grad()
        t_emb(torch.tensor(idx)).pow(2).sum().backward()
        t_opt.step()
    np.testing.assert_allclose(e_emb.weight.detach().numpy(), t_emb.weight.detach().numpy(), **F64)


def test_sparse_adam_compiled_step_equals_eager():
    def make():
        emb, _ = _embedding_pair()
        return emb, optim.SparseAdam(emb.parameters(), lr=0.05)

    (eager_emb, eager_opt), (emb, opt) = make(), make()

    def train(emb, opt):
        def step(idx):
            opt.zero_grad()
            loss = (emb(idx) ** 2).sum()
            loss.backward()
            opt.step()
            return loss

        return step

    eager_step, step = train(eager_emb, eager_opt), ember.function(train(emb, opt))
    for _, idx in zip(range(8), _index_batches()):
        np.testing.assert_allclose(
            step(ember.tensor(idx)).detach().numpy(),
            eager_step(ember.tensor(idx)).detach().numpy(),
            rtol=1e-12,
        )
        np.testing.assert_allclose(
            emb.weight.detach().numpy(), eager_emb.weight.detach().numpy(), **F64
        )
    assert step.stats.traces == 2, step.stats


@pytest.mark.parametrize(
    "kwargs",
    [dict(lr=0.0), dict(eps=0.0), dict(betas=(1.0, 0.9)), dict(betas=(0.9, -0.1))],
    ids=str,
)
def test_sparse_adam_refuses_what_torch_refuses(kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError):
            torch.optim.SparseAdam([torch.nn.Parameter(torch.ones(2))], **kwargs)
    with pytest.raises(ValueError):
        optim.SparseAdam([nn.Parameter(ember.ones(2))], **kwargs)
    with pytest.raises(ValueError, match="complex"):
        optim.SparseAdam([nn.Parameter(ember.ones(2, dtype=ember.complex64))])


def test_adafactor_refuses_complex_parameters():
    """PyTorch's refuses them at its first step; ember's when the parameter is given."""
    tw = torch.nn.Parameter(torch.ones(2, dtype=torch.complex64))
    t_opt = torch.optim.Adafactor([tw])
    tw.grad = torch.ones(2, dtype=torch.complex64)
    with pytest.raises(RuntimeError, match="complex"):
        t_opt.step()
    with pytest.raises(ValueError, match="complex"):
        optim.Adafactor([nn.Parameter(ember.ones(2, dtype=ember.complex64))])
