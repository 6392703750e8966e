"""What a captured call does to state beyond its results, as an eager call does: each leaf's
own .grad, arguments changed in place, tensors left in module attributes, closure cells,
globals and the dicts and lists they hold or on a bound method's object, and tensor hooks in
the recorded backward; compared with PyTorch or eager ember."""

import numpy as np
import pytest

import ember
from ember import nn


def _clipped_step(lstm, b1, b2, weights, opt):
    def step(x):
        opt.zero_grad()
        out, _ = lstm(x)
        ((out + b1 + b2) ** 2).mean().backward()
        nn.utils.clip_grad_norm_(weights, 0.01)
        opt.step()

    return step


def test_leaves_with_one_gradient_get_their_own_grads_in_a_captured_step():
    # an LSTM's two biases (and b1, b2 below) get the same gradient value: each .grad must be
    # its own tensor, or clipping in place scales the shared one twice
    def build():
        ember.manual_seed(3)
        return nn.LSTM(3, 4), nn.Parameter(ember.zeros(4)), nn.Parameter(ember.zeros(4))

    x = ember.tensor(np.random.default_rng(0).standard_normal((5, 2, 3)).astype(np.float32))
    params = []
    for captured in (False, True):
        lstm, b1, b2 = build()
        weights = [*lstm.parameters(), b1, b2]
        opt = ember.optim.SGD(weights, lr=0.5)

        step = _clipped_step(lstm, b1, b2, weights, opt)
        step = ember.function(step) if captured else step
        for _ in range(2):
            step(x)
        params.append([w.detach().numpy().copy() for w in weights])
    for eager, captured in zip(*params):
        np.testing.assert_allclose(captured, eager, rtol=1e-5, atol=1e-7)


def test_arguments_changed_in_place_are_written_back_as_eagerly():
    torch = pytest.importorskip("torch")

    def clamp_and_scale(lib):
        def f(x, y):
            x.clamp_(0, 1)
            y[0] = 5.0
            x[1:].mul_(2)  # through a view
            return x.sum()

        return f

    def sgd(lib):  # a parameter passed as an argument, updated under no_grad
        def f(w, x):
            loss = ((x @ w - 1.0) ** 2).mean()
            loss.backward()
            with lib.no_grad():
                w -= 0.1 * w.grad
                w.grad.zero_()
            return loss

        return f

    x0 = np.array([-1.0, 0.5, 2.0], np.float32)
    m = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    for make, args in [(clamp_and_scale, (x0, np.zeros(3, np.float32))), (sgd, (x0, m))]:
        runs = {}
        for name, lib, wrap in [("torch", torch, None), ("ember", ember, ember.function)]:
            tensors = [lib.tensor(a.copy()) for a in args]
            if make is sgd:
                tensors[0].requires_grad_(True)
            f = wrap(make(lib)) if wrap else make(lib)
            results = [f(*tensors).item() for _ in range(3)]
            runs[name] = results, [t.detach().numpy().copy() for t in tensors]
        np.testing.assert_allclose(runs["ember"][0], runs["torch"][0], rtol=1e-5)
        for got, want in zip(runs["ember"][1], runs["torch"][1]):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


def _stateful(lib):
    """A module that keeps tensors as plain attributes across calls, as stateful RNN code
    keeps its hidden state: set inside the call, read by the next one."""

    class Stateful(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = lib.nn.Linear(2, 2)
            self.h, self.pair = None, None

        def forward(self, x):
            if self.h is not None:
                x = x + self.h
            if self.pair is not None:
                x = x * self.pair[1]
            y = self.lin(x)
            self.h = y.detach()
            self.pair = (y.detach() * 0, lib.sigmoid(y.detach()))
            return y

    return Stateful()


def test_plain_tensor_attributes_set_in_a_captured_call_are_state():
    torch = pytest.importorskip("torch")
    t = _stateful(torch)
    e = _stateful(ember)
    e.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in t.state_dict().items()})
    step = ember.function(lambda x: e(x).sum())
    got = [step(ember.ones(1, 2)).item() for _ in range(4)]
    want = [t(torch.ones(1, 2)).sum().item() for _ in range(4)]
    # (float32 sums in PyTorch's order and in ember's, fed back four times: within rounding
    # at the scale of the largest, not relative to a small one)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6 * np.abs(want).max())
    assert isinstance(e.h, ember.Tensor) and isinstance(e.pair[1], ember.Tensor)
    np.testing.assert_allclose(e.pair[1].numpy(), t.pair[1].numpy(), rtol=1e-6)
    # rebinding them outside is seen
    e.h, e.pair, t.h, t.pair = ember.zeros(1, 2), None, torch.zeros(1, 2), None
    assert step(ember.ones(1, 2)).item() == pytest.approx(t(torch.ones(1, 2)).sum().item())


