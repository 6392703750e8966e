"""ONNX files are hostile input: damaged, crafted or wrong models and calls give an
`OnnxError` (an EmberError) naming the problem, never a raw traceback, and nothing reads
outside the model's folder."""

from __future__ import annotations

import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import ember  # noqa: E402
from ember.errors import EmberError, OnnxError  # noqa: E402

from . import fuzzing  # noqa: E402

F32 = TensorProto.FLOAT


def _add_model(opset: int = 17, **graph_kwargs):
    x = helper.make_tensor_value_info("x", F32, [2, 3])
    out = helper.make_tensor_value_info("out", F32, [2, 3])
    nodes = graph_kwargs.pop("nodes", [helper.make_node("Add", ["x", "w"], ["out"])])
    inits = graph_kwargs.pop("inits", [numpy_helper.from_array(np.ones((2, 3), np.float32), "w")])
    graph = helper.make_graph(nodes, "g", [x], [out], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def test_a_valid_model_runs_and_matches_numpy(tmp_path):
    path = tmp_path / "add.onnx"
    onnx.save(_add_model(), path)
    f = ember.onnx.load(str(path))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(f(x).numpy(), x + 1)
    np.testing.assert_array_equal(f(x=x).numpy(), x + 1)
    assert "add" in str(f.graph)


def test_truncated_and_random_files_are_refused_naming_the_file(tmp_path):
    data = _add_model().SerializeToString()
    cut = tmp_path / "cut.onnx"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(OnnxError, match="cut.onnx"):
        ember.onnx.load(str(cut))
    noise = tmp_path / "noise.onnx"
    noise.write_bytes(bytes(np.random.default_rng(0).integers(0, 256, 300, dtype=np.uint8)))
    with pytest.raises(OnnxError, match="noise.onnx"):
        ember.onnx.load(str(noise))
    with pytest.raises(OnnxError, match="no such ONNX model"):
        ember.onnx.load(str(tmp_path / "missing.onnx"))
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    with pytest.raises(OnnxError, match="empty.onnx"):
        ember.onnx.load(str(empty))


def test_unknown_operator_and_domain_are_named():
    model = _add_model(nodes=[helper.make_node("NoSuchOp", ["x", "w"], ["out"])])
    with pytest.raises(OnnxError, match="NoSuchOp"):
        ember.onnx.load(model)
    model = _add_model(nodes=[helper.make_node("Add", ["x", "w"], ["out"], domain="com.example")])
    with pytest.raises(OnnxError, match="com.example"):
        ember.onnx.load(model)


def test_an_opset_domain_that_is_not_text_is_refused():
    """protobuf hands a string field that is not UTF-8 over as bytes (found by the fuzzer:
    sorting the domains for the error message raised a TypeError)."""
    model = _add_model()
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    data = model.SerializeToString().replace(b"com.microsoft", b"com.\xffmicrosof")
    with pytest.raises(OnnxError, match="not valid UTF-8"):
        ember.onnx.load(data)


def test_undefined_names_cycles_and_missing_outputs_are_refused():
    model = _add_model(nodes=[helper.make_node("Add", ["x", "nowhere"], ["out"])])
    with pytest.raises(OnnxError, match="nowhere"):
        ember.onnx.load(model)
    cyclic = _add_model(
        nodes=[
            helper.make_node("Add", ["x", "b"], ["a"]),
            helper.make_node("Relu", ["a"], ["b"]),
            helper.make_node("Identity", ["b"], ["out"]),
        ]
    )
    with pytest.raises(OnnxError, match="'b'"):
        ember.onnx.load(cyclic)
    twice = _add_model(
        nodes=[
            helper.make_node("Add", ["x", "w"], ["out"]),
            helper.make_node("Relu", ["x"], ["out"]),
        ]
    )
    with pytest.raises(OnnxError, match="already defined"):
        ember.onnx.load(twice)
    no_output = _add_model(nodes=[helper.make_node("Add", ["x", "w"], ["other"])])
    with pytest.raises(OnnxError, match="never computed"):
        ember.onnx.load(no_output)


def test_absurd_declared_sizes_are_refused_before_allocating():
    huge = TensorProto()
    huge.name, huge.data_type = "w", F32
    huge.dims.extend([2**30, 2**30])
    with pytest.raises(OnnxError, match="more than ember reads"):
        ember.onnx.load(_add_model(inits=[huge]))
    lying = numpy_helper.from_array(np.ones((2, 3), np.float32), "w")
    lying.dims[0] = 5
    with pytest.raises(OnnxError, match="bytes"):
        ember.onnx.load(_add_model(inits=[lying]))


def test_an_empty_batch_does_not_hide_an_absurd_dimension():
    # a zero batch makes the element count 0, but no array can have a 2**62-long axis: refused
    # with the node named (a fuzzed Upsample once reached NumPy's ValueError in a pass)
    x = helper.make_tensor_value_info("x", F32, [0, 2, 2, 2])
    out = helper.make_tensor_value_info("out", F32, None)
    scales = numpy_helper.from_array(np.array([1, 1, 2.0**62, 2], np.float32), "scales")
    node = helper.make_node("Resize", ["x", "", "scales"], ["out"], mode="nearest")
    graph = helper.make_graph([node], "g", [x], [out], initializer=[scales])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(OnnxError, match="Resize.*no array can index"):
        ember.onnx.load(model)(np.zeros((0, 2, 2, 2), np.float32))


@pytest.mark.parametrize("location", ["../secret.bin", "/etc/passwd", "sub/../../secret.bin"])
def test_external_data_outside_the_models_folder_is_refused(tmp_path, location):
    folder = tmp_path / "model"
    folder.mkdir()
    (tmp_path / "secret.bin").write_bytes(np.ones(6, np.float32).tobytes())
    tensor = TensorProto()
    tensor.name, tensor.data_type = "w", F32
    tensor.dims.extend([2, 3])
    tensor.data_location = TensorProto.EXTERNAL
    entry = tensor.external_data.add()
    entry.key, entry.value = "location", location
    onnx.save(_add_model(inits=[tensor]), folder / "m.onnx")
    with pytest.raises(OnnxError, match="outside the model's folder|leads outside"):
        ember.onnx.load(str(folder / "m.onnx"))


def test_external_data_inside_the_folder_loads_and_bad_offsets_are_refused(tmp_path):
    weights = np.arange(6, dtype=np.float32).reshape(2, 3)
    (tmp_path / "w.bin").write_bytes(b"\0" * 8 + weights.tobytes())

    def model(offset, length):
        tensor = TensorProto()
        tensor.name, tensor.data_type = "w", F32
        tensor.dims.extend([2, 3])
        tensor.data_location = TensorProto.EXTERNAL
        for key, value in (("location", "w.bin"), ("offset", str(offset)), ("length", str(length))):
            entry = tensor.external_data.add()
            entry.key, entry.value = key, value
        path = tmp_path / f"m{offset}_{length}.onnx"
        onnx.save(_add_model(inits=[tensor]), path)
        return str(path)

    f = ember.onnx.load(model(8, 24))
    np.testing.assert_array_equal(f(np.zeros((2, 3), np.float32)).numpy(), weights)
    with pytest.raises(OnnxError, match="outside its"):
        ember.onnx.load(model(8, 4096))
    with pytest.raises(OnnxError):
        ember.onnx.load(model(-4, 24))
    # bytes of a model with external data cannot find them: a clear error, not a guess
    with pytest.raises(OnnxError, match="external"):
        ember.onnx.load(open(model(8, 24), "rb").read())


def test_wrong_inputs_at_call_time_are_named():
    f = ember.onnx.load(_add_model())
    good = np.zeros((2, 3), np.float32)
    with pytest.raises(OnnxError, match="'x' must be float32, got float64"):
        f(good.astype(np.float64))
    with pytest.raises(OnnxError, match=r"'x' must have shape \(2, 3\), got \(3, 2\)"):
        f(good.T.copy())
    with pytest.raises(OnnxError, match="no input 'y'"):
        f(y=good)
    with pytest.raises(OnnxError, match="'x' is missing"):
        f()
    with pytest.raises(OnnxError, match="2 inputs given"):
        f(good, good)


def test_the_seeds_are_valid():
    for data in fuzzing.seeds():
        fuzzing.run(data)


@pytest.mark.parametrize("seed", range(4))
def test_a_seeded_slice_of_mutations_raises_only_ember_errors(seed):
    tally = fuzzing.fuzz(count=60, seed=seed)
    assert tally["runs"] == 60
    assert not tally["failures"], tally["failures"][0][1]


@pytest.mark.skipif(not os.environ.get("EMBER_FUZZ_SECONDS"), reason="set EMBER_FUZZ_SECONDS")
def test_long_fuzz():
    tally = fuzzing.fuzz(seconds=float(os.environ["EMBER_FUZZ_SECONDS"]), seed=1234)
    problems = [problem for _, problem in tally["failures"]]
    assert not problems, f"{len(problems)} of {tally['runs']}: {problems[:5]}"


def test_every_error_is_an_ember_error():
    assert issubclass(OnnxError, EmberError)
