"""Adadelta, Adamax, NAdam, RAdam, Rprop, ASGD and LBFGS against PyTorch 2.13, step for step.

Each comparison builds the same parameters in both frameworks, takes twenty steps on the same
loss and compares every parameter after every step (float64: within 1e-12 relative). PyTorch runs
its single-tensor ("for-loop") implementations, which ember follows. Also: the state_dict layout
and a round trip of it mid-run (ember's own, through a checkpoint file, and PyTorch's), param
groups, learning-rate schedulers (eager and in a step compiled by ``ember.function``), LBFGS on
the Rosenbrock function with and without the strong-Wolfe line search, and an optimizer written
the PyTorch way as a subclass of ``ember.optim.Optimizer``.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import ember
from ember import nn, optim
from ember.errors import StateDictError
from ember.optim import OptimizerError
from ember.optim import lr_scheduler as EL

torch = pytest.importorskip("torch", reason="PyTorch is the peer these tests compare with")

_rng = np.random.default_rng(2024)
W0 = _rng.standard_normal((3, 4))
B0 = _rng.standard_normal(4)
X = _rng.standard_normal((3, 4))
Y = _rng.standard_normal((3, 4))

STEPS = 20
F64 = dict(rtol=1e-12, atol=1e-14)


def _loss(w, b, x, y):
    # the same expression in both frameworks
    return (((w * x + b).tanh() - y) ** 2).sum() + (b**2).sum()


CASES = [
    ("Adadelta", dict()),
    ("Adadelta", dict(lr=0.5, rho=0.8, eps=1e-4)),
    ("Adadelta", dict(lr=0.5, weight_decay=0.1, maximize=True)),
    ("Adamax", dict(lr=0.05)),
    ("Adamax", dict(lr=0.05, weight_decay=0.1)),
    ("Adamax", dict(lr=0.05, betas=(0.3, 0.8), eps=1e-6, maximize=True)),
    ("NAdam", dict(lr=0.05)),
    ("NAdam", dict(lr=0.05, momentum_decay=0.1, weight_decay=0.1)),
    ("NAdam", dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True)),
    ("NAdam", dict(lr=0.05, betas=(0.4, 0.9), maximize=True)),
    ("RAdam", dict(lr=0.05)),  # rho_t > 5 from the seventh step on
    ("RAdam", dict(lr=0.05, betas=(0.5, 0.6))),  # rho_t never exceeds 5: the plain update
    ("RAdam", dict(lr=0.05, betas=(0.9, 0.9), weight_decay=0.1)),
    ("RAdam", dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True, maximize=True)),
    ("Rprop", dict()),
    ("Rprop", dict(lr=0.1, etas=(0.3, 1.5), step_sizes=(1e-3, 0.2))),
    ("Rprop", dict(lr=0.05, maximize=True)),
    ("ASGD", dict(lr=0.05)),
    ("ASGD", dict(lr=0.05, lambd=1e-2, alpha=0.5, t0=5, weight_decay=0.1)),  # averages after 5
    ("ASGD", dict(lr=0.05, t0=0, maximize=True)),
]


def _case_id(case):
    name, kwargs = case
    return name + "-" + ",".join(f"{k}={v}" for k, v in kwargs.items())


IDS = [_case_id(c) for c in CASES]


def _pair(dtype=np.float64, init=(W0, B0)):
    """The same leaf tensors in ember and in torch."""
    e = [ember.tensor(a.astype(dtype), requires_grad=True) for a in init]
    t = [torch.tensor(a.astype(dtype), requires_grad=True) for a in init]
    return e, t


def _ember_step(opt, params, dtype=np.float64):
    opt.zero_grad()
    _loss(*params, ember.tensor(X.astype(dtype)), ember.tensor(Y.astype(dtype))).backward()
    opt.step()


def _torch_step(opt, params, dtype=np.float64):
    opt.zero_grad()
    _loss(*params, torch.tensor(X.astype(dtype)), torch.tensor(Y.astype(dtype))).backward()
    opt.step()


def _assert_params(e_params, t_params, step, **tol):
    for e, t in zip(e_params, t_params):
        np.testing.assert_allclose(
            e.detach().numpy(), t.detach().numpy(), **(tol or F64), err_msg=f"step {step}"
        )


def _to_ember(value):
    """A torch state_dict's value with its tensors as ember tensors of the same dtype."""
    if isinstance(value, torch.Tensor):
        return ember.tensor(value.detach().numpy().copy())
    if isinstance(value, dict):
        return {k: _to_ember(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_to_ember(v) for v in value)
    return value


# ---------------------------------------------------------------------------- step for step
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_twenty_float64_steps_match_torch(case):
    name, kwargs = case
    e_params, t_params = _pair()
    e_opt = getattr(optim, name)(e_params, foreach=False, **kwargs)
    t_opt = getattr(torch.optim, name)(t_params, foreach=False, **kwargs)
    for step in range(1, STEPS + 1):
        _ember_step(e_opt, e_params)
        _torch_step(t_opt, t_params)
        _assert_params(e_params, t_params, step)
    # the same state layout: keys per parameter, dtypes and values; the same param groups
    e_sd, t_sd = e_opt.state_dict(), t_opt.state_dict()
    assert sorted(e_sd["state"]) == sorted(t_sd["state"])
    for idx, t_state in t_sd["state"].items():
        assert sorted(e_sd["state"][idx]) == sorted(t_state)
        for key, t_val in t_state.items():
            e_val = e_sd["state"][idx][key]
            assert str(e_val.dtype) == str(t_val.dtype).replace("torch.", "ember."), key
            np.testing.assert_allclose(e_val.numpy(), t_val.numpy(), **F64, err_msg=key)
    assert e_sd["param_groups"] == t_sd["param_groups"]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_identical_gradients_give_float32_updates_within_rounding(case):
    """Fed the same gradients, float32 updates agree to a few roundings (PyTorch's kernels may
    fuse a multiply and an add) and stay float32."""
    name, kwargs = case
    rng = np.random.default_rng(3)
    init = rng.standard_normal(64).astype(np.float32)
    e = ember.tensor(init, requires_grad=True)
    t = torch.tensor(init, requires_grad=True)
    e_opt = getattr(optim, name)([e], **kwargs)
    t_opt = getattr(torch.optim, name)([t], foreach=False, **kwargs)
    for step in range(1, 11):
        g = rng.standard_normal(64).astype(np.float32)
        e.grad, t.grad = ember.tensor(g), torch.tensor(g)
        e_opt.step()
        t_opt.step()
        assert e.dtype is ember.float32
        np.testing.assert_allclose(
            e.detach().numpy(), t.detach().numpy(), rtol=1e-5, atol=1e-6, err_msg=f"step {step}"
        )
    for key, value in e_opt.state[e].items():
        assert value.dtype is ember.float32, key


@pytest.mark.parametrize("name", ["Adadelta", "Adamax", "NAdam", "RAdam", "Rprop", "ASGD"])
def test_param_groups_with_their_own_lr_match_torch(name):
    e_params, t_params = _pair()

    def groups(p):
        return [{"params": [p[0]], "lr": 0.02}, {"params": [p[1]], "weight_decay": 0.05}]

    e_opt = getattr(optim, name)(groups(e_params), lr=0.1, foreach=False)
    t_opt = getattr(torch.optim, name)(groups(t_params), lr=0.1, foreach=False)
    assert [g["lr"] for g in e_opt.param_groups] == [0.02, 0.1]
    for step in range(1, STEPS + 1):
        _ember_step(e_opt, e_params)
        _torch_step(t_opt, t_params)
        _assert_params(e_params, t_params, step)
    assert e_opt.state_dict()["param_groups"] == t_opt.state_dict()["param_groups"]


# ------------------------------------------------------------------------------ state_dict
ROUND_TRIP = [c for c in CASES if c[1]]  # every optimizer, with options


@pytest.mark.parametrize("case", ROUND_TRIP, ids=[_case_id(c) for c in ROUND_TRIP])
def test_state_dict_round_trip_mid_run_continues_as_torch_does(case, tmp_path):
    """Seven steps, then the optimizer's state through a checkpoint file into a new optimizer,
    then thirteen more: the same as PyTorch doing the same with its own state_dict (which casts
    0-d state such as NAdam's mu_product to the parameter's dtype, as ember does)."""
    name, kwargs = case
    e_params, t_params = _pair()
    e_opt = getattr(optim, name)(e_params, **kwargs)
    t_opt = getattr(torch.optim, name)(t_params, **kwargs)
    for _ in range(7):
        _ember_step(e_opt, e_params)
        _torch_step(t_opt, t_params)

    path = tmp_path / "opt.safetensors"
    ember.io.save({"params": e_params, "optimizer": e_opt.state_dict()}, path)
    loaded = ember.io.load(path)
    e_params = [t.detach().requires_grad_() for t in loaded["params"]]
    e_opt = getattr(optim, name)(e_params, **kwargs)
    e_opt.load_state_dict(loaded["optimizer"])
    t_sd = t_opt.state_dict()
    t_params = [t.detach().clone().requires_grad_() for t in t_params]
    t_opt = getattr(torch.optim, name)(t_params, **kwargs)
    t_opt.load_state_dict(t_sd)

    for step in range(8, STEPS + 1):
        _ember_step(e_opt, e_params)
        _torch_step(t_opt, t_params)
        _assert_params(e_params, t_params, step)


@pytest.mark.parametrize("case", ROUND_TRIP, ids=[_case_id(c) for c in ROUND_TRIP])
def test_a_torch_state_dict_loads_and_continues_identically(case):
    """PyTorch's state_dict, its tensors turned into ember tensors, loads into the ember
    optimizer (the same layout), which then steps as PyTorch's does."""
    name, kwargs = case
    e_params, t_params = _pair()
    t_opt = getattr(torch.optim, name)(t_params, **kwargs)
    for _ in range(7):
        _torch_step(t_opt, t_params)
    e_params, _ = _pair(init=[t.detach().numpy() for t in t_params])
    e_opt = getattr(optim, name)(e_params, **kwargs)
    e_opt.load_state_dict(_to_ember(t_opt.state_dict()))
    t_sd = t_opt.state_dict()
    t_opt = getattr(torch.optim, name)(t_params, **kwargs)
    t_opt.load_state_dict(t_sd)  # (torch casts 0-d state on loading: the same on both sides)
    for step in range(8, STEPS + 1):
        _ember_step(e_opt, e_params)
        _torch_step(t_opt, t_params)
        _assert_params(e_params, t_params, step)


@pytest.mark.parametrize("name", ["Adadelta", "Adamax", "RAdam", "Rprop"])
def test_a_round_trip_without_scalar_state_resumes_bit_for_bit(name):
    straight, _ = _pair()
    opt = getattr(optim, name)(straight)
    for _ in range(STEPS):
        _ember_step(opt, straight)
    first, _ = _pair()
    opt = getattr(optim, name)(first)
    for _ in range(7):
        _ember_step(opt, first)
    resumed = [p.detach().clone().requires_grad_() for p in first]
    fresh = getattr(optim, name)(resumed)
    fresh.load_state_dict(opt.state_dict())
    for _ in range(STEPS - 7):
        _ember_step(fresh, resumed)
    for a, b in zip(straight, resumed):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())


