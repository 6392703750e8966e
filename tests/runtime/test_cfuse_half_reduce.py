"""Fused reductions of bfloat16 and float16 values (kernels/creduce.py, kernels/cfuse.py): the
terms are read from 16 bits (or computed by half-precision instructions, each rounded as NumPy
rounds it), accumulated as the float32 reduction is (a sum's rows pairwise in float, its
leading axes in double; max and min in float) and each result rounded once to 16 bits.

The reference is the interpreter (the ops' NumPy kernels, which sum half precision in
float32 and float64 the same way): bit for bit where the order is the kernel's, within an ulp
of the 16-bit type where it is not (rows longer than NumPy's 8192-element cast buffer, the
fixed row blocks of a narrow column loop). A product is not fused in half precision (NumPy
rounds each step to 16 bits). Also: which graphs fuse, the kernels' sources, thread
counts, zero sizes, the epilogue pass's split of a sum off a matmul's reader, and the fallback
without a C compiler."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import ml_dtypes
import numpy as np
import pytest

import ember
from ember.graph import interpreter
from ember.kernels import ccompile, cfuse, cpool, creduce

pytestmark = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")

DTYPES = [ember.bfloat16, ember.float16]
IDS = ["bfloat16", "float16"]


def _ops(graph) -> list[str]:
    return [n.op.name for n in graph.nodes if n.kind == "call"]


def _ordered(x) -> np.ndarray:
    """16-bit floats as integers in the order of their values (-0 and +0 both 0), so that
    neighbouring values differ by 1: the distance in ulps."""
    bits = np.asarray(x).view(np.uint16).astype(np.int64)
    magnitude = bits & 0x7FFF
    return np.where(bits & 0x8000, -magnitude, magnitude)


def _assert_ulps(got, want, ulps: int = 0, message: str = "") -> None:
    """``got`` equals ``want`` (16-bit floats) to ``ulps`` units in the last place (0: bit for
    bit, but any NaN for a NaN: a fused max stores the quiet NaN, NumPy the one it met)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, message
    nan = np.isnan(want.astype(np.float32))
    np.testing.assert_array_equal(np.isnan(got.astype(np.float32)), nan, err_msg=message)
    distance = np.abs(_ordered(got) - _ordered(want))[~nan]
    if ulps == 0:  # (bit for bit: a zero's sign too)
        np.testing.assert_array_equal(got.view(np.uint16)[~nan], want.view(np.uint16)[~nan])
    assert distance.size == 0 or distance.max() <= ulps, (message, distance.max())


def _compare(fn, args, ulps: int = 0):
    """``fn`` compiled (O3: fused, run as C) against the interpreter on its own graph (the
    fused nodes' reference kernels) and against eager execution (the unfused ops)."""
    compiled = ember.function(fn)
    got = compiled(*args)
    got = got if isinstance(got, tuple) else (got,)
    assert "fused_reduce" in _ops(compiled.graph)
    want = interpreter.run(compiled.graph, [a.numpy() for a in args])
    eager = fn(*args)
    eager = eager if isinstance(eager, tuple) else (eager,)
    for i, (g, w, e) in enumerate(zip(got, want, eager)):
        _assert_ulps(g.numpy(), w, ulps, f"output {i} against the interpreter")
        # eager sums run NumPy on float32 copies (ops/reduce.py `_sum_fast`): the same
        # arithmetic, but a float16 total rounded twice where the kernel rounds it once
        _assert_ulps(g.numpy(), e.numpy(), max(ulps, 1), f"output {i} against eager ops")
    return compiled


