"""kernels/cconv.py and kernels/cconv_weight.py on half precision (bfloat16, float16) read and
write the 16-bit values themselves, computing in float32: every result equals the float32
kernels run on widened copies and rounded once (the same sums in the same order: equal
values; where the kernels sum bfloat16 pairs with AVX512_BF16's dot products, `cconv.pairs`,
within the float32 bound of a K-term sum in another order plus one rounding), over random
geometries (strides, padding, dilation, 1x1, channel counts that take
the channels-last weight gradient or the extended grid), both forward layouts, one and two
threads; the forward's epilogue adds the bias to the float32 sums and rounds once, as
PyTorch's half-precision convolutions (ReLU and its mask read the rounded value); non-finite
values propagate;
and the ops run these kernels with no float32 copies (their workspace rule says so, the
measured peak agrees)."""

import zlib

import numpy as np
import pytest

import ember
from ember.kernels import ccompile, cconv, cconv_weight, cpool
from ember.kernels.conv_plan import conv_out_size, plan
from ember.kernels.cstep import STEP_CALL, function_address
from ember.ops import _conv_dispatch

pytestmark = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")

HALF = [ember.bfloat16.np, np.float16]


def _same(got, want):
    """Equal values (a -0.0 equal to 0.0: a sum with no bias keeps its sign of zero, the
    float32 kernel's store adds 0.0), NaN where NaN; one dtype and shape."""
    assert got.dtype == want.dtype and got.shape == want.shape
    g, w = got.astype(np.float64), want.astype(np.float64)
    assert np.array_equal(np.isnan(g), np.isnan(w))
    finite = ~np.isnan(w)
    assert np.array_equal(g[finite], w[finite]), float(np.max(np.abs(g - w)[finite]))


def _forward_close(got, want, bound, terms):
    """`_same` where the kernels sum in the float32 kernels' order; with bfloat16 pairs,
    within 2 K eps32 of the sum of the products' magnitudes (``bound``) plus one unit in the
    last place of the 16-bit result (the float32 sum rounded on the other side of a tie)."""
    if not cconv.pairs(got.dtype):
        return _same(got, want)
    assert got.dtype == want.dtype and got.shape == want.shape
    g, w = got.astype(np.float64), want.astype(np.float64)
    limit = 2 * terms * np.finfo(np.float32).eps * bound + np.spacing(np.abs(want)).astype(
        np.float64
    )
    assert np.all(np.abs(g - w) <= limit), float(np.max(np.abs(g - w) - limit))


def _cases():
    rng = np.random.default_rng(7)
    cases = []
    for _ in range(24):
        cin = int(rng.choice([1, 3, 16, 32, 40]))
        cout = int(rng.choice([1, 7, 16, 48, 49, 100]))
        kernel = tuple(int(rng.integers(1, 4)) for _ in range(2))
        stride = tuple(int(rng.choice([1, 1, 2, 3])) for _ in range(2))
        dilation = tuple(int(rng.choice([1, 1, 2])) for _ in range(2))
        padding = tuple((int(rng.integers(0, 3)), int(rng.integers(0, 3))) for _ in range(2))
        size = tuple(int(rng.choice([3, 5, 7, 9, 14])) for _ in range(2))
        n = int(rng.integers(1, 5))
        cases.append((n, cin, cout, size, kernel, stride, padding, dilation))
    return cases


def _operands(case, dtype, seed):
    n, cin, cout, size, kernel, stride, padding, dilation = case
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, cin) + size).astype(np.float32).astype(dtype)
    w = (rng.standard_normal((cout, cin) + kernel) / np.sqrt(cin)).astype(np.float32)
    p = plan(size, kernel, stride, padding, dilation, cin * int(np.prod(kernel)), cout)
    return x, w.astype(dtype), p


def _wide(*arrays):
    return [a.astype(np.float32) for a in arrays]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", HALF, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("case", _cases(), ids=str)