def test_scalar_state_must_be_0d_and_other_state_the_parameters_shape():
    params, _ = _pair()
    opt = optim.NAdam(params, lr=0.05)
    _ember_step(opt, params)
    sd = opt.state_dict()
    sd["state"][0]["mu_product"] = ember.zeros(3)
    with pytest.raises(StateDictError, match="'mu_product' has shape \\(3,\\) but must be 0-d"):
        optim.NAdam(_pair()[0]).load_state_dict(sd)
    sd = opt.state_dict()
    sd["state"][1]["exp_avg"] = ember.zeros(())
    with pytest.raises(StateDictError, match="'exp_avg' has shape \\(\\) but the parameter"):
        optim.NAdam(_pair()[0]).load_state_dict(sd)


# ------------------------------------------------------------------------------ schedulers
SCHEDULED = [
    ("Adadelta", dict(lr=1.0), False),
    ("Adamax", dict(lr=0.05), True),
    ("NAdam", dict(lr=0.05), True),
    ("RAdam", dict(lr=0.05), True),
    ("Rprop", dict(lr=0.05), False),
    ("ASGD", dict(lr=0.05, t0=3), False),
]


@pytest.mark.parametrize("name, kwargs, cycle", SCHEDULED, ids=[s[0] for s in SCHEDULED])
@pytest.mark.parametrize("schedule", ["onecycle", "step_exponential"])
def test_schedulers_drive_the_new_optimizers_as_torch_does(name, kwargs, cycle, schedule):
    def schedulers(lib_sched, opt):
        if schedule == "onecycle":  # cycles betas[0] too, for the optimizers that have it
            return [lib_sched.OneCycleLR(opt, 0.1, total_steps=STEPS + 1, cycle_momentum=cycle)]
        return [lib_sched.StepLR(opt, 5, gamma=0.5), lib_sched.ExponentialLR(opt, 0.95)]

    e_params, t_params = _pair()
    e_opt = getattr(optim, name)(e_params, **kwargs)
    t_opt = getattr(torch.optim, name)(t_params, **kwargs)
    e_scheds = schedulers(EL, e_opt)
    t_scheds = schedulers(torch.optim.lr_scheduler, t_opt)
    for step in range(1, STEPS + 1):
        _ember_step(e_opt, e_params)
        _torch_step(t_opt, t_params)
        for s in e_scheds + t_scheds:
            s.step()
        _assert_params(e_params, t_params, step)
        for e_group, t_group in zip(e_opt.param_groups, t_opt.param_groups):
            assert e_group["lr"] == pytest.approx(t_group["lr"], rel=1e-14)
            if cycle:
                assert e_group["betas"][0] == pytest.approx(t_group["betas"][0], rel=1e-14)


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


