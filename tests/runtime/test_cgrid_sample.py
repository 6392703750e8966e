"""kernels/cgrid_sample.py: grid_sample's forward and backward C kernels against the NumPy
kernels of ops/grid_sample.py (the specification), over random shapes (4-D and 5-D, every mode
and padding, both alignments, batch 1 with its channel blocks), grids with NaN, Inf, huge and
out-of-range values, float32/float64/bfloat16, one thread and two; the NumPy path where C does
not run; the op against PyTorch on NaN grids."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.kernels import ccompile, cfuse, cgrid_sample, cpool
from ember.ops.grid_sample import GRID_SAMPLE, GRID_SAMPLE_BACKWARD

torch = pytest.importorskip("torch", reason="PyTorch (the reference peer) is not installed")
needs_cc = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")
_SPECIAL = np.array([np.nan, np.inf, -np.inf, 1e20, -1e20, 3.5, -2.75, 1e6])
_MODES = {2: ("bilinear", "nearest", "bicubic"), 3: ("bilinear", "nearest")}


def _case(rng, dims: int, dtype, special: bool = True):
    n, c = int(rng.integers(1, 4)), int(rng.integers(1, 20))
    spatial = tuple(int(s) for s in rng.integers(1, 7, size=dims))
    out = tuple(int(s) for s in rng.integers(1, 6, size=dims))
    x = rng.standard_normal((n, c, *spatial)).astype(dtype)
    grid = rng.uniform(-1.6, 1.6, (n, *out, dims)).astype(dtype)
    if special:  # a few NaN, infinite, huge and far values among them
        picks = rng.integers(0, grid.size, max(grid.size // 6, 1))
        grid.reshape(-1)[picks] = rng.choice(_SPECIAL, picks.size).astype(dtype)
    g = rng.standard_normal((n, c, *out)).astype(dtype)
    return x, grid, g


def _dgrid_tolerance(x, g, dtype, taps: int) -> float:
    """The grid gradient sums C channels of ``taps`` products; the C kernels split a small
    batch's channels into blocks summed afterwards: a few ulps per term of the largest sum."""
    eps = float(np.finfo(np.float32 if dtype != np.float64 else dtype).eps)
    terms = x.shape[1] * taps
    finite = np.abs(x[np.isfinite(x)]).max(initial=0) * np.abs(g).max(initial=0)
    return 4 * eps * terms * finite * max(x.shape[2:])


@needs_cc
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dims", [2, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_kernels_equal_the_numpy_reference(dims, dtype, threads, monkeypatch):
    """The forward and the input gradient are the NumPy kernels' bits (NaN where they give
    NaN); the grid gradient too with one channel block, within its sums' rounding with more."""
    monkeypatch.setattr(cfuse, "PARALLEL_MIN", 1)  # (the pool for these small shapes too)
    rng = np.random.default_rng(100 * dims + threads)
    before = cpool.get_num_threads()
    cpool.set_num_threads(threads)
    try:
        for mode in _MODES[dims]:
            for padding in ("zeros", "border", "reflection"):
                align = bool(rng.integers(2))
                x, grid, g = _case(rng, dims, dtype)
                a = {"mode": mode, "padding_mode": padding, "align_corners": align}
                what = f"{mode} {padding} align={align} {x.shape} {grid.shape}"
                y = cgrid_sample.grid_sample(x, grid, mode, padding, align)
                np.testing.assert_array_equal(y, GRID_SAMPLE.kernel(x, grid, **a), what)
                got = cgrid_sample.grid_sample_backward(x, grid, g, mode, padding, align, (1, 1))
                want = GRID_SAMPLE_BACKWARD.kernel(x, grid, g, output_mask=(True, True), **a)
                np.testing.assert_array_equal(got[0], want[0], what)
                if cgrid_sample.channel_blocks(x.shape[0], x.shape[1]) == 1:
                    np.testing.assert_array_equal(got[1], want[1], what)
                else:
                    taps = {"bilinear": 2, "nearest": 1, "bicubic": 4}[mode] ** dims
                    tol = _dgrid_tolerance(x, g, dtype, taps)
                    np.testing.assert_allclose(got[1], want[1], 0, tol, err_msg=what)
    finally:
        cpool.set_num_threads(before)


@needs_cc
def test_output_mask_and_half_precision():
    """An unwanted gradient is zeros; bfloat16 is computed in float32 and rounded once."""
    import ml_dtypes

    rng = np.random.default_rng(7)
    x, grid, g = _case(rng, 2, np.float32, special=False)
    a = {"mode": "bilinear", "padding_mode": "border", "align_corners": False}
    dx, dgrid = cgrid_sample.grid_sample_backward(x, grid, g, "bilinear", "border", False, (1, 0))
    assert not dgrid.any() and dx.any()
    dx, dgrid = cgrid_sample.grid_sample_backward(x, grid, g, "bilinear", "border", False, (0, 1))
    assert not dx.any() and dgrid.any()
    half = [v.astype(ml_dtypes.bfloat16) for v in (x, grid, g)]
    y = cgrid_sample.grid_sample(half[0], half[1], "bilinear", "border", False)
    assert y.dtype == half[0].dtype
    want = GRID_SAMPLE.kernel(*[v.astype(np.float32) for v in half[:2]], **a)
    np.testing.assert_array_equal(y, want.astype(ml_dtypes.bfloat16))
    np.testing.assert_array_equal(GRID_SAMPLE.kernel(*half[:2], **a), y)


def test_the_numpy_kernels_run_where_c_does_not(monkeypatch):
    """Without the C kernels (no compiler: CC=/bin/false), the op runs the NumPy kernels."""
    monkeypatch.setattr(cgrid_sample, "_functions", lambda dtype: None)
    assert not cgrid_sample.available(np.float32)
    rng = np.random.default_rng(3)
    x, grid, _ = _case(rng, 3, np.float32, special=False)
    tx, tg = torch.tensor(x, requires_grad=True), torch.tensor(grid, requires_grad=True)
    ex, eg = ember.tensor(x, requires_grad=True), ember.tensor(grid, requires_grad=True)
    y = F.grid_sample(ex, eg, padding_mode="reflection", align_corners=True)
    ty = torch.nn.functional.grid_sample(tx, tg, padding_mode="reflection", align_corners=True)
    y.sum().backward()
    ty.sum().backward()
    for got, want in ((y, ty), (ex.grad, tx.grad), (eg.grad, tg.grad)):
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), 1e-5, 1e-5)


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
def test_nan_and_infinite_grids_give_pytorchs_4d_values(mode):
    """NaN, infinite and huge grid values, every padding and alignment: PyTorch's 4-D kernel's
    values (NaN where it gives NaN)."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 2, 4, 5)).astype(np.float32)
    v = _SPECIAL.astype(np.float32)
    grid = np.concatenate(
        [np.stack([v, np.full_like(v, 0.1)], -1), np.stack([np.full_like(v, 0.2), v], -1)]
    )[None, None]
    for padding in ("zeros", "border", "reflection"):
        for align in (False, True):
            got = F.grid_sample(ember.tensor(x), ember.tensor(grid), mode, padding, align)
            want = torch.nn.functional.grid_sample(
                torch.tensor(x), torch.tensor(grid), mode, padding, align
            )
            np.testing.assert_allclose(got.numpy(), want.numpy(), 1e-6, 1e-6, equal_nan=True)
