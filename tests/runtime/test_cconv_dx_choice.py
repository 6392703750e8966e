"""Which way a convolution's input gradient runs (kernels/cconv_dx_choice.py): the product and
col2im (kernels/cconv_col2im.py) or the padded forward (phase by phase where strided), measured
once per machine and geometry where the counted work is near, cached in a JSON file that later
calls read; the counted way held unless the other is clearly faster; a damaged file ignored and
replaced; 16-bit operands follow float32's choice; ``EMBER_CONV_LAYOUT=count`` and far-apart
counts keep the count. Both ways against PyTorch on ResNet's stride-2 128 -> 256 layer (the
geometry whose counted way was the slower)."""

import json

import numpy as np
import pytest

from ember.kernels import ccompile, cconv, cconv_col2im, cconv_dx_choice
from ember.kernels.conv_plan import plan

torch = pytest.importorskip("torch")

needs_cc = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")

# (batch, in channels, size, out channels, kernel, stride, padding): ResNet-18's r3a layer at a
# small batch (counts near: measured); a DCGAN layer's 1x1 planes under a 4x4 kernel (counts
# far apart: the col2im, never measured)
NEAR = (2, 128, 16, 256, 3, 2, 1)
FAR = (2, 48, 4, 40, 4, 1, 0)


def _geometry(case):
    n, cin, size, cout, k, s, pad = case
    p = plan((size, size), (k, k), (s, s), ((pad, pad),) * 2, (1, 1), cin * k * k, cout)
    return (n, cout) + p.out_size, (cout, cin, k, k), p


@pytest.fixture
def choices_file(tmp_path, monkeypatch):
    path = tmp_path / "conv-input-grad-ways.json"
    monkeypatch.setattr(cconv_dx_choice._choices, "path", lambda: path)
    monkeypatch.setattr(cconv_dx_choice._choices, "_loaded", {})
    monkeypatch.delenv("EMBER_CONV_LAYOUT", raising=False)
    return path


@needs_cc
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_both_ways_give_pytorchs_input_gradient(dtype):
    gy_shape, w_shape, p = _geometry(NEAR)
    rng = np.random.default_rng(0)
    gy = rng.standard_normal(gy_shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)
    want = torch.nn.grad.conv2d_input(
        (NEAR[0], NEAR[1]) + p.in_size, torch.from_numpy(w), torch.from_numpy(gy),
        stride=p.stride, padding=p.lo,
    ).numpy()  # fmt: skip
    # (each result a sum of out channels * 4 taps at most, in its own order)
    bound = torch.nn.grad.conv2d_input(
        (NEAR[0], NEAR[1]) + p.in_size, torch.from_numpy(abs(w)), torch.from_numpy(abs(gy)),
        stride=p.stride, padding=p.lo,
    ).numpy()  # fmt: skip
    limit = 2 * NEAR[3] * 4 * np.finfo(dtype).eps * bound
    for got in (
        cconv_col2im.input_grad(gy, w, p, 1),
        cconv.padded_input_grad(gy, w, p, 1),
        cconv.conv_input_grad(gy, w, p, 1),
    ):
        assert got.dtype == dtype and got.shape == want.shape
        assert np.all(np.abs(got - want) <= limit)


@needs_cc
def test_measured_once_cached_and_read_back(choices_file, monkeypatch):
    gy_shape, w_shape, p = _geometry(NEAR)
    counted = cconv_col2im.wins(gy_shape, w_shape, p, 1, 4)
    timed = []

    def col2im_faster(calls, samples, clock):  # (the col2im is the first way)
        timed.append(len(calls))
        return [[0.5, 0.55, 0.6], [1.0, 1.1, 1.2]]

    monkeypatch.setattr(cconv_dx_choice, "interleaved", col2im_faster)
    assert cconv.col2im_runs(gy_shape, w_shape, p, 1, np.float32) is True
    assert timed == [2]
    data = json.loads(choices_file.read_text())
    assert data["machine"] == cconv_dx_choice._machine_key()
    assert list(data["choices"].values()) == [True]
    # a later process reads the file: nothing timed again
    monkeypatch.setattr(cconv_dx_choice._choices, "_loaded", {})
    monkeypatch.setattr(cconv_dx_choice, "_measure", lambda *a: pytest.fail("measured again"))
    assert cconv.col2im_runs(gy_shape, w_shape, p, 1, np.float32) is True
    # 16-bit operands follow float32's choice (the op widens those the col2im takes to
    # float32's); the count where asked
    assert cconv.col2im_runs(gy_shape, w_shape, p, 1, np.float16) is True
    monkeypatch.setenv("EMBER_CONV_LAYOUT", "count")
    assert cconv.col2im_runs(gy_shape, w_shape, p, 1, np.float32) is counted


@needs_cc
def test_the_counted_way_is_held_unless_the_other_is_clearly_faster(choices_file, monkeypatch):
    gy_shape, w_shape, p = _geometry(NEAR)
    counted = cconv_col2im.wins(gy_shape, w_shape, p, 1, 4)

    def tie(calls, samples, clock):
        return [[1.0, 1.1, 1.2]] * len(calls)

    monkeypatch.setattr(cconv_dx_choice, "interleaved", tie)
    assert cconv.col2im_runs(gy_shape, w_shape, p, 1, np.float64) is counted


@needs_cc
def test_far_apart_counts_are_not_measured(choices_file, monkeypatch):
    gy_shape, w_shape, p = _geometry(FAR)
    monkeypatch.setattr(cconv_dx_choice, "_measure", lambda *a: pytest.fail("measured"))
    assert cconv.col2im_runs(gy_shape, w_shape, p, 1, np.float32) is True
    assert not choices_file.exists()


@needs_cc
@pytest.mark.parametrize(
    "text",
    [
        "not json",
        json.dumps({"format": 1, "machine": "another", "choices": {}}),
        json.dumps({"format": 1, "machine": None, "choices": {"k": 1}}),
        json.dumps([1, 2]),
    ],
)
def test_a_damaged_file_is_ignored_and_replaced(text, choices_file, monkeypatch):
    if '"machine": null' in text:
        text = text.replace("null", json.dumps(cconv_dx_choice._machine_key()))
    choices_file.write_text(text)
    assert cconv_dx_choice._choices.read(choices_file) == {}
    gy_shape, w_shape, p = _geometry(NEAR)
    monkeypatch.setattr(cconv_dx_choice, "interleaved", lambda c, s, clock: [[1.0]] * len(c))
    cconv.col2im_runs(gy_shape, w_shape, p, 1, np.float32)
    data = json.loads(choices_file.read_text())
    assert data["machine"] == cconv_dx_choice._machine_key() and len(data["choices"]) == 1
