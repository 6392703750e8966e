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
