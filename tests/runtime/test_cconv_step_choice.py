"""A built forward-convolution step's layout (kernels/cconv_step_choice.py): measured once per
machine and geometry when a step left to choose is built, cached in a JSON file that later
builds read; the counted layout held unless another is clearly faster; a damaged file ignored
and replaced; ``EMBER_CONV_LAYOUT=count`` keeps the count; and whichever layout runs, the step
gives the counted layout's bits."""

import json

import numpy as np
import pytest

from ember.kernels import ccompile, cconv, cconv_step_choice, cpool
from ember.kernels.conv_plan import plan
from ember.kernels.cstep import STEP_CALL, function_address

needs_cc = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")

# (x shape, w shape, stride, padding): a 1x1 layer on small planes (the count's channels-wide
# case), a strided 3x3 (three candidates: the split by phases too), a stride-1 3x3 on a batch
GEOMETRIES = [
    ((2, 32, 7, 7), (64, 32, 1, 1), 1, 0),
    ((3, 8, 9, 9), (16, 8, 3, 3), 2, 1),
    ((4, 6, 5, 5), (10, 6, 3, 3), 1, 1),
]


@pytest.fixture
def choices_file(tmp_path, monkeypatch):
    path = tmp_path / "conv-layouts.json"
    monkeypatch.setattr(cconv_step_choice._choices, "path", lambda: path)
    monkeypatch.setattr(cconv_step_choice._choices, "_loaded", {})
    monkeypatch.delenv("EMBER_CONV_LAYOUT", raising=False)
    return path


def _plan(x_shape, w_shape, stride, pad):
    return plan(
        x_shape[2:], w_shape[2:], (stride,) * 2, ((pad, pad),) * 2, (1, 1),
        w_shape[1] * w_shape[2] * w_shape[3], w_shape[0],
    )  # fmt: skip


def _run(made, x, w, out_shape):
    step, args, keep = made
    out = np.empty(out_shape, x.dtype)
    args = args.copy()
    args[0], args[1], args[3] = x.ctypes.data, w.ctypes.data, out.ctypes.data
    STEP_CALL(function_address(step))(args.ctypes.data)
    del keep
    return out


def _way(made) -> tuple:
    """(wide, split) of a made step: its function and its relayout slot."""
    wide = made[0] is cconv._step_function(np.dtype(np.float32), cconv._WIDE)
    return wide, not wide and made[1][37] != 0


@needs_cc
@pytest.mark.parametrize("geometry", GEOMETRIES)
def test_measured_once_cached_and_the_counted_bits(geometry, choices_file, monkeypatch):
    x_shape, w_shape, stride, pad = geometry
    p = _plan(x_shape, w_shape, stride, pad)
    rng = np.random.default_rng(5)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    out_shape = (x_shape[0], w_shape[0]) + p.out_size
    monkeypatch.setenv("EMBER_CONV_LAYOUT", "count")
    counted = cconv.forward_step(x_shape, w_shape, p, np.float32, None)
    assert not choices_file.exists()  # (the count: nothing measured)
    monkeypatch.delenv("EMBER_CONV_LAYOUT")
    built = cconv.forward_step(x_shape, w_shape, p, np.float32, None)
    data = json.loads(choices_file.read_text())
    assert data["machine"] == cconv_step_choice.machine_key()
    [(key, way)] = data["choices"].items()
    assert tuple(bool(v) for v in way) == _way(built)
    np.testing.assert_array_equal(_run(built, x, w, out_shape), _run(counted, x, w, out_shape))

    def measured_again(*args):
        raise AssertionError("measured again")

    monkeypatch.setattr(cconv_step_choice, "_measure", measured_again)
    monkeypatch.setattr(
        cconv_step_choice._choices, "_loaded", {}
    )  # (a new process: the file is read)
    assert _way(cconv.forward_step(x_shape, w_shape, p, np.float32, None)) == _way(built)
    # (another thread count is another geometry's choice)
    before = cpool.get_num_threads()
    cpool.set_num_threads(1 if before != 1 else 2)
    try:
        with pytest.raises(AssertionError, match="measured again"):
            cconv.forward_step(x_shape, w_shape, p, np.float32, None)
    finally:
        cpool.set_num_threads(before)


