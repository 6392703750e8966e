"""kernels/cfuse.py on bfloat16 and float16: fused loops read and write the 16-bit values and
round each instruction's result to its dtype, as NumPy rounds each op's, so they equal the
reference interpreter bit for bit (the C library's exp, tanh, erf: within an ulp of the half
type, a few float32 ulps moving a rounding), in flat loops, broadcast rows, non-contiguous
inputs, odd and zero sizes, and casts from float64 rounded as NumPy rounds them."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.graph import interpreter
from ember.kernels import ccompile

pytestmark = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")

DTYPES = [ember.bfloat16, ember.float16]


def _fused_nodes(f):
    return [n for n in f.graph.nodes if n.kind == "call" and n.op.compile is not None]


def _bits(x):
    return np.asarray(x).view(np.uint16)


def _compare(f, args, ulps=0):
    got = f(*args)
    got = got if isinstance(got, tuple) else (got,)
    want = interpreter.run(f.graph, [a.numpy() for a in args])
    for g, w in zip(got, want):
        g = g.numpy()
        assert g.dtype == w.dtype and g.shape == w.shape
        if g.dtype.itemsize != 2:
            np.testing.assert_allclose(g, w, rtol=1e-6)
            continue
        nan = np.isnan(w.astype(np.float32))
        np.testing.assert_array_equal(np.isnan(g.astype(np.float32)), nan)
        eps = float(ml_dtypes.finfo(w.dtype).eps)
        if ulps == 0:
            np.testing.assert_array_equal(_bits(g)[~nan], _bits(w)[~nan])
            continue
        g, w = g.astype(np.float64)[~nan], w.astype(np.float64)[~nan]
        np.testing.assert_array_equal(g[np.isinf(w)], w[np.isinf(w)])
        finite = np.isfinite(w)
        assert (np.abs(g - w)[finite] <= ulps * eps * np.abs(w[finite]) + 1e-30).all()


def _tensor(r, shape, dtype, scale=1.0):
    return ember.tensor((scale * r.standard_normal(shape)).astype(np.float32)).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=["bfloat16", "float16"])
@pytest.mark.parametrize("shape", [(0,), (1,), (7,), (1000, 33), (1 << 19) + 3], ids=str)
@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # (the reference's division by zero)
def test_arithmetic_equals_the_interpreter_bit_for_bit(dtype, shape):
    r = np.random.default_rng(0)
    x, y = _tensor(r, shape, dtype), _tensor(r, shape, dtype, 100.0)
    f = ember.function(lambda a, b: (F.relu(a * b + a) - b / (a + 3.0), a.maximum(b) * 0.5))
    f(x, y)
    assert _fused_nodes(f)
    _compare(f, (x, y))


@pytest.mark.parametrize("dtype", DTYPES, ids=["bfloat16", "float16"])
def test_transcendentals_within_an_ulp(dtype):
    r = np.random.default_rng(1)
    x, y = _tensor(r, (300, 17), dtype), _tensor(r, (17,), dtype)  # (a broadcast row)
    f = ember.function(lambda a, b: F.gelu(a * b + a) + (a.exp() * 0.25).tanh())
    f(x, y)
    assert _fused_nodes(f)
    _compare(f, (x, y), ulps=1)


@pytest.mark.parametrize("dtype", DTYPES, ids=["bfloat16", "float16"])
def test_non_contiguous_inputs_and_mixed_dtypes(dtype):
    r = np.random.default_rng(2)
    x = _tensor(r, (40, 64), dtype)
    w = ember.tensor(r.standard_normal((64, 40)).astype(np.float32))
    f = ember.function(lambda a, b: (a.T * 2.0 + b.to(a.dtype), a.T.to(ember.float32) * b))
    f(x, w)
    _compare(f, (x, w))


@pytest.mark.parametrize("dtype", DTYPES, ids=["bfloat16", "float16"])
def test_casts_from_float64_round_as_numpy(dtype):
    # values halfway between two half-precision numbers, nudged by less than a float32 ulp:
    # through float32 they round twice, to the even neighbour, as ml_dtypes' bfloat16 cast
    # does; NumPy's float16 cast rounds once
    base = np.array([1.0, 3.0, 1000.0, 2.0**-10], np.float64)
    ulp = base * float(ml_dtypes.finfo(dtype.np).eps)
    x = np.concatenate([base + ulp / 2 + base * 2.0**-40, base + ulp / 2 - base * 2.0**-40])
    x = np.concatenate([x, -x, [1e300, -1e-300, np.inf, np.nan, 0.0]])
    t = ember.tensor(x)
    f = ember.function(lambda a: (a * 2.0).to(dtype))
    got = f(t).numpy()
    with np.errstate(over="ignore"):
        want = (x * 2.0).astype(dtype.np)
    assert _fused_nodes(f)
    nan = np.isnan(x)
    np.testing.assert_array_equal(_bits(got)[~nan], _bits(want)[~nan])
    assert np.isnan(got.astype(np.float32)[nan]).all()
