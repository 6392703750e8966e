"""The HuggingFace-style patterns of tests/onnx/_torch_zoo52.py written for ember (``import
ember as torch``) and exported by ``ember.onnx.export(..., dynamo=True, dynamic_shapes=...)``
run in onnxruntime at several batch sizes and lengths equal to ember. Before onnx52 the cached
decoder could not be captured over symbolic sizes: its positions ``arange(past, past + t)``
start at a symbolic size, which ember's arange refused."""

from __future__ import annotations

import types
from pathlib import Path

import numpy as np
import pytest

import ember
from ember import TensorSpec

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


def _zoo_on_ember():
    source = (Path(__file__).parent / "_torch_zoo52.py").read_text()
    imports = "import torch\nfrom torch import nn\nfrom torch.nn import functional as F"
    assert imports in source
    source = source.replace(
        imports, "import ember as torch\nfrom ember import nn\nfrom ember.nn import functional as F"
    )
    module = types.ModuleType("ember_zoo52")
    exec(compile(source, "_torch_zoo52.py (on ember)", "exec"), module.__dict__)
    return module


zoo = _zoo_on_ember()


@pytest.mark.parametrize("name", sorted(zoo.MODELS))
def test_exports_run_in_onnxruntime_as_in_ember(tmp_path, name):
    model = zoo.build(name)
    path = tmp_path / f"{name}.onnx"
    ember.onnx.export(
        model,
        tuple(ember.tensor(a) for a in zoo.inputs(name, 2, 7)),
        str(path),
        dynamo=True,
        dynamic_shapes=zoo.dynamic_shapes(name, ember.export.Dim),
        input_names=zoo.MODELS[name][1],
    )
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for batch, length in ((1, 5), (3, 8), (2, 6)):
        feed = zoo.inputs(name, batch, length)
        want = session.run(None, dict(zip(zoo.MODELS[name][1], feed)))
        with np.errstate(divide="ignore", invalid="ignore"):  # (T5's log of distance 0)
            got = model(*[ember.tensor(a) for a in feed])
        got = got if isinstance(got, tuple) else (got,)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert tuple(g.shape) == w.shape
            np.testing.assert_allclose(g.detach().numpy(), w, rtol=2e-5, atol=2e-6)


def test_a_range_from_a_symbolic_start():
    """arange(past, past + t) inside ember.function over symbolic sizes: the positions follow
    both sizes at every call, as eager arange gives them."""

    def positions(cache, new):
        past, t = cache.shape[0], new.shape[0]
        return ember.arange(past, past + t) * 10 + ember.arange(past, past + 2 * t, 2)

    f = ember.function(positions, input_signature=[TensorSpec(("p",)), TensorSpec(("t",))])
    for past, t in ((3, 1), (5, 4), (1, 2)):
        got = f(ember.zeros(past), ember.zeros(t)).numpy()
        want = np.arange(past, past + t) * 10 + np.arange(past, past + 2 * t, 2)
        np.testing.assert_array_equal(got, want)
        assert got.dtype == np.int64


class _Seq2Seq(ember.nn.Module):
    """BART's shape from ember's layers: an encoder layer over a padded source, a decoder
    layer under the causal mask of the target's (dynamic) length."""

    def __init__(self):
        super().__init__()
        nn = ember.nn
        self.encoder = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
        self.decoder = nn.TransformerDecoderLayer(16, 4, 32, dropout=0.0, batch_first=True)

    def forward(self, source, target, padding):
        causal = ember.nn.Transformer.generate_square_subsequent_mask(target.shape[1])
        memory = self.encoder(source, src_key_padding_mask=padding.bool())
        return self.decoder(target, memory, tgt_mask=causal, memory_key_padding_mask=padding.bool())


def test_a_causal_mask_of_a_dynamic_length_exports(tmp_path):
    """generate_square_subsequent_mask built its mask in NumPy, so a symbolic target length
    failed to capture; it is ember's triu of a full now, as PyTorch's."""
    ember.manual_seed(0)
    model = _Seq2Seq().eval()
    r = np.random.default_rng(0)

    def feed(batch, length):
        padding = np.zeros((batch, length), np.int64)
        padding[-1, length // 2 :] = 1
        source = r.standard_normal((batch, length, 16)).astype(np.float32)
        return [source, r.standard_normal((batch, length + 1, 16)).astype(np.float32), padding]

    b, t, u = (ember.export.Dim(n, min=2) for n in "btu")
    path = tmp_path / "seq2seq.onnx"
    ember.onnx.export(
        model,
        tuple(ember.tensor(a) for a in feed(2, 6)),
        str(path),
        dynamo=True,
        dynamic_shapes=({0: b, 1: t}, {0: b, 1: u}, {0: b, 1: t}),
    )
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for batch, length in ((2, 5), (3, 8)):
        arrays = feed(batch, length)
        (want,) = session.run(None, dict(zip([i.name for i in session.get_inputs()], arrays)))
        got = model(*[ember.tensor(a) for a in arrays]).detach().numpy()
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)
    mask = ember.nn.Transformer.generate_square_subsequent_mask(3).numpy()
    np.testing.assert_array_equal(mask, np.triu(np.full((3, 3), -np.inf, np.float32), 1))


class _LastToken(ember.nn.Module):
    """BERT's buffers sliced to the length and GPT-2's last-token pooling: ``x[:, -1]`` of a
    symbolic length T is a select at T - 1, which export's Slice rule took for a slice."""

    def __init__(self):
        super().__init__()
        self.register_buffer("position_ids", ember.arange(32).expand((1, -1)))
        self.positions = ember.nn.Embedding(32, 8)

    def forward(self, ids):
        b, t = ids.shape
        h = self.positions(self.position_ids[:, :t]) + ids[..., None].float()
        return h[:, -1], h[:, -2:].sum(1), h[:, : t // 2].mean(1)


def test_a_select_from_the_end_of_a_dynamic_length_exports(tmp_path):
    model = _LastToken()
    path = tmp_path / "last_token.onnx"
    r = np.random.default_rng(0)
    ember.onnx.export(
        model,
        (ember.tensor(r.integers(0, 5, (2, 6))),),
        str(path),
        dynamo=True,
        dynamic_shapes=({0: ember.export.Dim("b"), 1: ember.export.Dim("t", min=2)},),
    )
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for batch, length in ((1, 5), (3, 8)):
        ids = r.integers(0, 5, (batch, length))
        want = session.run(None, {session.get_inputs()[0].name: ids})
        got = model(ember.tensor(ids))
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.detach().numpy(), w, rtol=1e-6, atol=1e-6)
    x = ember.zeros(2, 5, requires_grad=True)
    f = ember.function(lambda x: x[:, -1].sum(), input_signature=[TensorSpec((None, "t"))])
    f(x).backward()
    np.testing.assert_array_equal(x.grad.numpy()[:, -1], np.ones(2, np.float32))
