"""Fused programs (ops/program.py) as the graph layer sees them: printed readably, stored by op
name and read back through the registry (a damaged program fails naming the file and the
attribute), compared by value in CSE (constants by their bits)."""

import json

import numpy as np
import pytest

import ember
from ember.graph import Graph, GraphFileError, interpreter, load_graph
from ember.io.checkpoint import read_safetensors, write_safetensors
from ember.ops import REGISTRY
from ember.ops.fused import FUSED
from ember.ops.program import Const, Input, Instr, Program, Temp
from ember.transforms import CSE, DCE, optimize
from ember.transforms.epilogue import EPILOGUE
from ember.transforms.fuse import FUSE
from ember.types import TensorType

F = ember.nn.functional
F32 = ember.float32


def _optimized():
    """A layer with an epilogue and a normalisation ending in reductions, fused at O3."""

    def f(x, w, b):
        h = F.gelu(F.linear(x, w, b)) * 2
        d = x - x.mean(-1, keepdim=True)
        return h, d * (d * d).sum(-1, keepdim=True) * 0.5, (x * 1.702).sigmoid().amax(-1)

    examples = (ember.randn(6, 5), ember.randn(4, 5), ember.randn(4))
    graph = ember.trace(f, *examples, opt_level=0).graph
    arrays = [e.numpy() for e in examples]
    fused, _ = optimize(graph.copy(), passes=[FUSE, DCE, EPILOGUE], check=arrays)
    return fused, arrays


def _fused_nodes(graph):
    return [n for n in graph.nodes if n.kind == "call" and n.op.fused is not None]


def test_a_program_prints_as_its_instructions():
    g = Graph("g")
    x = g.add_input(TensorType((3,), F32), "x")
    y = g.add_input(TensorType((3,), F32), "y")
    program = Program(
        (
            Instr(REGISTRY["mul"], (Input(0), Input(1))),
            Instr(REGISTRY["relu"], (Temp(0),)),
            Instr(REGISTRY["add"], (Temp(1), Const(1.702, F32))),
        )
    )
    out = TensorType((3,), F32)
    g.set_outputs(
        g.add_call(
            FUSED, [x, y], {"program": program, "outputs": (2,), "out_types": (out,)}
        ).outputs
    )
    text = str(g)
    assert "program=[t0 = mul(in0, in1); t1 = relu(t0); t2 = add(t1, 1.702)]" in text
    assert str(program[0]) == "mul(in0, in1)"


def test_an_epilogue_prints_its_producer_by_name():
    fused, _ = _optimized()
    text = str(fused)
    assert "fused_epilogue(" in text and "producer=linear" in text and "t1 = erf(t0)" in text
    assert "sum(t" in text and "axes=(1,), keepdims=True" in text


def test_fused_graphs_round_trip_through_the_registry(tmp_path):
    fused, arrays = _optimized()
    path = tmp_path / "fused.emg"
    fused.save(path)
    loaded = load_graph(path)
    assert str(loaded) == str(fused)
    for a, b in zip(_fused_nodes(fused), _fused_nodes(loaded), strict=True):
        assert a.attrs["program"] == b.attrs["program"] and type(b.attrs["program"]) is Program
        assert all(x.op is y.op for x, y in zip(a.attrs["program"], b.attrs["program"]))
        if "producer" in a.attrs:
            assert b.attrs["producer"] is a.attrs["producer"] is REGISTRY["linear"]
    for x, y in zip(interpreter.run(fused, arrays), interpreter.run(loaded, arrays), strict=True):
        np.testing.assert_array_equal(x, y)


def _saved_fused(tmp_path):
    path = tmp_path / "fused.emg"
    _optimized()[0].save(path)
    return path