def _hooked_step(lib, seen):
    w = lib.full((3,), 2.0, requires_grad=True)
    w.register_hook(lambda g: g.clamp(max=1.0))  # an eager leaf's hook

    def step(x):
        h = x * w
        h.register_hook(lambda g: seen.append(1) or g * 2)  # an intermediate's
        z = h.sin()
        z.register_hook(lambda g: g + 1).remove()
        reversed_ = h.detach().requires_grad_(False) + 0 * h
        reversed_.register_hook(lambda g: -g)  # a gradient reversal
        y = (z**2).sum() + (h * 3).sum() + reversed_.sum()
        y.backward()
        return y

    return w, step


def test_tensor_hooks_run_in_a_recorded_backward():
    torch = pytest.importorskip("torch")
    grads = []
    for lib, wrap in ((torch, None), (ember, ember.function)):
        seen = []
        w, step = _hooked_step(lib, seen)
        step = wrap(step) if wrap else step
        for _ in range(2):
            step(lib.tensor([0.3, 1.0, -2.0]))
        grads.append(w.grad.numpy().copy())
        assert seen  # (ember: once per trace; the hook's ops run on every call)
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-6)


def _accumulating(lib, mem, stats):
    def step(x):
        out = x + mem["h"]
        mem["h"] = out.detach() * 0.5  # a tensor kept in a closed-over dict
        if mem["n"] is not None:
            out = out * mem["n"]
        mem["n"] = out.detach().sum()  # None, then a tensor
        stats[0] = stats[0] + out.sum().detach()  # a running metric in a list
        return out.sum()

    return step


def test_tensors_a_captured_call_leaves_in_closed_over_dicts_and_lists():
    torch = pytest.importorskip("torch")
    runs = []
    for lib, wrap in ((torch, None), (ember, ember.function)):
        mem, stats = {"h": lib.zeros(3), "n": None}, [lib.zeros(())]
        step = _accumulating(lib, mem, stats)
        step = wrap(step) if wrap else step
        results = [step(lib.ones(3)).item() for _ in range(4)]
        runs.append((results, mem["h"].numpy().copy(), float(mem["n"]), float(stats[0])))
    np.testing.assert_allclose(runs[1][0], runs[0][0], rtol=1e-6)
    np.testing.assert_allclose(runs[1][1], runs[0][1], rtol=1e-6)
    assert runs[1][2:] == pytest.approx(runs[0][2:], rel=1e-6)


class _Trainer:
    """A trainer whose captured step keeps a running loss and a metrics dict on itself."""

    def __init__(self, lib, wrap):
        self.w = lib.tensor([0.5, -0.3], requires_grad=True)
        self.opt = lib.optim.SGD([self.w], lr=0.1)
        self.running, self.metrics = lib.zeros(()), {"n": lib.zeros(())}
        self.step = wrap(self._step) if wrap else self._step

    def _step(self, x, y):
        self.opt.zero_grad()
        loss = ((x @ self.w - y) ** 2).mean()
        loss.backward()
        self.opt.step()
        self.running = 0.9 * self.running + 0.1 * loss.detach()
        self.metrics["n"] = self.metrics["n"] + 1
        return loss


def test_tensors_a_captured_method_leaves_on_its_object():
    torch = pytest.importorskip("torch")
    runs = []
    for lib, wrap in ((torch, None), (ember, ember.function)):
        trainer = _Trainer(lib, wrap)
        x, y = lib.tensor([[1.0, 2.0], [3.0, -1.0]]), lib.tensor([1.0, 0.0])
        losses = [trainer.step(x, y).item() for _ in range(4)]
        runs.append(losses + [float(trainer.running), float(trainer.metrics["n"])])
    np.testing.assert_allclose(runs[1], runs[0], rtol=1e-5)


