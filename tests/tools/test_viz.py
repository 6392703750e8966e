"""ember.tools.viz and graph.to_dot: DOT structure (fused clusters, nested control flow, types on
edges, phase styles), Graphviz parsing and SVG, the viewer's data and layout, training-step
phases, and the `ember viz` command on every built-in model and on bad graph files."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import ember
from ember.cli import main
from ember.graph.printer import format_type
from ember.models import EXAMPLE_STEPS
from ember.tools import viz

from .graphs import hostile, nested_control_flow, step, synthetic

needs_dot = pytest.mark.skipif(
    shutil.which("dot") is None,
    reason="Graphviz's dot is not installed (Debian: apt-get install graphviz)",
)


def clusters(dot_text: str) -> list[tuple[str, tuple[str, ...]]]:
    """Each cluster of a DOT text with the clusters enclosing it, outermost first."""
    stack, found = [], []
    for line in dot_text.splitlines():
        opened = re.match(r"\s*subgraph (\w+) \{", line)
        if opened:
            found.append((opened[1], tuple(stack)))
            stack.append(opened[1])
        elif line.strip() == "}" and stack:
            stack.pop()
    return found


def test_dot_has_a_cluster_per_fused_group_and_types_on_edges():
    graph, phases = step("gpt")
    text = graph.to_dot(phases)
    fused = [n for n in graph.call_nodes() if n.op.fused is not None]
    assert len(fused) > 10  # the GPT step after the passes
    names = [name for name, _ in clusters(text)]
    assert sum(name.startswith("cluster_fused_") for name in names) == len(fused)
    # each member op of each group is drawn: one box per program instruction (+ the producer)
    members = sum(len(n.attrs["program"]) + (n.op.name == "fused_epilogue") for n in fused)
    member_boxes = 0
    for cluster in re.findall(r"subgraph cluster_fused_\d+ \{(.*?)\n  \}", text, re.S):
        member_boxes += len(re.findall(r"^\s+n\d+ \[", cluster, re.M))
    assert member_boxes == members
    # every value's type labels its edges: the activations' f32[8, 128, 256] among them
    assert 'label="f32[8, 128, 256]"' in text
    edge_labels = set(re.findall(r'-> \w+ \[label="([^"]*)"', text))
    assert {format_type(v.type) for v in graph.inputs} <= edge_labels


def test_dot_styles_the_phases_apart():
    graph, phases = step("mlp")
    text = graph.to_dot(phases)
    counts = {p: sum(1 for n in graph.nodes if phases[n] == p) for p in viz.PHASES}
    assert all(counts.values()), counts
    backward_nodes = re.findall(r'\[label="[^"]*"[^\]]*class="backward"\]', text)
    assert backward_nodes and all('style="rounded,filled,dashed"' in b for b in backward_nodes)
    assert re.search(r"-> \w+ \[[^\]]*style=dashed", text)  # backward edges dashed
    forward_nodes = re.findall(r'\[label="[^"]*"[^\]]*class="forward"\]', text)
    assert forward_nodes and not any("dashed" in f for f in forward_nodes)


def test_dot_nests_control_flow_bodies():
    graph = nested_control_flow()
    found = dict(clusters(graph.to_dot()))
    loop = [c for c, outer in found.items() if c.startswith("cluster_control_") and not outer]
    assert len(loop) == 1
    # the cond inside the loop body: control cluster inside a body cluster inside the loop's
    inner = [c for c, outer in found.items() if c.startswith("cluster_control_") and outer]
    assert len(inner) == 1 and found[inner[0]][0] == loop[0]
    assert found[inner[0]][1].startswith("cluster_body_")
    branches = [c for c, outer in found.items() if outer and outer[-1] == inner[0]]
    assert len(branches) == 2  # true_branch and false_branch


@needs_dot
@pytest.mark.parametrize("which", ["gpt", "control"])
def test_dot_parses_with_graphviz(which):
    graph, phases = step("gpt") if which == "gpt" else (nested_control_flow(), None)
    done = subprocess.run(
        ["dot", "-Tcanon"], input=viz.dot(graph, phases=phases).encode(), capture_output=True
    )
    assert done.returncode == 0, done.stderr.decode()


@needs_dot
def test_svg_export(tmp_path):
    graph, phases = step("mlp")
    path = viz.svg(graph, tmp_path / "mlp.svg", phases)
    root = ET.parse(path).getroot()
    assert root.tag.endswith("svg")
    groups = [g.get("class", "") for g in root.iter("{http://www.w3.org/2000/svg}g")]
    # one SVG group per drawn box: a node per graph node, fused nodes as their members
    boxes = sum(
        len(n.attrs["program"]) + (n.target == "fused_epilogue") if n.op and n.op.fused else 1
        for n in graph.nodes
    )
    assert sum(c.startswith("node") for c in groups) == boxes + len(graph.outputs)
    assert any("backward" in c for c in groups) and any("optimizer" in c for c in groups)


@needs_dot
def test_svg_of_a_hostile_graph_holds_its_names_as_text_only(tmp_path):
    graph, payload = hostile()
    root = ET.parse(viz.svg(graph, tmp_path / "hostile.svg")).getroot()
    tags = {element.tag.rsplit("}", 1)[-1] for element in root.iter()}
    assert tags <= {"svg", "g", "title", "text", "path", "polygon", "ellipse", "polyline"}, tags
    assert not [k for e in root.iter() for k in e.attrib if k.lower().startswith("on")]
    texts = " ".join(e.text or "" for e in root.iter() if e.tag.endswith("text"))
    assert payload[:20] in texts


def test_html_of_a_hostile_graph_holds_no_markup_of_its_own(tmp_path):
    graph, _ = hostile()
    page = (tmp_path / "h.html").read_text() if viz.html(graph, tmp_path / "h.html") else ""
    assert "<img" not in page and "<!--" not in page
    assert page.count("<script") == 2 and page.count("</script>") == 2
    assert page.count("<title>") == 1 and page.count("</title>") == 1


def test_svg_without_graphviz_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setattr(viz.shutil, "which", lambda name: None)
    with pytest.raises(viz.VizError, match="apt-get install graphviz"):
        viz.svg(nested_control_flow(), tmp_path / "x.svg")
    assert not list(tmp_path.iterdir())


def test_step_phases_split_where_the_trace_did():
    graph, phases = step("mlp")
    loss = graph.outputs[0].node
    assert phases[loss] == "forward"
    # the step returns the loss, then per parameter its SGD update (optimizer) and its .grad
    # (backward), each of the parameter's shape
    params = [tuple(p.shape) for p in ember.models.example_step("mlp").model.parameters()]
    by_phase: dict = {}
    for v in graph.outputs[1:]:
        by_phase.setdefault(phases[v.node], []).append(tuple(v.shape))
    assert sorted(by_phase["optimizer"]) == sorted(params)
    assert sorted(by_phase["backward"]) == sorted(params)
    # the weight gradients (matmuls against saved activations) are backward, the forward has
    # none: it multiplies by the weights with linear / its fused epilogue
    matmuls = [n for n in graph.call_nodes() if n.target == "matmul"]
    assert matmuls and all(phases[n] == "backward" for n in matmuls)
    forward, forward_phases = step("mlp", forward_only=True)
    assert all(forward_phases[n] == "forward" for n in forward.nodes)


def test_node_table_costs_and_layout():
    graph, phases = step("gpt")
    table = viz.node_table(graph, phases)
    nodes = table["nodes"]
    assert len(nodes) == len(graph.nodes)
    for record, node in zip(nodes, graph.nodes):
        if node.target == "matmul":  # analytic: 2 * (output elements) * (contracted size)
            k = node.inputs[0].shape[-1]
            assert record["flops"] == 2 * int(np.prod(node.outputs[0].shape)) * k
        if node.kind == "call":
            assert record["memory"] == sum(
                int(np.prod(v.shape)) * v.dtype.itemsize for v in node.outputs
            )
        assert record["outputs"][0]["shape"] == [str(d) for d in node.outputs[0].shape]
    position = {id(n): i for i, n in enumerate(graph.nodes)}
    for a, b, _ in table["edges"]:  # every edge points down
        assert nodes[b]["y"] > nodes[a]["y"]
    rows: dict = {}
    for r in nodes:
        rows.setdefault(r["y"], []).append((r["x"] - r["w"] / 2, r["x"] + r["w"] / 2))
    for boxes in rows.values():  # no two boxes of a layer overlap
        boxes.sort()
        assert all(left >= right for (_, right), (left, _) in zip(boxes, boxes[1:]))
    assert position  # (the table is in graph order)


def test_html_is_self_contained(tmp_path):
    graph, phases = step("gpt")
    path = viz.html(graph, tmp_path / "gpt.html", phases)
    page = open(path).read()
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)  # nothing fetched
    data = json.loads(
        re.search(r'<script id="graph-data" type="application/json">(.*?)</script>', page, re.S)[1]
    )
    assert len(data["nodes"]) == len(graph.nodes)
    assert "emberViewer" in page and "#details" in page  # the JS and CSS are inlined
    assert {r["phase"] for r in data["nodes"]} == set(viz.PHASES)


def test_layout_of_a_large_graph():
    graph = synthetic(5000)
    table = viz.node_table(graph)
    assert len(table["nodes"]) == 5000
    ys = [r["y"] for r in table["nodes"]]
    assert all(ys[b] > ys[a] for a, b, _ in table["edges"])


# ------------------------------------------------------------------------------ ember viz
@pytest.mark.parametrize("name", EXAMPLE_STEPS)
def test_cli_draws_every_built_in_model(name, tmp_path, capsys):
    out = tmp_path / f"{name}.html"
    assert main(["viz", name, "-o", str(out)]) == 0
    graph, _ = step(name)
    assert f"{len(graph.nodes)} nodes" in capsys.readouterr().out
    page = out.read_text()
    assert page.count('"phase":"backward"') > 0 and page.count('"phase":"optimizer"') > 0


def test_cli_forward_only_and_dot(tmp_path):
    out = tmp_path / "cnn.dot"
    assert main(["viz", "cnn", "--forward-only", "-o", str(out)]) == 0
    text = out.read_text()
    assert 'class="forward"' in text and 'class="backward"' not in text


def test_cli_draws_a_saved_graph_file(tmp_path):
    graph, _ = step("resnet")
    graph.save(tmp_path / "resnet.graph")
    # (a multi-output node whose stored names the loader's fresh names would permute: the
    # loader used to refuse this file, "the value name %59 is already taken")
    assert str(ember.load_graph(tmp_path / "resnet.graph")) == str(graph)
    assert main(["viz", str(tmp_path / "resnet.graph"), "-o", str(tmp_path / "r.html")]) == 0
    data = (tmp_path / "r.html").read_text()
    assert data.count('"op":') == len(ember.load_graph(tmp_path / "resnet.graph").nodes)


@pytest.mark.parametrize(
    "edit",
    [
        lambda program, attrs: attrs.update(outputs={"t": "tuple", "v": [{"t": "int", "v": 9}]}),
        lambda program, attrs: program[0]["args"].__setitem__(1, ["in", 7]),
        lambda program, attrs: program.pop(),
        lambda program, attrs: program[1].update(op="sum"),
    ],
)
def test_cli_dot_of_a_malformed_fused_program_is_a_clean_error(tmp_path, capsys, edit):
    import json

    from ember.io.checkpoint import read_safetensors, write_safetensors

    def f(x, b):
        return ((x + b).relu() * 2.0).sum(axis=1)

    path = tmp_path / "fused.graph"
    ember.trace(f, ember.randn(4, 3), ember.randn(3), opt_level=3).graph.save(path)
    metadata, arrays = read_safetensors(str(path), lambda m, p: None)
    structure = json.loads(metadata["graph"])
    node = next(n for n in structure["nodes"] if n.get("op") == "fused_reduce")
    attrs = {key: record for key, record in node["attrs"]}
    edit(attrs["program"]["v"], attrs)
    node["attrs"] = [[key, record] for key, record in attrs.items()]
    write_safetensors(str(path), arrays, {**metadata, "graph": json.dumps(structure)})
    assert main(["viz", str(path), "-o", str(tmp_path / "x.dot")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ember viz: error:") and str(path) in err and "Traceback" not in err
    assert not (tmp_path / "x.dot").exists()


def test_cli_missing_and_corrupt_graph_files(tmp_path, capsys):
    missing = tmp_path / "nothing.graph"
    assert main(["viz", str(missing), "-o", str(tmp_path / "a.html")]) == 2
    err = capsys.readouterr().err
    assert str(missing) in err and "no such file" in err and "Traceback" not in err
    corrupt = tmp_path / "corrupt.graph"
    nested_control_flow().save(corrupt)
    blob = bytearray(corrupt.read_bytes())
    blob[-5] ^= 0xFF  # a flipped byte in a constant's data: its CRC no longer matches
    corrupt.write_bytes(bytes(blob))
    assert main(["viz", str(corrupt), "-o", str(tmp_path / "b.html")]) == 2
    err = capsys.readouterr().err
    assert str(corrupt) in err and "Traceback" not in err
    assert not (tmp_path / "a.html").exists() and not (tmp_path / "b.html").exists()
    assert main(["viz", "mlp", "-o", str(tmp_path / "c.png")]) == 2
    assert ".html, .svg" in capsys.readouterr().err


def test_cli_error_in_a_real_process(tmp_path):
    """As a user runs it: exit status 2, one line naming the file, no traceback."""
    junk = tmp_path / "junk.graph"
    junk.write_bytes(b"not a graph at all")
    done = subprocess.run(
        [sys.executable, "-m", "ember.cli", "viz", str(junk), "-o", str(tmp_path / "x.html")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert str(junk) in done.stderr and "Traceback" not in done.stderr