def test_half_kernels_equal_the_float32_kernels_rounded_once(case, dtype, threads):
    n, cin, cout, size, kernel, stride, padding, dilation = case
    if any(o < 1 for o in conv_out_size(size, kernel, stride, padding, dilation)):
        pytest.skip("no output")
    before = cpool.get_num_threads()
    cpool.set_num_threads(threads)
    try:
        x, w, p = _operands(case, dtype, zlib.crc32(repr(case).encode()))
        y = cconv.conv_forward(x, w, p, 1)
        bound = cconv.conv_forward(*_wide(abs(x), abs(w)), p, 1)
        terms = cin * int(np.prod(kernel))
        _forward_close(y, cconv.conv_forward(*_wide(x, w), p, 1).astype(dtype), bound, terms)
        gy = np.random.default_rng(1).standard_normal(y.shape).astype(np.float32).astype(dtype)
        gx = cconv.conv_input_grad(gy, w, p, 1)
        if gx is None:  # (the product and col2im: ops/conv.py widens to float32 for it)
            assert cconv.col2im_runs(gy.shape, w.shape, p, 1, np.float32)
        else:
            bound = cconv.conv_input_grad(*_wide(abs(gy), abs(w)), p, 1)
            terms = cout * int(np.prod(kernel))
            want = cconv.conv_input_grad(*_wide(gy, w), p, 1).astype(dtype)
            _forward_close(gx, want, bound, terms)
        gw = cconv_weight.conv_weight_grad(x, gy, p, 1)
        if cconv_weight.reads_half(x.shape, cout, p, 1):
            want = cconv_weight.conv_weight_grad(*_wide(x, gy), p, 1).astype(dtype)
            bound = cconv_weight.conv_weight_grad(*_wide(abs(x), abs(gy)), p, 1)
            _forward_close(gw, want, bound, n * int(np.prod(y.shape[2:])))
        else:  # (the strided phases and the pointwise products: the op widens instead)
            assert gw is None
    finally:
        cpool.set_num_threads(before)


