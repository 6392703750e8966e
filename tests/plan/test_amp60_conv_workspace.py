"""Convolution gradients' workspace against what the compiled kernels allocate (tracemalloc),
for the cases the planner counted wrongly: a stride-1 3x3 input gradient (only its flipped
weight: the inner forward packs on its step's scratch, kept between calls; float32 and, where
the compiled kernel reads 16 bits, bfloat16), a 1x1 stride-2 weight gradient (the contiguous
copy of the strided phase: beside the per-sample products, or before the channels-last
kernel's temporaries), and a bfloat16 weight gradient (its float32 gradient exists before the
16-bit result, not beside it)."""

from __future__ import annotations

import tracemalloc
from types import SimpleNamespace

import numpy as np
import pytest

import ember
from ember.kernels.ccompile import compiler_available
from ember.ops.conv import CONV_INPUT_GRAD, CONV_WEIGHT_GRAD
from ember.types import TensorType

pytestmark = pytest.mark.skipif(
    not compiler_available(),
    reason="no C compiler: the workspace tested is the compiled kernels' (the NumPy kernels "
    "keep their columns as scratch between calls)",
)

_PAD1 = ((1, 1), (1, 1))
_PAD0 = ((0, 0), (0, 0))


def _allocated(op, a, b, attrs) -> tuple[int, np.ndarray]:
    """Bytes ``op`` allocates beyond its result at its peak, and the result."""
    for _ in range(3):  # (first calls: libraries load, steps and their scratch are made)
        op.run(a, b, **attrs)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        result = op.run(a, b, **attrs)
        extra = tracemalloc.get_traced_memory()[1] - before - result.nbytes
    finally:
        tracemalloc.stop()
    return extra, result


def _planned(op, a, b, result, attrs, dtype) -> int:
    node = SimpleNamespace(
        op=op,
        inputs=[TensorType(a.shape, dtype), TensorType(b.shape, dtype)],
        outputs=[TensorType(result.shape, dtype)],
        attrs=attrs,
    )
    return op.workspace(node, None)


def _dx(n, c, cout, size, k, s):
    pad = _PAD1 if k == 3 else _PAD0
    out = (size + 2 * (k // 2) - k) // s + 1
    attrs = dict(in_size=(size, size), stride=(s, s), padding=pad, dilation=(1, 1), groups=1)
    return CONV_INPUT_GRAD, (n, cout, out, out), (cout, c, k, k), attrs


def _dw(n, c, cout, size, k, s):
    pad = _PAD1 if k == 3 else _PAD0
    out = (size + 2 * (k // 2) - k) // s + 1
    attrs = dict(kernel_size=(k, k), stride=(s, s), padding=pad, dilation=(1, 1), groups=1)
    return CONV_WEIGHT_GRAD, (n, c, size, size), (n, cout, out, out), attrs


# ResNet-18's (width 16, CIFAR) geometries at a batch of 32
CASES = {
    "input grad 3x3/1 128ch 4x4": _dx(32, 128, 128, 4, 3, 1),
    "input grad 3x3/1 64ch 8x8": _dx(32, 64, 64, 8, 3, 1),
    "weight grad 1x1/2 16->32 32x32 (per-sample products)": _dw(32, 16, 32, 32, 1, 2),
    "weight grad 1x1/2 64->128 8x8 (channels-last)": _dw(32, 64, 128, 8, 1, 2),
    "weight grad 3x3/1 128ch 4x4": _dw(32, 128, 128, 4, 3, 1),
}


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("case", list(CASES))
def test_gradient_workspace_is_what_the_kernel_allocates(case, dtype, bare_executors):
    op, a_shape, b_shape, attrs = CASES[case]
    dtype = getattr(ember, dtype)
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(s).astype(np.float32).astype(dtype.np) for s in (a_shape, b_shape))
    extra, result = _allocated(op, a, b, attrs)
    planned = _planned(op, a, b, result, attrs, dtype)
    assert extra > 16384  # (the kernels' temporaries, not nothing)
    # (a few Python objects beside the arrays)
    assert abs(extra - planned) <= 8192 + 0.02 * extra, (planned, extra)
