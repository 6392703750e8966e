"""What ``load(path, trainable=True)`` trains.

* PyTorch's dynamo exporter folds a weight-normed convolution's weight (its magnitude and
  direction, both parameters) into one initializer: it is a parameter, as the TorchScript
  export's folded weight is (onnx/_export_roles.py reads the sources' roles from the
  program's signature on the graph), so both files train the same elements, and a weight
  folded from a buffer and constants is a buffer.
* In a file without PyTorch's signature, a floating initializer no gradient can reach (its
  every path to an output passes through a comparison, a Shape, a Cast to an integer) is a
  buffer, not a parameter (onnx/_gradient_free.py); one reaching an output stays trainable.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto as TP  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx import numpy_helper  # noqa: E402

import ember  # noqa: E402
import ember.onnx  # noqa: E402


@pytest.fixture(scope="module")
def wav2vec_files(tmp_path_factory):
    pytest.importorskip("torch")
    pytest.importorskip("onnxscript", reason="torch.onnx.export(dynamo=True) needs onnxscript")
    from . import _torch_zoo52 as zoo

    folder = tmp_path_factory.mktemp("trainable53")
    files = {}
    for dynamo, opset in ((True, 18), (False, 17)):
        path = folder / f"wav2vec_{int(dynamo)}.onnx"
        zoo.export("wav2vec", path, dynamo=dynamo, opset=opset)
        files[dynamo] = path
    return zoo, files


def _count(module) -> int:
    return sum(p.numel() for p in module.parameters())


def test_folded_weight_norm_is_trained_as_in_the_torchscript_file(wav2vec_files):
    zoo, files = wav2vec_files
    model = zoo.build("wav2vec")
    dynamo = ember.onnx.load(str(files[True]), trainable=True)
    script = ember.onnx.load(str(files[False]), trainable=True)
    assert _count(dynamo) == _count(script)
    # every PyTorch parameter is in both but the weight norm's magnitude, folded into the weight
    magnitude = model.pos.parametrizations.weight.original0
    assert _count(dynamo) == sum(p.numel() for p in model.parameters()) - magnitude.numel()
    # the folded weight has a gradient, and a step changes the output
    wave = ember.tensor(zoo.inputs("wav2vec", 2, 6)[0])
    before = dynamo(wave).detach().numpy()
    loss = dynamo(wave).square().mean()
    loss.backward()
    shapes = {tuple(p.shape) for p in dynamo.parameters()}
    assert (16, 4, 4) in shapes
    assert all(p.grad is not None for p in dynamo.parameters())
    ember.optim.SGD(dynamo.parameters(), lr=0.1).step()
    assert not np.allclose(dynamo(wave).detach().numpy(), before)


def _signed_model(sources: list[str], kinds: dict[str, str]) -> bytes:
    """A dynamo-style file: y = x * w, w folded from ``sources`` whose roles the graph's
    signature text gives (``kinds``)."""
    w = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "w")
    graph = h.make_graph(
        [h.make_node("Mul", ["x", "w"], ["y"])],
        "signed",
        [h.make_tensor_value_info("x", TP.FLOAT, [2, 3])],
        [h.make_tensor_value_info("y", TP.FLOAT, [2, 3])],
        [w],
    )
    info = h.make_tensor_value_info("w", TP.FLOAT, [2, 3])
    entry = info.metadata_props.add()
    entry.key, entry.value = "pkg.onnxscript.optimizer.folded_from", repr(sources)
    graph.value_info.append(info)
    marked = graph.input[0].metadata_props.add()  # (the file's marker that it is torch.export's)
    marked.key, marked.value = "pkg.torch.export.graph_signature.InputSpec.kind", "USER_INPUT"
    text = "\n# inputs\n" + "".join(
        f"p_{n.replace('.', '_')}: {k} target='{n}'\n" for n, k in kinds.items()
    )
    sig = graph.metadata_props.add()
    sig.key, sig.value = "pkg.torch.export.ExportedProgram.graph_signature", text
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 18)]).SerializeToString()


@pytest.mark.parametrize(
    "kinds, role",
    [
        ({"a.weight": "PARAMETER", "b.running": "BUFFER"}, "parameter"),
        ({"a.weight": "BUFFER"}, "buffer"),
        ({"c": "CONSTANT_TENSOR"}, "constant"),
        ({}, "constant"),  # (sources the signature does not list: the exporter's constants)
    ],
)
def test_a_value_folded_from_several_takes_its_sources_role(kinds, role):
    module = ember.onnx.load(_signed_model([*kinds, "val_3", "val_4"], kinds), trainable=True)
    params = dict(module.named_parameters())
    buffers = dict(module.named_buffers())
    assert ("w" in params, "w" in buffers) == (role == "parameter", role == "buffer")
    x = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(module(x).detach().numpy(), np.arange(6).reshape(2, 3))


def _script_model() -> bytes:
    """y = where(x > threshold, x * w, 0) + shift; ``threshold`` reaches the output only
    through a comparison, ``table`` only through its Shape, ``w`` and ``shift`` directly,
    ``unused`` not at all."""
    inits = {
        "threshold": np.array([0.25], np.float32),
        "table": np.zeros((3, 4), np.float32),
        "w": np.full((4,), 2.0, np.float32),
        "shift": np.array([0.5], np.float32),
        "unused": np.ones(2, np.float32),
    }
    nodes = [
        h.make_node("Greater", ["x", "threshold"], ["keep"]),
        h.make_node("Mul", ["x", "w"], ["scaled"]),
        h.make_node("Shape", ["table"], ["dims"]),
        h.make_node("Gather", ["dims", "one"], ["cols"], axis=0),
        h.make_node("Cast", ["cols"], ["colsf"], to=TP.FLOAT),
        h.make_node("Mul", ["scaled", "colsf"], ["wide"]),
        h.make_node("Where", ["keep", "wide", "zero"], ["picked"]),
        h.make_node("Add", ["picked", "shift"], ["y"]),
    ]
    tensors = [numpy_helper.from_array(a, n) for n, a in inits.items()]
    tensors += [
        numpy_helper.from_array(np.array(1, np.int64), "one"),
        numpy_helper.from_array(np.array(0.0, np.float32), "zero"),
    ]
    graph = h.make_graph(
        nodes,
        "script",
        [h.make_tensor_value_info("x", TP.FLOAT, [2, 4])],
        [h.make_tensor_value_info("y", TP.FLOAT, [2, 4])],
        tensors,
    )
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()


def test_initializers_no_gradient_reaches_are_buffers():
    module = ember.onnx.load(_script_model(), trainable=True)
    params, buffers = dict(module.named_parameters()), dict(module.named_buffers())
    # (the cast of a shape gives a float that no initializer's gradient reaches: table is a
    # buffer; "zero" reaches the output through the where's float branch: a parameter)
    assert set(params) == {"w", "shift", "unused", "zero"}, set(params)
    assert {"threshold", "table"} <= set(buffers), set(buffers)
    x = np.array([[0.1, 0.3, -1.0, 2.0], [1.0, 0.2, 0.26, 0.0]], np.float32)
    out = module(x)
    want = np.where(x > 0.25, x * 2.0 * 4.0, 0.0) + 0.5
    np.testing.assert_allclose(out.detach().numpy(), want, rtol=1e-6)
    out.sum().backward()
    assert params["w"].grad is not None and params["shift"].grad is not None
    assert "threshold" in module.state_dict() and "table" in module.state_dict()
