"""What hunt45's programs found, reduced, each against PyTorch.

A traced ``.item()`` (graph/traced_item.py) stood for its number in arithmetic and in a tensor's
operators, but not as an op's scalar argument: in a captured function ``x.clamp(max=m.item())``
and ``ember.full(shape, n.item())`` raised a TypeError ("unsupported dtype <.item() of a traced
tensor>") from the dtype promotion, and ``x.masked_fill(mask, v.item())``, ``x.mul_(s.item())``,
``x.fill_(v.item())``, ``full_like``, ``ember.tensor([a.item(), n])`` and
``ember.tensor(p.tolist())`` a TraceError, though none needs the number in Python. The item is a
weak scalar in ``dtypes.result_type`` and ``ops.elementwise.to_tensor``/``promote`` now; clamp,
full and tensor take its graph value. An index that is an object with ``__index__`` (which
PyTorch takes as an int) was a TypeError; an int item of a traced value there raises its
TraceError now.

A traced ``.tolist()`` held ``detach()``'s alias of its tensor, which reads the tensor's later
in-place writes: rows or elements taken from the list after a write (``rows = y.tolist();
y.fill_(7); rows[1]``) had the new values, where eager's list holds the old ones. Items and lists
hold a snapshot now (graph/traced_item.py ``_snapshot``).

A captured function's dataclass result (``return StepOutput(loss=..., logits=...)``) was kept as
a constant: every call returned the trace's symbolic tensors, and an ``.item()`` in it was
refused as kept outside the results; an OrderedDict or defaultdict result came back a plain dict.
graph/tree.py's structures have a node for each now (`DataclassKind`, `DictKind`).

``x.is_floating_point()``, ``x.element_size()`` and ``x.nbytes`` raised AttributeError under
ember.function (they were the eager Tensor's own methods, reading its array).

``torch._assert`` (torchvision's models check input shapes with it) and the
``torch.utils.hooks.RemovableHandle`` path (type annotations) were missing.

A captured function that stored a graph value under a new key of a dict it reaches
(``features["h"] = h.detach()`` into an empty global dict) left the trace's SymbolicTensor there
after the first call: capture/writebacks.py's slots were the keys the dict had before the trace.
A forward hook storing its module's output into a dict (feature extraction) left the trace's
SymbolicTensor there on every call: the user's forward hooks' globals and closures are slots now.
"""

import collections
import dataclasses

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

X = np.array([[1.5, -2.0, 0.25], [3.0, 0.5, -1.0]], dtype=np.float32)


def _both(fn, *arrays):
    """``fn(lib, *tensors)`` on PyTorch, eagerly on ember and under ember.function."""
    expected = fn(torch, *[torch.tensor(a) for a in arrays])
    eager = fn(ember, *[ember.tensor(a) for a in arrays])
    captured = ember.function(lambda *a: fn(ember, *a))(*[ember.tensor(a) for a in arrays])
    return expected, eager, captured


def _same(expected, *actual):
    for a in actual:
        if isinstance(expected, torch.Tensor):
            assert str(a.dtype).split(".")[-1] == str(expected.dtype).split(".")[-1]
            np.testing.assert_allclose(a.numpy(), expected.numpy(), rtol=1e-6)
        else:
            assert type(a) is type(expected) and a == pytest.approx(expected)