COMPILED = [
    ("Adadelta", dict(lr=1.0, weight_decay=1e-3), False),
    ("Adamax", dict(lr=1e-2, weight_decay=1e-3), True),
    ("NAdam", dict(lr=1e-2, weight_decay=1e-2, decoupled_weight_decay=True), True),
    ("RAdam", dict(lr=1e-2), True),  # both sides of rho_t > 5 within the run
    ("Rprop", dict(lr=1e-2, maximize=False), False),
    ("ASGD", dict(lr=1e-2, lambd=1e-2, t0=4), False),  # both sides of mu == 1
]


@pytest.mark.parametrize("name, kwargs, cycle", COMPILED, ids=[c[0] for c in COMPILED])
def test_a_compiled_scheduled_step_equals_the_eager_step_without_retracing(name, kwargs, cycle):
    """The update recorded once by ``ember.function`` reads the hyper-parameters at run time
    and decides RAdam's rectification and ASGD's averaging in the graph: twelve compiled steps
    under OneCycleLR equal twelve eager ones, with two traces (the first call finds no
    gradients and no optimizer state)."""
    steps = 12
    eager_model, model = _model(), _model()
    eager_opt = getattr(optim, name)(eager_model.parameters(), **kwargs)
    opt = getattr(optim, name)(model.parameters(), **kwargs)

    def schedule(o):
        return EL.OneCycleLR(o, 0.05, total_steps=steps + 1, cycle_momentum=cycle)

    eager_sched, sched = schedule(eager_opt), schedule(opt)
    eager_step, step = _train_step(eager_model, eager_opt), ember.function(_train_step(model, opt))
    for _, (x, y) in zip(range(steps), _batches()):
        expected, got = eager_step(x, y), step(x, y)
        eager_sched.step()
        sched.step()
        np.testing.assert_allclose(got.detach().numpy(), expected.detach().numpy(), rtol=1e-12)
        for p, q in zip(model.parameters(), eager_model.parameters()):
            np.testing.assert_allclose(
                p.detach().numpy(), q.detach().numpy(), rtol=1e-12, atol=1e-14
            )
    assert step.stats.traces == 2, step.stats
    for key, value in eager_opt.state_dict()["state"][0].items():
        np.testing.assert_allclose(opt.state_dict()["state"][0][key].numpy(), value.numpy())


