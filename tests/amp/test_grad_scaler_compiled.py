"""GradScaler inside a captured training step (ember.function, ember.compile): with overflows
injected on chosen steps (an input scaled to inf), the scale sequence, the skipped steps and the
parameters equal torch.amp.GradScaler's eagerly, and the step is captured without a retrace per
step; the scaler's state_dict survives a round trip mid-run."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

STEPS = 9
# the first step too: its optimizer state is created by the skipped step (GradScaler's
# docstring), zero for these two optimizers, as their fresh state
OVERFLOW_AT = {0, 2, 3, 6}


def _setup(lib, optimizer):
    rng = np.random.default_rng(0)
    lib.manual_seed(0)
    model = lib.nn.Sequential(lib.nn.Linear(4, 8), lib.nn.Tanh(), lib.nn.Linear(8, 2))
    with lib.no_grad():
        for p in model.parameters():
            p.copy_(lib.tensor(rng.standard_normal(tuple(p.shape)) * 0.5).float())
    if optimizer == "sgd":
        opt = lib.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    else:
        opt = lib.optim.Adam(model.parameters(), lr=0.01)
    scaler = lib.amp.GradScaler("cpu", init_scale=2.0**10, growth_interval=2)
    x = lib.tensor(rng.standard_normal((5, 4)).astype(np.float32))
    return model, opt, scaler, x


def _run(lib, optimizer, capture=None, resume_at=None):
    model, opt, scaler, x = _setup(lib, optimizer)

    def step(x, factor):
        opt.zero_grad()
        loss = (model(x * factor) ** 2).mean()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss

    run = capture(step) if capture is not None else step
    scales, params = [], []
    for i in range(STEPS):
        factor = lib.tensor(float("inf") if i in OVERFLOW_AT else 1.0)
        run(x, factor)
        scales.append(float(scaler.get_scale()))
        params.append([p.detach().numpy().copy() for p in model.parameters()])
        if i == resume_at:  # a checkpoint's round trip: a new scaler takes over the state
            state = scaler.state_dict()
            scaler.load_state_dict(dict(state))
            assert scaler.state_dict() == state
    return scales, params, run, scaler


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
@pytest.mark.parametrize("capture", ["eager", "function", "compile"])
def test_scale_sequence_and_skips_equal_torch(optimizer, capture):
    want_scales, want_params, _, want_scaler = _run(torch, optimizer)
    how = {"eager": None, "function": ember.function, "compile": ember.compile}[capture]
    scales, params, run, scaler = _run(ember, optimizer, how, resume_at=4)
    assert scales == want_scales
    # an overflowed step changes nothing; the others move the parameters as torch's do
    for i in range(STEPS):
        for ours, theirs in zip(params[i], want_params[i]):
            np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)
        if i in OVERFLOW_AT and i > 0:
            for a, b in zip(params[i], params[i - 1]):
                np.testing.assert_array_equal(a, b)
    theirs = want_scaler.state_dict()
    assert scaler.state_dict()["scale"] == theirs["scale"]
    assert scaler.state_dict()["_growth_tracker"] == theirs["_growth_tracker"]
    if capture == "function":
        # the first call has no optimizer state yet, every later one the same: two traces
        assert run.stats.traces == 2, run.stats


def test_state_dict_round_trip_into_a_fresh_scaler():
    a = ember.amp.GradScaler("cpu", init_scale=64.0, growth_interval=3)
    w = ember.nn.Parameter(ember.ones(2))
    opt = ember.optim.SGD([w], lr=0.1)
    for _ in range(4):
        opt.zero_grad()
        a.scale((w * w).sum()).backward()
        a.step(opt)
        a.update()
    b = ember.amp.GradScaler("cpu")
    b.load_state_dict(a.state_dict())
    assert (
        b.state_dict()
        == a.state_dict()
        == {
            "scale": 128.0,
            "growth_factor": 2.0,
            "backoff_factor": 0.5,
            "growth_interval": 3,
            "_growth_tracker": 1,
        }
    )


def test_a_captured_skip_keeps_no_copy_of_the_parameters():
    # the skip selects each parameter's and buffer's old value where a gradient overflowed;
    # a graph's values are never written, so the select reads the old value itself: no
    # parameter-sized copy (the float16 step's peak was 0.94x of float32's with them)
    model, opt, scaler, x = _setup(ember, "sgd")

    @ember.function
    def step(x, factor):
        opt.zero_grad()
        loss = (model(x * factor) ** 2).mean()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss

    for factor in (1.0, 1.0):  # (the second call has the momentum buffers)
        step(x, ember.tensor(factor))
    graph = step.compile(x, ember.tensor(1.0)).graph
    copies = [n for n in graph.nodes if n.kind == "call" and n.op.name == "copy"]
    assert not copies, str(graph)