# name: (function, operand shapes ("?" marks a boolean operand), NaN and infinities in the
# first operand, ulps). Every reduction is over static axes of an elementwise result, so the
# group ends in it; the comments say which loop runs it (kernels/cfuse.py `_plan`)
CASES = {
    # rows: trailing axes, each row summed pairwise in float
    "rows_sum": (lambda x, y: (x * y).sum(-1), [(37, 300), (300,)], False, 0),
    "rows_two_axes_keepdims": (
        lambda x, y: (x * y + 1.0).sum((1, 2), keepdim=True),
        [(5, 6, 7), (6, 7)],
        False,
        0,
    ),
    # NumPy casts a bfloat16 row to float32 in 8192-element buffers, each summed pairwise on
    # its own; the loop sums the whole row pairwise (as NumPy sums a float32 row)
    "rows_long": (lambda x, y: (x * y).sum(-1), [(3, 20000), (20000,)], False, 1),
    "rows_max_min": (
        lambda x, y: ((x * y).amax(-1), (x - y).amin(-1)),
        [(9, 40), (40,)],
        True,
        0,
    ),
    "rows_mean": (lambda x, y: (x * y).mean(-1), [(16, 100), (100,)], False, 0),
    # columns: leading axes, each output element accumulating its rows in order (in double)
    "columns_sum": (lambda x, y: (x * y).sum(0), [(300, 37), (37,)], False, 0),
    "columns_nan": (
        lambda x, y: ((x * y).sum(0), (x + y).amax(0), (x - y).amin((0, 1))),
        [(7, 3, 5), (3, 5)],
        True,
        0,
    ),
    "columns_mean_keepdims": (
        lambda x, y: (x - y).mean(0, keepdim=True),
        [(50, 8), (8,)],
        False,
        0,
    ),
    # the loop reads a C-contiguous copy, in row order; the reference's terms keep the
    # transposed layout, which its kernel sums in float64 in another order: an ulp at a tie
    "columns_transposed": (lambda x, y: (x.T * y).sum(0), [(40, 64), (40,)], False, 1),
    # both: a convolution's bias gradient, rows of (H, W) pairwise, added over N in double
    "bias_grad": (
        lambda m, g: ember.where(m, g, 0.0).sum((0, 2, 3)),
        [(8, 16, 7, 9), "?"],
        False,
        0,
    ),
    "both_max_min": (
        lambda x, y: ((x * y).amax((0, 2, 3)), (x - y).amin((0, 2))),
        [(3, 4, 5, 6), (4, 1, 1)],
        True,
        0,
    ),
    # beyond cfuse.PARALLEL_MIN: kept rows (both) or column shares (columns) among threads,
    # each output element still accumulated by one thread in row order
    "threads_bias_grad": (
        lambda m, g: (ember.where(m, g, 0.0), ember.where(m, g, 0.0).sum((0, 2, 3))),
        [(64, 64, 14, 14), "?"],
        False,
        0,
    ),
    "threads_columns": (lambda x, y: (x * y).sum(0), [(600, 2100), (2100,)], False, 0),
    # narrow and long: the rows in creduce.ROW_BLOCKS fixed blocks, combined after (their
    # double sums differ from the sequential one by double rounding: an ulp at a tie)
    "row_blocks": (
        lambda x, y: ((x * y).sum(0), (x - y).amax(0), (x + y).amin(0)),
        [(3001, 700), (700,)],
        True,
        1,
    ),
}


def _args(r, shapes, dtype, special):
    first = shapes[0]
    args = []
    for k, shape in enumerate(shapes):
        if shape == "?":
            args.append(ember.tensor(r.standard_normal(first) > 0))
        else:
            x = r.standard_normal(shape).astype(np.float32) * 4
            if special and k == 0:
                x.reshape(-1)[[1, 5, 9]] = [np.nan, np.inf, -np.inf]
            args.append(ember.tensor(x).to(dtype))
    if shapes[1] == "?":  # (where(mask, g, 0): the mask first)
        args = [args[1], args[0]]
    return args


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # (the reference's inf - inf)
def test_fused_half_reductions_equal_the_interpreter(case, dtype):
    fn, shapes, special, ulps = CASES[case]
    _compare(fn, _args(np.random.default_rng(0), shapes, dtype, special), ulps)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_a_bias_gradient_becomes_one_fused_reduce_node(dtype):
    r = np.random.default_rng(1)
    m = ember.tensor(r.standard_normal((4, 8, 5, 5)) > 0)
    g = ember.tensor(r.standard_normal((4, 8, 5, 5)).astype(np.float32)).to(dtype)
    fn = ember.function(lambda m, g: ember.where(m, g, 0.0).sum((0, 2, 3)))
    fn(m, g)
    graph = fn.compile(m, g).memory_layout().graph
    assert _ops(graph) == ["fused_reduce"]  # no lone sum on a float32 copy of the gradient
    node = next(n for n in graph.nodes if n.kind == "call")
    assert [i.op.name for i in node.attrs["program"]] == ["where", "sum"]
    assert node.outputs[0].dtype is dtype


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("axes", [(0, 2, 3), (0,), (2, 3), (0, 1, 2, 3)], ids=str)
def test_half_sums_are_the_float32_loops_sums_rounded_once(dtype, axes):
    # the selected terms are exact in float32, so the float32 loop sums the same values in the
    # same order: its float32 result rounded to 16 bits is the half loop's (bfloat16: bit for
    # bit, as both round the double through float; float16 rounds the double once, where the
    # float32 result rounded again may be an ulp away at a tie)
    r = np.random.default_rng(2)
    m = ember.tensor(r.standard_normal((6, 5, 7, 9)) > 0)
    g = ember.tensor((r.standard_normal((6, 5, 7, 9)) * 3).astype(np.float32)).to(dtype)
    fn = ember.function(lambda m, g: ember.where(m, g, 0.0).sum(axes))
    got = fn(m, g).numpy()
    wide = ember.function(lambda m, g: ember.where(m, g, 0.0).sum(axes))(m, g.to(ember.float32))
    assert "fused_reduce" in _ops(fn.graph)
    _assert_ulps(got, wide.numpy().astype(dtype.np), 0 if dtype is ember.bfloat16 else 1)


