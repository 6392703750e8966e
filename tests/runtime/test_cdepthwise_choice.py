"""kernels/cdepthwise_choice.py: an eager depthwise forward or input gradient keeps the counted
kernels unless the other way is clearly faster on the geometry's first call, once per key; a
way that declines is never chosen; ``EMBER_CONV_LAYOUT=count`` keeps the count; and on
MobileNetV2's 32x32 planes, where the count picks the channels-wide kernels, the eager result
is the row-wide kernels' bits whichever runs."""

from __future__ import annotations

import numpy as np
import pytest

from ember.kernels import ccompile, cdepthwise, cdepthwise_choice, cdepthwise_wide
from ember.kernels.conv_plan import conv_geometry


def _busy():
    return sum(range(200_000))


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    monkeypatch.delenv("EMBER_CONV_LAYOUT", raising=False)
    monkeypatch.setattr(cdepthwise_choice, "_CHOSEN", {})


def test_a_clearly_faster_way_replaces_the_count_once():
    calls = []

    def wide():
        calls.append("wide")
        _busy()
        return True

    def rows():
        calls.append("rows")

    assert cdepthwise_choice.wide_runs(("k",), True, wide, rows, 1) is False
    timed = len(calls)
    assert cdepthwise_choice.wide_runs(("k",), True, wide, rows, 1) is False
    assert len(calls) == timed  # (measured once per key)
    assert cdepthwise_choice.chosen(("k",)) is False


def test_the_count_holds_unless_the_other_way_is_clearly_faster():
    # (the other way twice the count's work: never clearly faster, even on a loaded machine,
    # where two equal ways could time apart)
    def slower():
        _busy()  # (_busy's sum is truthy: `_busy() or _busy()` would run it once)
        _busy()
        return True

    assert cdepthwise_choice.wide_runs(("a",), False, slower, _busy, 1) is False
    assert cdepthwise_choice.wide_runs(("b",), True, lambda: True, _busy, 1) is True


def test_a_declining_way_and_the_count_switch(monkeypatch):
    assert cdepthwise_choice.wide_runs(("d",), True, lambda: False, lambda: None, 1) is False
    monkeypatch.setenv("EMBER_CONV_LAYOUT", "count")
    assert cdepthwise_choice.wide_runs(("e",), True, lambda: _busy() or True, lambda: None, 1)
    assert cdepthwise_choice.chosen(("e",)) is None


@pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_mobilenet_planes_give_the_row_kernels_bits(monkeypatch, dtype):
    rng = np.random.default_rng(0)
    c = 96
    attrs = dict(stride=(1, 1), padding=((1, 1), (1, 1)), dilation=(1, 1), groups=c)
    p = conv_geometry(attrs, (32, 32), (c, 1, 3, 3))
    x = rng.standard_normal((2, c, 32, 32)).astype(dtype)
    w = rng.standard_normal((c, 1, 3, 3)).astype(dtype)
    gy = rng.standard_normal((2, c, 32, 32)).astype(dtype)
    got = cdepthwise.conv_forward(x, w, p, c), cdepthwise.conv_input_grad(gy, w, p, c)
    monkeypatch.setenv("EMBER_CONV_LAYOUT", "count")
    monkeypatch.setattr(cdepthwise_wide, "wins", lambda *args: False)
    rows = cdepthwise.conv_forward(x, w, p, c), cdepthwise.conv_input_grad(gy, w, p, c)
    for a, b in zip(got, rows):
        np.testing.assert_array_equal(a, b)
