"""Opsets, both ways. Export: ``opset=`` from 13 (refused before onnx50: Trilu and HardSwish
are opset 14, now a Where over a triangle mask and x * HardSigmoid(x) there) to the newest
the installed onnx knows, for a model whose ops changed signature across opsets (Split,
Squeeze/Unsqueeze and the reductions' axes as inputs, Resize, Pad, Clip's inputs, layer and
group norm), each file checked and run by onnxruntime against ember. Import: a default-domain
opset newer than any ember knows is read with the newest definitions, as onnx's checker reads
it; an operator of an unknown domain or of a version before its first, an opset version out
of range and default-domain nodes without a default opset are OnnxErrors, as onnx's checker
refuses them."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember import TensorSpec

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
helper = onnx.helper

from ember.onnx.exporter import to_model  # noqa: E402


class _Changed(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln, self.gn = nn.LayerNorm(8), nn.GroupNorm(2, 4)
        self.conv = nn.Conv2d(4, 4, 3, padding=1)

    def forward(self, x):
        a, b = x.split([3, 1], dim=1)
        y = (a.sum(1, keepdim=True) + b.mean((2, 3), keepdim=True)).squeeze(1).unsqueeze(-1)
        return (
            y,
            F.interpolate(x, scale_factor=2.0, mode="bilinear"),
            F.pad(x, (1, 2, 0, 1), mode="reflect"),
            x.clamp(-0.5, 0.7) + x.clamp(min=0.1),
            self.ln(x),
            self.gn(self.conv(x)),
            x.chunk(2, dim=1)[1],
            x.amax(-1) + x.prod(-1),
            ember.tril(x, -1) + ember.triu(x[0, 0], 2),
            F.hardswish(x),
            x.cumsum(-1).var(2),
            F.scaled_dot_product_attention(x, x, x, is_causal=True),
        )


def _newest() -> int:
    return onnx.defs.onnx_opset_version()


@pytest.mark.parametrize("opset", range(13, 29))
def test_every_opset_writes_a_valid_file_onnxruntime_runs(opset, tmp_path):
    if opset > _newest():
        pytest.skip(f"the installed onnx knows opsets up to {_newest()}")
    model = _Changed().eval()
    path = tmp_path / "m.onnx"
    ember.onnx.export(model, path, input_signature=[TensorSpec((None, 4, 6, 8))], opset=opset)
    proto = onnx.load(str(path))
    assert proto.opset_import[0].version == opset
    onnx.checker.check_model(proto, full_check=True)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for n in (1, 3):
        x = np.random.default_rng(n).standard_normal((n, 4, 6, 8)).astype(np.float32)
        want = [w.detach().numpy() for w in model(ember.tensor(x))]
        got = session.run(None, {"x": x})
        for g, w in zip(got, want):
            assert g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def test_opsets_outside_the_range_are_refused():
    with pytest.raises(ember.errors.OnnxError, match=f"writes 13 to {_newest()}"):
        to_model(lambda x: x + 1.0, ember.ones(2), opset=12)


def _relu_model(opsets, domain=""):
    node = helper.make_node("Relu", ["x"], ["y"], domain=domain)
    info = [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, [2, 3]) for n in "xy"]
    graph = helper.make_graph([node], "g", info[:1], info[1:])
    ids = [helper.make_opsetid(d, v) for d, v in opsets]
    return helper.make_model(graph, opset_imports=ids, ir_version=8).SerializeToString()


def test_future_and_unknown_opsets_on_import():
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    for opsets in ([("", 99)], [("", _newest())], [("", 17), ("com.unknown", 3)]):
        # (onnx's checker reads a newer opset with its newest schemas; so does ember)
        onnx.checker.check_model(onnx.load_from_string(_relu_model(opsets)))
        np.testing.assert_array_equal(
            ember.onnx.load(_relu_model(opsets))(x).numpy(), np.maximum(x, 0)
        )
    with pytest.raises(ember.errors.OnnxError, match="com.unknown.Relu"):
        ember.onnx.load(_relu_model([("", 17), ("com.unknown", 1)], domain="com.unknown"))
    with pytest.raises(
        ember.errors.OnnxError, match="Relu from opset 1, the model imports opset 0"
    ):
        ember.onnx.load(_relu_model([("", 0)]))
    # as onnx's checker: versions outside an int32's range, and default-domain nodes in a
    # model importing no default opset (a TypeError and a silent opset 1 before onnx50)
    for version in (-3, 2**40):
        with pytest.raises(ember.errors.OnnxError, match=f"version {version}, outside the range"):
            ember.onnx.load(_relu_model([("", version)]))
    with pytest.raises(ember.errors.OnnxError, match="imports no opset of"):
        ember.onnx.load(_relu_model([("com.unknown", 1)]))
