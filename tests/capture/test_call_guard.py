"""ember.function's call guard (capture/call_guard.py): a call like the last one skips building
its key, and every change the key would see still retraces (or picks the right program):
argument shapes, dtypes and requires_grad, grad mode, training flags, parameters and
submodules added, removed or replaced, tensors' shapes, dtypes and requires_grad, Python values
and the objects the function reaches, gradients for graphs that read them."""

import numpy as np
import pytest

import ember
from ember import nn
from ember.capture import function as function_module
from ember.nn._tables import Table, tables_version


class Net(nn.Module):
    def __init__(self, width=4):
        super().__init__()
        self.a = nn.Linear(width, width)
        self.drop = nn.Dropout(0.5)
        self.b = nn.Linear(width, 3)

    def forward(self, x):
        return self.b(self.drop(ember.relu(self.a(x))))


@pytest.fixture
def keys(monkeypatch):
    """Counts the calls that built a key (the full path: `discover` runs once per key)."""
    counter = [0]
    real = function_module.discover

    def counted(*args, **kwargs):
        counter[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(function_module, "discover", counted)
    return counter


def _close(fn, model, x):
    with ember.no_grad():
        got, want = fn(x).numpy(), model(x).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def _model():
    ember.manual_seed(0)
    return Net().eval()


def test_a_repeated_call_skips_the_key(keys):
    model = _model()
    fn = ember.function(model)
    x = ember.randn(2, 4)
    for _ in range(4):
        _close(fn, model, x)
    assert keys[0] == 1  # only the first call built a key
    assert (fn.stats.calls, fn.stats.traces, fn.stats.hits) == (4, 1, 3)
    _close(fn, model, ember.randn(2, 4))  # another tensor of the same type: still the guard
    assert keys[0] == 1


@pytest.mark.parametrize(
    "change",
    ["shape", "dtype", "rank"],
)
def test_argument_types_retrace(keys, change):
    model = _model()
    fn = ember.function(lambda x: model(x))
    x = ember.randn(2, 4)
    _close(fn, model, x)
    _close(fn, model, x)
    if change == "shape":
        y = ember.randn(5, 4)
    elif change == "dtype":
        model.double()  # (the parameters' dtypes change too)
        y = ember.randn(2, 4, dtype=ember.float64)
    else:
        y = ember.randn(1, 2, 4)
    _close(fn, model, y)
    assert fn.stats.traces == 2
    _close(fn, model, x if change != "dtype" else x.double())  # (the dtype's program: y's)
    assert fn.stats.traces == 2


def test_requires_grad_of_an_argument_and_grad_mode_pick_their_programs():
    model = _model()
    fn = ember.function(lambda x: model(x).sum())
    x = ember.randn(2, 4)
    with ember.no_grad():
        fn(x)
        fn(x)
    out = fn(x)  # grad mode on: another program, whose result is on the tape
    assert out.requires_grad
    out.backward()
    assert model.a.weight.grad is not None
    xr = ember.randn(2, 4, requires_grad=True)
    fn(xr).backward()
    assert xr.grad is not None  # (the program for an argument that requires grad)
    with ember.no_grad():
        assert not fn(xr).requires_grad
    assert fn.stats.traces >= 3


def test_training_flags_retrace():
    model = _model()
    fn = ember.function(model)
    x = ember.ones(64, 4)
    with ember.no_grad():
        a, b = fn(x).numpy(), fn(x).numpy()
        np.testing.assert_allclose(a, b)  # eval: no dropout
        model.drop.train()  # one submodule's flag
        dropped = fn(x).numpy()
        assert fn.stats.traces == 2
        assert not np.allclose(dropped, a)
        model.drop.training = False  # set directly
        np.testing.assert_allclose(fn(x).numpy(), a, rtol=1e-6)
        assert fn.stats.hits >= 2  # (back to the first program)


def test_replaced_and_added_state_is_seen(keys):
    model = _model()
    fn = ember.function(model)
    x = ember.randn(3, 4)
    _close(fn, model, x)
    _close(fn, model, x)
    model.a = nn.Linear(4, 4)  # a replaced submodule
    _close(fn, model, x)
    model.b.weight = nn.Parameter(ember.randn(3, 4))  # a replaced parameter
    _close(fn, model, x)
    model.b._parameters["bias"] = nn.Parameter(ember.randn(3))  # the table itself
    _close(fn, model, x)
    model.register_buffer("extra", ember.zeros(2))  # a new buffer the key lists
    _close(fn, model, x)
    before = fn.stats.traces
    with ember.no_grad():
        model.a.weight.mul_(3.0)  # values change in place: fed on each call, no retrace
    _close(fn, model, x)
    assert fn.stats.traces == before


def test_tensor_facts_retrace():
    model = _model()
    fn = ember.function(lambda x: model(x))
    x = ember.randn(3, 4)
    _close(fn, model, x)
    _close(fn, model, x)
    model.b.bias.requires_grad_(False)
    _close(fn, model, x)
    assert fn.stats.traces == 2
    assert "requires_grad" in fn.stats.retrace_reasons[-1]
    model.b.bias.data = ember.randn(3).double().float()  # same shape, a new array: no retrace
    _close(fn, model, x)
    assert fn.stats.traces == 2
    model.double()  # (a layer takes inputs of its own dtype only, as PyTorch's)
    with ember.no_grad():
        fn(x.double())
    assert fn.stats.traces == 3
    assert "dtype" in fn.stats.retrace_reasons[-1] or "bias" in fn.stats.retrace_reasons[-1]


def test_sequential_changes_are_seen():
    ember.manual_seed(0)
    seq = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    fn = ember.function(lambda x: seq(x))
    x = ember.randn(2, 4)
    _close(fn, seq, x)
    _close(fn, seq, x)
    seq.append(nn.Linear(4, 2))
    _close(fn, seq, x)
    del seq[0]  # renumbers: a new table
    _close(fn, seq, ember.randn(2, 4))
    assert fn.stats.traces == 3


def test_the_objects_the_function_reaches_are_seen(keys):
    first, second = _model(), Net(4).eval()

    class Holder:
        pass

    holder = Holder()
    holder.model = first
    fn = ember.function(lambda x: holder.model(x))
    x = ember.randn(2, 4)
    _close(fn, first, x)
    _close(fn, first, x)
    holder.model = second  # an attribute of a plain object the closure holds
    _close(fn, second, x)

    current = first

    def run(x):
        return current(x)

    g = ember.function(run)
    _close(g, first, x)
    _close(g, first, x)
    current = second  # a rebound closure variable
    _close(g, second, x)
    models = [first]
    h = ember.function(lambda x: models[0](x))
    _close(h, first, x)
    _close(h, first, x)
    models[0] = second  # an item of a list the closure holds
    _close(h, second, x)


GAIN = 1.0
BIASES = [0.0]


def test_python_values_are_guarded_on_repeated_calls():
    global GAIN

    def fn(x):
        return x * GAIN + BIASES[0]

    f = ember.function(fn)
    x = ember.ones(3)
    try:
        for gain in (1.0, 1.0, 2.0, 2.0, 3.0):
            GAIN = gain
            np.testing.assert_allclose(f(x).numpy(), np.full(3, gain, np.float32))
        BIASES[0] = 5.0  # a list changed in place
        np.testing.assert_allclose(f(x).numpy(), np.full(3, 8.0, np.float32))
    finally:
        GAIN = 1.0
        BIASES[0] = 0.0
    assert f.stats.traces == 4


def test_python_arguments_are_compared_by_identity_then_value():
    model = _model()

    def fn(x, scale, mode):
        return model(x) * scale if mode == "scale" else model(x)

    f = ember.function(fn)
    x = ember.randn(2, 4)
    with ember.no_grad():
        want = model(x).numpy()
        np.testing.assert_allclose(f(x, 2.0, "scale").numpy(), want * 2, rtol=1e-6)
        np.testing.assert_allclose(f(x, 2.0, "scale").numpy(), want * 2, rtol=1e-6)
        np.testing.assert_allclose(f(x, 3.0, "scale").numpy(), want * 3, rtol=1e-6)
        np.testing.assert_allclose(f(x, 3.0, "plain").numpy(), want, rtol=1e-6)
        np.testing.assert_allclose(f(x, scale=3.0, mode="plain").numpy(), want, rtol=1e-6)
    assert f.stats.traces == 4


def test_an_input_signature_is_checked_on_every_call():
    model = _model()
    fn = ember.function(model, input_signature=[ember.TensorSpec((None, 4))])
    _close(fn, model, ember.randn(2, 4))
    _close(fn, model, ember.randn(5, 4))
    assert fn.stats.traces == 1
    with pytest.raises(ember.ShapeError, match="input signature"):
        fn(ember.randn(2, 5))
    with pytest.raises(ember.EmberError, match="dtype"):
        fn(ember.randn(2, 4, dtype=ember.float64))


def test_gradients_are_guarded_for_graphs_that_read_them():
    ember.manual_seed(0)
    w = ember.randn(3, requires_grad=True)

    def step(x):
        loss = (w * x).sum()
        loss.backward()
        with ember.no_grad():
            w.sub_(0.1 * w.grad)
        return loss

    f = ember.function(step)
    x = ember.ones(3)
    w_eager = w.detach().clone().requires_grad_(True)
    for _ in range(4):
        f(x)
        (w_eager * x).sum().backward()
        with ember.no_grad():
            w_eager.sub_(0.1 * w_eager.grad)
        np.testing.assert_allclose(w.detach().numpy(), w_eager.detach().numpy(), rtol=1e-6)
        np.testing.assert_allclose(
            w.grad.detach().numpy(), w_eager.grad.detach().numpy(), rtol=1e-6
        )
    w.grad = None  # the graph reads the gradient: its presence is part of the key
    w_eager.grad = None
    f(x)
    (w_eager * x).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), w_eager.grad.numpy(), rtol=1e-6)


