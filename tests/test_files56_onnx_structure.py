"""ONNX models valid-looking past the first checks, each once an escape:

* an attribute of another kind than its operator's schema gives it (ONNX's checker refuses
  these; the importer read attributes by name): a Constant whose ``value`` is a graph returned
  an object array holding a GraphProto to the caller, a LeakyRelu ``alpha`` or a Cast ``to``
  given as text was read as a number; now refused, naming the node, the attribute and both
  kinds;
* external data named with a NUL byte raised a raw ValueError from ``os.path.realpath``; the
  location now goes through the shared `inside_folder` check (_file_limits.py), and the file
  is opened as a regular file (a named pipe or a folder in its place is refused, not waited on);
* many tensors naming the same large external file each read it whole, unbounded in total;
  the bytes read for all of them are held to the machine's memory (lowered here to 64 kB).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import ember
from ember import _file_limits
from ember.errors import OnnxError

onnx = pytest.importorskip("onnx")
from onnx import AttributeProto, TensorProto, helper, numpy_helper  # noqa: E402

X = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
Y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)


def _model(nodes, initializers=()):
    graph = helper.make_graph(nodes, "g", [X], [Y], initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _attribute(name, kind, value):
    attribute = AttributeProto(name=name, type=kind)
    field = {
        AttributeProto.FLOAT: "f",
        AttributeProto.INT: "i",
        AttributeProto.STRING: "s",
    }.get(kind)
    if field is not None:
        setattr(attribute, field, value)
    elif kind == AttributeProto.GRAPH:
        attribute.g.CopyFrom(value)
    elif kind == AttributeProto.TENSOR:
        attribute.t.CopyFrom(value)
    elif kind == AttributeProto.INTS:
        attribute.ints.extend(value)
    return attribute


def _node(op, inputs, attribute):
    node = helper.make_node(op, inputs, ["y"])
    node.attribute.append(attribute)
    return node


_EMPTY_GRAPH = helper.make_graph([], "e", [], [])
_ONE = numpy_helper.from_array(np.array(1))
WRONG_KINDS = {
    "Constant value as a graph": ("Constant", [], ("value", AttributeProto.GRAPH, _EMPTY_GRAPH)),
    "LeakyRelu alpha as text": ("LeakyRelu", ["x"], ("alpha", AttributeProto.STRING, b"0.1")),
    "Cast to as text": ("Cast", ["x"], ("to", AttributeProto.STRING, b"float")),
    "Flatten axis as a tensor": ("Flatten", ["x"], ("axis", AttributeProto.TENSOR, _ONE)),
    "Transpose perm as a float": ("Transpose", ["x"], ("perm", AttributeProto.FLOAT, 1.0)),
}


@pytest.mark.parametrize("case", list(WRONG_KINDS))
def test_an_attribute_of_another_kind_than_its_schema_is_refused(case):
    op, inputs, spec = WRONG_KINDS[case]
    attribute = _attribute(*spec)
    with pytest.raises(OnnxError, match=rf"\({op}\): attribute '{attribute.name}' is \w+, {op}"):
        ember.onnx.load(_model([_node(op, inputs, attribute)]).SerializeToString())


def test_the_same_attributes_of_the_right_kind_load():
    nodes = [helper.make_node("LeakyRelu", ["x"], ["y"], alpha=0.5)]
    got = ember.onnx.load(_model(nodes).SerializeToString())(ember.tensor([[-2.0] * 3] * 2))
    np.testing.assert_allclose(got.numpy(), np.full((2, 3), -1.0))


def _external(name, location, offset=0, length=24):
    tensor = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=[2, 3])
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", offset), ("length", length)):
        tensor.external_data.add(key=key, value=str(value))
    return tensor


def _save(tmp_path, nodes, initializers) -> str:
    path = str(tmp_path / "m.onnx")
    with open(path, "wb") as f:
        f.write(_model(nodes, initializers).SerializeToString())
    return path


@pytest.mark.parametrize("location", ["w.bin\x00x", "fifo", "sub", ""])
def test_an_external_location_that_names_no_regular_file_is_refused(tmp_path, location):
    (tmp_path / "w.bin").write_bytes(bytes(24))
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "sub").mkdir()
    add = [helper.make_node("Add", ["x", "w"], ["y"])]
    with pytest.raises(OnnxError, match=r"m\.onnx: tensor 'w'"):
        ember.onnx.load(_save(tmp_path, add, [_external("w", location)]))
    got = ember.onnx.load(_save(tmp_path, add, [_external("w", "w.bin")]))(ember.ones(2, 3))
    np.testing.assert_array_equal(got.numpy(), np.ones((2, 3)))


def test_many_tensors_reading_one_external_file_are_bounded_in_total(tmp_path, monkeypatch):
    (tmp_path / "w.bin").write_bytes(np.arange(4096, dtype=np.float32).tobytes())
    monkeypatch.setattr(_file_limits, "physical_memory", lambda: 64 << 10)

    def model(count):
        tensors = [_external(f"w{k}", "w.bin", 0, 16384) for k in range(count)]
        for t in tensors:
            t.dims[:] = [4096]
        nodes = [
            helper.make_node("ReduceSum", [f"w{k}"], [f"s{k}"], keepdims=0) for k in range(count)
        ]
        nodes.append(helper.make_node("Sum", ["x", *(f"s{k}" for k in range(count))], ["y"]))
        return nodes, tensors

    ember.onnx.load(_save(tmp_path, *model(3)))  # 48 kB read: within the bound
    with pytest.raises(OnnxError, match=r"tensor 'w4'.*with the tensors read before it"):
        ember.onnx.load(_save(tmp_path, *model(40)))