@pytest.mark.parametrize(
    "fn",
    [
        lambda T, x: x.clamp(max=x.mean().item()),
        lambda T, x: T.clamp(x, min=-x.std().item(), max=2.0),
        lambda T, x: T.arange(6).clamp(max=x.max().item()),  # int tensor, float bound: float
        lambda T, x: T.arange(6).clamp(min=(x > 0).sum().item()),  # int bound: stays int64
        lambda T, x: T.full((2, 3), x.max().item()),
        lambda T, x: T.full((2,), (x > 0).sum().item()),  # an int: int64
        lambda T, x: T.full((2,), (x > 0).any().item()),  # a bool: bool
        lambda T, x: T.full_like(x, x.min().item()),
        lambda T, x: x.new_full((3,), x.sum().item()),
        lambda T, x: x.clone().fill_(x.mean().item()),
        lambda T, x: T.zeros(3, dtype=T.int32).fill_(x.sum().item()),
        lambda T, x: x.masked_fill(x < 0, x.min().item()),
        lambda T, x: x.clone().mul_(x.mean().item()),
        lambda T, x: x.mul(x.abs().max().item()),
        lambda T, x: T.arange(4).add((x > 0).float().mean().item()),  # int + float: float32
        lambda T, x: T.tensor(x.sum().item()),
        lambda T, x: T.tensor([[x.sum().item(), 2], [True, (x > 0).sum().item()]]),
        lambda T, x: T.tensor([(x > 0).sum().item(), x.numel()]),  # ints: int64
        lambda T, x: T.tensor([(x > 0).sum().item(), 3], dtype=T.float64),
        lambda T, x: T.tensor(x.double().tolist()),  # Python floats: the default float dtype
        lambda T, x: T.tensor(x.argmax(1).tolist()) + 1,
        lambda T, x: T.as_tensor([x.max().item(), 1.5]),
        lambda T, x: x.new_tensor([x.max().item(), 1]),
        lambda T, x: T.zeros(2, 3).scatter(1, T.tensor([[0], [2]]), x.max().item()),
        lambda T, x: T.zeros(2, 3).scatter_(1, T.tensor([[0], [2]]), value=x.min().item()),
        lambda T, x: T.where(x > 0, x.max().item(), x.min().item()),
    ],
)
def test_item_as_scalar_operand(fn):
    expected, eager, captured = _both(fn, X)
    _same(expected, eager, captured)


def test_item_clamp_keeps_gradient_to_input():
    def fn(T, x):
        x = x.detach().requires_grad_()
        y = x.clamp(-x.abs().mean().item(), x.abs().mean().item())
        (g,) = T.autograd.grad((y * y).sum(), [x])
        return g

    expected, eager, captured = _both(fn, X)
    _same(expected, eager, captured)


class _Index:
    def __init__(self, value):
        self.value = value

    def __index__(self):
        return self.value


def test_index_objects_index_as_ints():
    for lib in (torch, ember):
        x = lib.arange(12).reshape(3, 4)
        got = [x[_Index(1)], x[_Index(-1), _Index(2)], x[:, _Index(0)]]
        if lib is torch:
            expected = [g.numpy() for g in got]
        else:
            for e, g in zip(expected, got):
                np.testing.assert_array_equal(g.numpy(), e)


def test_traced_int_item_as_index_is_a_trace_error():
    f = ember.function(lambda x, k: x[k.argmax().item()])
    with pytest.raises(ember.TraceError, match="as an index"):
        f(ember.arange(6.0).reshape(3, 2), ember.tensor([0.0, 2.0, 1.0]))


def _later_writes(T, x):
    y = x.clone()
    rows = y.tolist()
    y[1, 2] = 9.0
    second = rows[1]  # indexed after the write: still the values .tolist() saw
    v = y[0, 1].item()
    y.add_(1)
    return second, rows[0][1], sum(rows[1]), v - 1, [r for r in rows]


def test_tolist_and_item_do_not_see_later_writes():
    # a traced .tolist() held detach()'s alias of the tensor, which reads its later in-place
    # writes: rows taken from the list after ``y[1, 2] = 9.0`` had the 9
    expected, eager, captured = _both(_later_writes, X)
    assert eager == expected
    assert captured == expected


@dataclasses.dataclass
class _Out:
    loss: object
    logits: object
    note: str = "train"


@dataclasses.dataclass(frozen=True)
class _Frozen:
    value: object


def test_dataclass_and_dict_subclass_results():
    # a dataclass result was kept as a constant: each call returned the trace's symbolic
    # tensors (and an .item() in it was refused as kept outside the results); an OrderedDict
    # or defaultdict came back a plain dict
    def fn(T, x):
        metrics = collections.OrderedDict(max=x.max().item(), min=x.min())
        groups = collections.defaultdict(list, rows=[x[0], x[1].sum().item()])
        return _Out(x.sum().item(), x * 2), metrics, groups, _Frozen(x.mean())

    expected, eager, captured = _both(fn, X)
    f = ember.function(lambda x: fn(ember, x))
    again = f(ember.tensor(X * 3))
    for got, scale in ((eager, 1), (captured, 1), (again, 3)):
        out, metrics, groups, frozen = got
        assert type(out) is _Out and out.note == "train"
        assert out.loss == pytest.approx(expected[0].loss * scale)
        np.testing.assert_allclose(out.logits.numpy(), expected[0].logits.numpy() * scale)
        assert type(metrics) is collections.OrderedDict and list(metrics) == ["max", "min"]
        assert metrics["max"] == pytest.approx(expected[1]["max"] * scale)
        assert type(groups) is collections.defaultdict and groups.default_factory is list
        assert groups["rows"][1] == pytest.approx(expected[2]["rows"][1] * scale)
        assert type(frozen) is _Frozen
        assert frozen.value.item() == pytest.approx(expected[3].value.item() * scale)


