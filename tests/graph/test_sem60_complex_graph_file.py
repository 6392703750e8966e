"""Graph files hold complex64/complex128 constants (as their float parts along a last axis of
2: safetensors has no complex dtype) and complex attribute values (a tagged pair of floats),
and refuse a file whose stored parts or tags do not fit the node's type."""

import json

import numpy as np
import pytest

import ember
from ember.graph import Graph, GraphFileError, interpreter, load_graph, save_graph
from ember.io.checkpoint import read_safetensors, write_safetensors
from ember.ops import REGISTRY
from ember.types import TensorType


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_complex_constants_round_trip(tmp_path, dtype):
    table = np.array([[3j, 1 - 1j, -2.5 + 0.5j]], dtype)

    def f(x):
        return x * (1 + 2j) + ember.tensor(table) + ember.tensor(np.array(-1j, dtype))

    x = np.array([[1j, 2.0, float("inf") - 1j]], dtype)
    graph = ember.trace(f, ember.tensor(x)).graph
    assert any(n.kind == "constant" and n.outputs[0].type.dtype.is_complex for n in graph.nodes)
    path = tmp_path / "c.emg"
    save_graph(graph, path)
    loaded = load_graph(path)
    assert str(loaded) == str(graph)
    (got,) = interpreter.run(loaded, [x])
    (want,) = interpreter.run(graph, [x])
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, f(ember.tensor(x)).numpy())


def test_complex_attribute_values_round_trip(tmp_path):
    g = Graph("c")
    c128, c64 = ember.complex128, ember.complex64
    values = [complex(1.5, -0.0), complex(float("inf"), float("nan")), np.complex64(2 - 3j)]
    for v, d in zip(values, (c128, c128, c64)):
        g.add_call(REGISTRY["full"], [], {"shape": (2,), "value": v, "dtype": d})
    g.set_outputs([n.outputs[0] for n in g.call_nodes()])
    save_graph(g, tmp_path / "a.emg")
    loaded = [n.attrs["value"] for n in load_graph(tmp_path / "a.emg").call_nodes()]
    assert type(loaded[0]) is complex and loaded[0] == values[0]
    assert np.copysign(1, loaded[0].imag) == -1
    assert loaded[1].real == float("inf") and np.isnan(loaded[1].imag)
    assert type(loaded[2]) is np.complex64 and loaded[2] == values[2]


def _saved(tmp_path):
    g = Graph("k")
    x = g.add_input(TensorType((2,), ember.complex128), "x")
    k = g.add_constant(np.array([1 + 1j, 2 - 2j]), "k")
    g.set_outputs(g.add_call(REGISTRY["mul"], [x, k]).outputs)
    path = tmp_path / "k.emg"
    save_graph(g, path)
    return path


def _rewrite(path, edit_structure=None, edit_arrays=None):
    metadata, arrays = read_safetensors(str(path), lambda m, p: None)
    structure = json.loads(metadata["graph"])
    if edit_structure:
        edit_structure(structure)
    if edit_arrays:
        arrays = edit_arrays(dict(arrays))
    metadata = {k: v for k, v in metadata.items() if k != "crc32"}
    write_safetensors(str(path), arrays, {**metadata, "graph": json.dumps(structure)})


@pytest.mark.parametrize(
    "parts",
    [
        np.zeros((2,), np.float64),  # no axis of parts
        np.zeros((2, 3), np.float64),  # three parts
        np.zeros((2, 2), np.float32),  # complex64's parts for a complex128 constant
        np.zeros((2, 2), np.int64),
    ],
)
def test_stored_parts_must_fit_the_type(tmp_path, parts):
    path = _saved(tmp_path)
    _rewrite(path, edit_arrays=lambda a: {**a, "k": parts})
    with pytest.raises(GraphFileError, match=r"k\.emg.*%k.*does not match the constant's type"):
        load_graph(path)


@pytest.mark.parametrize(
    "record",
    [
        {"t": "complex", "v": [1.0]},
        {"t": "complex", "v": ["1", 2.0]},
        {"t": "complex", "v": 3.0},
        {"t": "npscalar", "v": ["complex128", [1.0, "x"]]},
        {"t": "npscalar", "v": ["float64", [1.0, 2.0]]},
        {"t": "npscalar", "v": ["complex64", 1.0]},
    ],
)
def test_bad_complex_payloads_are_named(tmp_path, record):
    path = _saved(tmp_path)

    def edit(s):
        next(n for n in s["nodes"] if n.get("op") == "mul")["attrs"].append(["junk", record])

    _rewrite(path, edit)
    with pytest.raises(GraphFileError, match=r"k\.emg.*attribute 'junk'.*bad payload"):
        load_graph(path)
