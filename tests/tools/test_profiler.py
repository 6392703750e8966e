"""ember.profiler: events, their nesting in the Chrome trace, counts, costs, memory, the table
and the roofline classes, eager and compiled."""

import json
from collections import Counter

import numpy as np
import pytest

import ember
import ember.models
import ember.nn as nn
import ember.nn.functional as F
from ember import profiler
from ember.ops import _registry as _reg
from ember.ops._registry import REGISTRY
from ember.profiler import compiled as profiled_kernels
from ember.profiler import recorder
from ember.profiler.roofline import Peaks, bound
from ember.runtime import codegen
from ember.types import TensorType

# fixed peaks for the tests that do not test the roofline (no measurement needed)
PEAKS = Peaks(gflops=100.0, gbps=10.0)
X_EVENT_FIELDS = {"name": str, "ph": str, "ts": (int, float), "dur": (int, float),
                  "pid": int, "tid": int}  # fmt: skip


def small_model():
    ember.manual_seed(0)
    return nn.Sequential(nn.Linear(20, 16), nn.ReLU(), nn.Linear(16, 4))


def batch():
    rng = np.random.default_rng(0)
    x = ember.tensor(rng.standard_normal((8, 20)).astype(np.float32))
    return x, ember.tensor(rng.integers(0, 4, 8))


def load_trace(prof, tmp_path) -> list[dict]:
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(path, peaks=PEAKS)
    trace = json.loads(path.read_text())
    assert isinstance(trace["traceEvents"], list)
    for e in trace["traceEvents"]:
        assert e["ph"] in ("X", "M"), e
        if e["ph"] == "M":  # metadata: names of the process and threads
            assert e["name"] in ("process_name", "thread_name") and "name" in e["args"]
            assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
            continue
        for key, kind in X_EVENT_FIELDS.items():
            assert isinstance(e.get(key), kind), (key, e)
        assert e["ts"] >= 0 and e["dur"] >= 0
    return [e for e in trace["traceEvents"] if e["ph"] == "X"]


def end(e) -> float:
    return e["ts"] + e["dur"]


def inside(child, parent) -> bool:
    return (
        child["tid"] == parent["tid"]
        and parent["ts"] <= child["ts"]
        and end(child) <= end(parent)
        and child is not parent
    )


def check_nesting(events: list[dict]) -> dict:
    """Every two events of a thread are disjoint or one holds the other; returns each event's
    innermost enclosing event (id -> event or None)."""
    for i, a in enumerate(events):
        for b in events[i + 1 :]:
            if a["tid"] != b["tid"]:
                continue
            disjoint = end(a) <= b["ts"] or end(b) <= a["ts"]
            assert disjoint or inside(a, b) or inside(b, a), (a, b)
    parents = {}
    for e in events:
        holders = [p for p in events if inside(e, p)]  # (no two spans are equal: ns apart)
        parents[id(e)] = min(holders, key=lambda p: p["dur"]) if holders else None
    return parents


def test_eager_trace_nests_ops_in_user_ranges_and_backward(tmp_path):
    model, (x, y) = small_model(), batch()
    with profiler.profile(record_shapes=True, profile_memory=True) as prof:
        with profiler.record_function("step"):
            with profiler.record_function("forward"):
                loss = F.cross_entropy(model(x), y)
            loss.backward()
    events = load_trace(prof, tmp_path)
    parents = check_nesting(events)
    (step,) = [e for e in events if e["name"] == "step"]
    (forward,) = [e for e in events if e["name"] == "forward"]
    (backward,) = [e for e in events if e["name"] == "backward"]
    assert parents[id(forward)] is step and parents[id(backward)] is step
    forward_ops = [e for e in events if e["cat"] == "op"]
    backward_ops = [e for e in events if e["cat"] == "backward" and e["args"]]
    assert forward_ops and backward_ops
    assert all(parents[id(e)] is forward for e in forward_ops)
    # each op of the backward pass runs inside the range of the tape node whose VJP it is
    for e in backward_ops:
        node_range = parents[id(e)]
        assert node_range["name"].endswith(("Backward", "Backward0"))
        assert inside(node_range, backward)
    assert {"AddmmBackward0", "ReluBackward0"} <= {parents[id(e)]["name"] for e in backward_ops}
    op = forward_ops[0]
    fields = {"input_shapes", "flops", "bytes", "gflops_per_s", "gb_per_s", "bound"}
    assert fields <= set(op["args"])


