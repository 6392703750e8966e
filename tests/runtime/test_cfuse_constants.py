"""kernels/cfuse_source.py's run-time constants: fused loops that differ only in a constant
(a learning rate, a slope) share one compiled library and still compute NumPy's bits; zero,
powers of two and a math function's constants stay literals in the source."""

from __future__ import annotations

import numpy as np
import pytest

from ember import dtypes as dt
from ember.kernels import ccompile, cfuse
from ember.ops import REGISTRY
from ember.ops.program import Const, Input, Instr, Program, Temp
from ember.types import TensorType

pytestmark = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")


def _update(lr, slope, dtype):
    """``leaky_relu(p - lr * g, slope) / 8``: a Const operand, a numeric attribute, a power of
    two."""
    return Program(
        (
            Instr(REGISTRY["mul"], (Input(1), Const(lr, dtype))),
            Instr(REGISTRY["sub"], (Input(0), Temp(0))),
            Instr(REGISTRY["leaky_relu"], (Temp(1),), (("slope", slope),)),
            Instr(REGISTRY["div"], (Temp(2), Const(8.0, dtype))),
        )
    )


def test_loops_differing_only_in_constants_share_one_library_with_numpys_bits():
    rng = np.random.default_rng(0)
    for dtype in (dt.float32, dt.float64):
        t = TensorType((1000,), dtype)
        p, g = (rng.standard_normal(1000).astype(dtype.np) for _ in range(2))
        runs = []
        for lr, slope in ((0.1, 0.01), (3e-4, 0.2), (0.7, -0.3)):
            lr = float(dtype.np.type(lr))  # (a float32 Const holds a float32 value)
            before = ccompile.stats.compiles
            run = cfuse.build_program(_update(lr, slope, dtype), (3,), [t], [t, t])
            if runs:  # the same source and library: nothing compiled
                assert run.c_source == runs[0].c_source
                assert ccompile.stats.compiles == before
            runs.append(run)
            (got,) = run(p, g)
            x = p - g * dtype.np.type(lr)
            want = np.where(x > 0, x, x * dtype.np.type(slope)) / dtype.np.type(8)
            assert got.tobytes() == want.astype(dtype.np).tobytes(), (dtype, lr, slope)
        source = runs[0].c_source
        ctype = "float" if dtype is dt.float32 else "double"
        assert f"const {ctype} cv0 = cvals[0];" in source and "cv1" in source
        assert "0x1.0000000000000p+3" in source  # (the power of two: a literal, a multiply)


def test_a_math_functions_constant_stays_a_literal():
    t = TensorType((16,), dt.float64)
    program = Program(
        (
            Instr(REGISTRY["exp"], (Const(0.3, dt.float64),)),
            Instr(REGISTRY["mul"], (Input(0), Temp(0))),
        )
    )
    run = cfuse.build_program(program, (1,), [t], [t])
    assert (0.3).hex() in run.c_source and "cv0" not in run.c_source
    x = np.linspace(-1, 1, 16)
    assert np.array_equal(run(x)[0], x * np.exp(0.3))
