"""Hostile ONNX models through the tools that show them (``ember inspect`` and ``ember viz`` of
an .onnx file: onnx/tools.imported_graph, the inspect page, the viewer's HTML, DOT): seeded
mutations of tests/onnx/fuzzing.py's seed models are shown or refused with an `EmberError`,
and names written to be markup or code (node, value, graph and producer names, doc strings,
metadata) never reach the page unescaped."""

from __future__ import annotations

import random
import warnings

import pytest

from ember.graph.dot import to_dot
from ember.tools import inspect as inspect_tool
from ember.tools import viz

from . import files54_fuzzing as fz

onnx = pytest.importorskip("onnx")

from ember.onnx.tools import imported_graph  # noqa: E402

from .onnx import fuzzing as onnx_fuzzing  # noqa: E402

HOSTILE = "</script><img src=x onerror=alert(1)>\"'&{{x}}${x}\n"


def _show(path, batch_size=None) -> str:
    graph, note = imported_graph(str(path), batch_size)
    inspect_tool.inspect_graph(graph, f"{path}: ONNX model, imported", note)
    to_dot(graph)
    return open(viz.html(graph, str(path) + ".html")).read()


def test_hostile_names_never_reach_the_page_unescaped(tmp_path):
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info(HOSTILE + "in", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info(HOSTILE + "out", TensorProto.FLOAT, [2, 3])
    nodes = [
        helper.make_node("Relu", [HOSTILE + "in"], [HOSTILE + "mid"], name=HOSTILE),
        helper.make_node("Neg", [HOSTILE + "mid"], [HOSTILE + "out"], doc_string=HOSTILE),
    ]
    graph = helper.make_graph(nodes, HOSTILE, [x], [y], doc_string=HOSTILE)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.producer_name = model.doc_string = HOSTILE
    model.metadata_props.add(key=HOSTILE, value=HOSTILE)
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    page = _show(path)
    assert "<img" not in page and "onerror=alert" not in page.replace("onerror_alert", "")
    assert page.count("</script>") == page.count("<script")  # only the viewer's own


def test_mutated_models_are_shown_or_refused(tmp_path):
    rng = random.Random(fz.seed())
    seeds = onnx_fuzzing.seeds()
    tally = fz.Tally()
    path = tmp_path / "m.onnx"
    for case in range(fz.cases(300)):
        path.write_bytes(onnx_fuzzing.mutate(rng.choice(seeds), rng))
        size = rng.choice([None, 1, 3])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tally.check(f"case {case}", lambda: _show(path, size))
    assert not tally.escapes, tally.report()
    assert tally.read and tally.refused


def test_a_file_larger_than_any_onnx_model_is_refused_before_it_is_read(tmp_path):
    import tracemalloc

    import ember

    path = tmp_path / "huge.onnx"
    with open(path, "wb") as f:
        f.truncate(3 << 30)  # (sparse: no disk used)
    tracemalloc.start()
    try:
        with pytest.raises(ember.EmberError, match="huge.onnx: .* more than a protobuf"):
            ember.onnx.load(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, peak