@needs_cc
def test_the_counted_layout_is_held_unless_another_is_clearly_faster(choices_file, monkeypatch):
    x_shape, w_shape, stride, pad = GEOMETRIES[1]
    p = _plan(x_shape, w_shape, stride, pad)
    monkeypatch.setenv("EMBER_CONV_LAYOUT", "count")
    counted = _way(cconv.forward_step(x_shape, w_shape, p, np.float32, None))
    monkeypatch.delenv("EMBER_CONV_LAYOUT")
    ways = []

    def timings(calls, samples, clock, sample_s):  # every layout timed alike: a tie
        ways.append(len(calls))
        assert sample_s > 0  # (each timing repeats a step: single calls time cold calls)
        return [[1.0, 1.1, 1.2]] * len(calls)

    monkeypatch.setattr(cconv_step_choice, "interleaved", timings)
    assert _way(cconv.forward_step(x_shape, w_shape, p, np.float32, None)) == counted
    assert ways == [3]  # (column panels, channels-wide, split by phases)

    def one_faster(calls, samples, clock, sample_s):  # the last candidate clearly faster
        return [[1.0, 1.1, 1.2]] * (len(calls) - 1) + [[0.5, 0.55, 0.6]]

    monkeypatch.setattr(cconv_step_choice, "interleaved", one_faster)
    monkeypatch.setattr(cconv_step_choice._choices, "_loaded", {})
    choices_file.unlink()
    assert _way(cconv.forward_step(x_shape, w_shape, p, np.float32, None)) == (False, True)


@needs_cc
def test_a_store_with_a_clamp_or_an_activation_is_measured_apart(choices_file, monkeypatch):
    """The layouts store differently (the channels-wide one a position's channels a plane
    apart, a cost an activation's arithmetic hides): a geometry's plain step, its ReLU step
    and its activated step are three choices."""
    x_shape, w_shape, stride, pad = GEOMETRIES[1]
    p = _plan(x_shape, w_shape, stride, pad)
    measured = []

    def timings(calls, samples, clock, sample_s):
        measured.append(len(calls))
        return [[1.0, 1.1, 1.2]] * len(calls)

    monkeypatch.setattr(cconv_step_choice, "interleaved", timings)
    for clamp in (None, True, None, True):  # (each kind measured once, then read)
        assert cconv.forward_step(x_shape, w_shape, p, np.float32, clamp) is not None
    assert len(measured) == 2
    data = json.loads(choices_file.read_text())
    assert len(data["choices"]) == 2
    assert cconv_step_choice.store_kind(None) == cconv_step_choice.store_kind(False) == ""
    assert cconv_step_choice.store_kind(True) == "clamp"
    assert cconv_step_choice.store_kind((0.0, 6.0, False, False)) == "clamp"
    assert cconv_step_choice.store_kind((0.0, 6.0, False, False, False, object())) == "activation"


@needs_cc
@pytest.mark.parametrize(
    "text",
    [
        "not json",
        json.dumps({"format": 1, "machine": "another", "choices": {}}),
        json.dumps({"format": 1, "machine": None, "choices": {"k": [2, 0]}}),
        json.dumps([1, 2]),
    ],
)
def test_a_damaged_file_is_ignored_and_replaced(text, choices_file):
    x_shape, w_shape, stride, pad = GEOMETRIES[0]
    if '"machine": null' in text:
        text = text.replace("null", json.dumps(cconv_step_choice.machine_key()))
    choices_file.write_text(text)
    assert cconv_step_choice._choices.read(choices_file) == {}
    p = _plan(x_shape, w_shape, stride, pad)
    assert cconv.forward_step(x_shape, w_shape, p, np.float32, None) is not None
    data = json.loads(choices_file.read_text())
    assert data["machine"] == cconv_step_choice.machine_key() and len(data["choices"]) == 1
