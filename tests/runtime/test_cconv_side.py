"""The stride-1 forward convolution over its batch laid side by side (kernels/cconv_side.py):
on random geometries (kernels 1 to 5, dilations, zero and positive padding, unequal ones,
two to five samples, channel counts around the micro-kernel's tiles) the side-by-side step
equals the plain one bit for bit and the NumPy kernel of ops/_conv_kernels.py (the
specification) within rounding, with its bias, ReLU and mask; 16-bit operands equal the plain
layout's bits; NaN and infinity stay in their samples' windows; the eager path (the layout
measured fastest on a geometry's first call) matches PyTorch in float64, the forward and the
input gradient (a stride-1 convolution too)."""

import math
import zlib

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember import dtypes as dt
from ember.kernels import ccompile, cconv, cconv_side, cpool
from ember.kernels.conv_plan import conv_out_size, plan
from ember.kernels.cstep import STEP_CALL, function_address
from ember.ops import _conv_kernels as K

pytestmark = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")


def _within(got, want, bound, terms):
    """|got - want| within 2 * terms * eps of the sum of the products' magnitudes."""
    eps = np.finfo(want.dtype).eps
    limit = 2 * terms * eps * bound + np.finfo(want.dtype).tiny
    assert got.shape == want.shape and got.dtype == want.dtype
    assert np.all(np.abs(got - want) <= limit), float(np.max(np.abs(got - want) - limit))


def _run(x, w, p, split, bias=None, relu=False, mask=None):
    step, args, _keep = cconv.forward_step(
        x.shape, w.shape, p, x.dtype, relu, wide=False, split=split
    )
    out = np.full((x.shape[0], w.shape[0]) + p.out_size, np.nan, x.dtype)
    args[0], args[1], args[3] = x.ctypes.data, w.ctypes.data, out.ctypes.data
    args[2] = 0 if bias is None else bias.ctypes.data
    args[4] = 0 if mask is None else mask.ctypes.data
    STEP_CALL(function_address(step))(args.ctypes.data)
    return out, args


def _cases():
    rng = np.random.default_rng(54)
    cases = []
    while len(cases) < 36:
        cin = int(rng.choice([1, 3, 8, 20]))
        cout = int(rng.choice([1, 7, 8, 17, 48, 50]))
        kernel = tuple(int(rng.choice([1, 2, 3, 3, 5])) for _ in range(2))
        dilation = tuple(int(rng.choice([1, 1, 2])) for _ in range(2))
        padding = tuple((int(rng.integers(0, 3)), int(rng.integers(0, 3))) for _ in range(2))
        size = tuple(int(rng.choice([1, 4, 7, 8, 13])) for _ in range(2))
        if any(o < 1 for o in conv_out_size(size, kernel, (1, 1), padding, dilation)):
            continue
        n = int(rng.integers(2, 6))
        dtype = rng.choice([np.float32, np.float64])
        cases.append((n, cin, cout, size, kernel, padding, dilation, dtype))
    return cases


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", _cases(), ids=str)
def test_side_by_side_equals_plain_and_numpy(case, threads):
    n, cin, cout, size, kernel, padding, dilation, dtype = case
    before = cpool.get_num_threads()
    cpool.set_num_threads(threads)
    try:
        rng = np.random.default_rng(zlib.crc32(str(case).encode()))
        x = rng.standard_normal((n, cin) + size).astype(dtype)
        w = rng.standard_normal((cout, cin) + kernel).astype(dtype)
        bias = rng.standard_normal(cout).astype(dtype)
        p = plan(size, kernel, (1, 1), padding, dilation, w[0].size, cout)
        assert cconv_side.side_of(p, n) is not None
        got, args = _run(x, w, p, True, bias)
        assert args[37] != 0  # (the step copies the batch side by side)
        plain, _ = _run(x, w, p, False, bias)
        assert np.array_equal(got, plain)
        terms = cin * math.prod(kernel) + 1
        want = K.conv_forward(x, w, p, 1) + bias[:, None, None]
        bound = K.conv_forward(abs(x), abs(w), p, 1) + abs(bias)[:, None, None]
        _within(got, want, bound, terms)
        mask = np.zeros(got.shape, np.bool_)
        got, _ = _run(x, w, p, True, bias, relu=True, mask=mask)
        _within(got, np.maximum(want, 0), bound, terms)
        assert np.array_equal(mask, got > 0)
    finally:
        cpool.set_num_threads(before)


