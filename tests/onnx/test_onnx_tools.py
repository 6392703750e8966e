"""``ember inspect model.onnx`` and ``ember viz model.onnx -o page.html`` on imported models."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from ember.cli import main  # noqa: E402


def _model(path, batch="N"):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3])
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, [batch, 3])
    nodes = [helper.make_node("Add", ["x", "w"], ["s"]), helper.make_node("Tanh", ["s"], ["out"])]
    w = numpy_helper.from_array(np.ones(3, np.float32), "w")
    graph = helper.make_graph(nodes, "tiny", [x], [out], initializer=[w])
    onnx.save(helper.make_model(graph), path)
    return str(path)


def test_inspect_an_onnx_model(tmp_path, capsys):
    path = _model(tmp_path / "tiny.onnx")
    assert main(["inspect", path, "--batch-size", "4"]) == 0
    page = capsys.readouterr().out
    assert "ONNX model, imported" in page
    assert "N captured as 4" in page
    assert "24 FLOPs" in page  # add + tanh over 4 x 3 elements
    assert main(["inspect", _model(tmp_path / "fixed.onnx", batch=2), "--batch-size", "4"]) == 2
    assert "no dynamic sizes" in capsys.readouterr().err


def test_viz_an_onnx_model(tmp_path, capsys):
    path = _model(tmp_path / "tiny.onnx")
    out = tmp_path / "tiny.html"
    assert main(["viz", path, "-o", str(out)]) == 0
    page = out.read_text()
    assert "<html" in page.lower()
    assert "nodes" in capsys.readouterr().out


def test_a_damaged_onnx_file_is_one_line_error(tmp_path, capsys):
    path = tmp_path / "bad.onnx"
    path.write_bytes(b"\x08\x07garbage")
    assert main(["inspect", str(path)]) == 2
    err = capsys.readouterr().err
    assert "bad.onnx" in err and "Traceback" not in err


def _image_model(path):
    """A 3x3 convolution and a 2x2 pooling over an image of dynamic height and width: the
    tools' first guess of 1 for them is too small."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "H", "W"])
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, None)
    w = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"]),
        helper.make_node("MaxPool", ["c"], ["out"], kernel_shape=[2, 2], strides=[2, 2]),
    ]
    onnx.save(helper.make_model(helper.make_graph(nodes, "img", [x], [out], [w])), path)
    return str(path)


def test_inspect_an_image_model_with_dynamic_height_and_width(tmp_path, capsys):
    assert main(["inspect", _image_model(tmp_path / "img.onnx")]) == 0
    assert "captured as 32" in capsys.readouterr().out
    assert main(["viz", _image_model(tmp_path / "img.onnx"), "-o", str(tmp_path / "i.html")]) == 0


def test_inspect_a_model_whose_shapes_depend_on_its_data(tmp_path, capsys):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N"])
    out = helper.make_tensor_value_info("out", TensorProto.INT64, None)
    graph = helper.make_graph([helper.make_node("NonZero", ["x"], ["out"])], "nz", [x], [out])
    path = tmp_path / "nz.onnx"
    onnx.save(helper.make_model(graph), path)
    assert main(["inspect", str(path)]) == 2
    err = capsys.readouterr().err
    assert "computes shapes or control flow from its data" in err and "NonZero" in err
