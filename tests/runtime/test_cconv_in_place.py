"""Two paths of the forward convolution's C source (kernels/cconv_source.py) checked against
the same source compiled without them, bit for bit (they compute the same sums in the same
order), and against the NumPy kernels within rounding (2 * L * eps times the sum of the
products' magnitudes, L the sum's length) and PyTorch:

* column panels read in place (``micro_rows``): a panel that is one contiguous run of the
  input in every row is not packed; the micro-kernel reads its rows where they lie;
* a stride-2 phase of the input gradient stored a vector at a time (``store_steps``: values
  spread over the even lanes, a masked store), rather than element by element.

The geometries mix in-place panels with packed ones: planes of one and several panels, a
panel across two samples, the last panel short, padding (the flat layout's extended rows),
dilation, 1x1 and unpadded (the input read where it is), batch 1, both float dtypes (NR of
48 floats, 24 doubles), one and two threads; the input gradient of a stride-1 convolution
runs the same kernel. The strided input gradients cover tails of every length short of a
vector (odd widths) and a stride of 2 along one dimension only."""

import math
from contextlib import contextmanager

import numpy as np
import pytest

from ember.kernels import ccompile, cconv, cconv_library, cpool
from ember.kernels.conv_plan import plan
from ember.kernels.cstep import STEP_CALL, function_address
from ember.ops import _conv_kernels as K

torch = pytest.importorskip("torch")

needs_cc = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")

# (batch, cin, cout, size, kernel, padding, dilation)
CASES = [
    (3, 16, 16, (32, 32), (3, 3), 1, 1),  # the zoo ResNet-18's first stage: flat layout
    (1, 8, 20, (9, 50), (3, 3), 1, 1),  # batch 1, rows of 52: panels across rows
    (2, 5, 24, (7, 13), (1, 1), 0, 1),  # 1x1 unpadded: the input read where it is, 91 columns
    (2, 6, 9, (10, 61), (3, 2), (2, 0), (2, 3)),  # dilation, uneven padding
    (3, 32, 8, (16, 16), (3, 3), 1, 1),  # few output channels (one micro-kernel panel)
]


def _source_plain() -> str:
    """The forward's C source with every panel packed and every stepped store element by
    element."""
    plain = cconv.SOURCE.replace(
        "#define IN_PLACE(r) ((r)->s_count == 1 && (r)->nj == NR)", "#define IN_PLACE(r) 0"
    )
    plain, stores = plain.replace("  if (step == 2 && !res) {", "  if (0) {"), plain
    assert cconv.SOURCE != stores != plain
    return plain


@contextmanager
def _compiled_from(source: str):
    """kernels/cconv.py's steps compiled from ``source`` within the block (the library's
    source, which kernels/cconv_library.py's `_step_function` reads at each build)."""
    saved = cconv_library.SOURCE

    def use(text):
        cconv_library.SOURCE = text
        cconv_library._step_function.cache_clear()
        cconv._steps().clear()

    use(source)
    try:
        yield
    finally:
        use(saved)


def _run_step(source: str, x, w, p):
    """The graph runner's forward step (column layout) compiled from ``source``."""
    header = cconv._header(x.dtype)
    step = ccompile.load(header + source, "conv_forward_step", [cconv._P])
    made = cconv.forward_step(x.shape, w.shape, p, x.dtype, False, wide=False)
    assert made is not None
    _, args, keep = made
    out = np.empty((x.shape[0], w.shape[0]) + p.out_size, x.dtype)
    args = args.copy()
    args[0], args[1], args[3] = x.ctypes.data, w.ctypes.data, out.ctypes.data
    STEP_CALL(function_address(step))(args.ctypes.data)
    del keep
    return out


def _operands(case, dtype, seed):
    n, cin, cout, size, kernel, padding, dilation = case
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, cin) + size).astype(dtype)
    w = rng.standard_normal((cout, cin) + kernel).astype(dtype)
    pad = tuple((q, q) for q in padding) if isinstance(padding, tuple) else ((padding,) * 2,) * 2
    dil = dilation if isinstance(dilation, tuple) else (dilation,) * 2
    p = plan(size, kernel, (1, 1), pad, dil, w[0].size, cout)
    return x, w, p, pad, dil


@needs_cc
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES)
def test_in_place_panels_equal_packed_ones_bit_for_bit(case, dtype):
    x, w, p, _, _ = _operands(case, dtype, 11)
    in_place = _run_step(cconv.SOURCE, x, w, p)
    np.testing.assert_array_equal(in_place, _run_step(_source_plain(), x, w, p))


STRIDED = [
    # (batch, cin, cout, size, stride): 3x3, padding 1
    (3, 16, 32, (17, 33), (2, 2)),  # odd widths: every tail length of a phase's rows
    (2, 7, 5, (9, 22), (3, 2)),  # stride 2 along the rows only
    (1, 24, 16, (12, 12), (2, 2)),  # batch 1
]


@needs_cc
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", STRIDED)
def test_stride_two_phases_stored_as_vectors_equal_elementwise_stores(case, dtype):
    n, cin, cout, size, stride = case
    rng = np.random.default_rng(14)
    w = rng.standard_normal((cout, cin, 3, 3)).astype(dtype)
    p = plan(size, (3, 3), stride, ((1, 1), (1, 1)), (1, 1), w[0].size, cout)
    gy = rng.standard_normal((n, cout) + p.out_size).astype(dtype)
    got = cconv.conv_input_grad(gy, w, p, 1)
    with _compiled_from(_source_plain()):
        want = cconv.conv_input_grad(gy, w, p, 1)
    np.testing.assert_array_equal(got, want)
    eps = np.finfo(dtype).eps
    bound = K.conv_input_grad(abs(gy), abs(w), p, 1)
    limit = 2 * cout * 9 * eps * bound + np.finfo(dtype).tiny
    assert np.all(np.abs(got - K.conv_input_grad(gy, w, p, 1)) <= limit)


@needs_cc
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES)
def test_forward_and_input_grad_match_numpy_and_torch(case, dtype, threads):
    x, w, p, pad, dil = _operands(case, dtype, 12)
    gy = np.random.default_rng(13).standard_normal((x.shape[0], w.shape[0]) + p.out_size)
    gy = gy.astype(dtype)
    eps = np.finfo(dtype).eps
    before = cpool.get_num_threads()
    cpool.set_num_threads(threads)
    try:
        got_y = cconv.conv_forward(x, w, p, 1)
        got_gx = cconv.conv_input_grad(gy, w, p, 1)
    finally:
        cpool.set_num_threads(before)
    tx, tw, tg = (torch.from_numpy(a) for a in (x, w, gy))
    tpad = tuple(lo for lo, _ in pad)
    for got, want, bound, terms, peer in [
        (
            got_y,
            K.conv_forward(x, w, p, 1),
            K.conv_forward(abs(x), abs(w), p, 1),
            w[0].size,
            torch.nn.functional.conv2d(tx, tw, padding=tpad, dilation=dil),
        ),
        (
            got_gx,
            K.conv_input_grad(gy, w, p, 1),
            K.conv_input_grad(abs(gy), abs(w), p, 1),
            w.shape[0] * math.prod(w.shape[2:]),
            torch.nn.grad.conv2d_input(tx.shape, tw, tg, padding=tpad, dilation=dil),
        ),
    ]:
        assert got is not None and got.dtype == want.dtype and got.shape == want.shape
        limit = 2 * terms * eps * bound + np.finfo(dtype).tiny
        assert np.all(np.abs(got - want) <= limit)
        assert np.all(np.abs(got - peer.numpy()) <= 2 * limit)
