"""``ember.compile``: torch.compile's interface over ember.function, for modules and functions."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import ember
from ember import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.bn = nn.BatchNorm1d(8)
        self.drop = nn.Dropout(0.5)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x):
        return self.fc2(self.drop(self.bn(self.fc1(x)).relu()))


def _data(seed=0):
    rng = np.random.default_rng(seed)
    return ember.tensor(rng.standard_normal((6, 4)).astype(np.float32))


def test_compiled_module_is_a_module_over_the_original():
    ember.manual_seed(0)
    model = Net()
    compiled = ember.compile(model)
    assert isinstance(compiled, nn.Module) and compiled._orig_mod is model
    assert compiled.fc1 is model.fc1  # attribute access reaches the model
    assert [p is q for p, q in zip(compiled.parameters(), model.parameters())] == [True] * 6
    names = [n for n, _ in compiled.named_parameters()]
    assert names[0] == "_orig_mod.fc1.weight"  # PyTorch's OptimizedModule prefixes the same way
    assert set(compiled.state_dict()) == {f"_orig_mod.{k}" for k in model.state_dict()}
    assert "OptimizedModule" in repr(compiled) and "(_orig_mod): Net" in repr(compiled)
    with pytest.raises(AttributeError, match="no_such_layer"):
        compiled.no_such_layer  # noqa: B018


def test_compiled_module_deepcopies():
    ember.manual_seed(0)
    compiled = ember.compile(nn.Linear(3, 2))
    twin = copy.deepcopy(compiled)
    assert twin._orig_mod is not compiled._orig_mod
    x = ember.ones(1, 3)
    np.testing.assert_array_equal(twin(x).detach().numpy(), compiled(x).detach().numpy())
    with ember.no_grad():
        twin._orig_mod.weight.add_(1.0)
    assert not np.allclose(
        twin(x).detach().numpy(), compiled(x).detach().numpy()
    )  # its own parameters
    assert twin.compiled_function is not compiled.compiled_function


def test_compiled_forward_backward_equals_eager():
    ember.manual_seed(0)
    model = Net()
    twin = copy.deepcopy(model)
    compiled = ember.compile(model)
    model.eval(), twin.eval()
    compiled.eval()
    x = _data()
    np.testing.assert_allclose(
        compiled(x).detach().numpy(), twin(x).detach().numpy(), rtol=1e-5, atol=1e-6
    )
    # training mode with dropout: gradients of the eager and compiled call, same random draws
    compiled.train(), twin.train()
    assert model.training and all(m.training for m in model.modules())
    ember.manual_seed(3)
    loss = (compiled(x) ** 2).mean()
    loss.backward()
    ember.manual_seed(3)
    ref = (twin(x) ** 2).mean()
    ref.backward()
    np.testing.assert_allclose(loss.item(), ref.item(), rtol=1e-5)
    for (name, p), q in zip(model.named_parameters(), twin.parameters()):
        assert p.grad is not None, name
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(model.bn.running_mean.numpy(), twin.bn.running_mean.numpy(), 1e-5)


def test_train_eval_switch_retraces():
    ember.manual_seed(0)
    model = Net()
    compiled = ember.compile(model)
    x = _data()
    compiled.eval()
    a, b = compiled(x), compiled(x)
    np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())  # no dropout in eval mode
    compiled.train()
    c = compiled(x)
    assert not np.allclose(c.detach().numpy(), a.detach().numpy())  # dropout and batch statistics
    fn = compiled.compiled_function
    assert fn.stats.traces == 2 and "training flags" in fn.stats.retrace_reasons[0]


def test_state_dict_round_trip_and_to():
    ember.manual_seed(0)
    compiled = ember.compile(Net())
    other = ember.compile(Net())
    other.load_state_dict(compiled.state_dict())
    compiled.eval(), other.eval()
    x = _data()
    np.testing.assert_array_equal(compiled(x).detach().numpy(), other(x).detach().numpy())
    assert compiled.to("cpu") is compiled
    compiled.to(ember.float64)
    assert compiled.fc1.weight.dtype is ember.float64
    assert compiled(x.double()).dtype is ember.float64


def test_training_loop_through_compiled_module():
    ember.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))
    twin = copy.deepcopy(model)
    compiled = ember.compile(model)
    opt = ember.optim.SGD(compiled.parameters(), lr=0.1)
    opt_twin = ember.optim.SGD(twin.parameters(), lr=0.1)
    x, y = _data(1), _data(2)[:, :1]
    for _ in range(5):
        for net, o in ((compiled, opt), (twin, opt_twin)):
            o.zero_grad()
            loss = ((net(x) - y) ** 2).mean()
            loss.backward()
            o.step()
    for p, q in zip(model.parameters(), twin.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_function_decorators_and_options():
    @ember.compile
    def f(a, b):
        return (a * b + a.sin()).sum()

    @ember.compile(mode="max-autotune", fullgraph=True)
    def g(a):
        return a.relu() * 2

    a = ember.tensor([1.0, -2.0, 3.0], requires_grad=True)
    out = f(a, ember.ones(3))
    out.backward()
    np.testing.assert_allclose(a.grad.numpy(), 1 + np.cos([1.0, -2.0, 3.0]), rtol=1e-6)
    np.testing.assert_array_equal(g(ember.tensor([-1.0, 2.0])).numpy(), [0.0, 4.0])
    assert f.__name__ == "f" and g.__name__ == "g"
    h = ember.compile(lambda x: x + 1, backend="interpreter", options={"opt_level": 0})
    assert h(ember.ones(2)).numpy().tolist() == [2.0, 2.0]
    assert h._compiled.function.executor == "interpreter"


def test_disable_eager_backend_and_bad_arguments():
    def f(x):
        return x * 2

    assert ember.compile(f, disable=True) is f
    model = nn.Linear(2, 2)
    assert ember.compile(model, disable=True) is model
    eager = ember.compile(f, backend="eager")
    assert eager(ember.ones(1)).item() == 2.0 and eager._compiled.function is None
    with pytest.raises(ValueError, match="mode"):
        ember.compile(f, mode="fastest")
    with pytest.raises(ValueError, match="backend"):
        ember.compile(f, backend="tensorrt")
    with pytest.raises(TypeError, match="callable backend"):
        ember.compile(f, backend=lambda gm, inputs: gm)
    with pytest.raises(TypeError, match="triton.no_such_setting"):
        ember.compile(f, options={"triton.no_such_setting": True})
    with pytest.raises(TypeError, match="'triton'"):  # (a group, not a setting)
        ember.compile(f, options={"triton": True})
    # inductor's own settings are accepted and change nothing, as in ember._inductor.config
    tuned = ember.compile(f, options={"triton.cudagraphs": False, "max_autotune": True})
    assert tuned(ember.ones(1)).item() == 2.0
    with pytest.raises(TypeError):
        ember.compile(3)


def test_dynamic_traces_the_batch_once():
    @ember.compile(dynamic=True)
    def f(x):
        return x.sum(dim=1)

    for n in (2, 5, 9):
        np.testing.assert_allclose(f(ember.ones(n, 3)).numpy(), np.full(n, 3.0))
    assert f._compiled.function.stats.traces == 1

    @ember.compile(dynamic=False)
    def g(x):
        return x.sum(dim=1)

    for n in (2, 5):
        g(ember.ones(n, 3))
    assert g._compiled.function.stats.traces == 2


def test_graph_break_falls_back_or_raises_with_fullgraph():
    def f(x):
        if x.sum() > 0:  # Python control flow on a value: no whole-graph capture
            return x * 2
        return x * 3

    loose = ember.compile(f)
    with pytest.warns(UserWarning, match="runs eagerly"):
        assert loose(ember.ones(2)).numpy().tolist() == [2.0, 2.0]
    assert loose(-ember.ones(2)).numpy().tolist() == [-3.0, -3.0]
    strict = ember.compile(f, fullgraph=True)
    with pytest.raises(ember.TraceError):
        strict(ember.ones(2))


def test_compiled_module_inside_a_compiled_step():
    ember.manual_seed(0)
    model = nn.Linear(3, 1)
    twin = copy.deepcopy(model)
    compiled = ember.compile(model)

    def make_step(net):
        opt = ember.optim.SGD(net.parameters(), lr=0.05)

        def step(x, y):
            opt.zero_grad()
            loss = ((net(x) - y) ** 2).mean()
            loss.backward()
            opt.step()
            return loss

        return step

    step, eager_step = ember.function(make_step(compiled)), make_step(twin)
    x, y = _data(3)[:, :3], ember.zeros(6, 1)
    for _ in range(5):
        np.testing.assert_allclose(step(x, y).item(), eager_step(x, y).item(), rtol=1e-5)
    np.testing.assert_allclose(
        model.weight.detach().numpy(), twin.weight.detach().numpy(), rtol=1e-5
    )