def test_compiled_trace_nests_kernels_in_the_graph_call(tmp_path):
    example = ember.models.example_step("mlp", batch=16)
    fn = ember.function(example.step)
    fn()  # trace and compile outside the profile
    with profiler.profile() as prof:
        for _ in range(2):
            with profiler.record_function("step"):
                fn()
    events = load_trace(prof, tmp_path)
    parents = check_nesting(events)
    graphs = [e for e in events if e["cat"] == "graph"]
    kernels = [e for e in events if e["cat"] == "kernel"]
    assert len(graphs) == 2 and all(parents[id(g)]["name"] == "step" for g in graphs)
    assert all(parents[id(k)] in graphs for k in kernels)
    # one event per generated kernel call, a fused group being one call named by its ops
    calls = [n for n in fn.graph.nodes if n.kind == "call"]
    assert len(kernels) == 2 * len(calls)
    expected = Counter(profiled_kernels.kernel_name(n) for n in calls)
    assert Counter(k["name"] for k in kernels) == Counter({k: 2 * v for k, v in expected.items()})
    assert any(k["name"].startswith("fused_") and "(" in k["name"] for k in kernels)
    assert {k["args"]["node"] for k in kernels} == {"%" + n.name for n in calls}


def test_compiled_function_backward_nests_under_the_tape_node(tmp_path):
    model, (x, y) = small_model(), batch()
    forward = ember.function(lambda x, y: F.cross_entropy(model(x), y))
    forward(x, y).backward()
    with profiler.profile() as prof:
        forward(x, y).backward()
    events = load_trace(prof, tmp_path)
    parents = check_nesting(events)
    graphs = [e for e in events if e["cat"] == "graph"]
    assert len(graphs) == 2  # the forward graph, then the AOT backward graph
    forward_graph, backward_graph = sorted(graphs, key=lambda e: e["ts"])
    assert parents[id(forward_graph)] is None
    chain, e = [], backward_graph
    while (e := parents[id(e)]) is not None:
        chain.append(e["name"])
    assert chain == ["compiled_function_backward", "CompiledFunctionBackward", "backward"]
    for k in (e for e in events if e["cat"] == "kernel"):
        assert parents[id(k)] in graphs


def test_eager_call_counts_equal_the_ops_the_model_runs():
    model, (x, _) = small_model(), batch()
    y = ember.randn(8, 4)

    def forward(x, y):
        return F.mse_loss(F.softmax(model(x), dim=-1), y)

    with ember.no_grad():
        # the reference: the graph of the same function, captured without any pass
        graph = ember.trace(forward, x, y, opt_level=0).graph
        with profiler.profile() as prof:
            forward(x, y)
            forward(x, y)
    expected = Counter(n.op.name for n in graph.nodes if n.kind == "call")
    got = Counter(e.name for e in prof.events() if e.cat == "op")
    assert got == Counter({k: 2 * v for k, v in expected.items()})
    rows = {r.name: r.calls for r in prof.key_averages()}
    assert all(rows[name] == 2 * count for name, count in expected.items())