@pytest.mark.parametrize("name, kwargs, cycle", COMPILED, ids=[c[0] for c in COMPILED])
def test_a_session_training_op_follows_torch(name, kwargs, cycle):
    """``optimizer.minimize`` inside ``ember.Graph()``: the recorded training op, run by a
    Session eight times, moves the variable as eight PyTorch steps do."""
    x_data = np.random.default_rng(0).standard_normal((4, 3))
    with ember.Graph() as graph:
        x = ember.placeholder((None, 3), dtype=ember.float64, name="x")
        w = ember.Variable(np.ones((3, 1)), name="W")
        opt = getattr(optim, name)([w], **kwargs)
        train = opt.minimize(((x @ w) ** 2).sum())
    t_w = torch.ones((3, 1), dtype=torch.float64, requires_grad=True)
    t_opt = getattr(torch.optim, name)([t_w], **kwargs)
    with ember.Session(graph) as sess:
        for step in range(1, 9):
            sess.run(train, {x: x_data})
            t_opt.zero_grad()
            ((torch.tensor(x_data) @ t_w) ** 2).sum().backward()
            t_opt.step()
            np.testing.assert_allclose(
                w.detach().numpy(), t_w.detach().numpy(), **F64, err_msg=str(step)
            )


# ---------------------------------------------------------------------------------- LBFGS
def _rosenbrock(x, y):
    return ((1 - x) ** 2 + 100 * (y - x**2) ** 2).sum()


