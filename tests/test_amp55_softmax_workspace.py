"""ops/softmax.py: softmax's and log_softmax's workspace rule counts what the C kernel
(kernels/csoftmax.py) allocates, the result only, so a captured step's planned peak is its
measured one (the NumPy kernel's extra array, counted before, put the GPT step's planned
peak 7% above its measured peak)."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.kernels.ccompile import compiler_available
from ember.plan import measure_peak

needs_compiler = pytest.mark.skipif(not compiler_available(), reason="no C compiler")


@needs_compiler
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("strided", [False, True], ids=["contiguous", "transposed"])
def test_planned_peak_is_the_measured_one(bare_executors, op, dtype, strided):
    rng = np.random.default_rng(0)
    x = ember.tensor(rng.standard_normal((1000, 1024)).astype(np.float32)).to(getattr(ember, dtype))
    fn_op = getattr(ember.nn.functional, op)

    @ember.function
    def f(x):
        z = x * 2.0
        return fn_op(z.t() if strided else z, dim=-1).sum()

    want = fn_op((x * 2.0).t() if strided else x * 2.0, dim=-1).sum()
    got = f(x)
    np.testing.assert_allclose(got.float().item(), want.float().item(), rtol=1e-2)
    f(x)
    planned = f.compile(x).memory_plan.peak_bytes
    measured = measure_peak(f, x)
    assert abs(planned - measured) <= 0.02 * measured, (planned, measured)
