"""A cast keeps its operand's memory order (NumPy's astype, order 'K': the ``keeps_order``
rule), and ember's GEMM copies a batch of matrices not one stride apart before its product
(kernels/cgemm.py `_in_place`): the planner sees both, so the float32 cast of a permuted
16-bit view read by batched products (attention's heads, its gradient under autocast) is
planned as measured (it was planned contiguous: the copy, a whole operand, uncounted)."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.kernels.ccompile import compiler_available
from ember.plan import measure_peak
from ember.plan.layout import Layouts


def _heads(a, b, c):
    q = a.permute(0, 2, 1, 3).float()  # (batch, heads, rows, features) of a wider axis
    return q @ b.transpose(-1, -2), q @ c.transpose(-1, -2)


def _operands():
    rng = np.random.default_rng(0)
    a = ember.tensor(rng.standard_normal((8, 128, 4, 64)).astype(np.float32)).to(ember.bfloat16)
    b, c = (ember.tensor(rng.standard_normal((8, 4, 128, 64)).astype(np.float32)) for _ in "bc")
    return a, b, c


def test_a_cast_keeps_its_operand_s_order(bare_executors):
    a, b, c = _operands()
    fn = ember.function(_heads)
    got = fn(a, b, c)
    graph = fn.compile(a, b, c).graph
    cast = next(n for n in graph.nodes if n.target == "cast")
    eager = a.permute(0, 2, 1, 3).float().numpy()
    strides = tuple(s // eager.itemsize for s in eager.strides)
    assert Layouts(graph).strides_of(cast.outputs[0]) == strides != (32768, 8192, 64, 1)
    want = _heads(a, b, c)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.numpy(), w.numpy())


@pytest.mark.skipif(
    not compiler_available(), reason="the copy is ember's GEMM's (NumPy's product takes any layout)"
)
def test_a_strided_batch_copy_is_planned(bare_executors):
    a, b, c = _operands()
    fn = ember.function(_heads)
    fn(a, b, c)
    planned = fn.compile(a, b, c).memory_plan.peak_bytes
    measured = measure_peak(fn, a, b, c)
    assert abs(measured - planned) <= 0.02 * measured, (planned, measured)