def _lbfgs_pair(**kwargs):
    e = [ember.tensor(np.array([v]), requires_grad=True) for v in (-1.5, 2.0)]
    t = [torch.tensor([v], dtype=torch.float64, requires_grad=True) for v in (-1.5, 2.0)]
    e_opt, t_opt = optim.LBFGS(e, **kwargs), torch.optim.LBFGS(t, **kwargs)

    def e_closure():
        e_opt.zero_grad()
        loss = _rosenbrock(*e)
        loss.backward()
        return loss

    def t_closure():
        t_opt.zero_grad()
        loss = _rosenbrock(*t)
        loss.backward()
        return loss

    return (e, e_opt, e_closure), (t, t_opt, t_closure)


# (keyword arguments, whether eight steps reach the minimum (1, 1))
LBFGS_CASES = [
    (dict(line_search_fn="strong_wolfe"), True),
    (dict(line_search_fn="strong_wolfe", history_size=3, max_iter=7), True),
    (dict(line_search_fn="strong_wolfe", lr=0.5, max_iter=5, tolerance_change=1e-12), False),
    (dict(lr=0.1, max_iter=10), False),
    (dict(lr=0.2, max_iter=6, history_size=2), False),
]
# the Rosenbrock valley is ill-conditioned: the last-bit differences of dot products (their
# order of summation) grow over the iterations, to about 1e-7 at worst in these runs; the
# counts of closure evaluations and iterations must agree exactly, and a well-conditioned
# problem agrees to 1e-12 (test_lbfgs_on_a_least_squares_problem_matches_torch_to_rounding)
ROSENBROCK = dict(rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize(
    "kwargs, converges",
    LBFGS_CASES,
    ids=[",".join(f"{a}={b}" for a, b in k.items()) for k, _ in LBFGS_CASES],
)
def test_lbfgs_on_rosenbrock_follows_torch(kwargs, converges):
    """Every step's returned loss and iterate, and the closure evaluations and iterations
    counted, equal PyTorch's."""
    (e, e_opt, e_closure), (t, t_opt, t_closure) = _lbfgs_pair(**kwargs)
    for step in range(1, 9):
        e_loss, t_loss = e_opt.step(e_closure), t_opt.step(t_closure)
        np.testing.assert_allclose(float(e_loss), float(t_loss.detach()), rtol=1e-6, atol=1e-7)
        _assert_params(e, t, step, **ROSENBROCK)
        e_state, t_state = e_opt.state[e[0]], t_opt.state[t[0]]
        assert (e_state["func_evals"], e_state["n_iter"]) == (
            t_state["func_evals"],
            t_state["n_iter"],
        )
    assert sorted(e_state) == sorted(t_state)
    assert len(e_state["old_dirs"]) == len(t_state["old_dirs"])
    if converges:
        np.testing.assert_allclose([p.item() for p in e], [1.0, 1.0], atol=1e-5)


def test_lbfgs_on_a_least_squares_problem_matches_torch_to_rounding():
    """A well-conditioned problem, where nothing amplifies rounding: iterates within 1e-12."""
    rng = np.random.default_rng(5)
    A, b, w0 = rng.standard_normal((8, 5)), rng.standard_normal(8), rng.standard_normal(5)
    for line_search in (None, "strong_wolfe"):
        e = ember.tensor(w0, requires_grad=True)
        t = torch.tensor(w0, requires_grad=True)
        e_opt = optim.LBFGS([e], lr=0.5, max_iter=4, line_search_fn=line_search)
        t_opt = torch.optim.LBFGS([t], lr=0.5, max_iter=4, line_search_fn=line_search)

        def closure(opt, w, lib, A=A, b=b):
            opt.zero_grad()
            r = lib.tensor(A) @ w - lib.tensor(b)
            loss = (r * r).sum()
            loss.backward()
            return loss

        for step in range(1, 6):
            e_opt.step(lambda: closure(e_opt, e, ember))
            t_opt.step(lambda: closure(t_opt, t, torch))
            _assert_params([e], [t], step)


def test_lbfgs_state_dict_round_trips_and_loads_torchs(tmp_path):
    (e, e_opt, e_closure), (t, t_opt, t_closure) = _lbfgs_pair(
        line_search_fn="strong_wolfe", max_iter=4
    )
    for _ in range(2):
        e_opt.step(e_closure)
        t_opt.step(t_closure)
    sd = e_opt.state_dict()
    assert sorted(sd["state"]) == [0] and sd["param_groups"] == t_opt.state_dict()["param_groups"]
    assert isinstance(sd["state"][0]["old_dirs"], list)

    def resumed(state_dict):
        params = [p.detach().clone().requires_grad_() for p in e]
        opt = optim.LBFGS(params, line_search_fn="strong_wolfe", max_iter=4)
        opt.load_state_dict(state_dict)

        def closure():
            opt.zero_grad()
            loss = _rosenbrock(*params)
            loss.backward()
            return loss

        return params, opt, closure

    own = resumed(ember.io.load(_saved(sd, tmp_path / "opt.safetensors")))
    from_torch = resumed(_to_ember(t_opt.state_dict()))
    for step in range(3, 6):
        t_opt.step(t_closure)
        for params, opt, closure in (own, from_torch):
            opt.step(closure)
            _assert_params(params, t, step, **ROSENBROCK)
    assert own[1].state[own[0][0]]["func_evals"] == t_opt.state[t[0]]["func_evals"]


def _saved(state_dict, path):
    # (pytest's tmp_path: a folder of tempfile's of its own was left behind by every run)
    ember.io.save(state_dict, path)
    return path


def test_lbfgs_with_a_scheduler_follows_torch():
    (e, e_opt, e_closure), (t, t_opt, t_closure) = _lbfgs_pair(lr=0.2, max_iter=5)
    e_sched = EL.StepLR(e_opt, 2, gamma=0.5)
    t_sched = torch.optim.lr_scheduler.StepLR(t_opt, 2, gamma=0.5)
    for step in range(1, 7):
        e_opt.step(e_closure)
        t_opt.step(t_closure)
        e_sched.step()
        t_sched.step()
        assert e_opt.param_groups[0]["lr"] == t_opt.param_groups[0]["lr"]
        _assert_params(e, t, step, **ROSENBROCK)


def _least_squares_closure(opt, w, A, b):
    def closure():
        opt.zero_grad()
        r = A @ w - b
        loss = (r * r).sum()
        loss.backward()
        return loss

    return closure


def test_lbfgs_with_a_compiled_closure_equals_the_eager_one():
    """The closure (forward and backward) may be an ``ember.function``: LBFGS's state, which
    changes at every step, is no part of its cache key (LBFGS steps are never recorded), so it
    does not retrace at every call, and the iterates equal eager ones exactly. (On generated
    code, whose products are eager's kernels: the C graph runner's GEMM sums in its own order,
    within rounding of eager's, and the line search would carry that difference along.)"""
    rng = np.random.default_rng(5)
    A, b = ember.tensor(rng.standard_normal((8, 5))), ember.tensor(rng.standard_normal(8))
    w0 = rng.standard_normal(5)
    runs = []
    for compiled in (False, True):
        w = ember.tensor(w0, requires_grad=True)
        opt = optim.LBFGS([w], lr=0.5, max_iter=4, line_search_fn="strong_wolfe")

        closure = _least_squares_closure(opt, w, A, b)  # (reaches opt through its closure)
        closure = ember.function(closure, executor="codegen") if compiled else closure
        iterates = []
        for _ in range(5):
            opt.step(closure)
            iterates.append(w.detach().numpy().copy())
        runs.append(iterates)
    np.testing.assert_array_equal(np.array(runs[1]), np.array(runs[0]))
    assert closure.stats.calls > 20 and closure.stats.traces <= 2, closure.stats


def test_lbfgs_refuses_groups_unknown_line_searches_no_closure_and_capture():
    a, b = ember.zeros(2, requires_grad=True), ember.zeros(3, requires_grad=True)
    with pytest.raises(OptimizerError, match="per-parameter options"):
        optim.LBFGS([{"params": [a]}, {"params": [b]}])
    with pytest.raises(OptimizerError, match="line_search_fn must be None or 'strong_wolfe'"):
        optim.LBFGS([a], line_search_fn="backtracking")
    opt = optim.LBFGS([a])
    with pytest.raises(OptimizerError, match="per-parameter options"):
        opt.add_param_group({"params": [b]})
    with pytest.raises(OptimizerError, match="needs a closure"):
        opt.step()

    def closure():
        opt.zero_grad()
        loss = (a * a).sum()
        loss.backward()
        return loss

    with pytest.raises(OptimizerError, match="runs eagerly only"):
        ember.function(lambda: opt.step(closure))()


# ---------------------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    "make,message",
    [
        (lambda p: optim.Adadelta(p, rho=1.5), "rho=1.5"),
        (lambda p: optim.Adadelta(p, lr=-1.0), "lr=-1.0"),
        (lambda p: optim.Adamax(p, betas=(1.0, 0.9)), r"betas\[0\]=1.0"),
        (lambda p: optim.NAdam(p, momentum_decay=-1.0), "momentum_decay=-1.0"),
        (lambda p: optim.RAdam(p, betas=0.9), "pair"),
        (lambda p: optim.Rprop(p, etas=(1.5, 1.2)), "0 < etaminus < 1 < etaplus"),
        (lambda p: optim.Rprop(p, step_sizes=1e-6), "step_sizes must be a pair"),
        (lambda p: optim.ASGD(p, weight_decay=-0.1), "weight_decay=-0.1"),
        (lambda p: optim.NAdam(p, differentiable=True), "differentiable=True is not supported"),
        (lambda p: optim.Adadelta(p, foreach="yes"), "foreach must be None, True or False"),
        (lambda p: optim.LBFGS(p, max_iter=0), "max_iter must be a positive int"),
    ],
)
def test_invalid_arguments_name_the_value(make, message):
    with pytest.raises(OptimizerError, match=message):
        make([ember.zeros(2, requires_grad=True)])


