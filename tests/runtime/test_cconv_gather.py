"""The forward convolution's column panels packed by gathers (kernels/cconv_source.py's
``pack_gather``: a panel of many short runs, a small plane's output rows or a stride's columns,
gathered a vector at a time), checked bit for bit against the same source compiled without
them (the same values land in the same
packed positions, so the sums are the same), with every packed panel gathered
(``GATHER_COST 0``) and with the counted choice, and against the NumPy kernels within rounding
(2 * L * eps times the sum of the products' magnitudes, L the sum's length) and PyTorch.

Geometries: planes of 4x4 to 9x11 (runs shorter than a vector), strides 1, 2 and 3, dilation,
uneven and cropping padding, batch 1 and panels across samples, the last panel short, the
column layout and the stride-phase split one, both float dtypes (48 floats, 24 doubles a
panel), NaN and infinities in the input."""

import math

import numpy as np
import pytest

from ember.kernels import ccompile, cconv, cpool
from ember.kernels.conv_plan import plan
from ember.kernels.cstep import STEP_CALL, function_address
from ember.ops import _conv_kernels as K

torch = pytest.importorskip("torch")

needs_cc = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")

# (batch, cin, cout, size, kernel, stride, padding, dilation)
CASES = [
    (64, 8, 16, (4, 4), (3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1)),  # the zoo's last stage
    (5, 12, 9, (8, 8), (3, 3), (2, 2), ((1, 1), (1, 1)), (1, 1)),  # runs of 4 at stride 2
    (1, 6, 20, (9, 11), (3, 3), (2, 2), ((1, 1), (1, 1)), (1, 1)),  # batch 1, odd sizes
    (3, 5, 8, (10, 10), (3, 2), (3, 2), ((2, 0), (1, -1)), (1, 1)),  # stride 3, cropped
    (4, 7, 24, (8, 9), (3, 3), (1, 1), ((2, 2), (2, 2)), (2, 2)),  # dilation
    (7, 16, 8, (6, 6), (1, 1), (2, 2), ((0, 0), (0, 0)), (1, 1)),  # a 1x1 stride-2 shortcut
]


def _step(source: str, x, w, p, split: bool):
    """The graph runner's forward step over the column panels (``split``: the input split by
    stride phases) compiled from ``source``, run on x and w."""
    step = ccompile.load(cconv._header(x.dtype) + source, "conv_forward_step", [cconv._P])
    made = cconv.forward_step(x.shape, w.shape, p, x.dtype, False, wide=False, split=split)
    assert made is not None
    _, args, keep = made
    out = np.empty((x.shape[0], w.shape[0]) + p.out_size, x.dtype)
    args = args.copy()
    args[0], args[1], args[3] = x.ctypes.data, w.ctypes.data, out.ctypes.data
    STEP_CALL(function_address(step))(args.ctypes.data)
    del keep
    return out


def _operands(case, dtype, seed, non_finite=False):
    n, cin, cout, size, kernel, stride, padding, dilation = case
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, cin) + size).astype(dtype)
    if non_finite:
        x.flat[rng.choice(x.size, 5, replace=False)] = [np.nan, np.inf, -np.inf, np.nan, np.inf]
    w = rng.standard_normal((cout, cin) + kernel).astype(dtype)
    p = plan(size, kernel, stride, padding, dilation, w[0].size, cout)
    return x, w, p


def _variants():
    plain = "#define NO_GATHERS\n" + cconv.SOURCE
    every = "#define GATHER_COST 0\n" + cconv.SOURCE
    return plain, every


@needs_cc
@pytest.mark.parametrize("split", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES)
def test_gathered_panels_equal_copied_ones_bit_for_bit(case, dtype, split):
    if split and all(s == 1 for s in case[5]):
        pytest.skip("the split layout is a strided convolution's")
    x, w, p = _operands(case, dtype, 21, non_finite=True)
    plain, every = _variants()
    want = _step(plain, x, w, p, split)
    np.testing.assert_array_equal(_step(every, x, w, p, split), want)
    np.testing.assert_array_equal(_step(cconv.SOURCE, x, w, p, split), want)
    # (the NaN and infinities reach the windows that read them, as in the NumPy kernel)
    np.testing.assert_array_equal(np.isnan(want), np.isnan(K.conv_forward(x, w, p, 1)))


@needs_cc
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES)
def test_forward_and_input_grad_match_numpy_and_torch(case, dtype, threads):
    x, w, p = _operands(case, dtype, 22)
    _, _, _, _, _, stride, padding, dilation = case
    gy = np.random.default_rng(23).standard_normal((x.shape[0], w.shape[0]) + p.out_size)
    gy = gy.astype(dtype)
    before = cpool.get_num_threads()
    cpool.set_num_threads(threads)
    try:
        got_y = cconv.conv_forward(x, w, p, 1)
        got_gx = cconv.conv_input_grad(gy, w, p, 1)
    finally:
        cpool.set_num_threads(before)
    eps = np.finfo(dtype).eps
    # PyTorch pads symmetrically: its input padded (or cropped) as ember's plan reads it
    pads = [v for lo, hi in reversed(padding) for v in (lo, hi)]
    tx = torch.nn.functional.pad(torch.from_numpy(x), pads)
    tw = torch.from_numpy(w)
    peer_y = torch.nn.functional.conv2d(tx, tw, stride=stride, dilation=dilation).numpy()
    checks = [
        (got_y, K.conv_forward(x, w, p, 1), K.conv_forward(abs(x), abs(w), p, 1), w[0].size, peer_y)
    ]
    if got_gx is not None:  # (a strided gradient may decline: then NumPy runs, nothing to check)
        peer = None
        if all(lo == hi for lo, hi in padding):  # (PyTorch's gradient of the unpadded input)
            peer = torch.nn.grad.conv2d_input(
                x.shape, tw, torch.from_numpy(gy), stride=stride,
                padding=tuple(lo for lo, _ in padding), dilation=dilation,
            ).numpy()  # fmt: skip
        want = K.conv_input_grad(gy, w, p, 1)
        bound = K.conv_input_grad(abs(gy), abs(w), p, 1)
        checks.append((got_gx, want, bound, w.shape[0] * math.prod(w.shape[2:]), peer))
    for got, want, bound, terms, peer in checks:
        assert got is not None and got.dtype == want.dtype and got.shape == want.shape
        limit = 2 * terms * eps * bound + np.finfo(dtype).tiny
        assert np.all(np.abs(got - want) <= limit)
        if peer is not None:
            assert np.all(np.abs(got - peer) <= 2 * limit + 8 * eps * bound)
