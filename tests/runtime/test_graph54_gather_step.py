"""``index`` with one index tensor (an embedding lookup, an imported Gather) as a C graph-runner
step (kernels/cgather.py): np.take's results along any axis, int32 and int64 indices, negative
ones counted from the end, any data dtype; an index out of range raises the kernel's own
IndexOutOfRangeError through the runner (kernels/cstep.py `failed`), and the program runs
again afterwards."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.kernels import ccompile
from ember.ops._index_plan import IndexOutOfRangeError
from ember.runtime import cgraph
from ember.runtime.codegen import compile_graph

needs_c = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")


def _graph(fn, *arrays):
    return ember.trace(fn, *map(ember.tensor, arrays)).graph


@needs_c
@pytest.mark.parametrize("idx_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("x_dtype", [np.float32, np.float64, np.int64, np.float16, np.uint8])
def test_gather_steps_are_np_take(idx_dtype, x_dtype):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 7, 3)).astype(x_dtype)
    cases = [
        (lambda t, i: t[i], 0, (2, 4)),
        (lambda t, i: t[:, i], 1, (6,)),
        (lambda t, i: t[:, :, i], 2, (3, 2)),
    ]
    for fn, axis, shape in cases:
        n = x.shape[axis]
        idx = rng.integers(-n, n, shape).astype(idx_dtype)
        graph = _graph(fn, x, idx)
        steps = cgraph.c_steps(graph)
        assert steps is not None, str(graph)
        program = cgraph.CGraphProgram(graph, steps, None, 1)
        got = program(x, idx)[0]
        want = np.take(x, idx, axis=axis)
        assert got.dtype == want.dtype and np.array_equal(got, want)
        assert np.array_equal(got, compile_graph(graph)(x, idx)[0])


@needs_c
def test_units_of_sixteen_bytes_are_np_take():
    """A 16-byte unit (complex128 along the last axis; graphs keep complex values off C steps,
    so the step is called directly)."""
    from ember.kernels import cgather
    from ember.kernels.cstep import STEP_CALL, data_address

    rng = np.random.default_rng(1)
    x = (rng.standard_normal((4, 5)) + 1j * rng.standard_normal((4, 5))).astype(np.complex128)
    idx = np.array([4, -1, 0, 2, -5, 3], np.int64)
    step = cgather.gather_c_step(x.shape, x.dtype, idx.shape, idx.dtype, 1)
    out = np.empty((4, 6), np.complex128)
    for slot, _, _ in step.slots:  # (slots 0, 1, 2: x, idx, the result)
        step.args[slot] = data_address((x, idx, out)[slot])
    STEP_CALL(step.fn)(data_address(step.args))
    assert np.array_equal(out, np.take(x, idx, axis=1))


@needs_c
def test_an_index_out_of_range_raises_the_kernels_error_and_the_program_runs_on():
    x = np.arange(12.0, dtype=np.float32).reshape(4, 3)
    idx = np.array([0, 3], np.int64)
    graph = _graph(lambda t, i: (t[i] * 2.0).sum(1), x, idx)
    program = cgraph.CGraphProgram(graph, cgraph.c_steps(graph), None, 2)
    for bad in ([0, 4], [-5, 1]):
        with pytest.raises(IndexOutOfRangeError) as caught:
            program(x, np.array(bad, np.int64))
        with pytest.raises(IndexOutOfRangeError) as generated:
            compile_graph(graph)(x, np.array(bad, np.int64))
        # (the same message; the user's line each names is its caller's)
        assert str(caught.value).split(" at ")[0] == str(generated.value).split(" at ")[0]
        assert caught.value.op == "index"
        assert np.array_equal(program(x, idx)[0], (x[idx] * 2.0).sum(1))


@needs_c
def test_an_embedding_model_out_of_range_under_the_default_executor():
    emb = ember.nn.Embedding(10, 4)
    f = ember.function(lambda ids: emb(ids).sum(1))
    with ember.no_grad():
        ids = ember.tensor(np.array([[1, 2], [3, 9]], np.int64))
        np.testing.assert_allclose(f(ids).numpy(), emb(ids).sum(1).numpy(), rtol=1e-6)
        with pytest.raises(IndexError):
            f(ember.tensor(np.array([[1, 2], [3, 10]], np.int64)))
