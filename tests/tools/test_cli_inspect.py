"""``ember inspect``: every built-in model's page holds the numbers the tools compute on their
own, a saved graph file's page its node count and FLOPs, and bad files give one-line errors."""

from __future__ import annotations

import subprocess
import sys

import pytest

import ember
from ember.cli import main
from ember.models import EXAMPLE_STEPS
from ember.tools import memory
from ember.tools.flops import count_graphs
from ember.tools.viz import example_graph

from .graphs import nested_control_flow


@pytest.mark.parametrize("name", EXAMPLE_STEPS)
def test_inspect_every_built_in_model(name, capsys):
    assert main(["inspect", name]) == 0
    out = capsys.readouterr().out
    for section in ("summary", "FLOPs of one training step", "memory of one training step"):
        assert section in out
    assert "optimization passes" in out and "fuse" in out
    report = memory(name)
    assert f"peak {report.peak_bytes / 2**20:.2f} MiB" in out
    assert "per layer" in out and "saved activations" in out


def test_inspect_batch_size(capsys):
    assert main(["inspect", "mlp", "--batch-size", "32"]) == 0
    out = capsys.readouterr().out
    assert "batch (32, 784)" in out
    assert f"peak {memory('mlp', batch_size=32).peak_bytes / 2**20:.2f} MiB" in out


def test_inspect_a_saved_graph_file(tmp_path, capsys):
    graph, _ = example_graph("resnet")
    path = tmp_path / "resnet.graph"
    graph.save(path)
    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    loaded = ember.load_graph(path)
    assert f"{len(loaded.nodes)} nodes" in out
    assert f"total {count_graphs({'forward': loaded}).total:,} FLOPs" in out
    assert "memory plan of the graph as stored" in out and "optimization passes" in out


def test_inspect_a_control_flow_graph_file(tmp_path, capsys):
    path = tmp_path / "loops.graph"
    nested_control_flow().save(path)
    assert main(["inspect", str(path)]) == 0
    assert "memory plan" in capsys.readouterr().out


def test_missing_corrupt_and_foreign_files(tmp_path, capsys):
    cases = {"missing": tmp_path / "missing.graph", "directory": tmp_path}
    corrupt = tmp_path / "corrupt.graph"
    nested_control_flow().save(corrupt)
    blob = bytearray(corrupt.read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    corrupt.write_bytes(bytes(blob))
    cases["corrupt"] = corrupt
    checkpoint = tmp_path / "weights.ckpt"
    ember.save({"w": ember.randn(3)}, checkpoint)
    cases["checkpoint"] = checkpoint
    expected = {
        "missing": "no such file",
        "directory": "is a directory",
        "corrupt": "",
        "checkpoint": "not an ember graph file",
    }
    for case, path in cases.items():
        assert main(["inspect", str(path)]) == 2, case
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err, (case, err)
        assert err.startswith("ember inspect: error:") and str(path) in err, (case, err)
        assert expected[case] in err, (case, err)
    assert main(["inspect", "gtp"]) == 2
    assert "mlp, cnn, gpt, resnet" in capsys.readouterr().err


def test_inspect_in_a_real_process(tmp_path):
    missing = tmp_path / "none.graph"
    done = subprocess.run(
        [sys.executable, "-m", "ember.cli", "inspect", str(missing)], capture_output=True, text=True
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip() == (
        f"ember inspect: error: inspect: {missing}: no such file; MODEL is a graph file written "
        "by graph.save or one of the built-in models mlp, cnn, gpt, resnet"
    )


def _placeholder_graph():
    """A training loss built on placeholders: a symbolic batch N, as ember's own graphs have."""
    with ember.Graph() as g:
        x = ember.placeholder((None, 784), name="x")
        y = ember.placeholder((None,), dtype=ember.int64, name="y")
        loss = ember.nn.functional.cross_entropy(ember.models.mlp(784, 32, 10)(x), y)
    g.set_outputs([loss.value])
    return g


def test_inspect_a_graph_file_with_a_symbolic_batch(tmp_path, capsys):
    path = tmp_path / "symbolic.graph"
    _placeholder_graph().save(path)
    totals = {}
    for size in (None, 64):
        assert main(["inspect", str(path)] + ([] if size is None else ["--batch-size", "64"])) == 0
        out = capsys.readouterr().out
        assert f"symbolic sizes counted as N = {size or 1}" in out
        totals[size] = int(out.split("total ")[1].split(" FLOPs")[0].replace(",", ""))
    assert totals[64] > 30 * totals[None]  # (the weights' random init does not scale)
    fixed = tmp_path / "fixed.graph"
    nested_control_flow().save(fixed)
    assert main(["inspect", str(fixed), "--batch-size", "8"]) == 2
    assert "has no symbolic sizes" in capsys.readouterr().err


def test_inspect_a_graph_file_with_values_past_int64(tmp_path, capsys):
    from ember.graph import Graph
    from ember.ops import REGISTRY
    from ember.types import TensorType

    g = Graph("big")
    x = g.add_input(TensorType((4,), ember.float32), "x")
    attrs = {"shape": (2**32, 2**32), "value": 1.0, "dtype": ember.float32}
    f = g.add_call(REGISTRY["full"], [], attrs).outputs[0]
    s = g.add_call(REGISTRY["sum"], [f], {"axes": (0, 1), "keepdims": False}).outputs[0]
    g.set_outputs([g.add_call(REGISTRY["mul"], [x, s]).outputs[0]])
    path = tmp_path / "big.graph"
    g.save(path)
    assert main(["inspect", str(path)]) == 0
    assert "68719476736.00 GiB" in capsys.readouterr().out  # 2**66 bytes, counted exactly


def test_inspect_a_batch_too_large_for_memory_is_refused_up_front(capsys):
    assert main(["inspect", "mlp", "--batch-size", "1000000000"]) == 2
    err = capsys.readouterr().err
    assert "--batch-size 1000000000" in err and "choose a smaller batch" in err
    assert err.count("\n") == 1
