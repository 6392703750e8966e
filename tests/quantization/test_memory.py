"""ember.tools.memory on quantized models against tracemalloc's measured peak (within 5%):
the plan counts the uint8 activations, int8 weights and the int8 kernels' temporaries
(ops/quantized.py's workspace rules)."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import nn
from ember.kernels.ccompile import compiler_available
from ember.quantization import quantize
from ember.tools import memory

from . import fashion


def _models():
    ember.manual_seed(0)
    wide = nn.Sequential(nn.Conv2d(16, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 8, 1))
    return [
        ("fashion cnn", fashion.make_model().eval(), (64, 1, 28, 28)),
        ("padded conv peak", wide.eval(), (32, 16, 24, 24)),
        ("mlp", nn.Sequential(nn.Linear(300, 512), nn.ReLU(), nn.Linear(512, 10)).eval(),
         (256, 300)),
    ]  # fmt: skip


@pytest.mark.skipif(not compiler_available(), reason="the workspace rules describe the C path")
@pytest.mark.parametrize(
    "name,model,shape", _models(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_a_quantized_models_memory_report_matches_its_measured_peak(name, model, shape,
                                                                    bare_executors):  # fmt: skip
    x = np.random.default_rng(0).random(shape).astype(np.float32)
    q = quantize(model, [x])
    report = memory(q, ember.tensor(x))
    measured = report.measure()
    assert abs(report.peak_bytes - measured) <= 0.05 * measured, (report.peak_bytes, measured)
    # int8 weights: a quarter of the float ones (plus per-channel scales and biases)
    floats = sum(p.numel() * 4 for p in model.parameters())
    assert report.parameters < 0.4 * floats
