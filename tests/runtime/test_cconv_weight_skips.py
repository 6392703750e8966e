"""The channels-last weight gradient skips the products whose kernel offset reads the zero
padding (kernels/cconv_weight.py `_padding_skips`, as kernels/cconv_taps.py skips the
forward's; issue 20): the same sums as summing every position, bit for bit (each skipped term
is +0 times a finite value, added to sums that start at +0); within rounding of the NumPy kernel
of ops/_conv_kernels.py and PyTorch's; a chunk of gy holding inf/NaN sums every position; and
the tables skip exactly the products that read the padding."""

import math

import numpy as np
import pytest

from ember.kernels import ccompile, cconv_weight
from ember.kernels.conv_plan import conv_out_size, plan
from ember.ops import _conv_kernels as K

torch = pytest.importorskip("torch")

needs_cc = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")

# (x shape, cout, kernel, stride, padding, dilation)
CASES = [
    ((3, 32, 4, 4), 24, (3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1)),  # ResNet's 4x4 planes
    ((2, 32, 8, 7), 16, (3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1)),
    ((3, 16, 9, 8), 24, (3, 3), (2, 2), ((1, 1), (1, 1)), (1, 1)),  # a kernel row side by side
    ((2, 32, 6, 5), 8, (3, 3), (1, 2), ((2, 0), (0, 1)), (1, 1)),  # one-sided padding
    ((2, 32, 5, 6), 8, (3, 3), (1, 1), ((2, 2), (2, 2)), (2, 2)),  # dilated
    ((4, 32, 7), 8, (5,), (1,), ((2, 2),), (1,)),  # 1-d
    ((2, 32, 3, 4, 4), 8, (3, 3, 3), (1, 1, 1), ((1, 1),) * 3, (1, 1, 1)),  # 3-d
]


def _operands(x_shape, cout, kernel, stride, padding, dilation, dtype, seed):
    rng = np.random.default_rng(seed)
    out = conv_out_size(x_shape[2:], kernel, stride, padding, dilation)
    x = rng.standard_normal(x_shape).astype(dtype)
    gy = rng.standard_normal((x_shape[0], cout) + out).astype(dtype)
    p = plan(x_shape[2:], kernel, stride, padding, dilation, x_shape[1] * math.prod(kernel), cout)
    return x, gy, p


def _every_position(monkeypatch):
    monkeypatch.setattr(cconv_weight, "_padding_skips", lambda p, layout: None)


@needs_cc
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_skipping_the_padding_gives_every_positions_sums(case, dtype, monkeypatch):
    x, gy, p = _operands(*case, dtype, seed=len(case[0]))
    layout = cconv_weight.cl_layout(x.shape[1], p, np.dtype(dtype).itemsize)
    assert layout is not None and cconv_weight._padding_skips(p, layout) is not None
    got = cconv_weight.conv_weight_grad(x, gy, p, 1)
    want = K.conv_weight_grad(x, gy, p, 1)
    bound = K.conv_weight_grad(np.abs(x), np.abs(gy), p, 1)
    terms = x.shape[0] * math.prod(p.out_size)
    limit = 2 * terms * np.finfo(dtype).eps * bound + np.finfo(dtype).tiny
    assert got is not None and np.all(np.abs(got - want) <= limit)
    _every_position(monkeypatch)
    np.testing.assert_array_equal(got, cconv_weight.conv_weight_grad(x, gy, p, 1))


@needs_cc
@pytest.mark.parametrize("case", CASES[:3])
def test_against_pytorch(case):
    x, gy, p = _operands(*case, np.float64, seed=5)
    want = torch.nn.grad.conv2d_weight(
        torch.from_numpy(x), (gy.shape[1], x.shape[1]) + p.kernel, torch.from_numpy(gy),
        stride=p.stride, padding=p.lo,
    ).numpy()  # fmt: skip
    got = cconv_weight.conv_weight_grad(x, gy, p, 1)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@needs_cc
def test_a_non_finite_gradient_sums_every_position():
    """inf times the padding's zeros is NaN in the NumPy kernel's products: a chunk of gy's
    positions holding inf skips nothing, so the result (or the NumPy kernel it falls back to)
    has NaN where the NumPy kernel has. The inf sits at a corner whose window reads only the
    padding (padding 3 under a 3x3 kernel): skipped, every product of it would be."""
    case = ((2, 32, 4, 4), 8, (3, 3), (1, 1), ((3, 3), (3, 3)), (1, 1))
    x, gy, p = _operands(*case, np.float32, seed=3)
    assert cconv_weight._padding_skips(p, cconv_weight.cl_layout(32, p, 4)) is not None
    gy[1, 2, 0, 0] = np.inf
    want = K.conv_weight_grad(x, gy, p, 1)
    assert np.isnan(want).any()
    got = cconv_weight.conv_weight_grad(x, gy, p, 1)
    if got is not None:  # (a non-finite result is left to the NumPy kernel)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_array_equal(np.isinf(got), np.isinf(want))


@pytest.mark.parametrize("case", CASES)
def test_the_tables_skip_exactly_the_products_reading_padding(case):
    x_shape, cout, kernel, stride, padding, dilation = case
    p = plan(x_shape[2:], kernel, stride, padding, dilation, x_shape[1] * math.prod(kernel), cout)
    layout = cconv_weight.cl_layout(x_shape[1], p, 4)
    row_ok, col_lo, col_hi = cconv_weight._padding_skips(p, layout)
    lead = p.kernel[:-1] + (1,) if layout.rows else p.kernel
    rows = math.prod(p.out_size[:-1])
    for k, offset in enumerate(np.ndindex(*lead)):
        for r, at in enumerate(np.ndindex(*p.out_size[:-1], 1)):
            for col in range(p.out_size[-1]):
                position = at[:-1] + (col,)
                dims = list(zip(position, p.stride, p.lo, offset, p.dilation, p.in_size))
                if layout.rows:  # (a kernel row's columns are not skipped)
                    dims = dims[:-1]
                real = all(0 <= o * s - lo + i * d < n for o, s, lo, i, d, n in dims)
                kept = bool(row_ok.reshape(-1)[k * rows + r]) and col_lo[k] <= col < col_hi[k]
                assert kept == real, (offset, position)
