"""The multi-tensor C steps of SGD and Adam/AdamW (optim/_multi_tensor.py, kernels/coptim.py):
bit for bit the per-tensor ops' update (``foreach=False``), close to torch.optim over many steps,
the same state, and the per-tensor path wherever the C step does not apply."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.kernels import ccompile, coptim

torch = pytest.importorskip("torch")
needs_cc = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")
SHAPES = [(5, 7), (13,), (3, 4, 2), (4097,), ()]
CONFIGS = [
    ("SGD", {}),
    ("SGD", {"momentum": 0.9}),
    ("SGD", {"momentum": 0.9, "nesterov": True, "weight_decay": 0.1}),
    ("SGD", {"momentum": 0.5, "dampening": 0.3, "maximize": True, "weight_decay": 0.01}),
    ("Adam", {}),
    ("Adam", {"weight_decay": 0.1, "amsgrad": True}),
    ("Adam", {"betas": (0.3, 0.9), "maximize": True}),
    ("AdamW", {}),
    ("AdamW", {"amsgrad": True, "maximize": True, "weight_decay": 0.05}),
    ("AdamW", {"betas": (0.4, 0.99), "eps": 1e-3}),
]


def _run(lib, name, kwargs, dtype, steps, seed=0, grads_fn=None, **extra):
    r = np.random.default_rng(seed)
    weights = [r.standard_normal(s).astype(dtype) for s in SHAPES]
    if lib is torch:
        params = [torch.tensor(w, requires_grad=True) for w in weights]
    else:
        params = [ember.tensor(w, requires_grad=True) for w in weights]
    opt = getattr(lib.optim, name)(params, lr=0.01, **kwargs, **extra)
    for _ in range(steps):
        for p in params:
            g = r.standard_normal(tuple(p.shape)).astype(dtype)
            if grads_fn is not None:
                g = grads_fn(g)
            p.grad = lib.tensor(g)
        opt.step()
    return [p.detach().numpy().copy() for p in params], opt


@pytest.fixture
def c_calls(monkeypatch):
    """Counts the C steps that ran (to show the path under test is the C one)."""
    calls = []
    for name in ("adam", "sgd"):
        original = getattr(coptim, name)

        def counted(*args, _original=original, **kwargs):
            done = _original(*args, **kwargs)
            calls.append(done)
            return done

        monkeypatch.setattr(coptim, name, counted)
    return calls


@needs_cc
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,kwargs", CONFIGS)
def test_c_step_equals_the_per_tensor_ops_bit_for_bit(name, kwargs, dtype, c_calls):
    fast, fast_opt = _run(ember, name, kwargs, dtype, 12)
    assert c_calls and all(c_calls)
    slow, slow_opt = _run(ember, name, kwargs, dtype, 12, foreach=False)
    assert len(c_calls) == 12  # the foreach=False run took the ops
    for a, b in zip(fast, slow):
        np.testing.assert_array_equal(a, b)
    fast_state, slow_state = fast_opt.state_dict()["state"], slow_opt.state_dict()["state"]
    assert fast_state.keys() == slow_state.keys()
    for k in fast_state:
        assert fast_state[k].keys() == slow_state[k].keys()
        for key, value in fast_state[k].items():
            other = slow_state[k][key]
            assert value.dtype == other.dtype and value.shape == other.shape
            np.testing.assert_array_equal(value.numpy(), other.numpy())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,kwargs", CONFIGS)
def test_matches_torch_over_many_steps(name, kwargs, dtype):
    steps = 50
    ours, _ = _run(ember, name, kwargs, dtype, steps)
    theirs, _ = _run(torch, name, kwargs, dtype, steps)
    # each step rounds a few times within eps of the parameter's scale, independently
    tol = 8 * np.finfo(dtype).eps * np.sqrt(steps)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol * 4)


@needs_cc
@pytest.mark.parametrize("name,kwargs", [CONFIGS[2], CONFIGS[5], CONFIGS[8]])
def test_nan_and_inf_gradients_follow_the_per_tensor_path(name, kwargs):
    def poison(g):
        g = g.copy()
        flat = g.reshape(-1)
        flat[0] = np.nan
        flat[-1] = np.inf
        return g

    fast, _ = _run(ember, name, kwargs, np.float32, 3, grads_fn=poison)
    slow, _ = _run(ember, name, kwargs, np.float32, 3, grads_fn=poison, foreach=False)
    for a, b in zip(fast, slow):
        np.testing.assert_array_equal(a, b)


def test_without_a_compiler_the_ops_run(monkeypatch, c_calls):
    monkeypatch.setattr(coptim, "_functions", lambda dtype: None)
    ours, _ = _run(ember, "AdamW", {"amsgrad": True}, np.float64, 5)
    theirs, _ = _run(torch, "AdamW", {"amsgrad": True}, np.float64, 5)
    assert c_calls and not any(c_calls)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-14)


@needs_cc
def test_strided_and_mixed_groups_take_the_ops(c_calls):
    base = np.random.default_rng(1).standard_normal((6, 8))
    strided = ember.tensor(base, requires_grad=True)
    strided._data = base[:, ::2]  # a parameter viewing every other column
    other = ember.tensor(np.ones(3, np.float32), requires_grad=True)
    opt = ember.optim.SGD([strided, other], lr=0.1, momentum=0.9)
    strided.grad = ember.tensor(np.ones((6, 4)))
    other.grad = ember.tensor(np.ones(3, np.float32))
    opt.step()
    assert c_calls == []  # float64 beside float32: the ops ran, no C call
    np.testing.assert_allclose(base[:, ::2], np.asarray(strided.detach().numpy()))
    np.testing.assert_allclose(other.detach().numpy(), 0.9)
    same = [ember.tensor(base.copy(), requires_grad=True) for _ in range(2)]
    same[1]._data = same[0]._data  # two parameters sharing memory: not in parallel
    opt = ember.optim.Adam(same)
    for p in same:
        p.grad = ember.tensor(np.ones((6, 8)))
    opt.step()
    assert c_calls == [False]


@needs_cc
def test_step_under_a_graph_records_ops(c_calls):
    model = ember.nn.Linear(4, 3)
    opt = ember.optim.AdamW(model.parameters(), lr=0.1)
    x = ember.randn(5, 4)

    @ember.function
    def step():
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()

    before = model.weight.detach().numpy().copy()
    step()
    step()
    assert not c_calls  # recorded into the graph as ops, never the eager C call
    assert not np.array_equal(before, model.weight.detach().numpy())
