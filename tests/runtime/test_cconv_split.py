"""The strided forward convolution over its input split by stride phases
(kernels/cconv_split.py): on random geometries (strides 2 and 3, unequal ones, dilations, zero,
positive and negative padding, batch 1, channel counts around the micro-kernel's tiles) the
split step equals the plain one bit for bit and the NumPy kernel of ops/_conv_kernels.py (the
specification) within rounding, with its bias, ReLU and mask; 16-bit operands equal the plain
layout's bits; NaN and infinity stay in their windows; the eager path (which splits 1x1
strided layers by count and others where measured faster) matches PyTorch in float64, values
and gradients, eagerly and under ember.function."""

import math
import zlib

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember import dtypes as dt
from ember.kernels import ccompile, cconv, cconv_split, cpool
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
    made = cconv.forward_step(x.shape, w.shape, p, x.dtype, relu, wide=False, split=split)
    step, args, _keep = made
    out = np.full((x.shape[0], w.shape[0]) + p.out_size, np.nan, x.dtype)
    args[0], args[1], args[3] = x.ctypes.data, w.ctypes.data, out.ctypes.data
    args[2] = 0 if bias is None else bias.ctypes.data
    args[4] = 0 if mask is None else mask.ctypes.data
    STEP_CALL(function_address(step))(args.ctypes.data)
    return out, args


def _cases():
    rng = np.random.default_rng(53)
    cases = []
    while len(cases) < 40:
        cin = int(rng.choice([1, 3, 8, 20]))
        cout = int(rng.choice([1, 7, 8, 17, 48, 50]))
        kernel = tuple(int(rng.choice([1, 1, 2, 3, 5])) for _ in range(2))
        stride = tuple(int(rng.choice([1, 2, 2, 3])) for _ in range(2))
        if stride == (1, 1):
            stride = (2, 2)
        dilation = tuple(int(rng.choice([1, 1, 2])) for _ in range(2))
        padding = tuple((int(rng.integers(0, 3)), int(rng.integers(-1, 3))) for _ in range(2))
        size = tuple(int(rng.choice([4, 7, 8, 13, 20])) for _ in range(2))
        if any(o < 1 for o in conv_out_size(size, kernel, stride, padding, dilation)):
            continue
        n = int(rng.choice([1, 1, 2, 3]))
        dtype = rng.choice([np.float32, np.float64])
        cases.append((n, cin, cout, size, kernel, stride, padding, dilation, dtype))
    return cases


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", _cases(), ids=str)
def test_split_equals_plain_and_numpy(case, threads):
    n, cin, cout, size, kernel, stride, padding, dilation, dtype = case
    before = cpool.get_num_threads()
    cpool.set_num_threads(threads)
    try:
        rng = np.random.default_rng(zlib.crc32(str(case).encode()))
        x = rng.standard_normal((n, cin) + size).astype(dtype)
        w = rng.standard_normal((cout, cin) + kernel).astype(dtype)
        bias = rng.standard_normal(cout).astype(dtype)
        p = plan(size, kernel, stride, padding, dilation, w[0].size, cout)
        assert cconv_split.split_of(p) is not None
        got, args = _run(x, w, p, True, bias)
        assert args[37] != 0  # (the step copies the split input)
        plain, args = _run(x, w, p, False, bias)
        assert args[37] == 0
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
def test_half_precision_split_equals_plain(dtype):
    rng = np.random.default_rng(5)
    for cin, cout, k, stride, pad, size in (
        (3, 16, 7, 2, 3, 20),
        (16, 24, 1, 2, 0, 9),
        (8, 9, 3, 2, 1, 11),
    ):
        x = rng.standard_normal((2, cin, size, size)).astype(np.float32).astype(dtype)
        w = rng.standard_normal((cout, cin, k, k)).astype(np.float32).astype(dtype)
        p = plan((size, size), (k, k), (stride, stride), ((pad, pad),) * 2, (1, 1))
        got, _ = _run(x, w, p, True)
        plain, _ = _run(x, w, p, False)
        assert np.array_equal(got.view(np.uint16), plain.view(np.uint16))


