"""kernels/cconv_wide.py: the forward convolution with the output channels along the vectors,
forced on random geometries (both float dtypes; channel counts below, at and past a panel of
NR; position counts below, at and past a block of MR; strides that step the positions' runs;
dilation; cropping padding; bias, ReLU and mask), equal to the NumPy kernel within rounding on
one and two threads; which layout `wins` picks; and kernels/cconv_constant.py: a graph
constant's weight packed once, in generated code and in the C graph runner, equal to the
NumPy kernel, and re-packed when the step is handed another array."""

import math
import zlib

import numpy as np
import pytest

import ember
from ember.kernels import ccompile, cconv, cconv_constant, cconv_wide, cpool
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


def _cases():
    rng = np.random.default_rng(24)
    cases = []
    for _ in range(36):
        cin = int(rng.choice([1, 3, 16, 40]))
        cout = int(rng.choice([1, 7, 24, 47, 48, 49, 100, 150]))
        kernel = tuple(int(rng.integers(1, 4)) for _ in range(2))
        stride = tuple(int(rng.choice([1, 1, 2, 3])) for _ in range(2))
        dilation = tuple(int(rng.choice([1, 1, 2])) for _ in range(2))
        padding = tuple((int(rng.integers(0, 3)), int(rng.integers(-1, 3))) for _ in range(2))
        size = tuple(int(rng.choice([3, 5, 7, 9, 14, 17])) for _ in range(2))
        n = int(rng.integers(1, 4))
        dtype = rng.choice([np.float32, np.float64])
        cases.append((n, cin, cout, size, kernel, stride, padding, dilation, dtype))
    return cases


def _run_step(x, w, p, relu, bias, mask, wide, constant=False, made=None, by_blocks=None):
    made = made or cconv.forward_step(
        x.shape, w.shape, p, x.dtype, relu, weight_constant=constant, wide=wide
    )
    step, args, _keep = made
    if by_blocks is not None:  # threads share the position blocks, else the channel panels
        args[31] = by_blocks
    out = np.full((x.shape[0], w.shape[0]) + p.out_size, np.nan, x.dtype)
    args[0], args[1], args[3] = x.ctypes.data, w.ctypes.data, out.ctypes.data
    args[2] = 0 if bias is None else bias.ctypes.data
    args[4] = 0 if mask is None else mask.ctypes.data
    STEP_CALL(function_address(step))(args.ctypes.data)
    return out


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", _cases(), ids=str)
def test_wide_layout_equals_numpy_within_rounding(case, threads):
    n, cin, cout, size, kernel, stride, padding, dilation, dtype = case
    if any(o < 1 for o in conv_out_size(size, kernel, stride, padding, dilation)):
        pytest.skip("no output")
    before = cpool.get_num_threads()
    cpool.set_num_threads(threads)
    try:
        rng = np.random.default_rng(zlib.crc32(str(case).encode()))
        x = rng.standard_normal((n, cin) + size).astype(dtype)
        w = rng.standard_normal((cout, cin) + kernel).astype(dtype)
        bias = rng.standard_normal(cout).astype(dtype)
        p = plan(size, kernel, stride, padding, dilation, w[0].size, cout)
        terms = cin * math.prod(kernel) + 1
        want = K.conv_forward(x, w, p, 1) + bias[:, None, None]
        bound = K.conv_forward(abs(x), abs(w), p, 1) + abs(bias)[:, None, None]
        for by_blocks in (0, 1):
            got = _run_step(x, w, p, False, bias, None, wide=True, by_blocks=by_blocks)
            _within(got, want, bound, terms)
            mask = np.zeros(got.shape, np.bool_)
            got = _run_step(x, w, p, True, bias, mask, wide=True, by_blocks=by_blocks)
            _within(got, np.maximum(want, 0), bound, terms)
            assert np.array_equal(mask, got > 0)
        got = _run_step(x, w, p, False, None, None, wide=True)
        _within(got, K.conv_forward(x, w, p, 1), K.conv_forward(abs(x), abs(w), p, 1), terms)
    finally:
        cpool.set_num_threads(before)


