"""The graph file format: lossless round trips (printout, names, attributes, constants, random
generator state, execution) and clear errors for damaged, foreign or inconsistent files."""

import json
import os

import numpy as np
import pytest
import safetensors.numpy

import ember
from ember import models
from ember.graph import Graph, GraphError, GraphFileError, interpreter, load_graph, save_graph, sym
from ember.io.checkpoint import read_safetensors, write_safetensors
from ember.ops import REGISTRY
from ember.types import TensorType

F32 = ember.float32


def _symbolic_graph():
    n = sym("N")
    g = Graph("small")
    x = g.add_input(TensorType((n, 4), F32), "x")
    w = g.add_input(TensorType((3, 4), F32), "w")
    h = g.add_call(REGISTRY["linear"], [x, w]).outputs[0]
    scale = g.add_constant(np.arange(12, dtype=np.float32).reshape(1, 12)[:, :3], "scale")
    y = g.add_call(REGISTRY["mul"], [h, scale]).outputs[0]
    s = g.add_call(REGISTRY["sum"], [y], {"axes": (1,), "keepdims": False}).outputs[0]
    g.set_outputs([s, h])
    return g


def _inputs_for(graph, batch=5, seed=0):
    rng = np.random.default_rng(seed)
    arrays = []
    for v in graph.inputs:
        shape = tuple(batch if isinstance(d, ember.graph.SymDim) else d for d in v.shape)
        arrays.append(rng.standard_normal(shape).astype(v.dtype.np))
    return arrays


def _round_trip(graph, tmp_path, name="g.emg"):
    path = tmp_path / name
    graph.save(path)
    loaded = ember.load_graph(path)
    assert loaded is not graph
    assert str(loaded) == str(graph)
    assert [v.name for v in loaded.inputs] == [v.name for v in graph.inputs]
    assert [v.type for v in loaded.inputs] == [v.type for v in graph.inputs]
    for a, b in zip(graph.call_nodes(), loaded.call_nodes()):
        assert a.op is b.op
        assert list(a.attrs) == list(b.attrs)
    return loaded


def _assert_same_results(a, b, arrays):
    for x, y in zip(interpreter.run(a, arrays), interpreter.run(b, arrays), strict=True):
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_array_equal(x, y)


def test_symbolic_graph_round_trips(tmp_path):
    g = _symbolic_graph()
    loaded = _round_trip(g, tmp_path)
    total = next(n for n in loaded.call_nodes() if n.target == "sum")
    assert total.attrs == {"axes": (1,), "keepdims": False} and type(total.attrs["axes"]) is tuple
    assert loaded.inputs[0].shape[0] == sym("N")
    np.testing.assert_array_equal(loaded.constants["scale"], g.constants["scale"])
    _assert_same_results(g, loaded, _inputs_for(g))


def test_traced_cnn_round_trips(tmp_path):
    x = ember.randn(2, 1, 28, 28)
    g = ember.trace(models.cnn(1, 28, 10), x).graph
    loaded = _round_trip(g, tmp_path)
    _assert_same_results(g, loaded, _inputs_for(g))


def test_traced_mlp_with_constants_round_trips(tmp_path):
    model = models.mlp(8, 16, 4)

    def f(x):
        return ember.relu(model(x * 0.5)) * 2.0 + 1.0

    g = ember.trace(f, ember.randn(3, 8)).graph
    assert sum(n.kind == "constant" for n in g.nodes) >= 3
    loaded = _round_trip(g, tmp_path)
    assert loaded.constants.keys() == g.constants.keys()
    for name, array in g.constants.items():
        assert loaded.constants[name].dtype == array.dtype
        np.testing.assert_array_equal(loaded.constants[name], array)
    _assert_same_results(g, loaded, _inputs_for(g))