def test_non_finite_values_stay_in_their_windows():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 6, 9, 9)).astype(np.float32)
    x[0, 2, 3, 4] = np.inf
    x[0, 5, 0, 8] = np.nan
    x[0, 1, 8, 8] = -np.inf  # (read by no window of the 1x1 stride-2 layer: an odd position)
    x[0, 1, 7, 7] = -np.inf
    for k, pad in ((3, 1), (1, 0)):
        w = rng.standard_normal((20, 6, k, k)).astype(np.float32)
        p = plan((9, 9), (k, k), (2, 2), ((pad, pad),) * 2, (1, 1))
        want = K.conv_forward(x, w, p, 1)
        got, _ = _run(x, w, p, True)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
        finite = np.isfinite(want)
        np.testing.assert_allclose(got[finite], want[finite], rtol=1e-4, atol=1e-4)


def test_split_geometry():
    p = plan((8, 8), (1, 1), (2, 2), ((0, 0),) * 2, (1, 1))
    split = cconv_split.split_of(p)
    assert split.phases == ((0,), (0,)) and split.extent == (4, 4) and split.plane == 16
    assert cconv_split.reads_fewer(split)  # (a quarter of the input copied)
    p = plan((8, 8), (3, 3), (2, 2), ((1, 1),) * 2, (1, 1))
    split = cconv_split.split_of(p)
    assert split.phases == ((0, 1), (0, 1)) and not cconv_split.reads_fewer(split)
    # dilation 2 at stride 2: every tap on the even positions
    p = plan((9, 9), (3, 3), (2, 2), ((2, 2),) * 2, (2, 2))
    assert cconv_split.split_of(p).phases == ((0,), (0,))
    assert cconv_split.split_of(plan((8, 8), (3, 3), (1, 1), ((1, 1),) * 2, (1, 1))) is None
    assert cconv_split.split_of(plan((8, 8), (3, 3), (2, 2), ((-1, 1),) * 2, (1, 1))) is None


@pytest.mark.parametrize("compiled", [False, True])
def test_strided_layers_match_pytorch(compiled):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    for cin, cout, k, stride, pad, size, n in (
        (16, 32, 1, 2, 0, 10, 1),  # a shortcut: split by count
        (3, 16, 7, 2, 3, 21, 2),  # a stem: split where measured faster
        (8, 12, 3, 2, 1, 9, 1),
        (5, 6, 3, 3, 2, 11, 3),
    ):
        x = rng.standard_normal((n, cin, size, size))
        w = rng.standard_normal((cout, cin, k, k))
        b = rng.standard_normal(cout)
        for dtype in (np.float32, np.float64):
            ex = ember.tensor(x.astype(dtype), requires_grad=True)
            ew = ember.tensor(w.astype(dtype), requires_grad=True)
            eb = ember.tensor(b.astype(dtype), requires_grad=True)

            def fn(a, c, d):
                return F.conv2d(a, c, d, stride=stride, padding=pad)

            run = ember.function(fn) if compiled else fn
            y = run(ex, ew, eb)
            tx, tw, tb = (torch.tensor(v, requires_grad=True) for v in (x, w, b))
            ty = torch.nn.functional.conv2d(tx, tw, tb, stride=stride, padding=pad)
            gy = rng.standard_normal(ty.shape)
            ty.backward(torch.tensor(gy))
            (y * ember.tensor(gy.astype(dtype))).sum().backward()
            tol = 1e-4 if dtype == np.float32 else 1e-10
            for got, want in ((y, ty), (ex.grad, tx.grad), (ew.grad, tw.grad), (eb.grad, tb.grad)):
                np.testing.assert_allclose(
                    got.detach().numpy(), want.detach().numpy(), rtol=tol, atol=tol * 10
                )


def test_counted_choice_splits_a_strided_shortcut(monkeypatch):
    monkeypatch.setenv("EMBER_CONV_LAYOUT", "count")
    cconv._steps().clear()
    rng = np.random.default_rng(9)
    x = rng.standard_normal((2, 24, 12, 12)).astype(np.float32)
    w = rng.standard_normal((40, 24, 1, 1)).astype(np.float32)
    p = plan((12, 12), (1, 1), (2, 2), ((0, 0),) * 2, (1, 1))
    y = F.conv2d(ember.tensor(x), ember.tensor(w), stride=2).numpy()
    (entry,) = cconv._steps().values()
    assert entry[1][37] != 0  # (the step's argument block names the split copy)
    _within(y, K.conv_forward(x, w, p, 1), K.conv_forward(abs(x), abs(w), p, 1), 24)
