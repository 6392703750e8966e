"""HuggingFace models' patterns (tests/onnx/_torch_zoo52.py: T5's relative position buckets,
Wav2Vec2's feature extractor and weight-normed positional convolution, Swin's shifted windows,
CLIP's text tower, a GPT-2/Mistral decoder step on a key/value cache with a sliding window)
exported by PyTorch both ways, ``dynamo=True`` with ``dynamic_shapes`` (opset 18) and
TorchScript's ``dynamic_axes`` (opset 17), imported by ``ember.onnx.load`` and run against
onnxruntime at several batch sizes and lengths. transformers' own tiny models (BERT,
DistilBERT, RoBERTa, GPT-2, LLaMA, Mistral, Qwen2, T5, BART, ViT, DeiT, Swin, Whisper,
Wav2Vec2, CLIP, and decoders with a cache) passed these checks when onnx52 ran them; the suite
keeps their patterns without depending on transformers."""

from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from ..on_demand import OnDemand  # noqa: E402
from . import _torch_zoo52 as zoo  # noqa: E402

# (name, dynamo, opset): the dynamo exporter where its export of the pattern differs from
# TorchScript's in kind (decomposed attention, folded weight norm), TorchScript for the rest
CASES = [
    ("t5", False, 17),
    ("wav2vec", True, 18),
    ("wav2vec", False, 17),
    ("swin", False, 17),
    ("clip_text", False, 17),
    ("cached_decoder", True, 18),
]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    pytest.importorskip("onnxscript", reason="torch.onnx.export(dynamo=True) needs onnxscript")
    folder = tmp_path_factory.mktemp("hf_patterns")

    def made(case):  # (each case at its first test: tests/on_demand.py)
        name, dynamo, opset = case
        path = folder / f"{name}_{int(dynamo)}_{opset}.onnx"
        return zoo.export(name, path, dynamo=dynamo, opset=opset), path

    return OnDemand(made)


@pytest.mark.parametrize("name, dynamo, opset", CASES)
def test_imports_equal_onnxruntime(files, name, dynamo, opset):
    model, path = files[name, dynamo, opset]
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    imported = ember.onnx.load(str(path))
    for batch, length in ((1, 5), (3, 8), (2, 6)):
        feed = zoo.inputs(name, batch, length)
        want = session.run(None, dict(zip(zoo.MODELS[name][1], feed)))
        with torch.no_grad():
            reference = model(*[torch.tensor(a) for a in feed])
        reference = reference if isinstance(reference, tuple) else (reference,)
        with np.errstate(divide="ignore", invalid="ignore"):  # (T5's log of distance 0)
            got = imported(*feed)
        got = got if isinstance(got, tuple) else (got,)
        assert len(got) == len(want)
        for g, w, r in zip(got, want, reference):
            assert g.shape == w.shape
            np.testing.assert_allclose(g.numpy(), w, rtol=2e-5, atol=2e-6)
            np.testing.assert_allclose(g.numpy(), r.numpy(), rtol=2e-5, atol=2e-6)
    assert imported.eager_reason is None


def test_fine_tuning_the_decoder_step_follows_pytorch(files):
    """The dynamo file of the cached decoder: every parameter trains, three SGD steps follow
    PyTorch's losses."""
    model, path = files["cached_decoder", True, 18]
    model = zoo.build("cached_decoder")
    imported = ember.onnx.load(str(path), trainable=True)
    assert sum(p.numel() for p in imported.parameters()) == sum(
        p.numel() for p in model.parameters()
    )
    feed = zoo.inputs("cached_decoder", 3, 7)
    ours = ember.optim.SGD(imported.parameters(), lr=0.1)
    theirs = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        loss = model(*[torch.tensor(a) for a in feed])[0].square().mean()
        theirs.zero_grad()
        loss.backward()
        theirs.step()
        ember_loss = imported(*[ember.tensor(a) for a in feed])[0].square().mean()
        ours.zero_grad()
        ember_loss.backward()
        ours.step()
        assert float(ember_loss.detach().numpy()) == pytest.approx(float(loss.detach()), rel=2e-5)
