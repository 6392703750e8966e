"""The Module system: registration, iteration, modes, state_dict loading and its errors, hooks,
dtype conversion, containers and Parameter semantics. These tests need no peer."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import ember
from ember import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 4)
        self.bn = nn.BatchNorm1d(4)
        self.scale = nn.Parameter(ember.ones(4))
        self.register_buffer("counter", ember.zeros(1))
        self.register_buffer("scratch", ember.zeros(2), persistent=False)

    def forward(self, x):
        return self.bn(self.fc(x)) * self.scale


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()
        self.head = nn.Sequential(nn.ReLU(), nn.Linear(4, 2))
        self.shared = self.head[1]  # the same module twice: iterated once

    def forward(self, x):
        return self.head(self.block(x))


def test_registration_and_iteration_order():
    net = Net()
    names = [n for n, _ in net.named_parameters()]
    assert names == [
        "block.scale",
        "block.fc.weight",
        "block.fc.bias",
        "block.bn.weight",
        "block.bn.bias",
        "head.1.weight",
        "head.1.bias",
    ]
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in net.parameters())
    assert [n for n, _ in net.named_buffers()] == [
        "block.counter",
        "block.scratch",
        "block.bn.running_mean",
        "block.bn.running_var",
        "block.bn.num_batches_tracked",
    ]
    assert [n for n, _ in net.named_children()] == ["block", "head", "shared"]
    assert [n for n, _ in net.named_modules()] == [
        "",
        "block",
        "block.fc",
        "block.bn",
        "head",
        "head.0",
        "head.1",
    ]
    assert len(list(net.named_modules(remove_duplicate=False))) == 8
    assert [n for n, _ in net.block.named_parameters(recurse=False)] == ["scale"]
    assert net.get_submodule("head.1") is net.shared
    assert net.get_parameter("block.fc.bias") is net.block.fc.bias
    assert net.get_buffer("block.bn.running_var") is net.block.bn.running_var
    with pytest.raises(AttributeError, match="nope"):
        net.get_submodule("block.nope")


def test_state_dict_keys_dtypes_and_persistence():
    state = Net().state_dict()
    assert list(state) == [
        "block.scale",
        "block.counter",
        "block.fc.weight",
        "block.fc.bias",
        "block.bn.weight",
        "block.bn.bias",
        "block.bn.running_mean",
        "block.bn.running_var",
        "block.bn.num_batches_tracked",
        "head.1.weight",
        "head.1.bias",
        "shared.weight",
        "shared.bias",
    ]
    assert state["block.bn.num_batches_tracked"].dtype == ember.int64
    assert not state["block.fc.weight"].requires_grad  # detached unless keep_vars
    assert Net().state_dict(keep_vars=True)["block.fc.weight"].requires_grad


def test_load_state_dict_round_trip_and_copy_semantics():
    a, b = Net(), Net()
    weight = b.block.fc.weight
    result = b.load_state_dict(a.state_dict())
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert repr(result) == "<All keys matched successfully>"
    assert b.block.fc.weight is weight  # values are copied into the existing parameters
    for (name, pa), (_, pb) in zip(a.state_dict().items(), b.state_dict().items()):
        np.testing.assert_array_equal(pa.numpy(), pb.numpy(), err_msg=name)
    state = a.state_dict()
    state["block.fc.weight"] = state["block.fc.weight"].numpy() * 0 + 2.0  # arrays are accepted
    b.load_state_dict(state)
    assert np.all(b.block.fc.weight.detach().numpy() == 2.0)


def test_load_state_dict_strict_errors_load_nothing():
    a, b = Net(), Net()
    before = {k: v.numpy().copy() for k, v in b.state_dict().items()}
    state = dict(a.state_dict())
    del state["head.1.bias"]
    state["block.extra"] = ember.zeros(1)
    with pytest.raises(ember.StateDictError) as info:
        b.load_state_dict(state)
    message = str(info.value)
    assert '"block.extra"' in message and '"head.1.bias"' in message
    assert "nothing was loaded" in message
    for k, v in b.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), before[k])
    result = b.load_state_dict(state, strict=False)
    assert result.missing_keys == ["head.1.bias"]
    assert result.unexpected_keys == ["block.extra"]
    np.testing.assert_array_equal(
        b.block.fc.weight.detach().numpy(), a.block.fc.weight.detach().numpy()
    )


def test_load_state_dict_wrong_shape_names_key_and_shapes():
    net = Net()
    before = net.block.fc.bias.detach().numpy().copy()
    state = dict(Net().state_dict())
    state["block.fc.weight"] = ember.zeros(4, 5)
    with pytest.raises(ember.StateDictError) as info:
        net.load_state_dict(state, strict=False)  # shapes are checked even when not strict
    message = str(info.value)
    assert "block.fc.weight" in message and "(4, 5)" in message and "(4, 3)" in message
    np.testing.assert_array_equal(net.block.fc.bias.detach().numpy(), before)  # not half-loaded
    with pytest.raises(TypeError):
        net.load_state_dict([("block.fc.weight", ember.zeros(4, 3))])


def test_load_state_dict_hints_at_wrapper_prefix():
    net = nn.Linear(2, 2)
    state = {"module." + k: v for k, v in net.state_dict().items()}
    with pytest.raises(ember.StateDictError, match='"module." prefix'):
        net.load_state_dict(state)


def test_train_eval_apply_requires_grad_zero_grad():
    net = Net()
    assert net.training and net.block.bn.training
    net.eval()
    assert not any(m.training for m in net.modules())
    net.train()
    assert all(m.training for m in net.modules())
    seen = []
    net.apply(lambda m: seen.append(type(m).__name__))
    assert seen[-1] == "Net" and seen[0] == "Linear"  # children first
    net(ember.randn(5, 3)).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad(set_to_none=False)
    assert all(p.grad is not None and not np.any(p.grad.numpy()) for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())
    net.requires_grad_(False)
    assert not any(p.requires_grad for p in net.parameters())
    with pytest.raises(ValueError):
        net.train("yes")


def test_setattr_rules():
    m = nn.Module()
    m.w = nn.Parameter(ember.zeros(2))
    with pytest.raises(TypeError, match="parameter 'w'"):
        m.w = ember.zeros(2)
    m.w = None
    assert "w" in m._parameters and m.w is None and list(m.parameters()) == []
    m.sub = nn.Linear(1, 1)
    with pytest.raises(TypeError, match="child module 'sub'"):
        m.sub = 3
    m.register_buffer("buf", ember.zeros(1))
    m.buf = ember.ones(1)  # a registered buffer may be replaced by a tensor
    assert m._buffers["buf"].item() == 1.0
    m.plain = nn.Buffer(ember.ones(2), persistent=False)
    assert "plain" in m._buffers and "plain" not in m.state_dict()
    del m.sub
    assert "sub" not in m._modules
    with pytest.raises(KeyError):
        m.register_buffer("a.b", ember.zeros(1))
    with pytest.raises(AttributeError, match="no attribute 'missing'"):
        m.missing  # noqa: B018

    class Forgot(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(ember.zeros(1))

    with pytest.raises(AttributeError, match="before Module.__init__"):
        Forgot()


def test_forward_hooks():
    lin = nn.Linear(2, 2)
    calls = []
    h1 = lin.register_forward_pre_hook(lambda m, args: (args[0] * 2,))
    h2 = lin.register_forward_hook(lambda m, args, out: calls.append(out.shape) or out + 1)
    x = ember.ones(1, 2)
    expected = lin.forward(x * 2).detach().numpy() + 1
    np.testing.assert_allclose(lin(x).detach().numpy(), expected, rtol=1e-6)
    assert calls == [(1, 2)]
    h1.remove()
    h2.remove()
    np.testing.assert_allclose(lin(x).detach().numpy(), lin.forward(x).detach().numpy())
    order = []
    lin.register_forward_hook(lambda *a: order.append("second"))
    lin.register_forward_hook(lambda *a: order.append("first"), prepend=True)
    with lin.register_forward_pre_hook(lambda m, args, kwargs: (args, kwargs), with_kwargs=True):
        lin(x)
    assert order == ["first", "second"]
    assert len(lin._forward_pre_hooks) == 0  # the with-block removed it


def test_repr_tree():
    text = repr(Net())
    assert text.startswith("Net(\n  (block): Block(\n    (fc): Linear(in_features=3")
    assert "(head): Sequential(\n    (0): ReLU()\n    (1): Linear(in_features=4" in text
    blocks = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)] + [nn.ReLU()])
    assert repr(blocks) == (
        "ModuleList(\n  (0-2): 3 x Linear(in_features=2, out_features=2, bias=True)\n"
        "  (3): ReLU()\n)"
    )


def test_dtype_conversion_keeps_parameter_objects():
    net = Net()
    params = list(net.parameters())
    net(ember.randn(4, 3)).sum().backward()
    assert net.double() is net
    assert list(net.parameters()) == params  # same objects: optimizers stay valid
    assert all(p.dtype == ember.float64 and p.grad.dtype == ember.float64 for p in params)
    assert net.block.bn.running_mean.dtype == ember.float64
    assert net.block.bn.num_batches_tracked.dtype == ember.int64  # integers untouched
    out = net(ember.randn(4, 3, dtype=ember.float64))
    assert out.dtype == ember.float64
    net.float()
    assert all(p.dtype == ember.float32 for p in params)
    net.to(ember.float16)
    assert net.block.fc.weight.dtype == ember.float16
    net.bfloat16()
    assert net.block.fc.weight.dtype == ember.bfloat16
    net.to("cpu").cpu().to("cpu", dtype=ember.float32)
    assert net.block.fc.weight.dtype == ember.float32
    net.to(ember.zeros(1, dtype=ember.float64))
    assert net.block.fc.weight.dtype == ember.float64
    with pytest.raises(TypeError, match="floating point"):
        net.to(ember.int32)
    with pytest.raises(ember.EmberError, match="CPU"):
        net.to("cuda")


def test_parameter_semantics_and_deepcopy():
    t = ember.ones(3)
    p = nn.Parameter(t)
    assert isinstance(p, ember.Tensor) and p.requires_grad and p.is_leaf
    with ember.no_grad():
        p.mul_(2)
    assert t.numpy().tolist() == [2.0, 2.0, 2.0]  # shares memory with the tensor it wraps
    assert repr(p).startswith("Parameter containing:\ntensor(")
    assert not isinstance(p * 2, nn.Parameter)  # ops return plain tensors
    assert not nn.Parameter(ember.ones(1), requires_grad=False).requires_grad
    net = Net()
    clone = copy.deepcopy(net)
    assert isinstance(clone.block.fc.weight, nn.Parameter)
    assert clone.block.fc.weight is not net.block.fc.weight
    assert clone.shared is clone.head[1]  # sharing is preserved
    with ember.no_grad():
        clone.block.fc.weight.fill_(0)
    assert np.any(net.block.fc.weight.detach().numpy() != 0)
    np.testing.assert_array_equal(
        clone.block.bn.running_var.numpy(), net.block.bn.running_var.numpy()
    )


def test_sequential_container():
    seq = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    assert len(seq) == 3 and isinstance(seq[-1], nn.Linear)
    head = seq[:2]
    assert isinstance(head, nn.Sequential) and len(head) == 2 and head[0] is seq[0]
    x = ember.randn(4, 2)
    np.testing.assert_allclose(seq(x).detach().numpy(), seq[2](seq[1](seq[0](x))).detach().numpy())
    seq.append(nn.Sigmoid())
    assert list(seq._modules) == ["0", "1", "2", "3"]
    del seq[1]
    assert list(seq._modules) == ["0", "1", "2"] and isinstance(seq[1], nn.Linear)
    assert [k for k in seq.state_dict()] == ["0.weight", "0.bias", "1.weight", "1.bias"]
    seq.insert(0, nn.Identity())
    assert isinstance(seq[0], nn.Identity) and len(seq) == 4
    assert isinstance(seq.pop(0), nn.Identity) and len(seq) == 3
    from collections import OrderedDict

    named = nn.Sequential(OrderedDict([("fc", nn.Linear(2, 2)), ("act", nn.Tanh())]))
    assert list(named.state_dict()) == ["fc.weight", "fc.bias"] and named.act is named[1]
    with pytest.raises(IndexError):
        seq[5]


def test_module_list_dict_and_parameter_containers():
    layers = nn.ModuleList([nn.Linear(2, 2)])
    layers.extend([nn.Linear(2, 2), nn.ReLU()])
    layers += [nn.Tanh()]
    assert len(layers) == 4 and list(layers.state_dict())[-1] == "1.bias"
    layers[0] = nn.Identity()
    assert isinstance(layers[0], nn.Identity)
    assert isinstance(layers[1:], nn.ModuleList) and len(layers[1:]) == 3
    table = nn.ModuleDict({"a": nn.Linear(1, 1), "b": nn.ReLU()})
    table["c"] = nn.Linear(1, 2)
    assert list(table) == ["a", "b", "c"] and "b" in table and len(table) == 3
    assert list(table.state_dict()) == ["a.weight", "a.bias", "c.weight", "c.bias"]
    assert isinstance(table.pop("b"), nn.ReLU) and list(table.keys()) == ["a", "c"]
    plist = nn.ParameterList([ember.ones(2), nn.Parameter(ember.zeros(3))])
    plist.append(ember.ones(1))
    assert all(isinstance(p, nn.Parameter) for p in plist) and len(plist) == 3
    assert list(plist.state_dict()) == ["0", "1", "2"]
    assert "(1): Parameter containing: [ember.float32 of size 3]" in repr(plist)
    pdict = nn.ParameterDict({"w": ember.ones(2, 2)})
    pdict["b"] = ember.zeros(2)
    assert list(pdict.state_dict()) == ["w", "b"] and isinstance(pdict["b"], nn.Parameter)


def test_load_state_dict_assign_replaces_tensors():
    net = nn.Linear(2, 3)
    old = net.weight
    source = nn.Linear(2, 3).double()
    net.load_state_dict(source.state_dict(), assign=True)
    assert net.weight is not old and isinstance(net.weight, nn.Parameter)
    assert net.weight.requires_grad and net.weight.dtype == ember.float64  # the source's dtype
    np.testing.assert_array_equal(net.weight.detach().numpy(), source.weight.detach().numpy())


def test_forward_hook_with_kwargs_and_always_call():
    class Scale(nn.Module):
        def forward(self, x, factor=1.0):
            if factor < 0:
                raise ValueError("negative factor")
            return x * factor

    m = Scale()
    seen = []
    m.register_forward_hook(
        lambda mod, args, kwargs, out: seen.append(kwargs["factor"]) or out + 1,
        with_kwargs=True,
    )
    m.register_forward_hook(lambda mod, args, out: seen.append("always"), always_call=True)
    assert m(ember.ones(1), factor=3.0).item() == 4.0
    assert seen == [3.0, "always"]
    with pytest.raises(ValueError, match="negative"):
        m(ember.ones(1), factor=-1.0)
    assert seen[-1] == "always"  # an always_call hook runs even when forward raises
    with pytest.raises(NotImplementedError, match="forward"):
        nn.Module()(ember.ones(1))


def test_reassigned_children_parameters_and_buffers_keep_their_places():
    # PyTorch replaces an entry in place: a Sequential keeps its order, state_dict its keys' order
    seq = nn.Sequential(nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 3))
    setattr(seq, "1", nn.Tanh())
    seq[-1] = nn.Linear(2, 5)
    assert list(seq._modules) == ["0", "1", "2"]
    assert isinstance(seq[1], nn.Tanh) and seq(ember.ones(1, 2)).shape == (1, 5)
    lin = nn.Linear(2, 2)
    lin.register_buffer("scale", ember.ones(2))
    lin.register_buffer("shift", ember.zeros(2))
    lin.weight = nn.Parameter(ember.ones(2, 2))
    lin.scale = ember.full((2,), 3.0)
    assert list(lin.state_dict()) == ["weight", "bias", "scale", "shift"]
