"""The sizes an ember export was computed for, checked when ember imports it. Before onnx52 the
size equalities a capture over symbolic sizes took (a U-Net's ``2*(H//2) == H``) were only
listed in the file's metadata as text: ``ember.onnx.load`` of ember's own export ran an odd
image size into a kernel's error. And a derived input size (``2*n`` beside ``n``:
``Dim("n")`` and ``2 * Dim("n")``, which ember's Dim lacked and PyTorch's was refused as a bad
name) was written as an unrelated name, so nothing compared it with ``n``. Now the exporter
writes ``ember.symbolic_sizes`` (every input's dimensions as symbolic sizes, and the
assumptions) and the importer, ember.function and ember.export's module refuse sizes breaking
them with a ShapeError naming the input, the axis and the sizes; the sizes that keep them run
as onnxruntime runs them."""

from __future__ import annotations

import json

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember import TensorSpec
from ember.errors import OnnxError, ShapeError
from ember.symbolic import sym

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

KEY = "ember.symbolic_sizes"


class UNetish(nn.Module):
    def __init__(self):
        super().__init__()
        self.down, self.up = nn.Conv2d(3, 4, 3, padding=1), nn.Conv2d(8, 2, 3, padding=1)

    def forward(self, x):
        a = F.relu(self.down(x))
        b = F.interpolate(F.max_pool2d(a, 2), scale_factor=2, mode="nearest")
        return self.up(ember.cat([a, b], 1))  # (H and 2*(H//2): equal for even H only)


class Pairs(nn.Module):
    """y holds two values per row of x: its length is 2*n."""

    def forward(self, x, y):
        return x.sum(1) + y.reshape(-1, 2).sum(1)


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _props(path) -> dict:
    return {p.key: p.value for p in onnx.load(str(path)).metadata_props}


def _ort(path, *arrays):
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {i.name: a for i, a in zip(session.get_inputs(), arrays)})


@pytest.fixture(scope="module")
def unet(tmp_path_factory):
    path = tmp_path_factory.mktemp("contract") / "unet.onnx"
    ember.onnx.export(UNetish().eval(), path, input_signature=[TensorSpec((None, 3, None, None))])
    return path


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    path = tmp_path_factory.mktemp("contract") / "pairs.onnx"
    n = ember.export.Dim("n")
    ember.onnx.export(
        Pairs(),
        (ember.ones(4, 3), ember.ones(8)),
        str(path),
        dynamo=True,
        dynamic_shapes={"x": {0: n}, "y": {0: 2 * n}},
    )
    return path


def test_an_imported_export_refuses_sizes_breaking_an_assumption(unet):
    record = json.loads(_props(unet)[KEY])
    assert len(record["assumptions"]) == 2 and set(record["inputs"]) == {"x"}
    f = ember.onnx.load(str(unet))
    for shape in ((1, 3, 8, 8), (2, 3, 6, 10)):
        x = _rand(*shape)
        np.testing.assert_allclose(f(x).numpy(), _ort(unet, x)[0], rtol=1e-5, atol=1e-6)
    with pytest.raises(ShapeError, match=r"2\*\(x_2//2\) == x_2 \(here 8 and 9\)"):
        f(_rand(1, 3, 9, 8))
    with pytest.raises(ShapeError, match="x_3"):
        f.run_eager(_rand(1, 3, 8, 7))
    module = ember.onnx.load(str(unet), trainable=True)
    with pytest.raises(ShapeError, match="x_2"):
        module(_rand(1, 3, 9, 8))


def test_a_derived_input_size_is_written_as_the_root_scaled(pairs):
    dims = [
        [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim]
        for i in onnx.load(str(pairs)).graph.input
    ]
    assert dims == [["n", 3], ["2*n"]]
    record = json.loads(_props(pairs)[KEY])
    assert record["inputs"]["y"] == [{"sym": {"coefficient": 2, "factors": [["n", 1]]}}]


def test_an_imported_export_refuses_a_derived_size_that_disagrees(pairs):
    f = ember.onnx.load(str(pairs))
    x, y = _rand(5, 3), _rand(10, seed=1)
    np.testing.assert_allclose(f(x, y).numpy(), _ort(pairs, x, y)[0], rtol=1e-5, atol=1e-6)
    for length in (12, 11):  # (onnxruntime fails on both, inside a node)
        with pytest.raises(ShapeError, match=r"input 'y' has shape .*must be 2\*n = 10"):
            f(x, _rand(length))
    with pytest.raises(ShapeError, match="2\\*n = 10"):
        ember.onnx.load(str(pairs), trainable=True)(x, _rand(12))


