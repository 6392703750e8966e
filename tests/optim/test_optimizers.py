"""ember.optim optimizers: updates against PyTorch, param groups, zero_grad, state_dict, errors.

The PyTorch comparisons build the same parameters in both frameworks, take five steps on the same
loss and compare every parameter after every step (float32 within 1e-5 relative, float64 within
1e-12). PyTorch runs its single-tensor ("for-loop") implementations, which ember follows.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import optim
from ember.errors import EmberError, StateDictError
from ember.optim import OptimizerError

try:
    import torch
except ImportError:
    torch = None

needs_torch = pytest.mark.skipif(
    torch is None, reason="PyTorch is not installed; it is the peer for optimizer updates"
)

_rng = np.random.default_rng(1234)
W0 = _rng.standard_normal((3, 4))
B0 = _rng.standard_normal(4)
X = _rng.standard_normal((3, 4))
Y = _rng.standard_normal((3, 4))

TOL = {np.float32: dict(rtol=1e-5, atol=1e-6), np.float64: dict(rtol=1e-12, atol=1e-13)}


def _ember_loss(w, b, x, y):
    return (((w * x + b).tanh() - y) ** 2).sum() + (b**2).sum()


def _torch_loss(w, b, x, y):
    return (((w * x + b).tanh() - y) ** 2).sum() + (b**2).sum()


def _ember_params(dtype, *init):
    return [ember.tensor(a.astype(dtype), requires_grad=True) for a in (init or (W0, B0))]


def _ember_step(opt, params, dtype):
    w, b = params
    opt.zero_grad()
    loss = _ember_loss(w, b, ember.tensor(X.astype(dtype)), ember.tensor(Y.astype(dtype)))
    loss.backward()
    opt.step()


CASES = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9)),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.3)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
    ("SGD", dict(lr=0.1, momentum=0.8, weight_decay=0.1, maximize=True)),
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.05)),
    ("Adam", dict(lr=0.05)),
    ("Adam", dict(lr=0.05, amsgrad=True)),
    ("Adam", dict(lr=0.05, weight_decay=0.1)),
    ("Adam", dict(lr=0.05, betas=(0.3, 0.8), eps=1e-6, maximize=True)),
    ("Adam", dict(lr=0.05, amsgrad=True, weight_decay=0.1, maximize=True)),
    ("Adam", dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True)),
    ("AdamW", dict(lr=0.05)),
    ("AdamW", dict(lr=0.05, weight_decay=0.3, amsgrad=True)),
    ("AdamW", dict(lr=0.05, betas=(0.8, 0.9), maximize=True)),
    ("RMSprop", dict(lr=0.01)),
    ("RMSprop", dict(lr=0.01, momentum=0.9)),
    ("RMSprop", dict(lr=0.01, centered=True)),
    ("RMSprop", dict(lr=0.01, alpha=0.9, centered=True, momentum=0.5, weight_decay=0.1)),
    ("RMSprop", dict(lr=0.01, maximize=True, eps=1e-4)),
    ("Adagrad", dict(lr=0.1)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.2)),
    ("Adagrad", dict(lr=0.1, weight_decay=0.1, initial_accumulator_value=0.5)),
    ("Adagrad", dict(lr=0.1, eps=1e-3, maximize=True)),
]


def _case_id(case):
    name, kwargs = case
    return name + "-" + ",".join(f"{k}={v}" for k, v in kwargs.items())


@needs_torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_five_steps_match_torch(case, dtype):
    name, kwargs = case
    e_params = _ember_params(dtype)
    t_params = [torch.tensor(a.astype(dtype), requires_grad=True) for a in (W0, B0)]
    e_opt = getattr(optim, name)(e_params, **kwargs)
    t_opt = getattr(torch.optim, name)(t_params, foreach=False, **kwargs)
    tx, ty = torch.tensor(X.astype(dtype)), torch.tensor(Y.astype(dtype))
    for step in range(5):
        _ember_step(e_opt, e_params, dtype)
        t_opt.zero_grad()
        _torch_loss(*t_params, tx, ty).backward()
        t_opt.step()
        for e, t in zip(e_params, t_params):
            assert e.dtype.np == dtype  # no upcast of float32 parameters
            np.testing.assert_allclose(
                e.detach().numpy(), t.detach().numpy(), **TOL[dtype], err_msg=f"step {step + 1}"
            )
    # same state layout: the same keys per parameter, same dtypes and values
    e_state = e_opt.state_dict()["state"]
    t_state = t_opt.state_dict()["state"]
    assert sorted(e_state) == sorted(t_state)
    for idx in t_state:
        assert sorted(e_state[idx]) == sorted(t_state[idx])
        for key, t_val in t_state[idx].items():
            e_val = e_state[idx][key]
            assert str(e_val.dtype) == str(t_val.dtype).replace("torch.", "ember.")
            np.testing.assert_allclose(e_val.numpy(), t_val.numpy(), **TOL[dtype])
    # the same keys in the groups (the implementation switches too) and the same
    # hyper-parameters (torch resolves foreach=None to its choice of kernel during a step)
    switches = {"foreach", "fused", "differentiable", "capturable"}
    for e_group, t_group in zip(
        e_opt.state_dict()["param_groups"], t_opt.state_dict()["param_groups"]
    ):
        assert set(e_group) == set(t_group)
        for key in set(e_group) - switches:
            assert e_group[key] == t_group[key], key


@needs_torch
@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_identical_gradients_give_float32_updates_within_rounding(case):
    """Fed the same gradients, the float32 updates agree to a few roundings: only the order of
    float32 operations may differ from PyTorch's kernels (e.g. fused multiply-adds)."""
    name, kwargs = case
    rng = np.random.default_rng(3)
    init = rng.standard_normal(64).astype(np.float32)
    e = ember.tensor(init, requires_grad=True)
    t = torch.tensor(init, requires_grad=True)
    e_opt = getattr(optim, name)([e], **kwargs)
    t_opt = getattr(torch.optim, name)([t], foreach=False, **kwargs)
    for _ in range(5):
        g = rng.standard_normal(64).astype(np.float32)
        e.grad, t.grad = ember.tensor(g), torch.tensor(g)
        e_opt.step()
        t_opt.step()
        np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=2e-6, atol=2e-7)


