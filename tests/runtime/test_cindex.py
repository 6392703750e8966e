"""kernels/cindex.py's gather along the last axis (``take``: the ``index`` op of one index
tensor) against ``np.take`` bit for bit, and its scatter-add along one axis
(``index_backward`` of one index tensor) against the NumPy kernel (bit for bit: the same sums
in the same order; half precision rounded at each sum, as NumPy's add.at) and PyTorch's
``index_add``, and the gradients of ``index_select`` and ``interpolate`` that run it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ember
from ember.kernels import cindex, cpool
from ember.ops._index_plan import IndexOutOfRangeError
from ember.ops._scatter_kernels import add_slices

torch = pytest.importorskip("torch")

needs_c = pytest.mark.skipif(not cindex._function(np.dtype(np.float32)), reason="no C compiler")
ROOT = Path(__file__).resolve().parents[2]


def _case(rng, dtype, special: bool):
    ndim = int(rng.integers(1, 5))
    shape = tuple(int(s) for s in rng.integers(1, 9, ndim))
    axis = int(rng.integers(0, ndim))
    m = int(rng.integers(0, 3 * shape[axis] + 1))
    idx = rng.integers(0, shape[axis], m)
    g_shape = shape[:axis] + (m,) + shape[axis + 1 :]
    g = rng.standard_normal(g_shape).astype(dtype)
    if special and g.size:
        flat = g.reshape(-1)
        picks = rng.integers(0, flat.size, max(1, flat.size // 5))
        flat[picks] = rng.choice(np.array([np.nan, np.inf, -np.inf, -0.0], dtype), picks.size)
    return shape, axis, idx, g


@needs_c
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("special", [False, True])
@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy's add.at of inf and -inf
def test_random_shapes_equal_numpy_and_torch(dtype, special):
    rng = np.random.default_rng(7 + special)
    for _ in range(60):
        shape, axis, idx, g = _case(rng, dtype, special)
        got = cindex.add_slices(shape, axis, idx, g)
        want = add_slices(shape, axis, idx, g)
        assert got is not None
        assert got.shape == want.shape and got.dtype == want.dtype
        assert got.tobytes() == want.tobytes(), (shape, axis, idx)
        t = torch.zeros(shape, dtype=torch.from_numpy(g).dtype)
        t.index_add_(axis, torch.from_numpy(idx), torch.from_numpy(g))
        # a sum of at most m terms in another order: a few ulps of the sum of magnitudes
        mag = add_slices(shape, axis, idx, np.abs(np.nan_to_num(g, posinf=0, neginf=0)))
        eps = np.finfo(dtype).eps
        finite = np.isfinite(want)
        with np.errstate(invalid="ignore"):
            diff = np.abs(got - t.numpy())
        np.testing.assert_array_equal(np.isnan(got), np.isnan(t.numpy()))
        np.testing.assert_array_equal(
            got[~finite & ~np.isnan(got)], t.numpy()[~finite & ~np.isnan(got)]
        )
        assert (diff[finite] <= 4 * eps * max(1, len(idx)) * mag[finite]).all()


@needs_c
@pytest.mark.parametrize("dtype", [ember.bfloat16.np, np.float16], ids=str)
@pytest.mark.parametrize("special", [False, True])
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_half_precision_adds_as_numpy_does(dtype, special):
    # each sum rounded to 16 bits, in the order of the indices: NumPy's add.at on the array
    rng = np.random.default_rng(11 + special)
    for _ in range(40):
        shape, axis, idx, g = _case(rng, np.float32, special)
        g = g.astype(dtype)
        got = cindex.add_slices(shape, axis, idx, g)
        want = add_slices(shape, axis, idx, g)
        assert got is not None and got.dtype == want.dtype
        # (a NaN's sign and payload depend on the order the compiler gives an addition's
        # operands: NaN where NaN, every other value's bits equal)
        nan = np.isnan(want.astype(np.float32))
        assert np.array_equal(np.isnan(got.astype(np.float32)), nan)
        assert got[~nan].tobytes() == want[~nan].tobytes(), (shape, axis, idx)
    big = rng.standard_normal((8, 64, 40)).astype(dtype)  # (the pool's column chunks)
    idx = rng.integers(0, 32, 64)
    assert cindex.add_slices((8, 32, 40), 1, idx, big).tobytes() == (
        add_slices((8, 32, 40), 1, idx, big).tobytes()
    )


@needs_c
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_large_blocks_and_column_chunks_over_threads(threads):
    """Shapes that take the pool: many outer blocks (split by block), one outer block (split
    by column ranges, an inner size not a multiple of a cache line), the last axis."""
    rng = np.random.default_rng(3)
    before = cpool.get_num_threads()
    cpool.set_num_threads(threads)
    try:
        for shape, axis, m in [
            ((8, 16, 40, 33), 2, 80),
            ((300, 517), 0, 900),
            ((64, 96, 96), 2, 192),
        ]:
            idx = rng.integers(0, shape[axis], m)
            g = rng.standard_normal(shape[:axis] + (m,) + shape[axis + 1 :]).astype(np.float32)
            got = cindex.add_slices(shape, axis, idx, g)
            assert got.tobytes() == add_slices(shape, axis, idx, g).tobytes()
    finally:
        cpool.set_num_threads(before)


@needs_c
def test_declines_out_of_range_and_other_dtypes():
    g = np.ones((2, 3), np.float32)
    assert cindex.add_slices((2, 4), 1, np.array([0, 1, 4]), g) is None
    assert cindex.add_slices((2, 4), 1, np.array([0, -1, 2]), g) is None
    assert cindex.add_slices((2, 4), 1, np.array([0, 1, 2]), g.astype(np.int32)) is None
    # and the op reports the bad index as ember does without the C kernel
    with pytest.raises(IndexOutOfRangeError):
        x = ember.tensor(np.ones((2, 4), np.float32), requires_grad=True)
        ember.index_select(x, 1, ember.tensor(np.array([0, 1, 7]))).sum().backward()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("size", [(5, 7), (16, 16), (9, 4)])
@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
def test_interpolate_gradient_against_torch(dtype, size, mode):
    """The bilinear and nearest upsampling's input gradient (index_backward along each
    spatial axis) against PyTorch's."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((3, 4, *size)).astype(dtype)
    out = (2 * size[0], 3 * size[1] - 1)
    gy = rng.standard_normal((3, 4, *out)).astype(dtype)
    kw = {} if mode == "nearest" else {"align_corners": False}
    ex = ember.tensor(x, requires_grad=True)
    ember.nn.functional.interpolate(ex, size=out, mode=mode, **kw).backward(ember.tensor(gy))
    tx = torch.from_numpy(x).requires_grad_()
    torch.nn.functional.interpolate(tx, size=out, mode=mode, **kw).backward(torch.from_numpy(gy))
    eps = np.finfo(dtype).eps
    # each input gathers at most (3 + 1) * (2 + 1) weighted terms of |gy| <= max|gy|
    tol = 16 * eps * 12 * np.abs(gy).max()
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=0, atol=tol)