def test_generator_state_round_trips(tmp_path):
    gen = ember.Generator(3)

    def f(x):
        y = ember.nn.functional.dropout(x, 0.5, training=True, generator=gen)
        return ember.nn.functional.dropout(y, 0.25, training=True, generator=gen)

    g = ember.trace(f, ember.randn(6, 7)).graph
    draws = [n for n in g.call_nodes() if n.op.kind == "random"]
    assert len(draws) == 2 and all(n.attrs["generator"] is gen for n in draws)
    gen.numpy.random(5)  # advance it: the file must hold the state at save time, not the seed
    loaded = _round_trip(g, tmp_path)
    new = [n.attrs["generator"] for n in loaded.call_nodes() if n.op.kind == "random"]
    assert new[0] is new[1] and new[0] is not gen  # shared before, shared after
    assert new[0].json_state() == gen.json_state()
    # same starting state, so the same draws (and the generators advance in step)
    _assert_same_results(g, loaded, _inputs_for(g))
    assert new[0].json_state() == gen.json_state()


def test_default_generator_loads_as_the_default(tmp_path):
    g = ember.trace(lambda x: ember.nn.functional.dropout(x, 0.5), ember.randn(4)).graph
    loaded = _round_trip(g, tmp_path)
    node = next(n for n in loaded.call_nodes() if n.op.kind == "random")
    assert node.attrs["generator"] is ember.default_generator


def test_attributes_keep_their_types(tmp_path):
    g = Graph("attrs")
    values = [-0.0, float("inf"), float("-inf")]
    outs = [
        g.add_call(REGISTRY["full"], [], {"shape": (2,), "value": v, "dtype": F32}).outputs[0]
        for v in values
    ]
    nan = g.add_call(REGISTRY["full"], [], {"shape": [3], "value": float("nan"), "dtype": F32})
    x = g.add_input(TensorType((sym("N"), 4), F32), "x")
    r = g.add_call(REGISTRY["reshape"], [x], {"shape": (sym("N") * 2, 2)})
    g.set_outputs([*outs, nan.outputs[0], r.outputs[0]])
    loaded = _round_trip(g, tmp_path)
    nodes = list(loaded.call_nodes())
    for node, v in zip(nodes, values):
        assert node.attrs["value"] == v and np.copysign(1, node.attrs["value"]) == np.copysign(1, v)
        assert type(node.attrs["shape"]) is tuple and node.attrs["dtype"] is F32
    assert np.isnan(nodes[3].attrs["value"]) and nodes[3].attrs["shape"] == [3]
    assert nodes[4].attrs["shape"] == (sym("N") * 2, 2)


def test_names_survive_edits(tmp_path):
    """Names that the Graph API would not regenerate in order (edits, insertion points)."""
    g = _symbolic_graph()
    first = next(g.call_nodes())
    with g.inserting_before(first):
        neg = g.add_call(REGISTRY["neg"], [g.inputs[0]])
    first.replace_input(g.inputs[0], neg.outputs[0])
    g.inputs.reverse()
    assert [n.name for n in g.call_nodes()][:2] == ["3", "0"]
    _round_trip(g, tmp_path)


def test_save_overwrites_atomically_and_verifies(tmp_path):
    path = tmp_path / "g.emg"
    save_graph(_symbolic_graph(), path)
    before = path.read_bytes()
    bad = _symbolic_graph()
    next(bad.call_nodes()).attrs["junk"] = {"not": "storable"}
    with pytest.raises(GraphError):
        bad.save(path)  # the verifier rejects the unknown attribute before anything is written
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["g.emg"]  # no temporary file left behind


def test_unstorable_attribute_is_named(tmp_path):
    g = Graph("odd")
    x = g.add_input(TensorType((2,), F32), "x")
    node = g.add_call(REGISTRY["random_bernoulli"], [x], {"generator": ember.Generator(1)})
    g.set_outputs(node.outputs)
    node.attrs["generator"] = object()  # still typed by the rule, but not storable
    with pytest.raises(GraphFileError, match="attribute 'generator'.*object"):
        g.save(tmp_path / "odd.emg")
    assert not (tmp_path / "odd.emg").exists()


# ------------------------------------------------------------------------------------ errors
@pytest.fixture
def saved(tmp_path):
    path = tmp_path / "g.emg"
    _symbolic_graph().save(path)
    return path