@needs_torch
def test_matmul_mlp_with_param_groups_matches_torch():
    """A small tanh MLP built on matmul; weights and biases in groups with different lrs."""
    rng = np.random.default_rng(7)
    shapes = [(5, 8), (8,), (8, 3), (3,)]
    init = [rng.standard_normal(s).astype(np.float32) * 0.5 for s in shapes]
    x = rng.standard_normal((6, 5)).astype(np.float32)
    y = rng.standard_normal((6, 3)).astype(np.float32)

    def forward(lib, p, xx):
        h = lib.tanh(xx @ p[0] + p[1])
        return ((h @ p[2] + p[3] - lib_tensor(lib, y)) ** 2).mean()

    def lib_tensor(lib, a):
        return ember.tensor(a) if lib is ember else torch.tensor(a)

    for name, kw in [("SGD", dict(momentum=0.9)), ("Adam", {}), ("RMSprop", {}), ("Adagrad", {})]:
        e_p = [ember.tensor(a, requires_grad=True) for a in init]
        t_p = [torch.tensor(a, requires_grad=True) for a in init]

        def groups(p):
            return [{"params": [p[0], p[2]], "lr": 0.05}, {"params": [p[1], p[3]]}]

        e_opt = getattr(optim, name)(groups(e_p), lr=0.01, **kw)
        t_opt = getattr(torch.optim, name)(groups(t_p), lr=0.01, foreach=False, **kw)
        for _ in range(5):
            e_opt.zero_grad()
            forward(ember, e_p, ember.tensor(x)).backward()
            e_opt.step()
            t_opt.zero_grad()
            forward(torch, t_p, torch.tensor(x)).backward()
            t_opt.step()
            for e, t in zip(e_p, t_p):
                np.testing.assert_allclose(
                    e.detach().numpy(), t.detach().numpy(), rtol=1e-5, atol=1e-6
                )


def test_param_groups_use_their_own_lr_and_defaults():
    a = ember.tensor([1.0, 2.0], requires_grad=True)
    b = ember.tensor([1.0, 2.0], requires_grad=True)
    opt = optim.SGD([{"params": [a]}, {"params": [b], "lr": 0.5}], lr=0.1, momentum=0.0)
    assert opt.param_groups[0]["lr"] == 0.1 and opt.param_groups[1]["lr"] == 0.5
    assert opt.param_groups[1]["momentum"] == 0.0  # filled from the defaults
    (a.sum() + b.sum()).backward()
    opt.step()
    np.testing.assert_allclose(a.detach().numpy(), [0.9, 1.9], rtol=1e-6)
    np.testing.assert_allclose(b.detach().numpy(), [0.5, 1.5], rtol=1e-6)