class _ActNorm(nn.Module):
    """Glow's ActNorm: initialized from the first batch it sees, through ``.data``."""

    def __init__(self):
        super().__init__()
        self.loc = nn.Parameter(ember.zeros(3))
        self.register_buffer("initialized", ember.tensor(0, dtype=ember.uint8))

    def forward(self, x):
        if self.initialized.item() == 0:
            with ember.no_grad():
                self.loc.data.copy_(-x.mean(0))
                self.initialized.fill_(1)
        return x + self.loc


@pytest.mark.parametrize("training", [True, False])
def test_data_dependent_initialization_inside_a_captured_call(training):
    """A write through ``p.data`` is read by ``p`` later in the same trace (aliases of one
    array share their graph value), and a state tensor whose value Python read while tracing
    (the ``initialized`` flag) is part of the key: a later value retraces instead of
    re-running the branch the first trace baked in."""
    xs = [ember.tensor(np.arange(6.0, dtype=np.float32).reshape(2, 3) * (i + 1)) for i in range(4)]
    results = []
    for capture in (False, True):
        m = _ActNorm()
        opt = ember.optim.SGD(m.parameters(), lr=0.1)

        def step(x, m=m, opt=opt):
            if not training:
                with ember.no_grad():
                    return m(x).sum()
            loss = (m(x) ** 2).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss

        f = ember.function(step) if capture else step
        results.append(([f(x).item() for x in xs], m.loc.detach().numpy().copy()))
        if capture:  # (a training step's retrace reason is its first .grad)
            assert f.stats.traces == 2 and f.stats.hits == 2
            assert training or "new: the value of m.initialized" in str(f.stats)
    (want, want_loc), (got, got_loc) = results
    np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_allclose(got_loc, want_loc, rtol=1e-6)


def test_a_parameter_reads_an_update_made_through_its_data_alias():
    p = nn.Parameter(ember.ones(2))

    def f(x):
        with ember.no_grad():
            p.data.mul_(3.0)
        y = (p * x).sum()
        y.backward()
        return y

    got = ember.function(f)(ember.tensor([1.0, 2.0]))
    assert got.item() == 9.0 and p.tolist() == [3.0, 3.0] and p.grad.tolist() == [1.0, 2.0]


def test_state_filled_with_constants_in_a_captured_call():
    """A buffer's new value is a constant node of the graph (no call to write in place):
    generated code writes it back as it is."""
    buf, flag = ember.zeros(3), ember.tensor(0, dtype=ember.uint8)

    def f(x):
        with ember.no_grad():
            buf.fill_(1.0)
            flag.fill_(1)
        return x * 2

    assert ember.function(f)(ember.ones(3)).tolist() == [2.0] * 3
    assert buf.tolist() == [1.0] * 3 and flag.item() == 1


def test_modules_and_optimizers_bound_as_default_arguments_are_reached():
    m = nn.Linear(2, 1)
    opt = ember.optim.SGD(m.parameters(), lr=0.1)
    x = ember.tensor([[1.0, 2.0]])
    want = m.weight.detach().numpy() - 0.1 * np.array([[1.0, 2.0]])

    def step(x, model=m, *, optimizer=opt):
        optimizer.zero_grad()
        model(x).sum().backward()
        optimizer.step()

    ember.function(step)(x)
    np.testing.assert_allclose(m.weight.detach().numpy(), want, rtol=1e-6)


def test_assigning_data_in_a_captured_step_equals_eager():
    """``p.data = v`` (old-style manual SGD, vector_to_parameters) with a graph value is the
    functionalized write without history: the parameter stays a leaf."""
    results = []
    for capture in (False, True):
        ember.manual_seed(0)
        m = nn.Linear(2, 1)

        def step(x, m=m):
            loss = m(x).pow(2).sum()
            m.zero_grad()
            loss.backward()
            for p in m.parameters():
                p.data = p.data - 0.1 * p.grad
            vec = nn.utils.parameters_to_vector(m.parameters())
            nn.utils.vector_to_parameters(vec * 0.5, m.parameters())
            return loss

        f = ember.function(step) if capture else step
        losses = [f(ember.ones(3, 2)).item() for _ in range(3)]
        results.append((losses, m.weight.detach().numpy().copy(), m.weight.is_leaf))
    (l0, w0, leaf0), (l1, w1, leaf1) = results
    np.testing.assert_allclose(l1, l0, rtol=1e-6)
    np.testing.assert_allclose(w1, w0, rtol=1e-6)
    assert leaf0 and leaf1


