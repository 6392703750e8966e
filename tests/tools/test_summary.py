"""ember.summary: output shapes, parameters and activations per layer against PyTorch's twin of
the model (module hooks and parameter counts), MACs against FlopCounterMode's forward count."""

from __future__ import annotations

import pytest

import ember
import ember.nn as nn
from ember.models import example_step

from .test_flops import _torch_twin


@pytest.mark.parametrize("name", ["cnn", "gpt", "resnet"])
def test_summary_matches_torch_twin(name):
    torch = pytest.importorskip("torch", reason="PyTorch (the reference peer) is not installed")
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    example = example_step(name)
    result = ember.summary(example.model, tuple(example.x.shape), verbose=False)
    twin = _torch_twin(example)
    root = type(twin).__name__
    outputs = {}
    for qualified, module in twin.named_modules():
        key = f"{root}.{qualified}" if qualified else root
        module.register_forward_hook(lambda m, a, out, key=key: outputs.setdefault(key, out))
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        twin(torch.zeros(tuple(example.x.shape)))
    flops = {m: sum(per_op.values()) for m, per_op in counter.get_flop_counts().items()}
    modules = {(f"{root}.{q}" if q else root): m for q, m in twin.named_modules()}

    assert sorted(r.name for r in result.rows) == sorted(outputs)  # every module called
    for row in result.rows:
        out = outputs[row.name]
        assert row.output_shapes == [tuple(out.shape)], row.name
        assert row.activation_bytes == out.numel() * out.element_size(), row.name
        own = sum(p.numel() for p in modules[row.name].parameters(recurse=False))
        assert row.params == own, row.name
        assert row.macs * 2 == flops.get(row.name, 0), row.name
    assert result.total_params == sum(p.numel() for p in twin.parameters())
    assert result.total_macs * 2 == flops["Global"]


def test_summary_prints_a_table(capsys):
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Sequential(nn.Linear(16, 4)))
    result = ember.summary(model, (3, 8))
    printed = capsys.readouterr().out
    for text in ("Layer (type)", "0 (Linear)", "[3, 16]", "Total params: 212", "Total MACs"):
        assert text in printed
    assert [r.depth for r in result.rows] == [0, 1, 1, 1, 2]  # the nested Linear is indented
    assert result.rows[-1].name == "Sequential.2.0"
    assert result.rows[-1].macs == 3 * 16 * 4
    assert result.rows[2].macs == 0  # ReLU: no multiply-adds
    assert result.activation_bytes == 4 * (3 * 16 + 3 * 16 + 3 * 4)  # leaf outputs only


def test_summary_inputs_and_errors():
    model = nn.Linear(5, 2)
    several = ember.summary(
        nn.Bilinear(5, 6, 2), [(4, 5), (4, 6)], dtype=ember.float64, verbose=False
    )
    assert several.rows[0].output_shapes == [(4, 2)]
    assert several.rows[0].activation_bytes == 4 * 2 * 8
    data = ember.summary(model, input_data=ember.randn(7, 5), verbose=False)
    assert data.rows[0].output_shapes == [(7, 2)]
    with pytest.raises(ValueError, match="exactly one of input_shape and input_data"):
        ember.summary(model)
    with pytest.raises(TypeError, match="expected an ember.nn.Module"):
        ember.summary(lambda x: x, (2, 5))