def test_add_param_group_and_params_without_grad_are_skipped():
    a = ember.tensor([1.0, -1.0], requires_grad=True)
    frozen = ember.tensor([3.0, 4.0], requires_grad=True)
    opt = optim.Adam([a], lr=0.1)
    opt.add_param_group({"params": frozen, "lr": 0.2})
    assert opt.param_groups[1]["betas"] == (0.9, 0.999)
    (a * a).sum().backward()
    opt.step()
    np.testing.assert_array_equal(frozen.detach().numpy(), [3.0, 4.0])
    assert frozen not in opt.state and a in opt.state
    # the first Adam step moves each coordinate by lr against the gradient's sign
    np.testing.assert_allclose(a.detach().numpy(), [0.9, -0.9], rtol=1e-5)


def test_param_group_dicts_are_the_callers_as_in_torch():
    """PyTorch keeps the caller's group dicts: their params become lists (a generator can make
    a second optimizer), their defaults are filled in, and later edits reach the optimizer."""
    model = ember.nn.Linear(2, 2)
    groups = [{"params": model.parameters(), "lr": 0.1}]
    first = optim.SGD(groups, lr=0.5, momentum=0.9)
    second = optim.SGD(groups, lr=0.5, momentum=0.9)
    assert first.param_groups[0] is groups[0] and second.param_groups[0] is groups[0]
    assert len(second.param_groups[0]["params"]) == 2 and groups[0]["momentum"] == 0.9
    groups[0]["lr"] = 0.01
    assert first.param_groups[0]["lr"] == 0.01
    bad = {"params": [ember.zeros(2, requires_grad=True)], "lr": -1.0}
    with pytest.raises(OptimizerError):
        first.add_param_group(bad)
    assert set(bad) == {"params", "lr"}  # a refused group is left as it was


def test_zero_grad_set_to_none_and_to_zero():
    a = ember.tensor([1.0, 2.0], requires_grad=True)
    opt = optim.SGD([a], lr=0.1)
    (a * 3).sum().backward()
    grad = a.grad
    opt.zero_grad(set_to_none=False)
    assert a.grad is grad  # zeroed in place, the same tensor
    np.testing.assert_array_equal(a.grad.numpy(), [0.0, 0.0])
    opt.zero_grad()
    assert a.grad is None
    opt.step()  # no gradient: nothing changes
    np.testing.assert_array_equal(a.detach().numpy(), [1.0, 2.0])


def test_zero_grad_detaches_a_create_graph_gradient():
    a = ember.tensor([1.0, 2.0], requires_grad=True)
    (a**3).sum().backward(create_graph=True)
    assert a.grad.grad_fn is not None
    optim.SGD([a], lr=0.1).zero_grad(set_to_none=False)
    assert a.grad.grad_fn is None and not a.grad.requires_grad
    np.testing.assert_array_equal(a.grad.numpy(), [0.0, 0.0])


def test_step_with_closure_returns_the_loss_and_runs_without_recording():
    a = ember.tensor([2.0], requires_grad=True)
    opt = optim.SGD([a], lr=0.25)

    def closure():
        opt.zero_grad()
        loss = (a * a).sum()
        loss.backward()
        return loss

    loss = opt.step(closure)
    assert float(loss) == 4.0
    np.testing.assert_allclose(a.detach().numpy(), [1.0])  # 2 - 0.25 * 4
    assert a.is_leaf and a.grad_fn is None


def _run(name, kwargs, dtype, params, steps, opt=None):
    opt = opt or getattr(optim, name)(params, **kwargs)
    for _ in range(steps):
        _ember_step(opt, params, dtype)
    return opt


