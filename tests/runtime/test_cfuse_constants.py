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


def test_loops_declare_the_c_library_they_call_instead_of_parsing_its_headers():
    # parsing <math.h> and <stdlib.h> took about a sixth of a small loop's build time: every
    # math function an op's C calls has its arity listed, so no registered op brings them back
    from ember.kernels import cfuse_source

    called = {
        fn for op in REGISTRY.values() if op.c for fn in cfuse_source._MATH_CALL.findall(op.c)
    }
    assert called and called <= set(cfuse_source._MATH_ARITY), called - set(
        cfuse_source._MATH_ARITY
    )
    declared = cfuse_source._library_declarations({("atan2", "f"), ("exp", "")})
    assert "#include <math.h>" not in declared
    assert "float atan2f(float, float);" in declared
    assert '__attribute__((simd("notinbranch"))) double exp(double);' in declared
    # a function of unknown arity: the header, as before
    assert "#include <math.h>" in cfuse_source._library_declarations({("ldexp", "")})


def test_a_loop_with_math_infinities_and_scratch_builds_from_its_declarations():
    # a row maximum (an infinite identity, NaN kept: the NAN and INFINITY macros) of atan2
    # and exp (a declared function of each arity, float and double): NumPy's values
    rng = np.random.default_rng(1)
    for dtype in (dt.float32, dt.float64):
        x, y = (rng.standard_normal((7, 300)).astype(dtype.np) for _ in range(2))
        x[3, 5] = np.nan
        program = Program(
            (
                Instr(REGISTRY["atan2"], (Input(0), Input(1))),
                Instr(REGISTRY["exp"], (Temp(0),)),
                Instr(REGISTRY["max"], (Temp(1),), (("axes", (1,)), ("keepdims", False))),
            )
        )
        source = cfuse.source_of(program, (2,), [TensorType((7,), dtype)], [t(x), t(y)])
        assert "#include <math.h>" not in source and "#include <stdlib.h>" not in source
        run = cfuse.build_program(program, (2,), [TensorType((7,), dtype)], [t(x), t(y)])
        (got,) = run(x, y)
        want = np.exp(np.arctan2(x, y)).max(axis=1)
        np.testing.assert_allclose(got, want, rtol=8 * np.finfo(dtype.np).eps)
        assert np.isnan(got[3]) and np.isnan(want[3])


def t(array):
    return TensorType(array.shape, dt.from_numpy_dtype(array.dtype))


def test_attributes_differing_in_a_zero_sign_are_two_loops():
    """0.0 == -0.0, so two programs whose attributes differ only there compare equal; their
    loops do not (hardtanh(-inf) is lo): each is built for its own bits."""
    x = np.array([-np.inf, np.inf, -0.0, 0.0, 1.0, np.nan], np.float32)
    t = TensorType(x.shape, dt.float32)
    for lo, hi in ((-0.0, 0.0), (0.0, -0.0), (-0.0, 0.0)):
        instr = Instr(REGISTRY["hardtanh"], (Input(0),), (("hi", hi), ("lo", lo)))
        (got,) = cfuse.build_program(Program((instr,)), (0,), [t], [t])(x)
        want = REGISTRY["hardtanh"].kernel(x, lo=lo, hi=hi)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