def test_dtype_facts_of_a_traced_tensor():
    # x.is_floating_point(), x.element_size() and x.nbytes were the eager Tensor's own methods:
    # under ember.function they raised AttributeError
    def fn(T, x):
        y = x if x.is_floating_point() else x.float()  # (a common guard in user code)
        n = x.long()
        return (
            y * 2,
            x.is_floating_point(),
            n.is_floating_point(),
            x.element_size(),
            x.half().element_size(),
            x.nbytes,
            n.nbytes,
        )

    expected, eager, captured = _both(fn, X)
    for got in (eager, captured):
        np.testing.assert_array_equal(got[0].numpy(), expected[0].numpy())
        assert got[1:] == expected[1:]


def test_torch_assert_and_hooks_path():
    for lib in (torch, ember):
        lib._assert(lib.ones(2, 3).dim() == 2, "unused")
        with pytest.raises(AssertionError, match="expected 3 dims"):
            lib._assert(lib.ones(2).dim() == 3, "expected 3 dims")
        with pytest.raises(AssertionError, match="positive"):
            lib._assert(lib.tensor(-1.0) > 0, "positive")
        handle = lib.nn.Linear(2, 2).register_forward_hook(lambda *args: None)
        assert isinstance(handle, lib.utils.hooks.RemovableHandle)
    f = ember.function(lambda x: (ember._assert(x.shape[-1] == 3, "three"), x * 2)[1])
    np.testing.assert_array_equal(f(ember.ones(2, 3)).numpy(), np.full((2, 3), 2.0))


_FEATURES: dict = {}


def test_graph_value_stored_under_a_new_dict_key():
    # a captured function storing a graph value under a key its global dict did not have yet
    # (features["h"] = h.detach() into an empty dict) left the trace's SymbolicTensor there
    # after the first call; keys the dict had were already set after each run
    _FEATURES.clear()
    lin = ember.nn.Linear(2, 2)

    def step(x):
        h = lin(x)
        _FEATURES["h"] = h.detach()
        return h.sum()

    f = ember.function(step)
    for k in (1.0, 2.0, 3.0):
        x = ember.full((2,), k)
        f(x)
        with ember.no_grad():
            expected = lin(x)
        assert type(_FEATURES["h"]) is ember.Tensor
        np.testing.assert_allclose(_FEATURES["h"].numpy(), expected.numpy(), rtol=1e-6)


def test_feature_extraction_hook_under_capture():
    # a forward hook storing its module's output into a dict (feature extraction) left the
    # trace's SymbolicTensor there: the hook's globals and closure were no slots of the trace
    def run(lib, capture):
        lib.manual_seed(0)
        model = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.ReLU(), lib.nn.Linear(4, 2))
        with lib.no_grad():
            for p in model.parameters():
                p.copy_(lib.linspace(-1, 1, p.numel()).reshape(p.shape))
        features = {}

        def save(name):
            def hook(module, inputs, output):
                features[name] = output.detach()

            return hook

        model[1].register_forward_hook(save("relu"))
        model[2].register_forward_hook(save("out"))
        step = lambda x: model(x).sum()  # noqa: E731
        if capture:
            step = ember.function(step)
        got = []
        for k in (1.0, 2.0):
            step(lib.full((2, 3), k) * lib.tensor([1.0, -0.5, 0.25]))
            got.append({n: v.numpy().copy() for n, v in features.items()})
        return got

    expected = run(torch, False)
    for capture in (False, True):
        for want, got in zip(expected, run(ember, capture)):
            assert set(got) == set(want)
            for name in want:
                np.testing.assert_allclose(got[name], want[name], rtol=1e-6)