def _rewrite(path, edit):
    """Re-save ``path`` with its graph JSON changed by ``edit`` (a valid file otherwise)."""
    metadata, arrays = read_safetensors(str(path), lambda m, p: None)
    structure = json.loads(metadata["graph"])
    edit(structure)
    metadata = {k: v for k, v in metadata.items() if k != "crc32"}
    write_safetensors(str(path), arrays, {**metadata, "graph": json.dumps(structure)})


def _call(structure, op):
    return next(n for n in structure["nodes"] if n.get("op") == op)


def test_corrupt_tensor_bytes(saved):
    data = bytearray(saved.read_bytes())
    data[-3] ^= 0xFF
    saved.write_bytes(bytes(data))
    with pytest.raises(GraphFileError, match=r"(?s)g\.emg.*corrupt"):
        load_graph(saved)


def test_corrupt_header(saved):
    data = bytearray(saved.read_bytes())
    data[12] = ord("\x01")
    saved.write_bytes(bytes(data))
    with pytest.raises(GraphFileError, match=r"g\.emg"):
        load_graph(saved)


@pytest.mark.parametrize("keep", [0, 5, 40, -7])
def test_truncated_file(saved, keep):
    data = saved.read_bytes()
    saved.write_bytes(data[:keep])
    with pytest.raises(GraphFileError, match=r"(?s)g\.emg.*(truncated|empty|only)"):
        load_graph(saved)


def test_foreign_files(tmp_path):
    plain = tmp_path / "plain.safetensors"
    safetensors.numpy.save_file({"a": np.zeros(3, np.float32)}, str(plain))
    with pytest.raises(GraphFileError, match="plain safetensors file, not an ember graph"):
        load_graph(plain)
    checkpoint = tmp_path / "ckpt.safetensors"
    ember.save({"w": ember.randn(2)}, checkpoint)
    with pytest.raises(GraphFileError, match="ember checkpoint, not an ember graph"):
        load_graph(checkpoint)
    text = tmp_path / "notes.txt"
    text.write_text("graph small(%x: f32[N, 4]) { return (%x) }\n" * 4)
    with pytest.raises(GraphFileError, match="notes.txt"):
        load_graph(text)
    with pytest.raises(GraphFileError, match="no such file"):
        load_graph(tmp_path / "missing.emg")


def test_errors_are_ember_errors(saved):
    saved.write_bytes(b"")
    with pytest.raises(ember.EmberError):
        load_graph(saved)
    assert issubclass(GraphFileError, GraphError)


def test_unknown_op(saved):
    _rewrite(saved, lambda s: _call(s, "mul").update(op="mul_but_newer"))
    with pytest.raises(GraphFileError, match=r"g\.emg.*unknown op 'mul_but_newer'"):
        load_graph(saved)


def test_bad_attribute_tag(saved):
    def edit(s):
        _call(s, "sum")["attrs"][0][1]["t"] = "frozenset"

    _rewrite(saved, edit)
    with pytest.raises(GraphFileError, match=r"g\.emg.*attribute 'axes'.*unknown attribute tag"):
        load_graph(saved)


def test_bad_attribute_payload(saved):
    def edit(s):
        _call(s, "sum")["attrs"][1][1] = {"t": "bool", "v": 1}

    _rewrite(saved, edit)
    with pytest.raises(GraphFileError, match="bad payload 1 for tag 'bool'"):
        load_graph(saved)


def test_dangling_reference(saved):
    _rewrite(saved, lambda s: _call(s, "mul")["inputs"].__setitem__(0, "nowhere"))
    with pytest.raises(GraphFileError, match=r"g\.emg.*%nowhere, which no earlier node defines"):
        load_graph(saved)


def test_dangling_output(saved):
    _rewrite(saved, lambda s: s.update(outputs=["ghost"]))
    with pytest.raises(GraphFileError, match="graph output refers to %ghost"):
        load_graph(saved)


def test_duplicate_value_name(saved):
    _rewrite(saved, lambda s: _call(s, "sum")["outputs"][0].update(name="x"))
    with pytest.raises(GraphFileError, match="%x is defined twice"):
        load_graph(saved)


