"""Models ember has not seen, written by PyTorch's dynamo exporter (``torch.onnx.export(...,
dynamo=True)``, PyTorch's default since 2.9: ``torch.export`` with ``dynamic_shapes``, opset 18
and up, its onnxscript optimizer on by default), imported by ``ember.onnx.load`` and run
against onnxruntime at several batch sizes and lengths (tests/onnx/_torch_zoo51.py): here the
sequence models, a BERT-like encoder on scaled_dot_product_attention with a padding mask, a
LLaMA-style decoder (RMSNorm, rotary embedding, SwiGLU, grouped causal attention; opset 23's
Attention and RMSNormalization), a ViT and an LSTM under a bidirectional GRU;
test_onnx51_dynamo_vision.py has the image models."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript", reason="torch.onnx.export(dynamo=True) needs onnxscript")

from ..on_demand import OnDemand  # noqa: E402
from . import _torch_zoo51 as zoo  # noqa: E402

# (name, opset, optimize): PyTorch's default (opset 20 here, optimized), opset 23, and
# unoptimized files (the optimizer bakes the traced length into the recurrent model's
# reshapes, which onnxruntime then refuses too)
CASES = [
    ("bert", 20, True),
    ("llama", 20, True),
    ("llama", 23, False),
    ("vit", 23, True),
    ("recurrent", 18, False),
]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    # (each case at its first test: tests/on_demand.py)
    return OnDemand(functools.partial(zoo.export_case, tmp_path_factory.mktemp("dynamo")))


def check_against_onnxruntime(name: str, path) -> None:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    model = ember.onnx.load(str(path))
    for batch, length in ((1, 5), (3, 8), (2, 4)):
        feed = zoo.inputs(name, batch, length)
        want = session.run(None, {i.name: a for i, a in zip(session.get_inputs(), feed)})
        got = model(*feed)
        got = got if isinstance(got, (tuple, list)) else (got,)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.shape == w.shape
            np.testing.assert_allclose(g.numpy(), w, rtol=2e-4, atol=2e-5)
    assert model.eager_reason is None  # (captured: the dynamic sizes fold per shape)


@pytest.mark.parametrize("name, opset, optimize", CASES)
def test_imports_equal_onnxruntime(files, name, opset, optimize):
    check_against_onnxruntime(name, files[name, opset, optimize][1])