@pytest.mark.parametrize("wide", [False, True], ids=["columns", "channels wide"])
@pytest.mark.parametrize("dtype", HALF, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("relu", [False, True])
def test_the_epilogue_rounds_once_with_the_bias(relu, dtype, wide):
    case = (2, 16, 56, (7, 7), (3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1))
    x, w, p = _operands(case, dtype, 3)
    bias = np.random.default_rng(4).standard_normal(56).astype(np.float32).astype(dtype)
    if wide and cconv.pairs(dtype):
        assert cconv.forward_step(x.shape, w.shape, p, dtype, relu, wide=True) is None
        pytest.skip("the channels-wide layout has no bfloat16 pairs")
    step, args, _keep = cconv.forward_step(x.shape, w.shape, p, dtype, relu, wide=wide)
    out = np.empty((2, 56) + p.out_size, dtype)
    mask = np.zeros(out.shape, bool)
    args[0], args[1], args[2] = x.ctypes.data, w.ctypes.data, bias.ctypes.data
    args[3], args[4] = out.ctypes.data, mask.ctypes.data
    STEP_CALL(function_address(step))(args.ctypes.data)
    # the float32 kernel's sums plus the bias, rounded once
    b32 = bias.astype(np.float32)[:, None, None]
    once = (cconv.conv_forward(*_wide(x, w), p, 1) + b32).astype(dtype)
    want = np.where(once.astype(np.float32) < 0, once.dtype.type(0), once) if relu else once
    bound = cconv.conv_forward(*(abs(a) for a in _wide(x, w)), p, 1) + abs(b32)
    _forward_close(out, want, bound, 16 * 9 + 1)
    assert np.array_equal(mask, out.astype(np.float32) > 0)
    # and so does the forward with a bias outside the graph runner
    _forward_close(cconv.conv_forward(x, w, p, 1, bias), once, bound, 16 * 9 + 1)


@pytest.mark.parametrize("dtype", HALF, ids=lambda d: np.dtype(d).name)
def test_non_finite_values_propagate(dtype):
    case = (2, 8, 16, (9, 9), (3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1))
    x, w, p = _operands(case, dtype, 5)
    x[0, 3, 4, 4] = np.nan
    x[1, 0, 0, 0] = np.inf
    got = cconv.conv_forward(x, w, p, 1)
    want = cconv.conv_forward(*_wide(x, w), p, 1).astype(dtype)
    finite = np.isfinite(want.astype(np.float32))
    assert np.array_equal(np.isfinite(got.astype(np.float32)), finite)
    assert np.array_equal(np.isnan(got.astype(np.float32)), np.isnan(want.astype(np.float32)))
    tame = np.where(np.isfinite(x.astype(np.float32)), x.astype(np.float32), 0)
    bound = cconv.conv_forward(abs(tame), abs(w.astype(np.float32)), p, 1)
    _forward_close(np.where(finite, got, 0), np.where(finite, want, 0), bound, 8 * 9)


def test_the_ops_run_half_precision_without_float32_copies(bare_executors):
    # the ops' workspace rule counts no float32 copies of the operands, and the measured peak
    # agrees (tests/plan/test_half.py measures whole models)
    from ember.tools import memory

    def step(x, w, g):
        loss = lambda x, w: (ember.nn.functional.conv2d(x, w, padding=1) * g).sum()  # noqa: E731
        return ember.grad(loss, (0, 1))(x, w)

    rng = np.random.default_rng(0)
    x, w, g = (
        ember.tensor(rng.standard_normal(shape), dtype=ember.bfloat16)
        for shape in ((8, 32, 16, 16), (64, 32, 3, 3), (8, 64, 16, 16))
    )
    report = memory(step, x, w, g)
    measured = report.measure()
    assert abs(report.peak_bytes - measured) <= 0.05 * measured, (report.peak_bytes, measured)
    graph = ember.trace(step, x, w, g).graph
    names = {node.op.name: node for node in graph.nodes if node.kind == "call"}
    # (the input gradient: its flipped weight, in 16 bits, beside the forward's kept scratch)
    assert _conv_dispatch._workspace(names["conv_input_grad"], None) == w.numel() * 2
    weight_grad = names["conv_weight_grad"]  # its float32 result and partial sums only
    assert _conv_dispatch._workspace(weight_grad, None) < 2 * x.numel() * 4


@pytest.mark.parametrize("dtype", HALF, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize(
    "case",  # (n, channels, multiplier, size, kernel, stride, padding)
    [
        (2, 8, 1, 9, 3, 1, 1),
        (4, 16, 1, 14, 3, 2, 1),
        (2, 6, 2, 7, 3, 1, 1),  # (a multiplier's input gradient: the grouped kernel)
        (3, 32, 1, 5, 5, 1, 2),
        (2, 4, 3, 11, 3, 2, 1),
        (8, 24, 1, 28, 3, 1, 1),
    ],
    ids=str,
)
def test_depthwise_and_grouped_half_precision_equal_the_float32_kernels(case, dtype):
    # kernels/cdepthwise.py reads and writes 16 bits too (float32 sums in the same order)
    n, c, m, size, k, s, pad = case
    rng = np.random.default_rng(9)
    x = rng.standard_normal((n, c, size, size)).astype(np.float32).astype(dtype)
    w = (rng.standard_normal((c * m, 1, k, k)) / k).astype(np.float32).astype(dtype)
    attrs = dict(stride=(s, s), padding=((pad, pad), (pad, pad)), dilation=(1, 1), groups=c)
    y = _conv_dispatch._conv_fast(x, w, **attrs)
    _same(y, _conv_dispatch._conv_fast(*_wide(x, w), **attrs).astype(dtype))
    gy = rng.standard_normal(y.shape).astype(np.float32).astype(dtype)
    grad = _conv_dispatch._conv_input_grad_fast
    _same(grad(gy, w, in_size=(size, size), **attrs),
          grad(*_wide(gy, w), in_size=(size, size), **attrs).astype(dtype))  # fmt: skip
    wgrad = _conv_dispatch._conv_weight_grad_fast
    _same(wgrad(x, gy, kernel_size=(k, k), **attrs),
          wgrad(*_wide(x, gy), kernel_size=(k, k), **attrs).astype(dtype))  # fmt: skip
    from ember.kernels import cdepthwise

    assert cdepthwise.conv_forward(x, w, plan((size, size), (k, k), (s, s),
                                              ((pad, pad), (pad, pad)), (1, 1), k * k, c * m),
                                   c) is not None  # fmt: skip