def test_adversarial_step_reads_the_grad_of_a_fresh_leaf():
    """``x = x.clone().requires_grad_()`` inside a captured step is a leaf, as eagerly: a
    recorded backward sets its ``.grad`` (FGSM), and results may hold None."""
    results = []
    for capture in (False, True):
        ember.manual_seed(0)
        m = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 2))
        opt = ember.optim.SGD(m.parameters(), lr=0.1)

        def step(x, y, m=m, opt=opt):
            x = x.clone().requires_grad_(True)
            opt.zero_grad()
            nn.functional.cross_entropy(m(x), y).backward()
            x_adv = (x + 0.1 * x.grad.sign()).detach()
            loss = nn.functional.cross_entropy(m(x_adv), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss, None, {"eps": 0.1}

        f = ember.function(step) if capture else step
        x = ember.tensor(np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32))
        outs = [f(x, ember.tensor([0, 1, 1, 0])) for _ in range(3)]
        assert all(o[1] is None and o[2] == {"eps": 0.1} for o in outs)
        results.append([o[0].item() for o in outs])
    np.testing.assert_allclose(results[1], results[0], rtol=1e-6)


def test_an_argument_made_to_require_grad_takes_its_gradient_as_eagerly():
    results = []
    for capture in (False, True):
        ember.manual_seed(0)
        m = nn.Linear(3, 2)

        def step(x, m=m):
            x.requires_grad_(True)
            loss = m(x).pow(2).sum()
            loss.backward()
            return loss, x.grad.sign()

        f = ember.function(step) if capture else step
        out = []
        for i in range(2):
            x = ember.ones(2, 3) * (i + 1)
            loss, _ = f(x)
            out.append((loss.item(), x.requires_grad, x.grad.tolist()))
        x = ember.ones(2, 3)
        f(x)
        f(x)  # the same tensor again: its gradient accumulates
        out.append(x.grad.tolist())
        results.append(out)
    assert results[1] == results[0]


def test_rebinding_an_attribute_that_shares_a_parameters_memory_leaves_the_parameter():
    """A module attribute holding a parameter's detached alias (old-style spectral_norm's
    ``weight = weight_orig.detach()``) or a view of a buffer, rebound by the step: eagerly
    the old tensor's memory keeps its values, so the captured step must not write the new
    value into it; and the step is traced once."""

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 3)
            self.shadow = self.lin.weight.detach()  # shares the weight's memory
            self.register_buffer("table", ember.ones(2, 3))
            self.last = self.table[1]  # a view of the buffer

        def forward(self, x):
            self.shadow = self.lin.weight * 2.0
            self.last = self.lin.bias + 1.0
            return self.lin(x) + self.shadow.sum() + self.last.sum()

    x = ember.tensor(np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32))
    runs = []
    for capture in (False, True):
        ember.manual_seed(0)
        net = Net()
        w0 = net.lin.weight.detach().numpy().copy()
        f = ember.function(net) if capture else net
        with ember.no_grad():
            outs = [f(x).numpy().copy() for _ in range(3)]
        np.testing.assert_array_equal(net.lin.weight.detach().numpy(), w0)
        np.testing.assert_array_equal(net.table.numpy(), np.ones((2, 3)))
        np.testing.assert_array_equal(net.shadow.numpy(), 2 * w0)
        runs.append(outs)
        if capture:
            assert f.stats.traces == 1
    np.testing.assert_allclose(runs[1], runs[0], rtol=1e-6)


def test_rebinding_an_attribute_that_holds_a_buffer_leaves_the_buffer():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("table", ember.ones(3))
            self.alias = self.table  # the buffer itself, as a plain attribute

        def forward(self, x):
            self.alias = self.table * x
            return self.alias.sum()

    net = Net()
    f = ember.function(net)
    assert [f(ember.tensor(float(k))).item() for k in (2, 3, 4)] == [6.0, 9.0, 12.0]
    np.testing.assert_array_equal(net.table.numpy(), np.ones(3))
    np.testing.assert_array_equal(net.alias.numpy(), np.full(3, 4.0))