# three terms of a sum: 1, a tie of the 16-bit type above 1 and 2**-24 (a float's half ulp at 1)
def _tie_terms(dtype):
    eps = float(ml_dtypes.finfo(dtype.np).eps)
    return np.array([1.0, eps / 2, 2.0**-24], np.float32), eps


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("loop", ["columns", "both", "rows"])
def test_a_sum_accumulated_in_double_is_rounded_as_the_kernel_rounds_it(dtype, loop):
    # the terms' exact sum lies just above the tie, and a float holds it as the tie itself.
    # NumPy's float16 cast of the kernel's float64 sum rounds once (up); ml_dtypes' bfloat16
    # cast rounds through float32 (the tie, then to even: down). Over leading axes the loop's
    # running sums are doubles, rounded as the kernel rounds them; over a trailing row the
    # kernel sums in float32 (the tie, then down), as the loop does
    terms, eps = _tie_terms(dtype)
    if loop == "columns":  # (3, 4): each column the three terms
        x, axes = np.repeat(terms[:, None], 4, axis=1), (0,)
    elif loop == "both":  # (3, 4, 2): rows of (term, 0), added over the leading axis
        x, axes = np.zeros((3, 4, 2), np.float32), (0, 2)
        x[:, :, 0] = terms[:, None]
    else:  # (4, 3): each row the three terms
        x, axes = np.repeat(terms[None, :], 4, axis=0), (1,)
    m = ember.tensor(np.ones(x.shape, bool))
    t = ember.tensor(x).to(dtype)
    fn = ember.function(lambda m, x: ember.where(m, x, 0.0).sum(axes))
    got = fn(m, t).numpy()
    assert "fused_reduce" in _ops(fn.graph)
    _assert_ulps(got, interpreter.run(fn.graph, [m.numpy(), t.numpy()])[0])
    once = 1.0 + eps if dtype is ember.float16 and loop != "rows" else 1.0
    assert (got.astype(np.float64) == once).all(), got


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_sums_overflow_and_cancel_as_in_the_kernel(dtype):
    big = float(ml_dtypes.finfo(dtype.np).max) / 2
    x = np.array([[big, big, -big, 1.0], [big, -big, 1.0, -0.0]], np.float32)
    m = ember.tensor(np.ones(x.shape, bool))
    t = ember.tensor(x).to(dtype)
    for axes in ((0,), (1,), (0, 1)):  # (the float accumulator holds what 16 bits cannot)
        _compare(lambda m, x: ember.where(m, x, 0.0).sum(axes), [m, t])
    zeros = ember.tensor(np.full((3, 4), -0.0, np.float32)).to(dtype)
    got = ember.function(lambda x: (x * 1.5).sum(0))(zeros).numpy()
    assert not np.signbit(got.astype(np.float32)).any()  # from +0, as the kernel's sum


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_a_half_precision_product_keeps_its_own_node(dtype):
    # NumPy multiplies half precision step by step, each product rounded to 16 bits; a loop's
    # float accumulators would round once (several ulps apart over 30 terms): not fused
    r = np.random.default_rng(3)
    x = ember.tensor((1 + 0.05 * r.standard_normal((40, 30))).astype(np.float32)).to(dtype)
    y = ember.tensor((1 + 0.05 * r.standard_normal(30)).astype(np.float32)).to(dtype)
    fn = ember.function(lambda x, y: ((x * y).prod(-1), (x * y).sum(-1)))
    got = fn(x, y)
    ops = _ops(fn.graph)
    assert "prod" in ops and "fused_reduce" in ops, ops  # (the sum of the same terms fuses)
    want = interpreter.run(fn.graph, [x.numpy(), y.numpy()])
    for g, w in zip(got, want):
        _assert_ulps(g.numpy(), w)
    _assert_ulps(got[0].numpy(), np.prod(x.numpy() * y.numpy(), axis=-1))


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("case", ["threads_bias_grad", "threads_columns", "row_blocks"])
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_any_thread_count_gives_the_same_bits(dtype, case):
    fn, shapes, special, _ = CASES[case]
    args = _args(np.random.default_rng(4), shapes, dtype, special)
    compiled = ember.function(fn)
    before = cpool.get_num_threads()
    try:
        results = []
        for threads in (1, 2, 3):
            cpool.set_num_threads(threads)
            got = compiled(*args)
            results.append([t.numpy() for t in (got if isinstance(got, tuple) else (got,))])
    finally:
        cpool.set_num_threads(before)
    for other in results[1:]:
        for a, b in zip(results[0], other):
            _assert_ulps(b, a)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_narrow_column_loops_combine_fixed_row_blocks(dtype):
    # the row blocks' partial sums in double, combined in block order, rounded once (to
    # bfloat16 through float, to float16 once: as the kernel rounds a double sum)
    fn, shapes, _, _ = CASES["row_blocks"]
    x, y = _args(np.random.default_rng(5), shapes, dtype, False)
    total, peak, low = ember.function(fn)(x, y)
    terms = (x.numpy() * y.numpy()).astype(np.float64)  # (products rounded to 16 bits)
    edges = [b * len(terms) // creduce.ROW_BLOCKS for b in range(creduce.ROW_BLOCKS + 1)]
    want = np.sum(terms[edges[0] : edges[1]], axis=0)
    for b in range(1, creduce.ROW_BLOCKS):
        want = want + np.sum(terms[edges[b] : edges[b + 1]], axis=0)
    rounded = want.astype(np.float32) if dtype is ember.bfloat16 else want
    _assert_ulps(total.numpy(), rounded.astype(dtype.np))
    _assert_ulps(peak.numpy(), np.max(x.numpy() - y.numpy(), axis=0))
    _assert_ulps(low.numpy(), np.min(x.numpy() + y.numpy(), axis=0))


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("shape", [(0, 5), (4, 0), (3, 0, 2), (1, 5), (1, 1, 1)], ids=str)
def test_zero_size_and_size_one_reductions(dtype, shape):
    fn = lambda x: ((x * 2.0).sum(0), (x + 1.0).sum(-1, keepdim=True))  # noqa: E731
    x = ember.tensor(np.arange(np.prod(shape), dtype=np.float32).reshape(shape) - 2).to(dtype)
    got = ember.function(fn)(x)
    for g, w in zip(got, fn(x)):
        _assert_ulps(g.numpy(), w.numpy())


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_the_sources_keep_float_accumulators_and_round_each_result_once(dtype):
    half = "bf16" if dtype is ember.bfloat16 else "f16"

    def source(fn, *shapes):
        compiled = ember.function(fn)
        args = [ember.randn(*s).to(dtype) for s in shapes]
        compiled(*args)
        node = next(n for n in compiled.graph.nodes if n.kind == "call")
        assert node.op.name == "fused_reduce"
        return cfuse.source_of(
            node.attrs["program"],
            node.attrs["outputs"],
            list(node.attrs["out_types"]),
            [v.type for v in node.inputs],
        )

    rows = source(lambda x, y: ((x * y).sum(-1), (x * y).amax(-1)), (8, 16), (16,))
    assert "float *row0 = malloc" in rows  # the sum's terms: floats, summed pairwise
    assert "sums0[g] = pairwise_float(row0, s1 - s0);" in rows  # (piece by piece)
    assert f"r0[o] = {half}_store(rowsum_float(sums0, inner));" in rows
    assert f"r1[o] = {half}_store(nan1 ? (float)NAN : acc1);" in rows
    columns = source(lambda x, y: ((x * y).sum(0), (x * y).amin(0)), (8, 16), (16,))
    double = "(float)" if half == "bf16" else "round_odd("
    assert f"r0[q] = {half}_store({double}acc0[q - lo]" in columns  # double running sums
    assert "float *acc1;" in columns  # a min's running results: a float scratch row
    assert f"r1[q] = {half}_store(acc1[q - lo]);" in columns
    assert f"r0[q] = {half}_store({double}v" in columns  # the row blocks' combination
    both = source(lambda x, y: (x * y).sum((0, 2)), (4, 8, 16), (8, 1))
    assert "{ const float v = rowsum_float(sums0, inner);" in both
    assert f"r0[q] = {half}_store({double}w0[q - lo]" in both


def _masked_bias_grad(x, w, m):
    h = (x @ w) * m
    return h, h.sum(0)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_a_matmuls_half_precision_reader_keeps_its_fused_sum(bare_executors):
    # transforms/epilogue.py splits a fused reduction off a matmul's reader where the reader
    # could become the matmul's epilogue and the plan's peak drops; a bfloat16 product takes
    # no epilogue, so the one-pass loop stays (before, its lone bfloat16 sum ran NumPy on a
    # float32 copy: a higher peak). The graph is valid, computes what the interpreter does,
    # and is planned as tracemalloc measures it
    from ember.plan import measure_peak

    x, w = ember.randn(512, 16).to(ember.bfloat16), ember.randn(16, 512).to(ember.bfloat16)
    m = ember.tensor(np.random.default_rng(6).standard_normal((512, 512)) > 0)
    fn = ember.function(_masked_bias_grad, executor="codegen")
    compiled = fn.compile(x, w, m)
    compiled.graph.verify()
    assert _ops(compiled.graph) == ["matmul", "fused_reduce"]
    got = fn(x, w, m)
    want = interpreter.run(compiled.graph, [x.numpy(), w.numpy(), m.numpy()])
    for g, e in zip(got, want):  # (ember's bfloat16 GEMM adds in another order than NumPy)
        g, e = g.numpy().astype(np.float64), e.astype(np.float64)
        np.testing.assert_allclose(g, e, rtol=2**-7, atol=2**-7 * np.abs(e).max())
    planned = compiled.memory_plan.peak_bytes
    measured = measure_peak(fn, x, w, m)
    assert abs(measured - planned) <= 0.05 * measured, (planned, measured)


def test_without_a_compiler_half_reductions_keep_their_own_nodes(tmp_path):
    code = textwrap.dedent(
        """
        import warnings
        import numpy as np
        import ember
        warnings.simplefilter("ignore")
        x = ember.tensor(np.arange(12, dtype=np.float32).reshape(4, 3) - 5).to(ember.bfloat16)
        f = ember.function(lambda x: (x * 2.0 + 1.0).sum(0))
        got = f(x).numpy().astype(np.float32)
        ops = [n.op.name for n in f.graph.nodes if n.kind == "call"]
        assert "fused_reduce" not in ops and "sum" in ops, ops
        want = (x.numpy().astype(np.float32) * 2 + 1).sum(0)
        assert np.array_equal(got, want), got
        print("ok")
        """
    )
    env = dict(os.environ, CC="/bin/false", EMBER_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "ok" in out.stdout


@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, np.float16], ids=["bfloat16", "float16"])
def test_lone_half_reductions_run_the_loop_and_equal_the_kernel(dtype):
    # a sum, max or min of one 16-bit operand, eager or in generated code, runs the op's fast
    # rule (ops/_half.py reduction_fast): one reduction loop, the kernel's bits, over every
    # block of axes a loop takes; a middle block (axes (1,) of (3, 4, 5)) runs the widened kernel
    from itertools import combinations

    from ember.ops import REGISTRY

    rng = np.random.default_rng(3)
    for shape in [(5,), (3, 4), (1, 7), (3, 4, 5), (2, 1, 3, 6), (40, 300)]:
        x = (rng.standard_normal(shape) * 4).astype(dtype)
        x.flat[::7] = -x.flat[::7]
        for r in range(1, len(shape) + 1):
            for axes in combinations(range(len(shape)), r):
                for keepdims in (False, True):
                    for name in ("sum", "max", "min"):
                        op = REGISTRY[name]
                        got = op.fast(x, axes=axes, keepdims=keepdims)
                        want = op.kernel(x, axes=axes, keepdims=keepdims)
                        assert got is not None or name != "sum"
                        if got is None:
                            assert creduce.split_axes(shape, axes) is None
                            continue
                        assert got.dtype == want.dtype and got.shape == want.shape
                        np.testing.assert_array_equal(
                            got.astype(np.float64), want.astype(np.float64)
                        )
    # NaN wins a max and a min, as in NumPy
    x = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, -np.inf]], dtype)
    assert np.isnan(ember.from_numpy(x).amax(dim=1).numpy()[0].astype(np.float32))
    np.testing.assert_array_equal(
        ember.from_numpy(x).amin(dim=0).numpy().astype(np.float32), [1.0, np.nan, -np.inf]
    )
