"""Generated Python never holds a name as code: value names, symbol names, the graph's name, op
names and attribute keys that are no plain identifiers are spelled safely (runtime/codegen.py),
and a graph file whose names would be code is refused when loaded (graph/load.py)."""

import json

import numpy as np
import pytest

import ember
from ember.graph import Graph, GraphFileError, load_graph, sym
from ember.io.checkpoint import read_safetensors, write_safetensors
from ember.ops import REGISTRY
from ember.runtime.codegen import compile_graph
from ember.symbolic import SymDim
from ember.types import TensorType

F32 = ember.float32
HOSTILE = "N=0;__import__('os').system('touch M');x"


def _symbolic_relu(name="small"):
    g = Graph(name)
    x = g.add_input(TensorType((sym("N"), 4), F32), "x")
    y = g.add_call(REGISTRY["relu"], [x]).outputs[0]
    z = g.add_call(REGISTRY["reshape"], [y], {"shape": (sym("N") * 2, 2)}).outputs[0]
    g.set_outputs([z])
    return g


def _rewrite(path, out, edit):
    metadata, arrays = read_safetensors(str(path), lambda m, p: None)
    structure = json.loads(metadata["graph"])
    edit(structure)
    metadata = {k: v for k, v in metadata.items() if k != "crc32"}
    write_safetensors(str(out), arrays, {**metadata, "graph": json.dumps(structure)})


def _symbols_renamed(structure, new):
    text = json.dumps(structure).replace('"N"', json.dumps(new))
    structure.clear()
    structure.update(json.loads(text))


def test_a_graph_file_whose_symbol_name_is_code_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _symbolic_relu().save("g.emg")
    _rewrite("g.emg", "h.emg", lambda s: _symbols_renamed(s, HOSTILE))
    with pytest.raises(GraphFileError, match=r"h\.emg.*symbol name .* is not an identifier"):
        load_graph("h.emg")
    assert not (tmp_path / "M").exists()


@pytest.mark.parametrize(
    "edit, field",
    [
        (lambda s: s["nodes"][0]["outputs"][0].update(name="x);import os;(y"), "'name'"),
        (lambda s: s.update(name="small\nimport os"), "'name' should be printable"),
        (lambda s: s["nodes"][2]["attrs"][0].__setitem__(0, "shape=1,x"), "attribute key"),
        (lambda s: s["nodes"][1].update(scope="a\x1b[2Jb"), "scope must be printable"),
    ],
)
def test_names_the_graph_api_would_not_make_are_refused(tmp_path, edit, field):
    _symbolic_relu().save(tmp_path / "g.emg")
    _rewrite(tmp_path / "g.emg", tmp_path / "h.emg", edit)
    with pytest.raises(GraphFileError, match=field):
        load_graph(tmp_path / "h.emg")


def test_hostile_names_in_a_graph_in_memory_compile_to_safe_code(tmp_path, monkeypatch):
    """The code generator does not rely on the loader: names built in memory are spelled
    safely, results are right and nothing runs."""
    monkeypatch.chdir(tmp_path)
    hostile = SymDim(1, ((HOSTILE, 1),))
    g = Graph("x(): pass\nimport os\ndef y")
    x = g.add_input(TensorType((hostile, 4), F32), "x")
    y = g.add_call(REGISTRY["relu"], [x]).outputs[0]
    z = g.add_call(REGISTRY["reshape"], [y], {"shape": (hostile * 2, 2)}).outputs[0]
    g.set_outputs([z])
    x.name = "x, __import__('os').system('touch M')"  # the Graph API never makes such a name
    y.name = "y = 0\n__import__('os').system('touch M')\n"
    compiled = compile_graph(g)
    assert "touch" not in compiled.source and "import" not in compiled.source
    data = np.arange(-12, 12, dtype=np.float32).reshape(6, 4)
    (out,) = compiled(data)
    np.testing.assert_array_equal(out, np.maximum(data, 0).reshape(12, 2))
    assert not (tmp_path / "M").exists()


def test_an_attribute_key_that_is_no_identifier_is_never_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    g = Graph("keys")
    x = g.add_input(TensorType((2, 3), F32), "x")
    node = g.add_call(REGISTRY["sum"], [x], {"axes": (1,), "keepdims": False})
    g.set_outputs(node.outputs)
    node.attrs["keepdims=False, **{}) or __import__('os').system('touch M') or ("] = 1
    compiled = compile_graph(g)
    assert "touch" not in compiled.source
    # the kernel is handed an unknown keyword and says so (the suite's check, conftest.py, runs
    # the interpreter too, which wraps the error)
    with pytest.raises((TypeError, ember.EmberError), match="unexpected keyword"):
        compiled(np.ones((2, 3), np.float32))
    assert not (tmp_path / "M").exists()


def test_unusual_but_valid_names_still_run():
    """Unicode letters (what Graph._fresh keeps of a hint) and graph names that would shadow
    the code's own globals."""
    for name in ("c_0", "_sole", "class", "graph"):
        g = Graph(name)
        x = g.add_input(TensorType((3,), F32), "größe")
        y = g.add_call(REGISTRY["relu"], [x], names=["ausgabe_ä"]).outputs[0]
        z = g.add_call(REGISTRY["mul"], [y, g.add_constant(np.float32([1, 2, 3]))]).outputs[0]
        g.set_outputs([z])
        (out,) = compile_graph(g)(np.float32([-1, 2, 3]))
        np.testing.assert_array_equal(out, [0, 4, 9])