@pytest.mark.parametrize(
    "name,kwargs",
    [
        ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
        ("Adam", dict(lr=0.05, amsgrad=True)),
        ("AdamW", dict(lr=0.05)),
        ("RMSprop", dict(lr=0.01, momentum=0.5, centered=True)),
        ("Adagrad", dict(lr=0.1, lr_decay=0.1)),
    ],
)
def test_state_dict_round_trip_through_a_checkpoint_resumes_exactly(name, kwargs, tmp_path):
    dtype = np.float32
    straight = _ember_params(dtype)
    _run(name, kwargs, dtype, straight, 5)

    first = _ember_params(dtype)
    opt = _run(name, kwargs, dtype, first, 2)
    path = tmp_path / "opt.safetensors"
    ember.io.save({"params": first, "optimizer": opt.state_dict()}, path)
    loaded = ember.io.load(path)
    resumed = [t.detach().requires_grad_() for t in loaded["params"]]
    fresh = getattr(optim, name)(resumed, **kwargs)
    fresh.load_state_dict(loaded["optimizer"])
    _run(name, kwargs, dtype, resumed, 3, opt=fresh)
    for a, b in zip(straight, resumed):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    assert fresh.state_dict()["param_groups"] == opt.state_dict()["param_groups"]


def test_load_state_dict_shares_the_buffers_as_pytorch():
    # PyTorch's load_state_dict casts a buffer with ``.to(param.dtype)``: the dict's own tensor
    # when the dtype matches (stepping the loaded optimizer updates the source's buffer), a
    # copy when it does not
    params = _ember_params(np.float64)
    opt = _run("SGD", dict(lr=0.1, momentum=0.9), np.float64, params, 1)
    other = optim.SGD(_ember_params(np.float64), lr=0.1, momentum=0.9)
    other.load_state_dict(opt.state_dict())
    mine = other.state[other.param_groups[0]["params"][0]]["momentum_buffer"]
    assert mine is opt.state[params[0]]["momentum_buffer"]
    before = mine.numpy().copy()
    _run("SGD", {}, np.float64, list(other.param_groups[0]["params"]), 1, opt=other)
    assert not np.array_equal(opt.state[params[0]]["momentum_buffer"].numpy(), before)
    cast = optim.SGD(_ember_params(np.float32), lr=0.1, momentum=0.9)
    cast.load_state_dict(opt.state_dict())
    buf = cast.state[cast.param_groups[0]["params"][0]]["momentum_buffer"]
    assert buf.dtype == ember.float32 and buf is not opt.state[params[0]]["momentum_buffer"]


def test_state_dict_layout_is_torch_like():
    a, b, c = (ember.tensor([1.0, 2.0], requires_grad=True) for _ in range(3))
    opt = optim.SGD([{"params": [a, b]}, {"params": [c], "lr": 0.3}], lr=0.1, momentum=0.9)
    (a.sum() + b.sum() + c.sum()).backward()
    opt.step()
    sd = opt.state_dict()
    assert [g["params"] for g in sd["param_groups"]] == [[0, 1], [2]]
    assert sorted(sd["state"]) == [0, 1, 2]
    assert sd["param_groups"][1]["lr"] == 0.3
    assert all(isinstance(v, ember.Tensor) for s in sd["state"].values() for v in s.values())


def test_load_state_dict_errors_name_the_mismatch_and_change_nothing():
    params = _ember_params(np.float32)
    opt = _run("Adam", dict(lr=0.05), np.float32, params, 1)
    sd = opt.state_dict()

    two_groups = optim.Adam([{"params": [params[0]]}, {"params": [params[1]]}])
    with pytest.raises(StateDictError, match="1 parameter group.*has 2"):
        two_groups.load_state_dict(sd)

    three = optim.Adam(_ember_params(np.float32) + [ember.zeros(2, requires_grad=True)])
    with pytest.raises(StateDictError, match="group 0 has 2 parameter.*but 3"):
        three.load_state_dict(sd)

    swapped = optim.Adam(_ember_params(np.float32, B0, W0), lr=0.3)
    with pytest.raises(StateDictError, match=r"shape \(3, 4\).*shape \(4,\)"):
        swapped.load_state_dict(sd)
    assert swapped.param_groups[0]["lr"] == 0.3 and len(swapped.state) == 0  # untouched

    bad = {"state": {7: {}}, "param_groups": sd["param_groups"]}
    with pytest.raises(StateDictError, match="parameter 7"):
        optim.Adam(_ember_params(np.float32)).load_state_dict(bad)

    negative = {"state": {}, "param_groups": [dict(sd["param_groups"][0], lr=-1.0)]}
    with pytest.raises(StateDictError, match="lr=-1.0"):
        optim.Adam(_ember_params(np.float32)).load_state_dict(negative)

    with pytest.raises(StateDictError, match="'param_groups'"):
        opt.load_state_dict({"state": {}})