def test_wrong_stored_type_fails_verification(saved):
    _rewrite(saved, lambda s: _call(s, "sum")["outputs"][0]["type"].update(dtype="float64"))
    with pytest.raises(GraphFileError, match="does not verify"):
        load_graph(saved)


def test_missing_field_and_future_version(saved, tmp_path):
    _rewrite(saved, lambda s: s.pop("nodes"))
    with pytest.raises(GraphFileError, match="no 'nodes' entry"):
        load_graph(saved)
    other = tmp_path / "v2.emg"
    _symbolic_graph().save(other)
    metadata, arrays = read_safetensors(str(other), lambda m, p: None)
    metadata = {k: v for k, v in metadata.items() if k != "crc32"}
    write_safetensors(str(other), arrays, {**metadata, "ember_graph": "2"})
    with pytest.raises(GraphFileError, match="format version '2'"):
        load_graph(other)


def _nested(depth):
    record = {"t": "int", "v": 1}
    for _ in range(depth):
        record = {"t": "tuple", "v": [record]}
    return record


@pytest.mark.parametrize(
    "payload, message",
    [
        ({"t": {"a": 1}, "v": 1}, "unknown attribute tag"),  # an unhashable tag
        ({"t": ["int"], "v": 1}, "unknown attribute tag"),
        (_nested(400), "nest more than 32 deep"),
        ({"t": "float", "v": 10**400}, "bad payload"),  # float() of it would overflow
        ({"t": "int", "v": 2**70}, "bad payload"),
    ],
)
def test_hostile_attribute_records(saved, payload, message):
    def edit(s):
        _call(s, "sum")["attrs"][0][1] = payload

    _rewrite(saved, edit)
    with pytest.raises(GraphFileError, match=rf"g\.emg.*attribute 'axes'.*{message}"):
        load_graph(saved)


def test_an_int_of_too_many_digits_in_the_json(saved):
    metadata, arrays = read_safetensors(str(saved), lambda m, p: None)
    text = metadata["graph"].replace('"coefficient":1', '"coefficient":' + "9" * 5000, 1)
    metadata = {k: v for k, v in metadata.items() if k != "crc32"}
    write_safetensors(str(saved), arrays, {**metadata, "graph": text})
    with pytest.raises(GraphFileError, match=r"g\.emg.*not valid JSON"):
        load_graph(saved)


@pytest.mark.parametrize("dim", [-1, 2**64, 1.5, True, {"sym": {"coefficient": 0, "factors": []}}])
def test_bad_dimensions(saved, dim):
    _rewrite(saved, lambda s: _call(s, "sum")["outputs"][0]["type"]["shape"].__setitem__(0, dim))
    with pytest.raises(GraphFileError, match=r"g\.emg.*(bad dimension|bad symbolic dimension)"):
        load_graph(saved)


def test_no_flipped_header_bit_loads_as_a_different_graph(saved):
    """The header's checksum (ember.io.checkpoint) covers graph files too: every third
    single-bit flip of the header is refused or changes nothing."""
    data = saved.read_bytes()
    text = str(load_graph(saved))
    length = int.from_bytes(data[:8], "little")
    outcomes = {"refused": 0, "same": 0, "different": 0}
    for k in range(0, 8 * (8 + length), 3):
        damaged = bytearray(data)
        damaged[k // 8] ^= 1 << (k % 8)
        saved.write_bytes(bytes(damaged))
        try:
            loaded = load_graph(saved)
        except GraphFileError:
            outcomes["refused"] += 1
            continue
        outcomes["same" if str(loaded) == text else "different"] += 1
    assert outcomes["different"] == 0, outcomes


def test_graph_inputs_must_list_each_input_node_once(saved):
    """(Found by the fuzzer: a value named twice among the inputs made generated code with a
    duplicate argument; an input node left out, code reading a value no argument gives.)"""
    _rewrite(saved, lambda s: s.update(inputs=["x", "x", "w"]))
    with pytest.raises(GraphFileError, match="inputs name a value twice"):
        load_graph(saved)
    _rewrite(saved, lambda s: s.update(inputs=["x"]))
    with pytest.raises(GraphFileError, match="input node %w is not among the graph's inputs"):
        load_graph(saved)