def test_old_style_spectral_norm_in_a_captured_training_step_equals_eager():
    x = ember.tensor(np.random.default_rng(1).standard_normal((4, 5)).astype(np.float32))
    runs = []
    for capture in (False, True):
        ember.manual_seed(0)
        lin = nn.utils.spectral_norm(nn.Linear(5, 3))
        opt = ember.optim.SGD(lin.parameters(), lr=0.1)

        def step(x):
            y = lin(x).sum() + lin(x * 2).sum()
            opt.zero_grad()
            y.backward()
            opt.step()
            return y

        f = ember.function(step) if capture else step
        losses = [f(x).item() for _ in range(3)]
        runs.append((losses, {k: v.numpy().copy() for k, v in lin.state_dict().items()}))
    np.testing.assert_allclose(runs[1][0], runs[0][0], rtol=1e-5)
    for k, v in runs[0][1].items():
        np.testing.assert_allclose(runs[1][1][k], v, rtol=1e-5, atol=1e-6, err_msg=k)


def test_an_optimizers_parameter_passed_as_an_argument_is_updated_as_eagerly():
    """``step(x)`` where ``x`` is also the optimizer's parameter (optimizing an input:
    Sinkhorn's points, an adversarial image): the step's update and .grad land on ``x``."""
    runs = []
    for capture in (False, True):
        x = ember.tensor([1.0, 2.0, -1.0]).requires_grad_()
        y = ember.tensor([0.5, -0.5, 0.0]).requires_grad_()
        opt = ember.optim.SGD([x, y], lr=0.1, momentum=0.9)

        def step(x, target):
            loss = ((x - target) ** 2).sum() + (x * y).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss

        f = ember.function(step) if capture else step
        target = ember.tensor([0.0, 1.0, 0.0])
        losses = [f(x, target).item() for _ in range(3)]
        losses += [f(y, target).item() for _ in range(2)]  # the other parameter as argument
        assert x.grad is None  # (zero_grad, and the last two losses do not read x)
        runs.append((losses, x.detach().numpy().copy(), y.detach().numpy().copy(), y.grad))
        if capture:
            assert "argument x: the position among the state" in f.stats.retrace_reasons[-2]
    np.testing.assert_allclose(runs[1][0], runs[0][0], rtol=1e-6)
    np.testing.assert_allclose(runs[1][1], runs[0][1], rtol=1e-6)
    np.testing.assert_allclose(runs[1][2], runs[0][2], rtol=1e-6)
    np.testing.assert_allclose(runs[1][3].numpy(), runs[0][3].numpy(), rtol=1e-6)


def test_a_modules_parameter_passed_as_an_argument_reads_its_current_value():
    lin = nn.Linear(3, 1, bias=False)

    def f(w, x):
        with ember.no_grad():
            w.mul_(0.5)  # in place on the parameter, through the argument
        return lin(x).sum() + w.sum()

    g = ember.function(f)
    x = ember.ones(2, 3)
    w0 = lin.weight.detach().numpy().copy()
    for k in range(1, 4):
        want = 0.5**k * w0.sum() * 3
        np.testing.assert_allclose(g(lin.weight, x).item(), want, rtol=1e-5)
    np.testing.assert_allclose(lin.weight.detach().numpy(), w0 / 8, rtol=1e-6)
    other = ember.ones(1, 3)
    np.testing.assert_allclose(g(other, x).item(), w0.sum() / 8 * 2 + 1.5, rtol=1e-5)
    np.testing.assert_allclose(other.numpy(), 0.5 * np.ones((1, 3)))