@pytest.mark.parametrize(
    "make,message",
    [
        (lambda p: optim.SGD(p, lr=-0.1), "lr=-0.1"),
        (lambda p: optim.SGD(p, momentum=-0.5), "momentum=-0.5"),
        (lambda p: optim.SGD(p, weight_decay=-1), "weight_decay=-1"),
        (lambda p: optim.SGD(p, lr=0.1, nesterov=True), "Nesterov.*momentum=0"),
        (lambda p: optim.SGD(p, momentum=0.9, dampening=0.1, nesterov=True), "dampening=0.1"),
        (lambda p: optim.Adam(p, betas=(1.0, 0.999)), r"betas\[0\]=1.0"),
        (lambda p: optim.Adam(p, betas=(0.9, -0.1)), r"betas\[1\]=-0.1"),
        (lambda p: optim.Adam(p, betas=0.9), "pair"),
        (lambda p: optim.AdamW(p, eps=-1e-8), "eps=-1e-08"),
        (lambda p: optim.Adam(p, lr=float("nan")), "lr=nan"),
        (lambda p: optim.Adam(p, lr="0.1"), "real number"),
        (lambda p: optim.RMSprop(p, alpha=-0.9), "alpha=-0.9"),
        (lambda p: optim.Adagrad(p, lr_decay=-1), "lr_decay=-1"),
        (lambda p: optim.Adagrad(p, initial_accumulator_value=-1), "initial_accumulator_value"),
        (lambda p: optim.SGD([{"params": p, "lr": -2}], lr=0.1), "lr=-2"),
    ],
)
def test_invalid_hyperparameters_name_the_value(make, message):
    with pytest.raises(OptimizerError, match=message):
        make([ember.zeros(2, requires_grad=True)])


def test_invalid_parameters():
    a = ember.zeros(2, requires_grad=True)
    with pytest.raises(OptimizerError, match="appears twice"):
        optim.SGD([a, a], lr=0.1)
    opt = optim.SGD([a], lr=0.1)
    with pytest.raises(OptimizerError, match="already in param group 0"):
        opt.add_param_group({"params": [a]})
    with pytest.raises(OptimizerError, match="non-leaf"):
        optim.SGD([a * 2], lr=0.1)
    with pytest.raises(OptimizerError, match="floating-point"):
        optim.SGD([ember.tensor([1, 2])], lr=0.1)
    with pytest.raises(OptimizerError, match="empty parameter list"):
        optim.SGD([], lr=0.1)
    with pytest.raises(OptimizerError, match="single Tensor"):
        optim.SGD(a, lr=0.1)
    with pytest.raises(OptimizerError, match="not a set"):
        optim.SGD({a}, lr=0.1)
    with pytest.raises(OptimizerError, match="can only optimize Tensors"):
        optim.SGD([np.zeros(2)], lr=0.1)
    assert issubclass(OptimizerError, EmberError) and issubclass(OptimizerError, ValueError)


def test_float32_state_stays_float32():
    p = ember.tensor(np.ones((2, 2), np.float32), requires_grad=True)
    for opt in (
        optim.SGD([p], lr=0.1, momentum=0.9, weight_decay=0.1),
        optim.Adam([p], amsgrad=True, weight_decay=0.1),
        optim.RMSprop([p], momentum=0.9, centered=True),
        optim.Adagrad([p], weight_decay=0.1),
    ):
        for _ in range(2):
            opt.zero_grad()
            (p * p).sum().backward()
            opt.step()
        assert p.dtype is ember.float32 and p.is_leaf
        for key, value in opt.state[p].items():
            assert value.dtype is ember.float32, key


def test_named_parameters_give_param_names():
    a = ember.zeros(2, requires_grad=True)
    opt = optim.SGD([("weight", a)], lr=0.1)
    assert len(opt.param_groups[0]["params"]) == 1 and opt.param_groups[0]["params"][0] is a
    assert opt.state_dict()["param_groups"][0]["param_names"] == ["weight"]