def test_a_compiled_module_sees_eval_and_train():
    model = _model()
    compiled = ember.compile(model)
    x = ember.ones(64, 4)
    with ember.no_grad():
        a = compiled(x).numpy()
        np.testing.assert_allclose(compiled(x).numpy(), a)
        compiled.train()
        assert not np.allclose(compiled(x).numpy(), a)
        compiled.eval()
        np.testing.assert_allclose(compiled(x).numpy(), a, rtol=1e-6)


def test_tables_note_every_change():
    table = Table(a=1)
    for change in (
        lambda t: t.__setitem__("b", 2),
        lambda t: t.__delitem__("b"),
        lambda t: t.update(c=3),
        lambda t: t.pop("c"),
        lambda t: t.setdefault("d", 4),
        lambda t: t.popitem(),
        lambda t: t.__ior__({"e": 5}),
        lambda t: t.clear(),
        lambda t: Table(),
    ):
        before = tables_version()
        change(table)
        assert tables_version() != before
    module = nn.Linear(2, 2)
    assert all(type(t) is Table for t in (module._parameters, module._buffers, module._modules))
    import copy
    import pickle

    for copied in (copy.deepcopy(module), pickle.loads(pickle.dumps(module))):
        assert type(copied._parameters) is Table


def test_results_of_every_structure_are_each_calls_own():
    # a forward pass returns the program's results as they are (one tensor, a tuple, or the
    # structure rebuilt): through the guard too, each call's outputs are new tensors, a result
    # returned twice is two tensors, and the structure is the function's
    from collections import namedtuple

    Pair = namedtuple("Pair", "a b")
    outputs = {
        "one": lambda y: y,
        "tuple": lambda y: (y, y * 2.0),
        "same twice": lambda y: (y, y),
        "list": lambda y: [y, y + 1.0],
        "dict": lambda y: {"h": y, "n": None},
        "named": lambda y: Pair(y, y - 1.0),
    }
    flat = {
        "one": lambda r: [r],
        "tuple": list,
        "same twice": list,
        "list": list,
        "dict": lambda r: [r["h"]],
        "named": list,
    }
    rng = np.random.default_rng(0)
    for name, shape in outputs.items():
        fn = ember.function(lambda x, shape=shape: shape(ember.relu(x) * 3.0))
        seen = []
        for _ in range(3):
            x = rng.standard_normal((2, 3)).astype(np.float32)
            with ember.no_grad():
                got = fn(ember.tensor(x))
            want = shape(ember.relu(ember.tensor(x)) * 3.0)
            assert type(got) is type(want), name
            if name == "dict":
                assert got["n"] is None
            for g, e in zip(flat[name](got), flat[name](want)):
                np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-6, err_msg=name)
            seen.append((flat[name](got), [e.numpy() for e in flat[name](want)]))
        if name == "same twice":
            assert got[0] is not got[1] and not np.shares_memory(got[0].numpy(), got[1].numpy())
        assert fn.stats.hits == 2, name
        for tensors, arrays in seen:  # no later call wrote into an earlier call's results
            for g, e in zip(tensors, arrays):
                np.testing.assert_allclose(g.numpy(), e, rtol=1e-6, err_msg=name)