def test_non_finite_values_stay_in_their_windows():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 8, 7, 7)).astype(np.float32)
    x[0, 2, 3, 3] = np.inf
    x[0, 5, 0, 6] = np.nan
    w = rng.standard_normal((60, 8, 3, 3)).astype(np.float32)
    p = plan((7, 7), (3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), w[0].size, 60)
    want = K.conv_forward(x, w, p, 1)
    got = _run_step(x, w, p, False, None, None, wide=True)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-4, atol=1e-4)


def test_wins_where_the_positions_are_few_and_the_channels_many():
    # a 7x7 plane at batch 1: 49 positions are two column panels of 48, the second one
    # nearly empty; 512 channels are 11 panels to share among threads
    assert cconv_wide.wins(49, 512, 4608, 2, 4)
    assert cconv_wide.wins(196, 256, 2304, 2, 4)
    # a large plane with few channels: the channels' panel would be mostly padding
    assert not cconv_wide.wins(56 * 56, 64, 576, 2, 4)
    assert not cconv_wide.wins(64 * 1024, 32, 288, 2, 4)
    # on one thread, where the columns' layout pads nothing (whole panels of 48 columns,
    # whole blocks of 8 channels) it never does more work
    for cols in (48, 480, 4800):
        for cout in (8, 40, 64, 96):
            assert not cconv_wide.wins(cols, cout, 100, 1, 4)


def test_a_constant_weight_is_packed_once_and_repacked_for_another_array():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 32, 7, 7)).astype(np.float32)
    w1 = rng.standard_normal((96, 32, 3, 3)).astype(np.float32)
    w2 = rng.standard_normal((96, 32, 3, 3)).astype(np.float32)
    p = plan((7, 7), (3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), w1[0].size, 96)
    for wide in (True, False):
        made = cconv.forward_step(x.shape, w1.shape, p, x.dtype, False, True, wide=wide)
        for w in (w1, w1, w2, w1):
            got = _run_step(x, w, p, False, None, None, wide, made=made)
            np.testing.assert_allclose(got, K.conv_forward(x, w, p, 1), rtol=1e-4, atol=1e-4)
    forward = cconv_constant.ConstantWeightForward(x.shape, w1.shape, p, np.float32, True)
    for w in (w1, w2):
        got = forward(x, w)
        np.testing.assert_allclose(got, np.maximum(K.conv_forward(x, w, p, 1), 0), atol=1e-4)
    assert forward(x[:, :16], w1[:, :16]) is None  # another geometry: declined


@pytest.mark.parametrize("runner", ["generated code", "C graph runner"])
def test_imported_model_packs_its_constant_weights_once(runner, monkeypatch):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    from ember.runtime import cgraph

    rng = np.random.default_rng(7)
    w1 = rng.standard_normal((64, 16, 3, 3)).astype(np.float32) * 0.2
    w2 = rng.standard_normal((100, 64, 1, 1)).astype(np.float32) * 0.2
    b1 = rng.standard_normal(64).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["h"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("Conv", ["r", "w2"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "small",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 7, 7])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 100, 7, 7])],
        [numpy_helper.from_array(a, n) for a, n in ((w1, "w1"), (w2, "w2"), (b1, "b1"))],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    made = []
    original = cconv.forward_step

    def counting(*args, **kwargs):
        made.append(kwargs.get("weight_constant", False))
        return original(*args, **kwargs)

    monkeypatch.setattr(cconv, "forward_step", counting)
    fn = ember.onnx.load(model.SerializeToString())
    x = rng.standard_normal((1, 16, 7, 7)).astype(np.float32)
    fn(x)
    if runner == "C graph runner":
        captured = next(iter(fn._function._cache.values())).graph
        steps = cgraph.c_steps(captured)
        assert steps is not None
        program = cgraph.CGraphProgram(captured, steps, threads=1)
        fn = lambda x: program(x)[0]  # noqa: E731
    p1 = plan((7, 7), (3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), w1[0].size, 64)
    p2 = plan((7, 7), (1, 1), (1, 1), ((0, 0), (0, 0)), (1, 1), w2[0].size, 100)
    h = np.maximum(K.conv_forward(x, w1, p1, 1) + b1[:, None, None], 0)
    want = K.conv_forward(h, w2, p2, 1)
    for _ in range(3):
        got = np.asarray(fn(x))
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    assert any(made), "no step was built for a constant weight"