def test_torch_flags_are_kept_in_the_groups():
    p = ember.zeros(2, requires_grad=True)
    opt = optim.RAdam([p], foreach=True, capturable=True)
    group = opt.state_dict()["param_groups"][0]
    assert group["foreach"] is True and group["capturable"] is True
    assert group["differentiable"] is False
    tp = torch.zeros(2, requires_grad=True)
    assert set(group) == set(torch.optim.RAdam([tp]).state_dict()["param_groups"][0])


# ------------------------------------------------------------ an optimizer written as in torch
def _torch_style_optimizers(lib):
    """Two custom optimizers as a PyTorch user writes them, over ``lib`` (ember or torch):
    the same source runs in both frameworks."""

    class Adam(lib.optim.Optimizer):
        def __init__(self, params, lr=1e-2, betas=(0.9, 0.999), eps=1e-8):
            super().__init__(params, dict(lr=lr, betas=betas, eps=eps))

        @lib.no_grad()
        def step(self, closure=None):
            loss = None
            if closure is not None:
                with lib.enable_grad():
                    loss = closure()
            for group in self.param_groups:
                beta1, beta2 = group["betas"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    state = self.state[p]
                    if not state:
                        state["step"] = 0
                        state["exp_avg"] = lib.zeros_like(p)
                        state["exp_avg_sq"] = lib.zeros_like(p)
                    state["step"] += 1
                    exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                    exp_avg.mul_(beta1).add_(p.grad, alpha=1 - beta1)
                    exp_avg_sq.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
                    bias1 = 1 - beta1 ** state["step"]
                    bias2 = 1 - beta2 ** state["step"]
                    denom = (exp_avg_sq / bias2).sqrt().add_(group["eps"])
                    p.addcdiv_(exp_avg, denom, value=-group["lr"] / bias1)
            return loss

    class Momentum(lib.optim.Optimizer):
        def __init__(self, params, lr=0.1, momentum=0.9):
            super().__init__(params, dict(lr=lr, momentum=momentum))

        @lib.no_grad()
        def step(self, closure=None):
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    state = self.state[p]
                    if "buf" not in state:
                        state["buf"] = lib.zeros_like(p)
                    state["buf"].lerp_(p.grad, 1 - group["momentum"])
                    p.sub_(state["buf"], alpha=group["lr"])

    return Adam, Momentum


def test_a_custom_optimizer_written_the_torch_way_matches_torch():
    for e_cls, t_cls in zip(_torch_style_optimizers(ember), _torch_style_optimizers(torch)):
        e_params, t_params = _pair()
        e_opt, t_opt = e_cls(e_params), t_cls(t_params)
        for step in range(1, STEPS + 1):
            _ember_step(e_opt, e_params)
            _torch_step(t_opt, t_params)
            _assert_params(e_params, t_params, step)
        e_sd, t_sd = e_opt.state_dict(), t_opt.state_dict()
        assert sorted(e_sd["state"]) == sorted(t_sd["state"]) == [0, 1]
        assert e_sd["param_groups"] == t_sd["param_groups"]


class _IntStepSGD(optim.Optimizer):
    """A custom optimizer keeping its step count as a Python int, as PyTorch users write
    them, with a step-dependent learning rate (written with methods ember has today)."""

    def __init__(self, params, lr=0.1):
        super().__init__(params, dict(lr=lr))

    @ember.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                state["step"] = state.get("step", 0) + 1
                p.sub_(p.grad * (group["lr"] / state["step"]))


def test_a_custom_optimizer_with_python_state_is_exact_in_a_compiled_step():
    """A recorded step bakes in the Python values of the optimizer's state (here its int step
    count): they are part of the compiled function's cache key, so a new value retraces (with
    that reason) instead of replaying a stale one."""
    eager_model, model = _model(), _model()
    eager_opt, opt = _IntStepSGD(eager_model.parameters()), _IntStepSGD(model.parameters())
    eager_step, step = _train_step(eager_model, eager_opt), ember.function(_train_step(model, opt))
    with pytest.warns(UserWarning, match="Python values in its state"):
        for _, (x, y) in zip(range(8), _batches()):
            eager_step(x, y)
            step(x, y)
            for p, q in zip(model.parameters(), eager_model.parameters()):
                np.testing.assert_allclose(
                    p.detach().numpy(), q.detach().numpy(), rtol=1e-12, atol=1e-14
                )
    assert opt.state[next(iter(model.parameters()))]["step"] == 8
    assert "Python values in its state" in step.stats.retrace_reasons[-1]


@pytest.mark.parametrize(
    "name",
    [
        "SGD",
        "Adam",
        "AdamW",
        "RMSprop",
        "Adagrad",
        "Adadelta",
        "Adamax",
        "NAdam",
        "RAdam",
        "Rprop",
        "ASGD",
    ],
)
def test_every_optimizer_takes_torchs_implementation_switches_and_groups_match(name):
    params = [ember.nn.Parameter(ember.ones(2))]
    flags = {"foreach": True}
    if "fused" in inspect.signature(getattr(torch.optim, name)).parameters:
        flags["fused"] = None
    ours = getattr(ember.optim, name)(params, lr=0.1, **flags)
    theirs = getattr(torch.optim, name)([torch.nn.Parameter(torch.ones(2))], lr=0.1, **flags)
    assert set(ours.param_groups[0]) == set(theirs.param_groups[0])
    with pytest.raises(ember.optim.OptimizerError, match="differentiable"):
        getattr(ember.optim, name)(params, lr=0.1, differentiable=True)
