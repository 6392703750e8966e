"""Programs written for PyTorch 2.9+ (``import ember as torch``) export with the dynamo
exporter's calling convention: ``torch.onnx.export(model, args, f, dynamo=True,
dynamic_shapes=...)`` with ``torch.export.Dim``, names or ``Dim.AUTO``/``DYNAMIC``; an
``ExportedProgram`` as the model; no ``f`` (an ONNXProgram to ``save``). Before onnx51
``dynamic_shapes`` was an unexpected keyword, an ExportedProgram was called (and refused), and
``export(model, args)`` called the model with no inputs. The models of tests/onnx/_torch_zoo51.py,
built on ember, run in onnxruntime at several batch sizes and lengths equal to ember (the
resampling model's ``affine_grid`` over the dynamic batch: it took the batch with ``int()``)."""

from __future__ import annotations

import io
import types
from pathlib import Path

import numpy as np
import pytest

import ember
from ember.errors import OnnxError

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


def _zoo_on_ember():
    """tests/onnx/_torch_zoo51.py with ember in PyTorch's place (the program a user writes
    with ``import ember as torch``)."""
    source = (Path(__file__).parent / "_torch_zoo51.py").read_text()
    imports = "import torch\nfrom torch import nn\nfrom torch.nn import functional as F"
    assert imports in source
    source = source.replace(
        imports, "import ember as torch\nfrom ember import nn\nfrom ember.nn import functional as F"
    )
    module = types.ModuleType("ember_zoo51")
    exec(compile(source, "_torch_zoo51.py (on ember)", "exec"), module.__dict__)
    return module


zoo = _zoo_on_ember()


@pytest.mark.parametrize("name", sorted(zoo.MODELS))
def test_zoo_models_export_with_dynamic_shapes(tmp_path, name):
    model = zoo.build(name)
    args = tuple(ember.tensor(a) for a in zoo.inputs(name, 2, 6))
    path = tmp_path / f"{name}.onnx"
    ember.onnx.export(
        model,
        args,
        str(path),
        dynamo=True,
        dynamic_shapes=zoo.dynamic_shapes(name),
        input_names=zoo.MODELS[name][1],
    )
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for batch, length in ((1, 5), (3, 8)):
        feed = zoo.inputs(name, batch, length)
        want = model(*[ember.tensor(a) for a in feed])
        want = want if isinstance(want, tuple) else (want,)
        got = session.run(None, {i.name: a for i, a in zip(session.get_inputs(), feed)})
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w.detach().numpy(), rtol=2e-4, atol=2e-5)


def _linear():
    ember.manual_seed(0)
    return ember.nn.Sequential(ember.nn.Linear(4, 3), ember.nn.ReLU()).eval()


def _input_shape(proto) -> list:
    dims = proto.graph.input[0].type.tensor_type.shape.dim
    return [d.dim_param or d.dim_value for d in dims]


@pytest.mark.parametrize(
    "dynamic_shapes, first",
    [
        (lambda Dim: ({0: Dim("batch", min=1, max=64)},), "batch"),
        (lambda Dim: {"input": {0: "batch"}}, "batch"),
        (lambda Dim: ([Dim.DYNAMIC, None],), "input_0"),
        (lambda Dim: ({0: Dim.AUTO, 1: Dim.STATIC},), "input_0"),
    ],
)
def test_the_forms_of_dynamic_shapes(tmp_path, dynamic_shapes, first):
    model, x = _linear(), ember.randn(2, 4)
    path = tmp_path / "m.onnx"
    ember.onnx.export(model, (x,), str(path), dynamic_shapes=dynamic_shapes(ember.export.Dim))
    proto = onnx.load(str(path))
    assert _input_shape(proto) == [first, 4]
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    x5 = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    (got,) = session.run(None, {session.get_inputs()[0].name: x5})
    np.testing.assert_allclose(got, model(ember.tensor(x5)).detach().numpy(), rtol=1e-6)


def test_an_exported_program_and_an_onnx_program():
    model, x = _linear(), ember.randn(2, 4)
    program = ember.export.export(model, (x,), dynamic_shapes=({0: ember.export.Dim("n")},))
    buffer = io.BytesIO()
    ember.onnx.export(program, (x,), buffer)
    assert _input_shape(onnx.load_from_string(buffer.getvalue())) == ["n", 4]
    onnx_program = ember.onnx.export(model, (x,), dynamo=True)
    assert _input_shape(onnx_program.model_proto) == [2, 4]
    saved = io.BytesIO()
    onnx_program.save(saved)
    session = ort.InferenceSession(saved.getvalue(), providers=["CPUExecutionProvider"])
    (got,) = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    np.testing.assert_allclose(got, model(x).detach().numpy(), rtol=1e-6)


def test_wrong_dynamic_shapes_name_the_argument(tmp_path):
    model, x = _linear(), ember.randn(2, 4)
    path = str(tmp_path / "m.onnx")
    with pytest.raises(OnnxError, match="not arguments"):
        ember.onnx.export(model, (x,), path, dynamic_shapes={"images": {0: "n"}})
    with pytest.raises(OnnxError, match="no axis 5"):
        ember.onnx.export(model, (x,), path, dynamic_shapes=({5: "n"},))
    with pytest.raises(OnnxError, match="not both"):
        ember.onnx.export(
            model,
            (x,),
            path,
            input_names=["x"],
            dynamic_axes={"x": [0]},
            dynamic_shapes=({0: "n"},),
        )
    assert not Path(path).exists()