def test_an_optimizer_wrapped_by_another_is_found_and_stepped_as_eagerly():
    """SAM's pattern: a user Optimizer subclass holding the optimizer that steps as an
    attribute (``self.base_optimizer``), the step reaching only the wrapper."""

    class Wrapper(ember.optim.Optimizer):
        def __init__(self, params, **kwargs):
            super().__init__(params, {})
            self.base_optimizer = ember.optim.SGD(self.param_groups, **kwargs)
            self.param_groups = self.base_optimizer.param_groups

        def step(self):
            self.base_optimizer.step()

    runs = []
    for capture in (False, True):
        ember.manual_seed(0)
        lin = nn.Linear(3, 2)
        opt = Wrapper(lin.parameters(), lr=0.1, momentum=0.9)
        x = ember.ones(4, 3)

        def step(x):
            loss = lin(x).pow(2).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss

        f = ember.function(step) if capture else step
        runs.append([f(x).item() for _ in range(3)] + lin.weight.detach().numpy().ravel().tolist())
    # (eager SGD rounds p - lr * g once, PyTorch's fused add(alpha=); a recorded step, its lr
    # a graph input, multiplies first: a few float32 ulps apart after three momentum steps)
    np.testing.assert_allclose(runs[1], runs[0], rtol=1e-5)


def test_values_a_captured_call_appends_to_a_list_are_appended_by_each_call():
    """``history.append(loss.detach())`` (and a Python value) inside the step: each call
    appends, as eagerly (the trace's own appends are taken off, the run's put on)."""
    runs = []
    for capture in (False, True):
        ember.manual_seed(0)
        lin = nn.Linear(2, 1)
        opt = ember.optim.SGD(lin.parameters(), lr=0.1)
        history = []

        def step(x):
            loss = lin(x).pow(2).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            history.append(loss.detach())
            history.append(lin.weight.sum().detach())
            history.append("step")  # (a list that takes graph values: its Python ones too)
            return loss

        f = ember.function(step) if capture else step
        losses = [f(ember.ones(3, 2)).item() for _ in range(3)]
        assert history[2::3] == ["step"] * 3
        assert len(history) == 9
        runs.append(losses + [h.item() for h in history if not isinstance(h, str)])
    np.testing.assert_allclose(runs[1], runs[0], rtol=1e-6)

    bad = []

    def leaky(x):
        bad.append((x * 2, 1))
        return x

    with pytest.raises(ember.TraceError, match="container holding graph values"):
        ember.function(leaky)(ember.ones(2))
    assert bad == []


def test_retain_grad_of_an_intermediate_in_a_captured_step():
    """``h.retain_grad()`` on a value with history: a recorded backward sets its ``.grad``
    (the whole cotangent reaching it, after its hooks), accumulating over backward calls."""
    runs = []
    w0 = np.random.default_rng(0).standard_normal((3, 2)).astype(np.float32)
    for capture in (False, True):
        w = ember.tensor(w0, requires_grad=True)

        def step(x):
            h = x @ w
            h.retain_grad()
            h.register_hook(lambda g: g * 2.0)
            assert h.retains_grad
            y = (h.tanh() ** 2).sum() + h.sum()
            y.backward(retain_graph=True)
            (h**2).sum().backward()
            return h.grad.clone(), w.grad.clone()

        f = ember.function(step) if capture else step
        w.grad = None
        runs.append([a.numpy() for a in f(ember.ones(4, 3))])
    for got, want in zip(runs[1], runs[0]):
        np.testing.assert_allclose(got, want, rtol=1e-5)


def test_a_scheduler_stepped_inside_a_captured_step_is_refused_by_name():
    """The trace would run the scheduler's Python once and every later run would read the
    learning rate it left (a silent difference from eager): refused, naming the entry; under
    ember.compile the step runs eagerly instead, with eager's values."""
    results = []
    for mode in ("eager", "function", "compile"):
        ember.manual_seed(0)
        lin = nn.Linear(3, 1)
        opt = ember.optim.SGD(lin.parameters(), lr=0.1)
        sched = ember.optim.lr_scheduler.StepLR(opt, 1, gamma=0.5)

        def step(x):
            loss = lin(x).pow(2).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            return loss

        x = ember.ones(2, 3)
        if mode == "function":
            with pytest.raises(ember.TraceError, match=r"SGD.param_groups\[0\]\['lr'\]"):
                ember.function(step)(x)
            continue
        f, losses = step, []
        if mode == "compile":
            f = ember.compile(step)
            with pytest.warns(UserWarning, match="runs eagerly|eager"):
                losses.append(f(x).item())
        losses += [f(x).item() for _ in range(3 - len(losses))]
        results.append(losses + [opt.param_groups[0]["lr"]])
    np.testing.assert_allclose(results[1], results[0], rtol=1e-6)