def test_depthwise_convolution_flops_are_the_analytic_counts():
    # each of the three ops does the forward's multiply-adds: 2 N C K out per op for a
    # depthwise layer (torch's flop counter counts the weight gradient C times over)
    n, c, size, k = 2, 8, 9, 3
    x = ember.randn(n, c, size, size, requires_grad=True)
    w = ember.randn(c, 1, k, k, requires_grad=True)
    with profiler.profile() as prof:
        F.conv2d(x, w, padding=1, groups=c).sum().backward()
    analytic = 2 * n * c * k * k * size * size
    counted = {e.name: e.flops for e in prof.events() if e.name.startswith("conv")}
    assert counted == {"conv": analytic, "conv_input_grad": analytic, "conv_weight_grad": analytic}


def test_flops_follow_the_cost_rules():
    a, b = ember.randn(32, 48), ember.randn(48, 24)
    with profiler.profile() as prof:
        ember.matmul(a, b)
    (mm,) = prof.events()
    assert mm.flops == 2 * 32 * 48 * 24  # analytic
    t32 = ember.float32
    in_types = (TensorType((32, 48), t32), TensorType((48, 24), t32))
    rule = REGISTRY["matmul"].cost(in_types, (TensorType((32, 24), t32),), {})
    assert (mm.flops, mm.bytes) == (rule.flops, rule.bytes)

    # a fused group costs the sum of its ops' rules: compare with the same ops run eagerly
    def f(x, y):
        return ember.tanh(x * y + x).exp()

    x, y = ember.randn(64, 32), ember.randn(64, 32)
    compiled = ember.function(f)
    compiled(x, y)
    with profiler.profile() as eager, ember.no_grad():
        f(x, y)
    with profiler.profile() as fused, ember.no_grad():
        compiled(x, y)
    (kernel,) = [e for e in fused.events() if e.cat == "kernel"]
    assert kernel.name == "fused_elementwise(mul+add+tanh+exp)"
    assert kernel.flops == sum(e.flops for e in eager.events())
    assert kernel.bytes == 3 * 64 * 32 * 4  # one pass: two inputs read, one output written


def test_compiled_costs_use_each_call_s_own_sizes():
    w = ember.randn(32, 16)

    def f(x):
        return (x @ w).reshape(-1, 4, 4).sum(axis=2)

    compiled = ember.function(f, input_signature=[ember.TensorSpec((None, 32))])
    compiled(ember.randn(5, 32))  # traced once, with a symbolic batch N
    a, b = ember.randn(7, 32), ember.randn(3, 32)
    with profiler.profile() as prof:
        compiled(a)
        compiled(b)
    kernels = [e for e in prof.events() if e.cat == "kernel"]
    assert [(e.name, e.flops) for e in kernels if e.name != "reshape"] == [
        ("matmul", 2 * 7 * 32 * 16),
        ("sum", 7 * 16),
        ("matmul", 2 * 3 * 32 * 16),
        ("sum", 3 * 16),
    ]
    assert [e.attrs["shape"] for e in kernels if e.name == "reshape"] == [(7, 4, 4), (3, 4, 4)]


def test_memory_allocated_is_the_new_output_bytes():
    x, y = ember.randn(16, 32), ember.randn(16, 32)
    with profiler.profile(profile_memory=True) as prof:
        s = x + y
        s.reshape(32, 16)  # a view: no new memory
        ember.matmul(x, y.transpose(0, 1))
        ember.split(s, 8, dim=0)  # views
    by_name = {e.name: e for e in prof.events()}
    assert by_name["add"].allocated == s.numpy().nbytes == 16 * 32 * 4
    assert by_name["reshape"].allocated == 0
    assert by_name["matmul"].allocated == 16 * 16 * 4
    assert by_name["permute"].allocated == 0
    with profiler.profile() as prof:
        x + y
    assert prof.events()[0].allocated is None  # not asked for
    # the direct in-place route (an optimizer's update): no op dispatch, still one event
    p = ember.randn(16, 32)
    with profiler.profile(profile_memory=True) as prof, ember.no_grad():
        p.sub_(x)
        p.mul_(0.5)
    assert [(e.name, e.allocated, e.flops) for e in prof.events()] == [
        ("sub_", 0, 16 * 32),
        ("mul_", 0, 16 * 32),
    ]

    def g(x, w):
        return (x @ w).sum(axis=1)

    compiled = ember.function(g)
    compiled(x, y.transpose(0, 1))
    with profiler.profile(profile_memory=True) as prof:
        compiled(x, y.transpose(0, 1))
    kernels = [e for e in prof.events() if e.cat == "kernel"]
    for k in kernels:
        assert k.allocated == sum(int(np.prod(t.shape)) * t.dtype.itemsize for t in k.out_types)
    assert sum(k.allocated for k in kernels) == 16 * 16 * 4 + 16 * 4


