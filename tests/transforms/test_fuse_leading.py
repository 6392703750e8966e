"""Fused reductions over leading axes (kernels/creduce.py): NumPy's summation order for them,
the compiled loops against the NumPy kernels (random shapes, broadcasting, keepdims, float32
and float64, NaN and Inf, zero-size and non-contiguous inputs, thread counts), which nodes fuse,
a training step's bias gradients, and the fallback without a C compiler. The suite's conftest
also checks every compiled fused call against its reference kernel."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import ember
from ember import models
from ember.kernels import ccompile, cfuse, cpool
from ember.transforms import DCE, optimize
from ember.transforms.fuse import FUSE

needs_cc = pytest.mark.skipif(
    not ccompile.compiler_available(), reason="no C compiler: fused kernels fall back to NumPy"
)


def _fused(fn, *examples):
    graph = ember.trace(fn, *examples, opt_level=0).graph
    fused, _ = optimize(graph.copy(), passes=[FUSE, DCE], check=[e.numpy() for e in examples])
    fused.verify()
    return fused


def _ops(graph):
    return [n.op.name for n in graph.nodes if n.kind == "call"]


def _node(graph, name="fused_reduce"):
    return next(n for n in graph.nodes if n.kind == "call" and n.op.name == name)


def test_the_sum_kernel_sums_leading_axes_row_after_row_in_double():
    # the order the C loop copies (kernels/creduce.py): from 0, one row (or one trailing row's
    # pairwise float32 sum) added at a time, in double for a float32 result, rounded once
    # (ops/reduce.py's kernel; NumPy's own float32 sum would add the rows in float32)
    kernel = ember.ops.REGISTRY["sum"].kernel
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((300, 7, 37)) * 1e3).astype(np.float32)
    rows = x.reshape(300, -1)
    sequential = np.zeros(rows.shape[1], np.float64)
    for row in rows:
        sequential = sequential + row
    got = kernel(x, axes=(0,), keepdims=False)
    np.testing.assert_array_equal(got.reshape(-1), sequential.astype(np.float32))
    both = np.zeros(7, np.float64)
    for block in x:
        both = both + np.add.reduce(block, axis=-1)  # each row pairwise in float32, as np.sum
    np.testing.assert_array_equal(kernel(x, axes=(0, 2), keepdims=False), both.astype(np.float32))
    zeros = np.full((2, 3), -0.0, np.float32)
    assert not np.signbit(kernel(zeros, axes=(0,), keepdims=False)).any()  # from +0


def test_leading_reductions_end_a_group_and_the_node_returns_both_results():
    def f(g, mask, w):
        h = ember.where(mask, g * w, 0.0)  # a masked gradient read by a matmul too
        return h @ w.reshape(-1, 1), h.sum(0), h.amax(0, keepdim=True)

    fused = _fused(f, ember.randn(6, 5), ember.randn(6, 5) > 0, ember.randn(5))
    node = _node(fused)
    assert [entry.op.name for entry in node.attrs["program"]][-2:] == ["sum", "max"]
    assert len(node.outputs) == 3  # h (for the matmul), its sum and its max: one pass
    assert _ops(fused).count("fused_reduce") == 1 and "sum" not in _ops(fused)


def test_a_loop_ending_in_reductions_runs_where_its_elementwise_part_was():
    def f(x, m, z):
        h = x * m + 1.0
        other = z @ z.T  # traced between the loop and its sum, independent of both
        return h, other, h.sum(0)

    fused = _fused(f, ember.randn(64, 32), ember.randn(64, 32) > 0, ember.randn(16, 8))
    # not after the sum's place: the matmul's result would be held across the loop for nothing
    assert _ops(fused) == ["fused_reduce", "permute", "matmul"]


def test_which_leading_reductions_fuse():
    def over_batch_and_time(x, b):
        return ((x + b).relu()).sum((0, 1))  # a bias gradient of a (B, T, D) layer

    def batch_norm_statistics(x, scale):
        return (x * scale).sum((0, 2, 3))  # (N, H, W) of NCHW: a leading and a trailing block

    def middle(x):
        return (x * 2).sum((0, 2))  # axis 2 lies between kept axes 1 and 3

    def partly_broadcast(x, c):
        return (x * c).sum((0, 1))  # c varies across axis 0 but not axis 1

    def size_one_axes_between(x):
        return (x * 2).sum((0, 2))  # axis 1 has size 1: a leading block still

    assert "fused_reduce" in _ops(_fused(over_batch_and_time, ember.randn(2, 3, 4), ember.randn(4)))
    fused = _fused(batch_norm_statistics, ember.randn(2, 3, 4, 5), ember.randn(3, 1, 1))
    assert "fused_reduce" in _ops(fused)
    assert "fused_reduce" not in _ops(_fused(middle, ember.randn(2, 3, 4, 5)))
    assert "fused_reduce" not in _ops(
        _fused(partly_broadcast, ember.randn(2, 3, 4), ember.randn(2, 1, 1))
    )
    assert "fused_reduce" in _ops(_fused(size_one_axes_between, ember.randn(2, 1, 4, 5)))


# (function, x shape, w shape): w broadcasts against x in various ways
LEADING = {
    "bias_grad": (lambda x, w: ((x > 0).to(x.dtype) * w * x).sum(0), (64, 33), (33,)),
    "two_axes_keepdims": (lambda x, w: (x * w + 1).sum((0, 1), keepdim=True), (5, 6, 7), (7,)),
    "column_broadcast": (lambda x, w: ((x - w) * x).sum(0), (9, 4, 3), (4, 1)),
    "max_min": (lambda x, w: ((x * w).amax(0), (x * w).amin((0, 1))), (7, 3, 5), (3, 5)),
    "nchw": (lambda x, w: ((x * w).sum((0, 2, 3)), (x - w).amax((0, 2))), (3, 4, 5, 6), (4, 1, 1)),
    "threads": (lambda x, w: (x * w).sum(0), (600, 2100), (2100,)),  # beyond PARALLEL_MIN
    "threads_nchw": (lambda x, w: (x * w).sum((0, 2)), (40, 16, 700), (16, 1)),
}


def _pairs(got, want):
    return zip(*(t if isinstance(t, tuple) else (t,) for t in (got, want)))


@needs_cc
@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
@pytest.mark.parametrize("case", sorted(LEADING))
def test_compiled_leading_reductions_equal_numpy_bit_for_bit(case, dtype):
    fn, x_shape, w_shape = LEADING[case]
    rng = np.random.default_rng(4)
    x = (rng.standard_normal(x_shape) * 100).astype(dtype.np)
    w = rng.standard_normal(w_shape).astype(dtype.np)
    x.reshape(-1)[[1, 5, 9]] = [np.nan, np.inf, -np.inf]  # the columns they land in: NaN
    compiled = ember.function(fn)  # O3: fused, run as C
    got = compiled(ember.tensor(x), ember.tensor(w))
    assert "fused_reduce" in _ops(compiled.graph)
    for g, r in _pairs(got, fn(ember.tensor(x), ember.tensor(w))):  # eager: NumPy kernels
        # no transcendental function in the terms: the same terms, summed in the same order
        np.testing.assert_array_equal(g.numpy(), r.numpy())


@needs_cc
@pytest.mark.parametrize("shape", [(0, 5), (4, 0), (3, 0, 2), (1, 5), (1, 1, 1)])
def test_zero_size_and_size_one_reductions(shape):
    fn = lambda x: ((x * 2).sum(0), (x + 1).sum(0, keepdim=True))  # noqa: E731
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape) - 2
    got = ember.function(fn)(ember.tensor(x))
    for g, r in _pairs(got, fn(ember.tensor(x))):
        assert g.shape == r.shape
        np.testing.assert_array_equal(g.numpy(), r.numpy())


@needs_cc
def test_non_contiguous_inputs_and_any_thread_count_give_the_same_bits():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2100, 600)).astype(np.float32).T  # a transposed view
    w = rng.standard_normal(2100).astype(np.float32)

    def f(x, w):
        h = x * w - x
        return h.sum(0), h

    fused = _fused(f, ember.tensor(x), ember.tensor(w))
    node = _node(fused)
    run = cfuse.build(node)
    order = [[v.name for v in fused.inputs].index(u.name) for u in node.inputs]
    # the loop reads a C-contiguous copy: its rows in order, in double, rounded once (NumPy
    # keeps x's transposed layout for x * w - x, which the eager kernel sums in float64)
    want = np.sum(np.ascontiguousarray(x * w - x), axis=0, dtype=np.float64).astype(np.float32)
    before = cpool.get_num_threads()
    try:
        for threads in (1, 2, 3):
            cpool.set_num_threads(threads)
            results = run(*[(x, w)[i] for i in order])
            total = next(r for r in results if r.shape == want.shape)
            np.testing.assert_array_equal(total, want)
    finally:
        cpool.set_num_threads(before)


@needs_cc
def test_narrow_column_loops_split_their_rows_in_fixed_blocks():
    from ember.kernels import creduce

    rng = np.random.default_rng(6)
    x = (rng.standard_normal((3001, 700)) * 100).astype(np.float32)  # too narrow for 2 shares
    w = rng.standard_normal(700).astype(np.float32)
    x[7, 3], x[2900, 5] = np.nan, -np.inf
    fn = ember.function(lambda x, w: ((x * w).sum(0), (x - w).amax(0)))
    before = cpool.get_num_threads()
    try:
        results = []
        for threads in (1, 2, 3):
            cpool.set_num_threads(threads)
            results.append([r.numpy() for r in fn(ember.tensor(x), ember.tensor(w))])
    finally:
        cpool.set_num_threads(before)
    terms, blocks = x * w, creduce.ROW_BLOCKS
    edges = [b * len(x) // blocks for b in range(blocks + 1)]
    # each block in row order, in double; then block by block, and rounded once
    want = np.sum(terms[edges[0] : edges[1]], axis=0, dtype=np.float64)
    for b in range(1, blocks):
        want = want + np.sum(terms[edges[b] : edges[b + 1]], axis=0, dtype=np.float64)
    want = want.astype(np.float32)
    for total, peak in results:  # the same bits whatever the thread count
        np.testing.assert_array_equal(total, want)
        np.testing.assert_array_equal(peak, np.max(x - w, axis=0))


@needs_cc
def test_the_column_loop_accumulates_into_its_output_in_row_order():
    fused = _fused(lambda x, w: (x * w).sum(0), ember.randn(8, 16), ember.randn(16))
    node = _node(fused)
    source = cfuse.source_of(
        node.attrs["program"],
        node.attrs["outputs"],
        list(node.attrs["out_types"]),
        [v.type for v in node.inputs],
    )
    assert "for (long r = rb; r < re; r++)" in source  # the rows, in order, outside
    assert "double *acc0;" in source  # a float32 sum's running results are doubles
    assert "acc0[seg - off0 + i] = acc0[seg - off0 + i] + t" in source  # each column's sum
    assert "r0[q] = (float)acc0[q - lo];" in source  # rounded once
    assert "pairwise" not in source  # (no row of terms to sum)
    assert "pool(part_rows, &job, 4, 1)" in source  # narrow and long: fixed blocks of rows


def test_a_training_steps_bias_gradients_are_fused():
    example = models.example_step("mlp", batch=16)
    step = ember.function(example.step)
    step()
    graph = step.graph
    bias_sums = [
        n
        for n in graph.nodes
        if n.kind == "call"
        and n.op.name == "fused_reduce"
        and any(e.op.name == "sum" and e.kwargs["axes"] == (0,) for e in n.attrs["program"])
    ]
    # one per linear layer, each returning the masked gradient (for the weight gradient's
    # matmul) besides the bias gradient: one pass over it, no separate sum
    assert len(bias_sums) == 3
    for node in bias_sums[1:]:
        assert len(node.outputs) == 2 and "where" in [e.op.name for e in node.attrs["program"]]
    plain = [n for n in graph.nodes if n.kind == "call" and n.op.name == "sum"]
    assert all(tuple(n.attrs["axes"]) != (0,) for n in plain)


def test_without_a_compiler_leading_reductions_run_on_numpy(tmp_path):
    code = textwrap.dedent(
        """
        import warnings
        import numpy as np
        import ember
        warnings.simplefilter("ignore")
        x = np.arange(12, dtype=np.float32).reshape(4, 3) - 5
        f = ember.function(lambda x: (x * 2 + 1).sum(0))
        got = f(ember.tensor(x)).numpy()
        assert "fused_reduce" in [n.op.name for n in f.graph.nodes if n.kind == "call"]
        assert np.array_equal(got, np.sum(x * 2 + 1, axis=0)), got
        print("ok")
        """
    )
    env = dict(os.environ, CC="/bin/false", EMBER_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "ok" in out.stdout


@needs_cc
@pytest.mark.parametrize("length", [4096, 4097, 8200, 3 * 4096 + 5, 40_003])
def test_long_rows_are_summed_piece_by_piece_in_numpys_order(length):
    # a row longer than creduce.SEGMENT is summed in pieces (subtrees of NumPy's pairwise
    # order) whose sums combine in that order: the bits of np.sum on float32, with an
    # elementwise output and a max of the same terms in the same loop, over 1 to 3 threads
    from ember.kernels import creduce

    assert creduce.SEGMENT == 4096  # (the lengths above straddle one to ten pieces)
    rng = np.random.default_rng(length)
    x = (rng.standard_normal((3, length)) * 1e3).astype(np.float32)
    w = rng.standard_normal(length).astype(np.float32)

    def f(x, w):
        h = x * w - 1
        return h.sum(-1), h.amax(-1), h, h.sum()

    compiled = ember.function(f)
    before = cpool.get_num_threads()
    try:
        for threads in (1, 2, 3):
            cpool.set_num_threads(threads)
            rows, top, h, total = compiled(ember.tensor(x), ember.tensor(w))
            assert "fused_reduce" in _ops(compiled.graph)
            want = x * w - 1
            np.testing.assert_array_equal(h.numpy(), want)
            np.testing.assert_array_equal(rows.numpy(), np.sum(want, axis=-1, dtype=np.float32))
            np.testing.assert_array_equal(top.numpy(), want.max(-1))
            np.testing.assert_array_equal(total.numpy(), np.sum(want, dtype=np.float32))
            # a leading and a trailing block reduced (rows of the trailing block in pieces)
            x3 = np.stack([x, x[::-1]], axis=1)
            both = ember.function(lambda x, w: (x * w - 1).sum((0, 2)))
            got = both(ember.tensor(x3), ember.tensor(w))
            assert "fused_reduce" in _ops(both.graph)
            np.testing.assert_array_equal(
                got.numpy(), (ember.tensor(x3) * ember.tensor(w) - 1).sum((0, 2)).numpy()
            )
    finally:
        cpool.set_num_threads(before)


@needs_cc
def test_a_whole_tensor_reduction_shares_its_pieces_over_threads_with_the_same_bits():
    # one long row (every axis reduced): its pieces run on the thread pool, their sums
    # combined in NumPy's pairwise tree and their maxima in order, so the bits are the serial
    # loop's, NumPy's, on any number of threads; the elementwise output is stored as it goes
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((5, 70_001)) * 1e3).astype(np.float32)
    x[2, 777] = np.nan
    w = rng.standard_normal((5, 70_001)).astype(np.float32)  # (a broadcast one does not fuse)

    def f(x, w):
        h = x * w - 1
        return h.sum(), h.amax(), h

    fused = _fused(f, ember.tensor(x), ember.tensor(w))
    node = _node(fused)
    source = cfuse.source_of(
        node.attrs["program"],
        node.attrs["outputs"],
        list(node.attrs["out_types"]),
        [v.type for v in node.inputs],
    )
    assert "static void pieces(" in source
    compiled = ember.function(f)
    want = x * w - 1
    before = cpool.get_num_threads()
    try:
        for threads in (1, 2, 3):
            cpool.set_num_threads(threads)
            total, top, h = compiled(ember.tensor(x), ember.tensor(w))
            np.testing.assert_array_equal(total.numpy(), np.sum(want, dtype=np.float32))
            assert np.isnan(top.numpy())
            np.testing.assert_array_equal(h.numpy(), want)
    finally:
        cpool.set_num_threads(before)