def test_pytorchs_derived_dim_exports_the_same_file(tmp_path):
    torch = pytest.importorskip("torch")
    n = torch.export.Dim("n")
    path = tmp_path / "pairs_torch_dim.onnx"
    ember.onnx.export(
        Pairs(),
        (ember.ones(4, 3), ember.ones(8)),
        str(path),
        dynamo=True,
        dynamic_shapes={"x": {0: n}, "y": {0: n * 2}},
    )
    inputs = onnx.load(str(path)).graph.input
    assert inputs[1].type.tensor_type.shape.dim[0].dim_param == "2*n"
    with pytest.raises(ShapeError, match="2\\*n = 6"):
        ember.onnx.load(str(path))(_rand(3, 3), _rand(8))


def test_ember_function_checks_a_derived_signature_size():
    n = sym("n")
    f = ember.function(Pairs(), input_signature=[TensorSpec((n, 3)), TensorSpec((2 * n,))])
    x, y = _rand(5, 3), _rand(10)
    want = Pairs()(ember.tensor(x), ember.tensor(y)).numpy()
    np.testing.assert_allclose(f(ember.tensor(x), ember.tensor(y)).numpy(), want, rtol=1e-6)
    with pytest.raises(ShapeError, match=r"argument 1 has shape \(12,\).*2\*n = 10"):
        f(ember.tensor(x), ember.tensor(_rand(12)))


def test_a_scaled_input_size_must_divide(tmp_path):
    """TensorSpec((4*h,)): h is read as the size over 4, which a size of 10 does not give."""
    path = tmp_path / "scaled.onnx"
    h = sym("h")
    ember.onnx.export(
        lambda x: x.reshape(-1, 4).sum(1), path, input_signature=[TensorSpec((4 * h,))]
    )
    f = ember.onnx.load(str(path))
    x = _rand(8)
    np.testing.assert_allclose(f(x).numpy(), _ort(path, x)[0], rtol=1e-6)
    with pytest.raises(ShapeError, match="axis 0 must be 4\\*h"):
        f(_rand(10))


def test_ember_export_takes_derived_dims():
    n = ember.export.Dim("n")
    program = ember.export.export(
        Pairs(), (ember.ones(4, 3), ember.ones(8)), dynamic_shapes={"x": {0: n}, "y": {0: 2 * n}}
    )
    module = program.module()
    np.testing.assert_allclose(
        module(ember.ones(5, 3), ember.ones(10)).numpy(), np.full(5, 5.0, np.float32)
    )
    with pytest.raises(ShapeError, match="2\\*n"):
        module(ember.ones(5, 3), ember.ones(12))
    with pytest.raises(ShapeError, match="is not 2\\*n = 8"):
        ember.export.export(
            Pairs(),
            (ember.ones(4, 3), ember.ones(6)),
            dynamic_shapes={"x": {0: n}, "y": {0: 2 * n}},
        )


def test_one_name_on_two_inputs_is_not_refused_apart(tmp_path):
    """Dimension 0 of every argument is N by ember's convention; a runtime runs a graph that
    never combines them at two batch sizes, and so does the import."""
    path = tmp_path / "two.onnx"
    ember.onnx.export(
        lambda a, b: (a * 2, b + 1), path, input_signature=[TensorSpec((None, 2))] * 2
    )
    a, b = ember.onnx.load(str(path))(_rand(3, 2), _rand(5, 2))
    assert a.shape == (3, 2) and b.shape == (5, 2)


@pytest.mark.parametrize(
    "entry",
    [
        "not json",
        "[]",
        '{"inputs": []}',
        '{"inputs": {"x": [{"sym": {"coefficient": 1, "factors": [["N", 100000]]}}]}}',
        '{"inputs": {"x": [{"sym": {"coefficient": 1, "factors": [["not a name", 1]]}}]}}',
        '{"inputs": {"x": [true]}}',
        '{"inputs": {}, "assumptions": [{"kind": "equal", "left": 1, "right": 2, '
        '"ratio": [1, 0]}]}',
        '{"inputs": {}, "assumptions": [{"kind": "equal", "left": '
        '{"sym": {"coefficient": 1, "factors": [["Q", 1]]}}, "right": 2}]}',
        '{"inputs": {}, "assumptions": [{"kind": "maybe", "left": 1, "right": 2}]}',
    ],
)
def test_a_damaged_entry_is_refused_by_name(unet, entry):
    model = onnx.load(str(unet))
    for p in model.metadata_props:
        if p.key == KEY:
            p.value = entry
    with pytest.raises(OnnxError, match=KEY):
        ember.onnx.load(model.SerializeToString())