def test_calls_alternating_between_signatures_reuse_their_guards(keys):
    model = _model()
    fn = ember.function(lambda x: model(x))
    xs = [ember.randn(n, 4) for n in (2, 5, 1)]
    for x in xs:
        _close(fn, model, x)
    assert keys[0] == 3
    for x in xs * 2 + xs[::-1]:  # each a recent key's: no key built, the latest graph its own
        _close(fn, model, x)
        assert fn.graph.inputs[0].type.shape[0] == x.shape[0]
    assert keys[0] == 3 and fn.stats.traces == 3
    with ember.no_grad():  # (each guard still checks what it was recorded with)
        model.b.weight.data = ember.randn(3, 4)
        _close(fn, model, xs[0])
    assert keys[0] == 4
    # a program the bounded cache dropped is traced again, never run by its old guard
    small = ember.function(lambda x: model(x), cache_size=1)
    for x in xs[:2] * 2:
        _close(small, model, x)
    assert small.stats.traces == 4 and small.stats.evictions == 3


def test_an_array_the_function_reads_is_guarded_by_its_contents():
    table = np.array([1.0, 2.0, 3.0], np.float32)
    f = ember.function(lambda x: x * ember.tensor(table))
    x = ember.ones(3)
    for step in range(6):
        if step == 3:
            table[1] = 7.0  # changed in place: the guard compares the contents
        np.testing.assert_allclose(f(x).numpy(), table)
    assert f.stats.traces == 2 and f.stats.hits == 4


def test_a_repeated_call_skips_the_key_after_the_meta_device_was_used(keys):
    """A meta tensor made anywhere in the process (here, or by an earlier test) must not send
    every later call down the full path: the guard still holds, and meta arguments and meta
    models still run their ops' shape rules eagerly."""
    ember.empty(2, device="meta")
    model = _model()
    fn = ember.function(model)
    x = ember.randn(2, 4)
    for _ in range(4):
        _close(fn, model, x)
    assert keys[0] == 1 and (fn.stats.traces, fn.stats.hits) == (1, 3)
    meta_model = _model().to("meta")
    out = ember.function(meta_model)(x.to("meta"))
    assert out.is_meta and tuple(out.shape) == (2, 3)
    stateless = ember.function(lambda v: (v * 2).sum(-1))
    for _ in range(2):
        np.testing.assert_allclose(stateless(x).numpy(), (x * 2).sum(-1).numpy(), rtol=1e-6)
    # a meta argument of the guarded call's type: its ops' shape rules, not the program
    out = stateless(x.to("meta"))
    assert out.is_meta and tuple(out.shape) == (2,) and stateless.stats.traces == 1