def test_without_a_compiler_numpy_runs(tmp_path):
    """With CC=/bin/false the C kernel declines and index_select's gradient is NumPy's."""
    code = (
        "import numpy as np, ember\n"
        "from ember.kernels import cindex\n"
        "g = np.ones((2, 3), np.float32)\n"
        "assert cindex.add_slices((2, 3), 1, np.array([0, 2, 2]), g) is None\n"
        "x = ember.tensor(np.arange(6.0, dtype=np.float32).reshape(2, 3), requires_grad=True)\n"
        "ember.index_select(x, 1, ember.tensor(np.array([0, 2, 2]))).sum().backward()\n"
        "assert x.grad.numpy().tolist() == [[1, 0, 2], [1, 0, 2]]\n"
    )
    env = dict(
        os.environ, CC="/bin/false", EMBER_CACHE_DIR=str(tmp_path), PYTHONPATH=str(ROOT / "src")
    )
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@needs_c
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_take_along_the_last_axis_equals_numpy(threads):
    # element copies of every size (bool to float64, half precision), any index shape, NaN
    # payloads kept; other axes, small results and indices NumPy must wrap or report decline
    rng = np.random.default_rng(threads)
    before = cpool.get_num_threads()
    cpool.set_num_threads(threads)
    try:
        for shape, axis, index_shape in [
            ((8, 16, 24, 40), 3, (80,)),
            ((8, 16, 24, 40), -1, (7, 9)),
            ((300, 70, 1, 1), 1, (50,)),  # (size-1 axes after it: still element by element)
            ((70000,), 0, (5000,)),
        ]:
            for dtype in (np.float32, np.float64, np.float16, np.int8, np.int64, np.bool_):
                x = (rng.standard_normal(shape) * 50).astype(dtype)
                if dtype is np.float32:
                    x.reshape(-1)[:3] = [np.nan, -np.inf, -0.0]
                idx = rng.integers(0, shape[axis], index_shape)
                got, want = cindex.take(x, idx, axis), np.take(x, idx, axis=axis)
                assert got is not None and got.shape == want.shape and got.dtype == want.dtype
                np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    finally:
        cpool.set_num_threads(before)
    x = rng.standard_normal((64, 64, 8)).astype(np.float32)
    assert cindex.take(x, np.arange(8), 1) is None  # (slices: NumPy's)
    assert cindex.take(x[:2, :2], np.arange(8), 2) is None  # (small)
    assert cindex.take(x, np.array([0, -1]), 2) is None  # (NumPy wraps -1)
    assert cindex.take(x, np.array([0, 8]), 2) is None  # (NumPy reports 8)
    # the index op runs it (an interpolation's column selection) and still reports bad indices
    t = ember.tensor(x)
    np.testing.assert_array_equal(
        t[..., ember.tensor([7, 0, 3] * 9)].numpy(), x[..., [7, 0, 3] * 9]
    )
    with pytest.raises(IndexOutOfRangeError):
        t[..., ember.tensor([0, 9] * 20)]
