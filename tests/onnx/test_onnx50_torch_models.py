"""Models ember has not seen, exported by PyTorch's TorchScript exporter (``dynamo=False``) at
opsets 11 to 20 with dynamic axes (tests/onnx/_torch_zoo50.py: a BERT-like encoder, a ConvNeXt
block, an MBConv with squeeze-excite, a masked bidirectional GRU, a YOLO head, a DETR-ish
decoder), imported by ``ember.onnx.load`` and run against onnxruntime at several batch sizes
and lengths; with ``trainable=True``, a few SGD steps against PyTorch's own."""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from . import _torch_zoo50 as zoo  # noqa: E402


def _export(name: str, opset: int, fold: bool = True):
    model = zoo.build(name)
    _, names, axes = zoo.MODELS[name]
    args = tuple(torch.tensor(a) for a in zoo.inputs(name, 2, 6))
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model,
            args,
            buffer,
            opset_version=opset,
            dynamo=False,
            do_constant_folding=fold,
            input_names=names,
            dynamic_axes={
                n: {k: v for k, v in axes.items() if k < a.ndim} for n, a in zip(names, args)
            },
        )
    return model, buffer.getvalue()


@pytest.mark.parametrize(
    "name, opset",
    [
        ("bert", 14),
        ("bert", 20),
        ("convnext", 11),
        ("mbconv", 13),
        ("gru", 11),
        ("gru", 17),
        ("yolo", 18),
        ("detr", 14),
    ],
)
def test_imports_equal_onnxruntime(name, opset):
    _, data = _export(name, opset)
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    model = ember.onnx.load(data)
    for batch, length in ((1, 5), (3, 8), (2, 4)):
        feed = zoo.inputs(name, batch, length)
        want = session.run(None, {i.name: a for i, a in zip(session.get_inputs(), feed)})
        got = model(*feed)
        got = got if isinstance(got, (tuple, list)) else (got,)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.numpy(), w, rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("name, opset", [("bert", 17), ("mbconv", 13), ("detr", 17), ("gru", 14)])
def test_fine_tuning_follows_pytorch(name, opset):
    model, data = _export(name, opset, fold=False)
    imported = ember.onnx.load(data, trainable=True)
    assert sum(p.numel() for p in imported.parameters()) == sum(
        p.numel() for p in model.parameters()
    )
    feed = zoo.inputs(name, 3, 7)
    ours = ember.optim.SGD(imported.parameters(), lr=0.05)
    theirs = torch.optim.SGD(model.parameters(), lr=0.05)
    for _ in range(3):
        out = model(*[torch.tensor(a) for a in feed])
        loss = sum((o**2).mean() for o in (out if isinstance(out, tuple) else (out,)))
        theirs.zero_grad()
        loss.backward()
        theirs.step()
        got = imported(*[ember.tensor(a) for a in feed])
        ember_loss = sum((o**2).mean() for o in (got if isinstance(got, (tuple, list)) else (got,)))
        ours.zero_grad()
        ember_loss.backward()
        ours.step()
        assert float(ember_loss.detach().numpy()) == pytest.approx(float(loss), rel=2e-5, abs=1e-6)
