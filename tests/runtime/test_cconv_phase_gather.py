"""A strided input gradient's phases of one 2-d group read their flipped, transposed
sub-kernels in the weight itself (kernels/cconv_phases.py: the forward step's packer gathers
them by a table of offsets). The packed values are the copied sub-kernel's, so the result is
the same bit for bit as the phases run on copies (the path of grouped and non-2-d
convolutions), and within rounding of the NumPy kernel (the specification)."""

import functools

import numpy as np
import pytest

from ember import dtypes as dt
from ember.kernels import ccompile, cconv, cconv_phases
from ember.kernels.conv_plan import conv_out_size, plan
from ember.ops import _conv_kernels as K

pytestmark = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")

# (cin, cout, size, kernel, stride, padding, dilation): the zoo's 3x3/2, a 1x1/2 shortcut, a
# 2x2/2 transposed convolution's, and strides, dilations and paddings whose phases crop gy
CASES = [
    (12, 20, (8, 8), (3, 3), (2, 2), ((1, 1), (1, 1)), (1, 1)),
    (6, 10, (9, 7), (1, 1), (2, 2), ((0, 0), (0, 0)), (1, 1)),
    (10, 9, (8, 8), (2, 2), (2, 2), ((0, 0), (0, 0)), (1, 1)),
    (5, 7, (13, 11), (4, 3), (3, 2), ((3, 0), (2, 1)), (2, 3)),
    (9, 17, (10, 12), (5, 2), (2, 3), ((4, 2), (0, 1)), (1, 2)),
]


def _copied(store):
    """``store`` declining the gather: the phases packed from copied sub-kernels."""

    @functools.wraps(store)
    def run(*args):
        return None if len(args) > 8 else store(*args)

    return run


@pytest.mark.parametrize("dtype", [np.float32, np.float64, dt.bfloat16.np, np.float16])
@pytest.mark.parametrize("case", CASES)
def test_gathered_sub_kernels_equal_copied_ones_bit_for_bit(case, dtype):
    cin, cout, size, kernel, stride, padding, dilation = case
    rng = np.random.default_rng(sum(size) + cin)
    out = conv_out_size(size, kernel, stride, padding, dilation)
    gy = rng.standard_normal((3, cout) + out).astype(dtype)
    # a weight that is not contiguous: the gather reads the contiguous copy's offsets
    w = rng.standard_normal((cin, cout) + kernel).astype(dtype).swapaxes(0, 1)
    bias = rng.standard_normal(cin).astype(dtype)
    p = plan(size, kernel, stride, padding, dilation, w[0].size, cout)
    for b in (None, bias):
        got = cconv_phases.input_grad(gy, w, p, 1, cconv.conv_forward, cconv.forward_into, b)
        copied = cconv_phases.input_grad(
            gy, w, p, 1, cconv.conv_forward, _copied(cconv.forward_into), b
        )
        assert got is not None and copied is not None
        np.testing.assert_array_equal(got.view(np.uint8), copied.view(np.uint8))
    if dtype in (np.float32, np.float64):  # the specification, within rounding
        wc = np.ascontiguousarray(w)
        want = K.conv_input_grad(gy, wc, p, 1) + bias.reshape(1, -1, 1, 1)
        bound = K.conv_input_grad(abs(gy), abs(wc), p, 1) + abs(bias).reshape(1, -1, 1, 1)
        limit = 2 * (cout * np.prod(kernel) + 1) * np.finfo(dtype).eps * bound
        assert np.all(np.abs(got - want) <= limit + np.finfo(dtype).tiny)
