"""How the default executor times an imported graph's nodes and candidates
(runtime/cgraph.py `measure_nodes`, runtime/auto.py `_clock`): nodes of one signature (a
transformer's repeated layers) share one measurement and the costliest signatures are measured
first, so a budget that runs out leaves the cheap nodes to the tables rather than the large
products (a ViT's 16 GEMMs had been priced by the tables at four times their time, which kept
its graph off the C runner); with one thread the candidates are timed in process CPU time. The
imported model's results are checked against onnxruntime on the chosen program."""

from __future__ import annotations

import time

import numpy as np
import pytest

import ember
from ember.kernels import ccompile
from ember.runtime import auto, cgraph

needs_c = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")


def _layers(x, w_big, w):
    y = ember.relu(x @ w_big)  # the costliest node: measured first
    for _ in range(3):  # three nodes of one signature
        y = ember.tanh(y @ w)
    return y


def _graph():
    rng = np.random.default_rng(0)
    x = ember.tensor(rng.standard_normal((64, 96)).astype(np.float32))
    w_big = ember.tensor(rng.standard_normal((96, 80)).astype(np.float32))
    w = ember.tensor(rng.standard_normal((80, 80)).astype(np.float32))
    return ember.trace(_layers, x, w_big, w).graph


@needs_c
def test_nodes_of_one_signature_share_a_measurement():
    graph = _graph()
    steps = cgraph.c_steps(graph)
    assert steps is not None, str(graph)
    measured = cgraph.measure_nodes(graph, steps, reps=1)
    calls = [i for i, n in enumerate(graph.nodes) if n.kind == "call"]
    assert set(measured) == set(calls)
    groups: dict = {}
    for i in calls:
        groups.setdefault(cgraph._signature(graph.nodes[i]), []).append(measured[i])
    assert any(len(times) == 3 for times in groups.values()), groups.keys()
    for times in groups.values():
        assert all(t == times[0] for t in times)  # (one measurement, shared)
        assert all(s > 0 for s in times[0])


@needs_c
def test_the_costliest_signature_is_measured_first():
    graph = _graph()
    steps = cgraph.c_steps(graph)
    measured = cgraph.measure_nodes(graph, steps, reps=1, budget_s=0.0)  # one group, then out
    calls = [i for i, n in enumerate(graph.nodes) if n.kind == "call"]
    costliest = max(calls, key=lambda i: cgraph._work(graph.nodes[i]))
    assert set(measured) == {costliest}
    assert graph.nodes[costliest].inputs[1].type.shape == (96, 80)


def test_one_thread_times_candidates_in_cpu_time():
    threads = ember.get_num_threads()
    try:
        ember.set_num_threads(1)
        assert auto._clock() is time.process_time
        ember.set_num_threads(2)
        assert auto._clock() is time.perf_counter
    finally:
        ember.set_num_threads(threads)


def test_an_imported_mlp_stack_matches_onnxruntime_on_one_thread(tmp_path):
    """Three blocks of one signature (layer norm, linear, GELU, linear, residual)."""
    torch = pytest.importorskip("torch")
    ort = pytest.importorskip("onnxruntime")
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm, self.up, self.down = nn.LayerNorm(48), nn.Linear(48, 96), nn.Linear(96, 48)

        def forward(self, x):
            return x + self.down(nn.functional.gelu(self.up(self.norm(x))))

    torch.manual_seed(0)
    model = nn.Sequential(Block(), Block(), Block()).eval()
    x = torch.randn(2, 17, 48)
    path = str(tmp_path / "mlp.onnx")
    torch.onnx.export(model, (x,), path, dynamo=False, opset_version=17, input_names=["x"])
    options = ort.SessionOptions()
    options.log_severity_level = 3
    want = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"]).run(
        None, {"x": x.numpy()}
    )[0]
    threads = ember.get_num_threads()
    try:
        ember.set_num_threads(1)
        f = ember.onnx.load(path)
        got = f(ember.tensor(x.numpy())).numpy()
    finally:
        ember.set_num_threads(threads)
    assert f.eager_reason is None
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@needs_c
def test_unmeasured_nodes_are_priced_by_the_tables_scaled_to_the_measured_ones():
    """A budget that measured one node of an op leaves the others priced by the tables times
    that op's measured-to-table ratio, per side (generated code, worker, alone)."""
    from ember.runtime.parallel_cost import _estimate, calibrate, scaled_to_measured

    graph = _graph()
    calibration = calibrate().for_c_runner()
    steps = cgraph.c_steps(graph)
    measured = cgraph.measure_nodes(graph, steps, reps=1, budget_s=0.0)
    (first,) = measured
    filled = scaled_to_measured(graph, calibration, measured)
    calls = [i for i, n in enumerate(graph.nodes) if n.kind == "call"]
    assert set(filled) == set(calls) and filled[first] == measured[first]
    table = _estimate(graph.nodes[first], calibration)
    tables = (table.seconds, table.worker_seconds, table.alone_seconds or table.worker_seconds)
    ratios = [m / t for m, t in zip(measured[first], tables)]
    checked = 0
    for p in calls:
        node = graph.nodes[p]
        if p == first or node.op.name != graph.nodes[first].op.name:
            continue
        other = _estimate(node, calibration)
        sides = (other.seconds, other.worker_seconds, other.alone_seconds or other.worker_seconds)
        np.testing.assert_allclose(filled[p], [s * r for s, r in zip(sides, ratios)], rtol=1e-9)
        checked += 1
    assert checked >= 3  # (the three products of one signature, unmeasured)
