"""ember.tools.flops: counts per family and per module, forward and backward, equal PyTorch's
FlopCounterMode on the four reference training steps (the same models, with the same weights);
the ops PyTorch does not count are checked against analytic values."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn as nn
from ember import models
from ember.models import example_step
from ember.tools.flops import MAC_FAMILIES, NO_MODULE

# ------------------------------------------------------------------------------ the torch twins


def _torch_twin(example):
    """A PyTorch model of the same structure, class names and attribute names (so
    FlopCounterMode names its modules as ember's scopes do), holding the same weights."""
    import torch

    tnn, tf = torch.nn, torch.nn.functional

    def layer(m):
        kind = type(m).__name__
        if kind == "Linear":
            return tnn.Linear(m.in_features, m.out_features)
        if kind == "Conv2d":
            return tnn.Conv2d(m.in_channels, m.out_channels, m.kernel_size, padding=m.padding)
        if kind == "MaxPool2d":
            return tnn.MaxPool2d(m.kernel_size)
        return {"ReLU": tnn.ReLU, "Flatten": tnn.Flatten}[kind]()

    if example.name == "gpt":
        model = models.gpt_block_class(tnn, tf)()
    elif example.name == "resnet":
        model = models.basic_block_class(tnn, tf)()
    else:
        model = tnn.Sequential(*[layer(m) for m in example.model])
    state = {k: torch.from_numpy(v.numpy().copy()) for k, v in example.model.state_dict().items()}
    model.load_state_dict(state)
    return model


def _torch_counts(example):
    """(forward, forward + backward) flop counts of FlopCounterMode, per module and aten op,
    over PyTorch's twin of ``example``'s training step (optimizer step included)."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    model = _torch_twin(example)
    x = torch.from_numpy(example.x.numpy().copy())
    y = None if example.y is None else torch.from_numpy(example.y.numpy().copy())
    if example.name == "gpt":
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.0 if y is None else 0.9)

    def loss_of():
        out = model(x)
        return (out * out).mean() if y is None else torch.nn.functional.cross_entropy(out, y)

    # the math backend runs attention as ember does (two batched products forward, four
    # backward); CPU's fused kernel is not in FlopCounterMode's registry and would count 0
    with sdpa_kernel(SDPBackend.MATH):
        with FlopCounterMode(display=False) as forward:
            loss_of()
        with FlopCounterMode(display=False) as whole:
            opt.zero_grad()
            loss_of().backward()
            opt.step()
    return forward.get_flop_counts(), whole.get_flop_counts()


def _torch_family(op) -> str:
    name = str(op).split(".")[1]
    if name in ("mm", "addmm"):
        return "matmul"
    if name == "bmm":  # in these models only attention's decomposition multiplies in batches
        return "attention"
    if name.startswith("convolution"):
        return "conv"
    raise AssertionError(f"FlopCounterMode counted {op}, which the test does not map")


def _by_family(per_op: dict) -> dict:
    out: dict = {}
    for op, n in per_op.items():
        out[_torch_family(op)] = out.get(_torch_family(op), 0) + n
    return out


@pytest.mark.parametrize("name", ["mlp", "cnn", "resnet", "gpt"])
def test_counts_equal_torch_flop_counter(name):
    pytest.importorskip("torch", reason="PyTorch (the reference peer) is not installed")
    example = example_step(name)
    counts = ember.tools.flops(example.step)
    forward, whole = _torch_counts(example)

    # per family over the whole step: forward, backward (whole minus forward), optimizer 0
    t_forward, t_whole = _by_family(forward["Global"]), _by_family(whole["Global"])
    families = counts.only(*MAC_FAMILIES).by_family
    assert set(families) == set(t_whole), (families, t_whole)
    for family, c in families.items():
        assert c.forward == t_forward.get(family, 0), (family, c, t_forward)
        assert c.backward == t_whole[family] - t_forward.get(family, 0), (family, c, t_whole)
        assert c.optimizer == 0

    # per module (a module's count includes its submodules', as in FlopCounterMode)
    t_modules = {}
    for module, per_op in whole.items():
        if module != "Global":
            ahead = sum(forward.get(module, {}).values())
            t_modules[module] = (ahead, sum(per_op.values()) - ahead)
    e_modules = {
        m: (c.forward, c.backward) for m, c in counts.only(*MAC_FAMILIES).by_module.items()
    }
    assert e_modules == t_modules
    assert counts.macs * 2 == sum(t_whole.values())


def test_attention_is_counted_on_its_call():
    # sdpa is a composite: its matrix products count as 'attention', 4*b*h*s*s*d forward
    # (PyTorch's sdpa formula) and twice that backward, in the module that called it
    b, h, s, d = 2, 3, 16, 8
    q, k, v = (ember.randn(b, h, s, d, requires_grad=True) for _ in range(3))

    def step(q, k, v):
        out = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        (out * out).sum().backward()
        return out

    counts = ember.tools.flops(step, q, k, v)
    attention = counts.by_family["attention"]
    assert attention.forward == 4 * b * h * s * s * d
    assert attention.backward == 8 * b * h * s * s * d
    assert "matmul" not in counts.by_family


def test_other_ops_against_analytic_values():
    example = example_step("mlp")
    counts = ember.tools.flops(example.step)
    params = sum(p.numel() for p in example.model.parameters())
    # SGD without momentum: p - lr * g, two FLOPs per parameter, in the optimizer's scope
    assert counts.optimizer == 2 * params
    assert counts.by_module["optimizer"].optimizer == 2 * params
    # ReLU: one comparison per element of its (128, 512) input
    assert counts.by_module["Sequential.2"].forward == 128 * 512
    assert counts.by_op["relu"].forward == 2 * 128 * 512
    # a bias-free Linear on an input that needs no gradient: 2*M*N*K forward, the weight
    # gradient only backward
    assert counts.by_module["Sequential.1"].forward >= 2 * 128 * 784 * 512
    assert counts.only("matmul").by_module["Sequential.1"].backward == 2 * 128 * 784 * 512
    # the loss is outside every module
    assert counts.by_module[NO_MODULE].forward > 0

    x = ember.randn(6, 7)
    reduced = ember.tools.flops(lambda t: (t * t).sum(1), x)
    assert reduced.by_op["mul"].forward == 6 * 7
    assert reduced.by_op["sum"].forward == 6 * 7  # one add per element read
    assert reduced.backward == 0


def test_module_forward_only_unless_backward_requested():
    model = nn.Linear(16, 32)
    x = ember.randn(4, 16)
    forward = ember.tools.flops(model, x)
    assert forward.total == forward.forward == 2 * 4 * 16 * 32
    both = ember.tools.flops(model, x, backward=True)
    # the weight gradient is a product as large as the forward one; the bias gradient sums
    assert both.only("matmul").backward == 2 * 4 * 16 * 32
    assert both.by_op["sum"].backward == 4 * 32
    with ember.no_grad():
        assert ember.tools.flops(model, x, backward=True).backward == 0


def test_table_prints_every_phase():
    counts = ember.tools.flops(example_step("resnet").step)
    text = str(counts)
    for word in ("BasicBlock.conv1", "optimizer", "forward", "backward", "conv", "total"):
        assert word in text
    assert "creation" not in counts.table("family")  # rows of zero FLOPs are left out
    with pytest.raises(ValueError, match="rows must be one of"):
        counts.table("layer")
    first = counts.nodes[0]
    assert first.phase == "forward" and first.flops >= 0 and first.bytes > 0
    assert np.isclose(counts.total, sum(n.flops for n in counts.nodes))


_LAYERS = {  # case: (function in torch(.nn.functional) and ember(.nn.functional), shapes, kw)
    "conv2d grouped strided": ("conv2d", [(2, 8, 15, 15), (12, 2, 3, 3)], dict(stride=2, groups=4)),
    "conv2d dilated": ("conv2d", [(2, 4, 12, 12), (6, 4, 3, 3)], dict(dilation=2, padding=1)),
    "conv1d strided": ("conv1d", [(2, 4, 20), (6, 4, 5)], dict(stride=3)),
    "conv_transpose2d": ("conv_transpose2d", [(2, 4, 7, 7), (4, 6, 3, 3)], dict(stride=2)),
    "matmul broadcast": ("matmul", [(3, 5, 7, 8), (8, 4)], {}),
    "matmul batched": ("matmul", [(3, 5, 7, 8), (3, 5, 8, 4)], {}),
    "linear": ("linear", [(3, 5, 8), (6, 8), (6,)], {}),
}


@pytest.mark.parametrize("case", list(_LAYERS))
def test_layer_counts_equal_torch_flop_counter(case):
    torch = pytest.importorskip("torch", reason="PyTorch (the reference peer) is not installed")
    from torch.utils.flop_counter import FlopCounterMode

    name, shapes, kwargs = _LAYERS[case]
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    t_fn = getattr(torch, name) if name == "matmul" else getattr(torch.nn.functional, name)
    e_fn = getattr(ember, name) if name == "matmul" else getattr(nn.functional, name)

    def counted(*tensors):
        with FlopCounterMode(display=False) as counter:
            out = t_fn(*tensors, **kwargs)
        forward = counter.get_total_flops()
        with FlopCounterMode(display=False) as counter:
            (out * out).sum().backward()
        return forward, counter.get_total_flops()

    def step(*tensors):
        out = e_fn(*tensors, **kwargs)
        (out * out).sum().backward()
        return out

    forward, backward = counted(*[torch.tensor(a, requires_grad=True) for a in arrays])
    # torch's counter counts a grouped weight gradient over all input channels, groups times
    # its multiply-adds (which are the forward's); ember counts them once
    expected = (forward, backward - (kwargs.get("groups", 1) - 1) * forward)
    counts = ember.tools.flops(step, *[ember.tensor(a, requires_grad=True) for a in arrays])
    products = counts.only(*MAC_FAMILIES)
    assert (products.forward, products.backward) == expected