def test_table_sorts_and_limits_rows():
    a = ember.randn(64, 64)
    with profiler.profile(record_shapes=True) as prof:
        for _ in range(5):
            a = a * 1.0001
        for _ in range(3):
            ember.matmul(a, a)
        ember.exp(a)
    rows = prof.key_averages(group_by_input_shape=True)
    by_time = rows.sorted("time")
    assert [r.total_ns for r in by_time] == sorted((r.total_ns for r in rows), reverse=True)
    text = prof.table(sort_by="calls", row_limit=2, peaks=PEAKS)
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("Name"))
    body = lines[header + 2 : header + 4]
    assert lines[header + 4].startswith("---")  # exactly two rows
    assert [line.split()[0] for line in body] == ["mul", "matmul"]
    assert [int(line.split()[1]) for line in body] == [5, 3]
    assert "[[64, 64], []]" in body[0]  # record_shapes: the input shapes column
    full = prof.table(sort_by="name", row_limit=-1, peaks=PEAKS)
    names = [line.split()[0] for line in full.splitlines()[3:-2]]
    assert names == sorted(names) and len(names) == 3
    with pytest.raises(ValueError, match="unknown sort_by 'speed'"):
        prof.table(sort_by="speed")


def test_roofline_against_the_measured_peaks(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    peaks = profiler.machine_peaks(remeasure=True)
    assert peaks.gflops > 0 and peaks.gbps > 0
    stored = json.loads((tmp_path / "machine_peaks.json").read_text())
    assert [v["gflops"] for v in stored.values()] == [peaks.gflops]
    assert profiler.machine_peaks() == peaks  # cached: no new measurement
    big = ember.randn(512, 512)
    v, w = ember.randn(4_000_000), ember.randn(4_000_000)
    with profiler.profile() as prof:
        ember.matmul(big, big)
        v + w
    mm, add = prof.events()
    assert bound(mm.flops, mm.bytes, peaks) == "compute"
    assert bound(add.flops, add.bytes, peaks) == "memory"
    rows = {r.name: r for r in prof.key_averages()}
    text = prof.table(peaks=peaks)
    assert "compute" in next(line for line in text.splitlines() if line.startswith("matmul"))
    assert "memory" in next(line for line in text.splitlines() if line.startswith("add"))
    assert rows["matmul"].flops == 2 * 512**3


def test_profiler_restores_dispatch_and_refuses_misuse():
    base = _reg._base_mode[0]
    with profiler.record_function("nothing recorded"):
        ember.randn(2) + 1
    with profiler.profile() as prof:
        with pytest.raises(RuntimeError, match="already recording"):
            with profiler.profile():
                pass
        with pytest.raises(RuntimeError, match="after the `with` block"):
            prof.events()
    assert _reg._base_mode[0] is base and codegen.profiler is None
    assert recorder._active is None and ember.autograd._profiler is None

    @profiler.record_function("decorated")
    def f(t):
        return t * 2

    ones = ember.ones(3)
    prof = profiler.profile()
    prof.start()
    f(ones)
    prof.stop()
    names = [e.name for e in prof.events()]
    assert names == ["decorated", "mul"] and prof.events()[1].parent.name == "decorated"
