"""add_alpha's and add_scaled's workspace rule (ops/add_alpha.py `numpy_workspace`) against what
their NumPy kernel, the emulated fused multiply-add that runs without a C compiler, allocates
beyond its result (tracemalloc), and the rule counted inside a fused program's reference kernel."""

import tracemalloc
from types import SimpleNamespace

import numpy as np
import pytest

import ember
from ember.kernels import ccompile
from ember.ops import add_alpha, add_scaled
from ember.types import TensorType

DTYPES = [ember.bfloat16, ember.float16, ember.float32, ember.float64]


def _node(op, shape, dtype):
    t = TensorType(shape, dtype)
    return SimpleNamespace(op=op, inputs=[t, t], outputs=[t], attrs={})


@pytest.mark.parametrize("shape", [(300, 700), (5001,)], ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_the_rule_counts_the_emulation_s_temporaries(dtype, shape, monkeypatch):
    monkeypatch.setattr(ccompile, "compiler_available", lambda: False)
    rng = np.random.default_rng(0)
    x, y = (rng.standard_normal(shape).astype(dtype.np) for _ in range(2))
    for op, call in [
        (add_alpha.ADD_ALPHA, lambda: add_alpha._kernel(x, y, alpha=-0.3)),
        (add_scaled.ADD_SCALED, lambda: add_scaled._kernel(x, y, np.asarray(-0.3, dtype.np))),
    ]:
        tracemalloc.start()
        try:
            result = call()
            peak = tracemalloc.get_traced_memory()[1] - result.nbytes
        finally:
            tracemalloc.stop()
        rule = op.workspace(_node(op, shape, dtype), None)
        # (the few elements near a float32 halfway point take a small extra path, and NumPy's
        # ufunc buffers, up to 8192 elements of 8 bytes, do not grow with the operands)
        assert abs(rule - peak) <= 0.02 * peak + 65536, (op.name, rule, peak)


def test_a_compiler_allocates_only_the_result():
    if not ccompile.compiler_available():
        pytest.skip("no C compiler: the NumPy kernel runs")
    node = _node(add_alpha.ADD_ALPHA, (1000,), ember.float32)
    assert add_alpha.numpy_workspace(node, None) == 0


def test_a_fused_program_counts_its_member_s_temporaries(monkeypatch):
    from ember.ops.fused import _program_workspace
    from ember.ops.program import Input, Instr, Program

    monkeypatch.setattr(ccompile, "compiler_available", lambda: False)
    t = TensorType((1000,), ember.float32)
    alpha = TensorType((), ember.float32)
    program = Program([Instr(add_scaled.ADD_SCALED, (Input(0), Input(1), Input(2)), ())])
    held = _program_workspace(program, (0,), [t, t, alpha])
    assert held == add_alpha.numpy_workspace(_node(add_alpha.ADD_ALPHA, (1000,), t.dtype))
