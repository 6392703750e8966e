"""Hostile and odd files, beyond test_import_safety.py and test_onnx49_hostile.py: a seeded slice
of tests/onnx/fuzzing51.py (seeds of what the dynamo exporter and onnxruntime's tools write;
mutations of local functions, value_info, sparse initializers, raw data and the signature
metadata; trainable imports run forward and backward) raises only EmberErrors. Found by it:
a sparse initializer with a negative dimension, indices out of range or of the wrong shape
raised NumPy's ValueError (or allocated a huge dense array); an initializer named like one of
Module's own attributes ("half") raised a KeyError from a trainable import. Models saved with
``onnx.save_model(..., save_as_external_data=True)`` load from another working directory, and
a missing or short data file is refused naming the model and the tensor."""

from __future__ import annotations

import os

import numpy as np
import pytest

import ember
from ember.errors import EmberError, OnnxError

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from . import fuzzing, fuzzing51  # noqa: E402


def test_the_seeds_run_and_equal_onnxruntime():
    ort = pytest.importorskip("onnxruntime")
    for data in fuzzing51.seeds():
        fuzzing51.run(data)
        session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
        arrays = fuzzing._inputs(onnx.load_from_string(data))
        want = session.run(None, {i.name: a for i, a in zip(session.get_inputs(), arrays)})
        got = ember.onnx.load(data)(*arrays)
        got = got if isinstance(got, tuple) else (got,)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.numpy(), w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("seed", range(3))
def test_a_seeded_slice_of_mutations_raises_only_ember_errors(seed):
    tally = fuzzing51.fuzz(count=150, seed=seed)
    assert tally["runs"] == 150
    assert not tally["failures"], tally["failures"][0][1]


@pytest.mark.skipif(not os.environ.get("EMBER_FUZZ_SECONDS"), reason="set EMBER_FUZZ_SECONDS")
def test_long_fuzz():
    tally = fuzzing51.fuzz(seconds=float(os.environ["EMBER_FUZZ_SECONDS"]), seed=51)
    problems = [problem for _, problem in tally["failures"]]
    assert not problems, f"{len(problems)} of {tally['runs']}: {problems[:5]}"


def _sparse_model(dims, indices, values=(1.0, 2.0)):
    sparse = onnx.SparseTensorProto()
    sparse.dims.extend(dims)
    sparse.values.CopyFrom(helper.make_tensor("w", TensorProto.FLOAT, [len(values)], values))
    indices = np.asarray(indices, np.int64)
    sparse.indices.CopyFrom(numpy_helper.from_array(indices, "w_indices"))
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        sparse_initializer=[sparse],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_sparse_initializers_are_checked():
    x = np.zeros((2, 3), np.float32)
    dense = ember.onnx.load(_sparse_model([2, 3], [1, 5]))(x).numpy()
    np.testing.assert_array_equal(dense, [[0, 1, 0], [0, 0, 2]])
    coordinates = ember.onnx.load(_sparse_model([2, 3], [[0, 1], [1, 2]]))(x).numpy()
    np.testing.assert_array_equal(coordinates, dense)
    for dims, indices, problem in (
        ([2, -3], [0, 1], "negative dimension"),
        ([2, 3], [0, 6], "outside its shape"),
        ([2, 3], [[0, 3], [1, 0]], "outside its shape"),
        ([2, 3], [-1, 2], "outside its shape"),
        ([2, 3], [0, 1, 2], r"indices of shape \(3,\) for 2 values"),
        ([2**40, 2**30], [0, 1], "more than ember reads"),
    ):
        with pytest.raises(OnnxError, match=problem):
            ember.onnx.load(_sparse_model(dims, indices))


def test_initializers_named_like_module_attributes():
    names = ["half", "to", "forward", "training"]
    graph = helper.make_graph(
        [helper.make_node("Sum", ["x", *names], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
        [numpy_helper.from_array(np.full(3, i + 1, np.float32), n) for i, n in enumerate(names)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    module = ember.onnx.load(model, trainable=True)
    assert len(list(module.parameters())) == 4
    assert callable(module.half) and callable(module.forward)
    out = module(np.zeros(3, np.float32))
    np.testing.assert_array_equal(out.detach().numpy(), [10, 10, 10])
    out.sum().backward()
    assert all(np.array_equal(p.grad.numpy(), np.ones(3)) for p in module.parameters())


def _saved_with_external_data(folder):
    weights = np.arange(64 * 16, dtype=np.float32).reshape(64, 16) / 100
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 16])],
        [numpy_helper.from_array(weights, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    folder.mkdir()
    onnx.save_model(
        model,
        str(folder / "model.onnx"),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location="weights.bin",
        size_threshold=0,
    )
    return weights


def test_external_data_from_another_working_directory(tmp_path, monkeypatch):
    weights = _saved_with_external_data(tmp_path / "saved")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    x = np.ones((2, 64), np.float32)
    for path in (str(tmp_path / "saved" / "model.onnx"), os.path.join("..", "saved", "model.onnx")):
        np.testing.assert_allclose(ember.onnx.load(path)(x).numpy(), x @ weights, rtol=1e-6)
    module = ember.onnx.load(tmp_path / "saved" / "model.onnx", trainable=True)
    np.testing.assert_allclose(module(x).detach().numpy(), x @ weights, rtol=1e-6)


def test_missing_and_short_external_data_name_the_model_and_tensor(tmp_path):
    _saved_with_external_data(tmp_path / "saved")
    path = tmp_path / "saved" / "model.onnx"
    data = tmp_path / "saved" / "weights.bin"
    data.write_bytes(data.read_bytes()[:100])
    with pytest.raises(OnnxError, match=r"model\.onnx.*'w'.*100-byte file"):
        ember.onnx.load(str(path))
    data.unlink()
    with pytest.raises(OnnxError, match=r"model\.onnx.*'w'.*'weights\.bin' is missing"):
        ember.onnx.load(str(path))
    assert issubclass(OnnxError, EmberError)