@pytest.mark.parametrize("dtype", [dt.bfloat16.np, np.float16])
def test_half_precision_side_by_side_equals_plain(dtype):
    rng = np.random.default_rng(6)
    for cin, cout, k, pad, size in ((16, 24, 3, 1, 8), (8, 9, 3, 2, 5), (4, 33, 1, 0, 7)):
        x = rng.standard_normal((3, cin, size, size)).astype(np.float32).astype(dtype)
        w = rng.standard_normal((cout, cin, k, k)).astype(np.float32).astype(dtype)
        p = plan((size, size), (k, k), (1, 1), ((pad, pad),) * 2, (1, 1))
        got, _ = _run(x, w, p, True)
        plain, _ = _run(x, w, p, False)
        assert np.array_equal(got.view(np.uint16), plain.view(np.uint16))


def test_non_finite_values_stay_in_their_samples():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 6, 5, 5)).astype(np.float32)
    x[0, 2, 3, 4] = np.inf  # (next to sample 1's columns in the side-by-side image)
    x[1, 5, 0, 0] = np.nan
    x[3, 1, 4, 4] = -np.inf
    w = rng.standard_normal((20, 6, 3, 3)).astype(np.float32)
    p = plan((5, 5), (3, 3), (1, 1), ((1, 1),) * 2, (1, 1))
    want = K.conv_forward(x, w, p, 1)
    got, _ = _run(x, w, p, True)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-4, atol=1e-4)


def test_layout_geometry():
    side = cconv_side.side_of(plan((8, 8), (3, 3), (1, 1), ((1, 1),) * 2, (1, 1)), 4)
    assert (side.width, side.pitch, side.rows) == (9, 37, 10)  # (one gap between samples)
    side = cconv_side.side_of(plan((8, 8), (3, 3), (1, 1), ((2, 0),) * 2, (1, 1)), 2)
    assert side.width == 10  # (the gap is the wider padding)
    assert cconv_side.side_of(plan((8, 8), (3, 3), (1, 1), ((1, 1),) * 2, (1, 1)), 1) is None
    assert cconv_side.side_of(plan((8, 8), (3, 3), (2, 2), ((1, 1),) * 2, (1, 1)), 4) is None
    assert cconv_side.side_of(plan((8, 8), (3, 3), (1, 1), ((1, -1),) * 2, (1, 1)), 4) is None


def test_small_planes_match_pytorch(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.delenv("EMBER_CONV_LAYOUT", raising=False)
    rng = np.random.default_rng(8)
    for cin, cout, k, pad, size, n in ((16, 24, 3, 1, 8, 6), (9, 40, 3, 1, 4, 5)):
        x = rng.standard_normal((n, cin, size, size))
        w = rng.standard_normal((cout, cin, k, k))
        for dtype in (np.float32, np.float64):
            ex = ember.tensor(x.astype(dtype), requires_grad=True)
            ew = ember.tensor(w.astype(dtype), requires_grad=True)
            y = F.conv2d(ex, ew, padding=pad)
            tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
            ty = torch.nn.functional.conv2d(tx, tw, padding=pad)
            gy = rng.standard_normal(ty.shape)
            ty.backward(torch.tensor(gy))
            (y * ember.tensor(gy.astype(dtype))).sum().backward()
            tol = 1e-4 if dtype == np.float32 else 1e-10
            for got, want in ((y, ty), (ex.grad, tx.grad), (ew.grad, tw.grad)):
                np.testing.assert_allclose(
                    got.detach().numpy(), want.detach().numpy(), rtol=tol, atol=tol * 10
                )


def test_counted_choice_lays_an_8x8_batch_side_by_side(monkeypatch):
    monkeypatch.setenv("EMBER_CONV_LAYOUT", "count")
    cconv._steps().clear()
    rng = np.random.default_rng(9)
    x = rng.standard_normal((8, 64, 8, 8)).astype(np.float32)
    w = rng.standard_normal((64, 64, 3, 3)).astype(np.float32)
    p = plan((8, 8), (3, 3), (1, 1), ((1, 1),) * 2, (1, 1))
    y = F.conv2d(ember.tensor(x), ember.tensor(w), padding=1).numpy()
    (entry,) = cconv._steps().values()
    relayout = entry[1][37]
    assert (
        relayout != 0
        and np.frombuffer(  # (the description's kind: side by side)
            (np.ctypeslib.ctypes.c_int64 * 1).from_address(int(relayout)), np.int64
        )[0]
        == 1
    )
    _within(y, K.conv_forward(x, w, p, 1), K.conv_forward(abs(x), abs(w), p, 1), 64 * 9)
