"""A Loop whose condition never turns false: before onnx52 an ONNX Loop with no trip count (or
INT64_MAX, the exporters' while loop) and a condition that stays true ran until the process
was killed. Now ``ember.onnx.load(max_loop_iterations=N)`` (2**20 unless given) bounds the
iterations of a Loop with a condition: past the bound, with the condition still true and the
trip count not reached, the call raises an error naming the node and the keyword, eagerly and
in a captured graph alike; ``None`` lifts the bound and a KeyboardInterrupt still stops it. A
loop that ends by its condition or its trip count within the bound runs as onnxruntime does."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import ember
from ember.errors import EmberError, OnnxError

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402

INT64_MAX = np.iinfo(np.int64).max


def _doubling_loop(trip_count: int | None, *, until: float | None, static_start: bool = False):
    """x doubles each iteration; the condition is ``x < until`` (None: always true). The trip
    count is an initializer (None: absent)."""
    nodes = [h.make_node("Mul", ["x", "two"], ["x_out"])]
    if until is None:
        nodes.append(h.make_node("Identity", ["c"], ["c_out"]))
    else:
        nodes.append(h.make_node("ReduceMax", ["x_out"], ["top"], keepdims=0))
        nodes.append(h.make_node("Less", ["top", "until"], ["c_out"]))
    body = h.make_graph(
        nodes,
        "body",
        [
            h.make_tensor_value_info("i", T.INT64, []),
            h.make_tensor_value_info("c", T.BOOL, []),
            h.make_tensor_value_info("x", T.FLOAT, [2]),
        ],
        [
            h.make_tensor_value_info("c_out", T.BOOL, []),
            h.make_tensor_value_info("x_out", T.FLOAT, [2]),
        ],
        [h.make_tensor("two", T.FLOAT, [], [2.0])]
        + ([] if until is None else [h.make_tensor("until", T.FLOAT, [], [until])]),
    )
    inits = [h.make_tensor("cond", T.BOOL, [], [True])]
    if trip_count is not None:
        inits.append(h.make_tensor("M", T.INT64, [], [trip_count]))
    inputs = []
    if static_start:
        inits.append(h.make_tensor("x0", T.FLOAT, [2], [1.0, 0.5]))
    else:
        inputs.append(h.make_tensor_value_info("x0", T.FLOAT, [2]))
    loop = h.make_node(
        "Loop", ["M" if trip_count is not None else "", "cond", "x0"], ["y"], body=body
    )
    graph = h.make_graph([loop], "g", inputs, [h.make_tensor_value_info("y", T.FLOAT, [2])], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model.SerializeToString()


def _call(f, static_start: bool):
    return f() if static_start else f(np.array([1.0, 0.5], np.float32))


@pytest.mark.parametrize("capture", [True, False])
@pytest.mark.parametrize("trip_count", [None, INT64_MAX])
@pytest.mark.parametrize("static_start", [False, True])
def test_an_endless_loop_stops_at_the_bound(capture, trip_count, static_start):
    model = _doubling_loop(trip_count, until=None, static_start=static_start)
    f = ember.onnx.load(model, capture=capture, max_loop_iterations=50)
    with pytest.raises(EmberError, match=r"Loop.*still true after 50 iterations.*max_loop_iter"):
        _call(f, static_start)


@pytest.mark.parametrize("capture", [True, False])
def test_a_loop_ending_by_its_condition_within_the_bound_runs(capture):
    """x = [1, .5] doubles while max(x) < 1000: ten iterations. A bound of ten is enough
    (the condition is false after the tenth), nine is not."""
    ort = pytest.importorskip("onnxruntime")
    model = _doubling_loop(INT64_MAX, until=1000.0)
    x = np.array([1.0, 0.5], np.float32)
    (want,) = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {"x0": x})
    np.testing.assert_array_equal(want, x * 2.0**10)
    got = ember.onnx.load(model, capture=capture, max_loop_iterations=10)(x)
    np.testing.assert_array_equal(got.numpy(), want)
    short = ember.onnx.load(model, capture=capture, max_loop_iterations=9)
    with pytest.raises(EmberError, match="still true after 9 iterations"):
        short(x)
    # the default bound lets it run
    np.testing.assert_array_equal(ember.onnx.load(model, capture=capture)(x).numpy(), want)


@pytest.mark.parametrize("capture", [True, False])
def test_a_trip_count_within_the_bound_ends_a_loop_whose_condition_stays_true(capture):
    model = _doubling_loop(12, until=None)
    got = ember.onnx.load(model, capture=capture, max_loop_iterations=12)(
        np.array([1.0, 0.5], np.float32)
    )
    np.testing.assert_array_equal(got.numpy(), np.array([1.0, 0.5], np.float32) * 2.0**12)


def test_a_symbolic_trip_count_within_the_bound_is_no_error():
    """M read from the input's size (data the captured graph holds symbolically): the loop
    stops at M = 6 even though the bound, 8, is not reached, and no check fires."""
    body = h.make_graph(
        [h.make_node("Identity", ["c"], ["c_out"]), h.make_node("Add", ["s", "one"], ["s_out"])],
        "body",
        [
            h.make_tensor_value_info("i", T.INT64, []),
            h.make_tensor_value_info("c", T.BOOL, []),
            h.make_tensor_value_info("s", T.FLOAT, []),
        ],
        [
            h.make_tensor_value_info("c_out", T.BOOL, []),
            h.make_tensor_value_info("s_out", T.FLOAT, []),
        ],
        [h.make_tensor("one", T.FLOAT, [], [1.0])],
    )
    nodes = [
        h.make_node("Shape", ["x"], ["shape"]),
        h.make_node("Squeeze", ["shape"], ["M"]),
        h.make_node("Loop", ["M", "cond", "zero"], ["y"], body=body),
    ]
    graph = h.make_graph(
        nodes,
        "g",
        [h.make_tensor_value_info("x", T.FLOAT, ["n"])],
        [h.make_tensor_value_info("y", T.FLOAT, [])],
        [h.make_tensor("cond", T.BOOL, [], [True]), h.make_tensor("zero", T.FLOAT, [], [0.0])],
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()
    f = ember.onnx.load(model, max_loop_iterations=8)
    assert float(f(np.zeros(6, np.float32)).numpy()) == 6.0
    with pytest.raises(EmberError, match="still true after 8 iterations"):
        f(np.zeros(9, np.float32))


_ENDLESS_CALL = """
import signal
import sys
# (Python's own Ctrl-C handler: a test run may have left SIGINT ignored, which a child inherits)
signal.signal(signal.SIGINT, signal.default_int_handler)
import numpy as np
import ember
f = ember.onnx.load(sys.argv[1], capture=sys.argv[2] == "1", max_loop_iterations=None)
print("calling", flush=True)
try:
    f(np.zeros(2, np.float32))  # (zeros: doubling forever stays finite)
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(3)
"""


@pytest.mark.parametrize("capture", [True, False])
def test_without_a_bound_a_keyboard_interrupt_stops_it(capture, tmp_path):
    """Ctrl-C (SIGINT) stops an endless loop, in a process of its own: an interrupt inside the
    test process would reach whatever runs when it lands (the suite's own checks re-run a call
    that raised through the reference interpreter, which would loop on)."""
    path = tmp_path / "endless.onnx"
    path.write_bytes(_doubling_loop(None, until=None))
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = dict(os.environ, PYTHONPATH=src + os.pathsep + os.environ.get("PYTHONPATH", ""))
    args = [sys.executable, "-c", _ENDLESS_CALL, str(path), "1" if capture else "0"]
    with subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    ) as proc:
        try:
            assert proc.stdout.readline().strip() == "calling"
            # Ctrl-C until it stops: on a loaded machine the first may land before the loop
            # (while its kernels build), where it ends something else
            deadline = time.monotonic() + 120
            while True:
                time.sleep(1.0)
                proc.send_signal(signal.SIGINT)
                try:
                    out, err = proc.communicate(timeout=2)
                    break
                except subprocess.TimeoutExpired:
                    assert time.monotonic() < deadline, "the loop did not stop"
        finally:
            proc.kill()
    assert "interrupted" in out, err[-2000:]


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "many"])
def test_the_bound_must_be_a_positive_int(bad):
    with pytest.raises(OnnxError, match="max_loop_iterations"):
        ember.onnx.load(_doubling_loop(None, until=None), max_loop_iterations=bad)