def _rewrite_program(path, edit, op="fused_elementwise"):
    """Re-save ``path`` with the first ``op`` node's stored program changed by ``edit``."""
    metadata, arrays = read_safetensors(str(path), lambda m, p: None)
    structure = json.loads(metadata["graph"])
    node = next(n for n in structure["nodes"] if n.get("op") == op)
    record = next(value for key, value in node["attrs"] if key == "program")
    assert record["t"] == "program"
    edit(record["v"])
    metadata = {k: v for k, v in metadata.items() if k != "crc32"}
    write_safetensors(str(path), arrays, {**metadata, "graph": json.dumps(structure)})


@pytest.mark.parametrize(
    "edit, message",
    [
        (
            lambda v: v[0].update(op="mul_but_newer"),
            r"attribute 'program' instruction 0 names the unknown op 'mul_but_newer'",
        ),
        (
            lambda v: v[0].update(op=["mul"]),
            r"attribute 'program' instruction 0: 'op' must be a name",
        ),
        (lambda v: v[0].pop("args"), r"attribute 'program' instruction 0: expected"),
        (lambda v: v[1]["args"].__setitem__(0, ["t", 5]), r"instruction 1: bad operand \['t', 5\]"),
        (lambda v: v[1]["args"].__setitem__(0, ["in", -1]), r"instruction 1: bad operand"),
        (lambda v: v[1]["args"].__setitem__(0, ["k", "1.0", "float32"]), r"bad operand"),
        (
            lambda v: v[1]["args"].__setitem__(0, ["k", 1.0, "float128"]),
            r"unknown dtype 'float128'",
        ),
        (lambda v: v[1]["args"].__setitem__(0, "eval('boom')"), r"bad operand"),
        (lambda v: v[0]["attrs"].append([1, 2]), r"instruction 0 has a malformed attribute entry"),
        (lambda v: v.append(7), r"instruction \d+: expected"),
    ],
)
def test_a_damaged_program_names_the_file_and_the_attribute(tmp_path, edit, message):
    path = _saved_fused(tmp_path)
    _rewrite_program(path, edit)
    with pytest.raises(GraphFileError, match=r"(?s)fused\.emg.*" + message):
        load_graph(path)


def test_a_program_reading_what_is_not_there_fails_verification(tmp_path):
    path = _saved_fused(tmp_path)
    _rewrite_program(path, lambda v: v[0]["args"].__setitem__(0, ["in", 9]))
    with pytest.raises(GraphFileError, match=r"(?s)fused\.emg.*does not verify.*reads in9"):
        load_graph(path)
    path = _saved_fused(tmp_path)
    _rewrite_program(path, lambda v: v[0].update(op="matmul"))  # no C expression
    with pytest.raises(GraphFileError, match=r"(?s)does not verify.*cannot run in a fused loop"):
        load_graph(path)
    path = _saved_fused(tmp_path)
    _rewrite_program(path, lambda v: v[0].update(op="sum"), op="fused_epilogue")
    with pytest.raises(GraphFileError, match=r"(?s)does not verify.*fused_epilogue"):
        load_graph(path)


def _scaled(g, x, k: float):
    program = Program((Instr(REGISTRY["mul"], (Input(0), Const(k, F32))),))
    attrs = {"program": program, "outputs": (0,), "out_types": (TensorType((3,), F32),)}
    return g.add_call(FUSED, [x], attrs).outputs[0]


def test_cse_merges_equal_programs_and_keeps_constants_apart_by_their_bits():
    g = Graph("g")
    x = g.add_input(TensorType((3,), F32), "x")
    values = [_scaled(g, x, k) for k in (2.0, 2.0, 0.0, -0.0, float("nan"), float("nan"))]
    total = values[0]
    for v in values[1:]:  # (one output: CSE never makes two outputs one array)
        total = g.add_call(REGISTRY["add"], [total, v]).outputs[0]
    g.set_outputs([total])
    merged, _ = optimize(g.copy(), passes=[CSE, DCE])
    assert len(_fused_nodes(merged)) == 4  # 2.0 twice and NaN twice are one each; -0.0 stays
    assert Const(-0.0, F32) != Const(0.0, F32) and Const(np.nan, F32) == Const(np.nan, F32)
    assert Const(1.0, F32) != Const(1.0, ember.float64)
