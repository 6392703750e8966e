"""ops/_half.py: the half-precision fast rules agree with the ops' NumPy kernels.

Elementwise ops run as one-instruction C loops over the 16-bit values: IEEE arithmetic equals
NumPy's bit for bit (both compute in float32 and round once); functions from the C library
within an ulp of the half type (a float32 ulp or two moving a rounding); ops whose NumPy
kernel rounds more than once in half precision (sigmoid, rsqrt, softsign: the C expression
rounds once) within two. gelu, layer norm, softmax, log_softmax, sum and their gradients run
the float32 C kernels on widened operands: the float32 kernels' own agreement (1e-4 of the
scale, as tests/ops/test_fast_rules.py holds them to) plus one rounding."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from ember.kernels import ccompile
from ember.ops import REGISTRY

pytestmark = [
    pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler"),
    pytest.mark.filterwarnings("ignore::RuntimeWarning"),  # (the kernels' NaN and overflow)
]

HALF = [np.dtype(ml_dtypes.bfloat16), np.dtype(np.float16)]
EXACT = {"abs", "add", "div", "fmod", "maximum", "minimum", "mul", "neg", "relu", "sqrt"}
EXACT |= {"copysign", "square", "sub"}
BINARY = {"add", "atan2", "copysign", "div", "fmod", "maximum", "minimum", "mul", "sub"}
ELEMENTWISE = sorted(
    name
    for name, op in REGISTRY.items()
    if op.kind == "elementwise"
    and op.c is not None
    and op.fast is not None
    and name not in ("cast", "where")  # (where: below)
)


def _eps(dtype) -> float:
    return float(ml_dtypes.finfo(dtype).eps)


def _within(got, want, ulps: float, scale: float = 0.0):
    """``got`` equals ``want`` bit for bit (``ulps`` 0) or within ``ulps`` of the half type's
    eps of each value, plus ``scale`` absolutely; NaN where NaN, infinities equal."""
    assert got is not None and got.dtype == want.dtype and got.shape == want.shape
    g, w = got.astype(np.float64), want.astype(np.float64)
    nan = np.isnan(w)
    np.testing.assert_array_equal(np.isnan(g), nan)
    if ulps == 0:
        np.testing.assert_array_equal(got.view(np.uint16)[~nan], want.view(np.uint16)[~nan])
        return
    finite = np.isfinite(w)
    np.testing.assert_array_equal(g[~finite & ~nan], w[~finite & ~nan])
    allowed = ulps * _eps(want.dtype) * np.abs(w[finite]) + scale
    assert (np.abs(g - w)[finite] <= allowed).all(), np.abs(g - w)[finite].max()


def _values(dtype, shape, seed=0, scale=3.0):
    r = np.random.default_rng(seed)
    x = (scale * r.standard_normal(shape)).astype(dtype)
    if x.size > 8:
        flat = x.reshape(-1)
        flat[:4] = np.array([np.inf, -np.inf, np.nan, 0.0], np.float32).astype(dtype)
    return x


# ops with attributes (written into the loop as constants), and binary ops whose operands
# share one shape (gradients of activations)
ATTRS = {
    "add_alpha": {"alpha": -0.3},
    "clip": {"lo": -0.5, "hi": None},  # (an open bound)
    "hardtanh": {"lo": -1.0, "hi": 2.5},
    "hardtanh_backward": {"lo": -1.0, "hi": 2.5},
    "leaky_relu": {"slope": 0.25},
    "leaky_relu_backward": {"slope": 0.25},
    "softplus": {"beta": 2.0, "threshold": 5.0},
    "softplus_backward": {"beta": 2.0, "threshold": 5.0},
    "elu": {"alpha": 1.7, "scale": 1.05, "input_scale": 0.5},
    "elu_backward": {"alpha": 1.7, "scale": 1.05, "input_scale": 0.5},
    "threshold": {"threshold": 0.3, "value": -2.0},
    "threshold_backward": {"threshold": 0.3},
    "hardshrink": {"lambd": 0.5},
    "softshrink": {"lambd": 0.5},
    "shrink_backward": {"lambd": 0.5},
    "huber": {"delta": 0.7},
    "huber_backward": {"delta": 0.7},
    "smooth_l1": {"beta": 0.7},
    "smooth_l1_backward": {"beta": 0.7},
}
SAME_SHAPE = {
    "hardtanh_backward",
    "leaky_relu_backward",
    "hardswish_backward",
    "hardsigmoid_backward",
    "relu_backward",
    "sigmoid_backward",
    "tanh_backward",
}
SAME_SHAPE |= {"silu_backward", "softplus_backward", "elu_backward", "log_sigmoid_backward"}
SAME_SHAPE |= {"threshold_backward", "shrink_backward", "prelu"}
SAME_SHAPE |= {"huber_backward", "smooth_l1_backward", "add_alpha"}
# (gradient, input, weight; x, y and a per-element alpha)
TERNARY = {"prelu_backward", "prelu_weight_backward", "add_scaled"}
COMPARISONS = {"eq", "ne", "lt", "le", "gt", "ge"}
EXACT |= {
    "clip",
    "hardtanh",
    "hardtanh_backward",
    "leaky_relu",
    "leaky_relu_backward",
    "relu_backward",
}
EXACT |= {"threshold", "threshold_backward", "hardshrink", "softshrink", "shrink_backward"}
EXACT |= {"prelu", "add_alpha"} | TERNARY


@pytest.mark.parametrize("dtype", HALF, ids=["bfloat16", "float16"])
@pytest.mark.parametrize("name", ELEMENTWISE)
def test_elementwise_ops(name, dtype):
    op = REGISTRY[name]
    attrs = ATTRS.get(name, {})
    ulps = 0 if name in EXACT else 2 if name in ("sigmoid", "rsqrt", "softsign") else 1
    operands = 3 if name in TERNARY else 2 if name in BINARY | SAME_SHAPE | COMPARISONS else 1
    for shape in [(0,), (1,), (13,), (300, 37), (3, 5, 7)]:
        args = [_values(dtype, shape, seed) for seed in range(operands)]
        if name in COMPARISONS:  # (bool results: exactly NumPy's)
            np.testing.assert_array_equal(op.fast(*args), op.kernel(*args))
            continue
        _within(op.fast(*args, **attrs), op.kernel(*args, **attrs), ulps)
    if name in BINARY:  # a 0-d operand, and non-contiguous ones
        x, y = _values(dtype, (40, 50), 3), _values(dtype, (), 4)
        _within(op.fast(x, y), op.kernel(x, y), ulps)
        _within(op.fast(y, x[::2].T), op.kernel(y, x[::2].T), ulps)
        row, column = _values(dtype, (50,), 5), _values(dtype, (40, 1), 6)
        _within(op.fast(x, row), op.kernel(x, row), ulps)  # (broadcast rows and columns)
        _within(op.fast(column, x), op.kernel(column, x), ulps)
        _within(op.fast(column, row), op.kernel(column, row), ulps)


def test_other_dtypes_decline():
    for name in ("add", "exp"):
        op = REGISTRY[name]
        x = np.ones((4, 4), np.float32)
        assert op.fast(*[x] * (2 if name == "add" else 1)) is None


def _scale(want) -> float:
    w = want.astype(np.float64)
    finite = np.abs(w[np.isfinite(w)])
    return float(finite.max()) if finite.size else 0.0


@pytest.mark.parametrize("dtype", HALF, ids=["bfloat16", "float16"])
def test_float32_kernels_on_widened_operands(dtype):
    x = _values(dtype, (64, 96), 6, 1.0)
    g = _values(dtype, (64, 96), 7, 1.0)
    w, b = _values(dtype, (96,), 8, 1.0), _values(dtype, (96,), 9, 1.0)
    y = REGISTRY["softmax"].kernel(x, axis=-1, safe=False)
    cases = [
        ("gelu", (x,), {}),
        ("gelu_tanh", (x,), {}),
        ("gelu_backward", (x, g), {}),
        ("gelu_tanh_backward", (x, g), {}),
        ("softmax", (x,), {"axis": -1, "safe": False}),
        ("log_softmax", (x,), {"axis": -1}),
        ("softmax_backward", (y, g), {"axis": -1}),
        ("log_softmax_backward", (y, g), {"axis": -1}),
        ("layer_norm", (x, w, b), {"eps": 1e-5}),
        ("layer_norm_backward", (x, w, g), {"eps": 1e-5}),
        ("sum", (x,), {"axes": (1,), "keepdims": False}),
        ("sum", (x,), {"axes": (0, 1), "keepdims": True}),
        ("sum", (x.T,), {"axes": (0,), "keepdims": False}),
    ]
    for name, args, attrs in cases:
        op = REGISTRY[name]
        want = op.kernel(*args, **attrs)
        got = op.fast(*args, **attrs)
        for gv, wv in zip(
            got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)
        ):
            _within(np.asarray(gv), np.asarray(wv), 1, 1e-4 * _scale(wv))


@pytest.mark.parametrize("dtype", HALF, ids=["bfloat16", "float16"])
def test_elementwise_writes_into_out_and_dying_operands(dtype):
    # generated code passes an arena slot, or an operand's own buffer, as ``out=``
    op = REGISTRY["mul"]
    x, y = _values(dtype, (30, 40), 10), _values(dtype, (30, 40), 11)
    want = op.kernel(x, y)
    out = np.empty_like(x)
    assert op.fast(x, y, out=out) is out
    _within(out, want, 0)
    got = op.fast(x, y, out=x)  # (in place: each element read before it is written)
    assert got is x
    _within(x, want, 0)
    strided = np.empty((30, 80), dtype)[:, ::2]  # (not contiguous: written by a copy)
    assert op.fast(y, want, out=strided) is strided
    _within(strided, op.kernel(y, want), 0)
    row = _values(dtype, (40,), 12)
    target = np.empty_like(y)
    assert op.fast(y, row, out=target) is target
    _within(target, op.kernel(y, row), 0)


@pytest.mark.parametrize("dtype", HALF, ids=["bfloat16", "float16"])
def test_where_selects_the_16_bit_values(dtype):
    op = REGISTRY["where"]
    x, y = _values(dtype, (30, 40), 1), _values(dtype, (30, 40), 2)
    cond = _values(np.float32, (30, 40), 3) > 0
    _within(op.fast(cond, x, y), op.kernel(cond, x, y), 0)
    zero = np.zeros((), dtype)
    _within(op.fast(cond, x, zero), op.kernel(cond, x, zero), 0)  # (a ReLU's gradient)
    _within(op.fast(cond[:, :1], y, x[0]), op.kernel(cond[:, :1], y, x[0]), 0)  # broadcast


def test_large_float32_operands_run_the_loop_where_it_is_measured_faster():
    # float32/float64 operands of at least _MEASURED_FROM elements: the loop runs where it
    # beat NumPy's kernel on that size class (measured once, remembered), giving NumPy's
    # bits; a strided operand, a small one and an integer one stay NumPy's (None). (A loop
    # calling the vector math library: tests/runtime/test_vector_loops.py.)
    from ember.ops import _half

    n = _half._MEASURED_FROM
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((2, n)).astype(np.float32)
    x[:4] = [np.nan, np.inf, -np.inf, -0.0]
    for name, args in [
        ("add", (x, y)),
        ("mul", (x, y[:1])),
        ("relu", (x,)),
        ("maximum", (x, y)),
        ("where", (x > 0, y, np.zeros((), np.float32))),
    ]:
        op = REGISTRY[name]
        got = op.fast(*args)
        wins = [won for key, won in _half._LOOP_WINS.items() if key[1] == n.bit_length()]
        assert wins, name  # measured on the first call
        want = op.kernel(*args)
        if got is not None:  # the loop won here: NumPy's bits
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    assert REGISTRY["add"].fast(x[::2], y[::2]) is None
    assert REGISTRY["add"].fast(x[:100], y[:100]) is None
    ints = np.arange(n, dtype=np.int64)
    assert REGISTRY["add"].fast(ints, ints) is None


@pytest.mark.parametrize("dtype", HALF, ids=["bfloat16", "float16"])
def test_a_factor_attribute_is_multiplied_in_float32(dtype):
    """leaky_relu's slope (``{slope:compute}``) is a float32 factor in half precision, as the
    NumPy kernel and PyTorch multiply it, where a bound (hardtanh's ``{lo}``) is rounded to the
    dtype: 0.2 lies between two bfloat16 values."""
    torch = pytest.importorskip("torch")
    x = _values(dtype, (4000,), 7)
    for name in ("leaky_relu", "leaky_relu_backward"):
        op = REGISTRY[name]
        args = (x,) if name == "leaky_relu" else (x, x[::-1].copy())
        _within(op.fast(*args, slope=0.2), op.kernel(*args, slope=0.2), 0)
    tdtype = torch.bfloat16 if dtype == HALF[0] else torch.float16
    want = torch.nn.functional.leaky_relu(torch.tensor(x.astype(np.float32)).to(tdtype), 0.2)
    got = REGISTRY["leaky_relu"].fast(x, slope=0.2)
    np.testing.assert_array_equal(got.astype(np.float32), want.float().numpy())


def test_small_operands_broadcasting_to_a_large_result_take_the_loop(monkeypatch):
    """Operands below the measured size whose broadcast result is above it (a pairwise sum
    ``b[:, :, None] + b[:, None]``) are offered the loop too, which gives NumPy's bits; the
    eager call reaches the rule (OpDef.run's gate lets differently shaped operands through)."""
    from ember.kernels import ccompile
    from ember.ops import _half

    if not ccompile.compiler_available():
        pytest.skip("no C compiler")
    calls = []
    monkeypatch.setattr(_half, "_loop_wins", lambda *a, **k: calls.append(k) or True)
    n = _half._MEASURED_FROM
    side = int(np.ceil(np.sqrt(n)))
    b = np.random.default_rng(0).standard_normal((side,)).astype(np.float32)
    x, y = b[:, None], b[None, :]
    assert x.size < n and y.size < n <= x.size * y.size
    for name in ("add", "mul", "maximum"):
        got = REGISTRY[name].run(x, y)
        want = REGISTRY[name].kernel(x, y)
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    assert calls and all(k.get("size") == side * side for k in calls)
    assert REGISTRY["add"].fast(b[:10, None], b[None, :10]) is None  # (a small result)


def test_large_float32_sums_take_the_loop_with_the_kernels_bits(monkeypatch):
    """A float32 sum over at least _MEASURED_FROM C-contiguous elements may run the fused
    reduction loop (where measured faster): rows pairwise in float32 as NumPy orders them,
    other axes accumulated in double, as the kernel does, so bit for bit the kernel's result
    over random shapes, axes and a NaN; strided operands stay the kernel's."""
    from ember.kernels import ccompile
    from ember.ops import _half
    from ember.ops.reduce import _sum_kernel

    if not ccompile.compiler_available():
        pytest.skip("no C compiler")
    monkeypatch.setattr(_half, "_loop_wins", lambda *a, **k: True)
    monkeypatch.setattr(_half, "_MEASURED_FROM", 1)  # (small operands: a quick test)
    op = REGISTRY["sum"]
    rng = np.random.default_rng(5)
    ran = 0
    for _ in range(150):
        nd = int(rng.integers(1, 5))
        shape = tuple(int(s) for s in rng.integers(1, 30, nd))
        if rng.random() < 0.2:
            shape = (*shape[:-1], int(rng.integers(2000, 9000)))  # (past NumPy's 8-block rows)
        axes = tuple(sorted({int(a) for a in rng.integers(0, nd, int(rng.integers(1, nd + 1)))}))
        x = rng.standard_normal(shape).astype(np.float32)
        if rng.random() < 0.1:
            x.flat[int(rng.integers(x.size))] = np.nan
        for keepdims in (True, False):
            got = op.fast(x, axes=axes, keepdims=keepdims)
            want = _sum_kernel(x, axes=axes, keepdims=keepdims)
            if got is None:
                continue  # (axes no loop takes: a middle block)
            ran += 1
            assert got.shape == want.shape and got.dtype == want.dtype
            np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    assert ran > 100
    x = rng.standard_normal((64, 64)).astype(np.float32)
    assert op.fast(x.T, axes=(1,), keepdims=False) is None
