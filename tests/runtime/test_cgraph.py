"""runtime/cgraph.py, the C graph runner: graphs of convolutions (their bias, ReLU and mask
epilogues), max pooling, concatenation, fused loops and lone elementwise ops run in C give
exactly the results of generated code,
which runs the same C kernels one node at a time (and the interpreter's, on NumPy's kernels, to
rounding), on one thread and on several, in any priority order; a graph with a node lacking a C
step has no C program; and the parallel executor's cost model picks the runner from measured
node times."""

import threading

import numpy as np
import pytest

import ember
from ember import models
from ember.graph import interpreter
from ember.kernels import ccompile, cgemm, cpool, csteps
from ember.kernels.cstep import STEP_CALL
from ember.nn import functional as F
from ember.runtime import cgraph, parallel, parallel_measure
from ember.runtime.codegen import compile_graph
from ember.runtime.parallel_cost import Calibration

pytestmark = pytest.mark.skipif(
    not ccompile.compiler_available(), reason="no C compiler: the C runner needs one"
)


def _tensors(shapes, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return [ember.tensor(rng.standard_normal(s).astype(dtype)) for s in shapes]


def _graph(fn, args, opt_level=3):
    return ember.trace(fn, *args, opt_level=opt_level).graph


def _same(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)


def _generated(graph, arrays):
    """Generated code's results: the same C kernels, one node at a time (checked against the
    interpreter, to rounding, by tests/conftest.py)."""
    return compile_graph(graph)(*arrays)


def _check(graph, args, priority=None):
    steps = cgraph.c_steps(graph)
    assert steps is not None, str(graph)
    arrays = [a.detach().numpy() for a in args]
    want = _generated(graph, arrays)
    for threads in (1, 2, 3):
        program = cgraph.CGraphProgram(graph, steps, priority, threads)
        for _ in range(3):  # the counters and outputs are fresh for every run
            _same(program(*arrays), want)


def stem(x, w1, b1, w2, w3):
    """Padded, strided and biased convolutions (one without an epilogue), ReLU, pooling with
    padding and ceil_mode, concatenations along the channels and the width, a reshape."""
    a = F.relu(F.conv2d(x, w1, b1, stride=2, padding=1))
    b = F.conv2d(x, w2, padding=(2, 0)).reshape(2, -1)
    p = F.max_pool2d(a, 3, stride=2, padding=1, ceil_mode=True)
    q = F.max_pool2d(
        F.relu(F.conv2d(x, w3, stride=2, padding=1)), 3, stride=2, padding=1, ceil_mode=True
    )
    return ember.concat([ember.concat([p, q], dim=1), ember.concat([q, p], dim=1)], dim=3), b


STEM_SHAPES = [(2, 3, 15, 13), (8, 3, 3, 3), (8,), (4, 3, 5, 1), (8, 3, 3, 3)]


def test_the_inception_block_equals_the_interpreter():
    args = _tensors(models.inception_shapes(4, 16, 9))
    _check(_graph(models.inception_block, args), args)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_padded_strided_biased_convs_pools_and_concats_equal_the_interpreter(dtype):
    args = _tensors(STEM_SHAPES, 1, dtype)
    _check(_graph(stem, args), args)


def test_any_priority_order_gives_the_same_results():
    """A priority only orders the ready steps: even a reversed topological one cannot stall."""
    args = _tensors(models.inception_shapes(2, 8, 6), 2)
    graph = _graph(models.inception_block, args)
    calls = [i for i, n in enumerate(graph.nodes) if n.kind == "call"]
    rng = np.random.default_rng(0)
    for _ in range(3):
        _check(graph, args, priority=list(rng.permutation(calls)))


def test_a_relu_mask_output_is_written_by_the_conv_store():
    def forward(x, w):
        y = F.relu(F.conv2d(x, w, padding=1))
        return y, y > 0

    args = _tensors([(2, 4, 6, 6), (8, 4, 3, 3)], 3)
    graph = _graph(forward, args)
    assert [n.op.name for n in graph.nodes if n.kind == "call"] == ["fused_epilogue"]
    _check(graph, args)


def test_one_thread_of_the_pool_still_runs_every_step():
    args = _tensors(models.inception_shapes(2, 8, 6), 4)
    graph = _graph(models.inception_block, args)
    before = cpool.get_num_threads()
    cpool.set_num_threads(1)
    try:
        _check(graph, args)
    finally:
        cpool.set_num_threads(before)


def test_outputs_are_fresh_arrays_each_run():
    args = _tensors(models.inception_shapes(2, 8, 6), 5)
    graph = _graph(models.inception_block, args)
    program = cgraph.CGraphProgram(graph, cgraph.c_steps(graph))
    arrays = [a.numpy() for a in args]
    first = program(*arrays)[0]
    kept = first.copy()
    second = program(*[a * 2 for a in arrays])[0]
    assert not np.shares_memory(first, second)
    np.testing.assert_array_equal(first, kept)


def test_a_graph_with_a_node_lacking_a_c_step_has_no_c_program():
    args = _tensors([(2, 3, 8, 8), (4, 3, 3, 3)])
    assert cgraph.c_steps(_graph(lambda x, w: F.softmax(F.conv2d(x, w), dim=1), args)) is None
    grouped = _tensors([(2, 4, 8, 8), (4, 2, 3, 3)])
    assert cgraph.c_steps(_graph(lambda x, w: F.relu(F.conv2d(x, w, groups=2)), grouped)) is None


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fused_loops_and_lone_elementwise_ops_run_in_c(dtype):
    """A fused loop (a broadcast bias, a bool output), a fused reduction and an elementwise op
    no group took (the division after the reduction) are steps of the C runner: their loops
    (kernels/cfuse.py), bit for bit generated code's."""

    def net(x, w, b):
        z = F.relu(F.conv2d(x, w) * 2 + b.reshape(1, -1, 1, 1))
        return z.sum(dim=(2, 3)) / 7.0, z > 1.0, F.relu(x * 3 - 1)

    args = _tensors([(2, 3, 9, 9), (5, 3, 3, 3), (5,)], 3, dtype)
    graph = _graph(net, args)
    names = [n.op.name for n in graph.nodes if n.kind == "call"]
    assert {"fused_elementwise", "fused_reduce", "div"} <= set(names), str(graph)
    _check(graph, args)


def test_a_lone_math_function_runs_in_c_only_where_generated_code_runs_its_loop():
    """Generated code gives a lone float32 ``exp`` NumPy's kernel (libm's vector ``expf`` rounds
    some values an ulp apart), so the C runner has no step for it: a run would otherwise depend
    on which executor a machine's measurement picked. Exact functions (sqrt) and half
    precision, where generated code runs the same C loop, keep their steps."""
    (x,) = _tensors([(4, 3)])
    assert cgraph.c_steps(_graph(lambda x: x.exp().reshape(-1) + 1.0, [x], opt_level=2)) is None
    _check(_graph(lambda x: (x * x).sqrt() * 2.0, [x], opt_level=2), [x])
    half = x.to(ember.bfloat16)
    graph = _graph(lambda x: x.exp() + 1.0, [half], opt_level=2)
    _check(graph, [half])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_depthwise_convolutions_run_in_c(dtype):
    """Depthwise convolutions (a channel multiplier of one and of two, strided, padded) are
    steps of the C runner: kernels/cdepthwise.py's forward (the first with its ReLU stored by
    the kernel), bit for bit generated code's."""

    def net(x, w1, w2):
        y = F.relu(F.conv2d(x, w1, padding=1, groups=4))
        return F.conv2d(y, w2, stride=2, padding=(0, 2), groups=4)

    args = _tensors([(2, 4, 9, 8), (4, 1, 3, 3), (8, 1, 3, 2)], 5, dtype)
    graph = _graph(net, args)
    calls = [n for n in graph.nodes if n.kind == "call"]
    assert [n.op.name for n in calls] == ["fused_epilogue", "conv"], str(graph)
    assert calls[0].attrs["producer"].name == "conv"
    _check(graph, args)


def _bn(t, stats):
    return F.batch_norm(t, *stats, training=False, eps=1e-3)


_BATCH_NORMS = {
    # folded into a biased convolution's weight (its bias becomes the shift)
    "fold": (lambda x, w, b, s: _bn(F.conv2d(x, w, b, padding=1), s), (6, 4, 3, 3), 6),
    # a grouped convolution's
    "fold groups": (lambda x, w, b, s: _bn(F.conv2d(x, w, b, groups=2), s), (6, 2, 1, 1), 6),
    # a transposed convolution's: its output channels are the weight's axis 1
    "fold axis 1": (lambda x, w, b, s: _bn(F.conv_transpose2d(x, w, stride=2), s), (4, 5, 2, 2), 5),
    # on an input: the per-channel affine
    "eval": (lambda x, w, b, s: _bn(x * w, s), (), 4),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", list(_BATCH_NORMS))
def test_batch_norm_steps_equal_their_kernels(case, dtype):
    """Inference batch norms whose statistics are the graph's inputs (`batch_norm_fold`, into
    the weight of the call before them, and `batch_norm_eval`) have C steps equal to their
    NumPy kernels within rounding."""
    fn, w_shape, channels = _BATCH_NORMS[case]
    rng = np.random.default_rng(12)
    arrays = [rng.standard_normal((2, 4, 6, 6)), rng.standard_normal(w_shape)]
    arrays += [rng.standard_normal(w_shape[0] if w_shape else 1)]
    arrays += [rng.standard_normal(channels), rng.uniform(0.5, 2, channels)]
    arrays += [rng.standard_normal(channels), rng.standard_normal(channels)]
    args = [ember.tensor(a.astype(dtype)) for a in arrays]
    graph = _graph(lambda x, w, b, *stats: fn(x, w, b, stats), args)
    values = interpreter.all_values(graph, [a.numpy() for a in args])
    values.update({v.name: a.numpy() for v, a in zip(graph.inputs, args)})
    nodes = [n for n in graph.nodes if n.kind == "call" and n.op.name.startswith("batch_norm")]
    assert nodes, str(graph)
    for node in nodes:
        ins = [np.ascontiguousarray(values[v.name]) for v in node.inputs]
        want = node.op.kernel(*ins, **node.attrs)
        want = want if isinstance(want, tuple) else (want,)
        step = node.op.c_step(node)
        assert step is not None, node.op.name
        outs = [np.empty(tuple(v.type.shape), v.type.dtype.np) for v in node.outputs]
        for slot, role, k in step.slots:
            step.args[slot] = (ins if role == "in" else outs)[k].ctypes.data
        STEP_CALL(step.fn)(step.args.ctypes.data)
        tol = 1e-6 if dtype == np.float32 else 1e-14
        for got, w in zip(outs, want):
            np.testing.assert_allclose(got, w, rtol=tol, atol=tol)


def test_a_priority_must_list_every_call_node():
    args = _tensors(models.inception_shapes(2, 8, 6))
    graph = _graph(models.inception_block, args)
    with pytest.raises(ValueError, match="every call node"):
        cgraph.CGraphProgram(graph, cgraph.c_steps(graph), priority=[0])


def test_measured_node_times_cover_every_node():
    args = _tensors(models.inception_shapes(2, 8, 6))
    graph = _graph(models.inception_block, args)
    measured = cgraph.measure_nodes(graph, cgraph.c_steps(graph))
    calls = [i for i, n in enumerate(graph.nodes) if n.kind == "call"]
    assert sorted(measured) == calls
    assert all(s > 0 and one > 0 and pooled > 0 for s, one, pooled in measured.values())


# ----------------------------------------------------------------------- the cost model
def _c_calibration(cores=2) -> Calibration:
    """A machine whose C runner costs 15 us a run and whose single-threaded steps overlap
    (pair factor 1.1); the tables matter little: measured node times replace them."""
    blas = [(f, max(2e-6, f / 1.6e10), max(2e-6, f / 1e10), 2.0) for f in (1e3, 1e6, 1e9)]
    numpy = [(s, max(5e-7, s / 1e10), max(5e-7, s / 1e10), 2.0) for s in (1e3, 1e6, 1e9)]
    conv = [(f, max(1e-6, f / 1e10), 1.1) for f in (1e3, 1e6, 1e9)]
    copy = [(s, max(1e-7, s / 1e10), 1.1) for s in (1e3, 1e6, 1e9)]
    return Calibration(cores, 20e-6, 30e-6, 0.4e-6, blas, numpy, "test", 15e-6, 1e-6, conv, copy)


def test_the_cost_model_runs_independent_branches_on_the_c_runner():
    """Measured: every node 50 us in generated code and alone on one thread. Four branches
    spread over two threads beat eight nodes one after another."""
    args = _tensors(models.inception_shapes(8, 32, 16))
    graph = _graph(models.inception_block, args)
    calls = [i for i, n in enumerate(graph.nodes) if n.kind == "call"]
    measured = {p: (50e-6, 50e-6) for p in calls}
    costs = _c_calibration().for_c_runner()
    plan = parallel.plan(graph, costs, measured=measured)
    assert plan.parallel and plan.runner == "c", str(plan)
    assert sorted(plan.order) == calls and "C graph runner" in str(plan)
    # nodes that run twice as fast in generated code (their kernels take both cores) do not
    slow = {p: (25e-6, 50e-6) for p in calls}
    assert not parallel.plan(graph, costs, measured=slow).parallel


def test_the_cost_model_keeps_a_chain_on_the_generated_code():
    args = _tensors(models.CONV_CHAIN_SHAPES)
    graph = _graph(models.conv_chain, args)
    calls = [i for i, n in enumerate(graph.nodes) if n.kind == "call"]
    plan = parallel.plan(
        graph, _c_calibration().for_c_runner(), measured={p: (40e-6, 50e-6) for p in calls}
    )
    assert not plan.parallel and "no independent work" in plan.reason


def test_a_calibration_without_c_costs_has_no_c_runner():
    plain = Calibration(2, 20e-6, 30e-6, 0.4e-6, [(1e3, 1e-6, 1e-6, 1.0)], [(1e3, 1e-6, 1e-6, 1.0)])
    assert plain.for_c_runner() is None


def test_the_parallel_executor_runs_the_c_program_and_falls_back_while_it_is_busy(monkeypatch):
    monkeypatch.setattr(parallel, "calibrate", lambda force=False: _c_calibration())
    args = _tensors(models.inception_shapes(4, 16, 9), 6)
    graph = _graph(models.inception_block, args)
    program = parallel.ParallelProgram(graph, force=True)
    assert program.plan.runner == "c" and program.plan.parallel
    arrays = [a.numpy() for a in args]
    want = _generated(graph, arrays)
    _same(program(*arrays), want)
    calls = []
    monkeypatch.setattr(program, "_sequential", lambda *a: calls.append(1) or want)
    with program._c_lock:  # another thread's run holds the program: generated code instead
        result = []
        thread = threading.Thread(target=lambda: result.append(program(*arrays)))
        thread.start()
        thread.join()
    assert calls == [1]
    _same(program(*arrays), want)


def test_on_this_machine_the_calibration_has_the_c_runners_costs():
    c_run, c_step, convs, copies = parallel_measure._c_runner_costs()
    assert (
        c_run > 0
        and c_step >= 0
        and len(convs) == len(parallel_measure._C_CONVS)
        and len(copies) > 2
    )
    assert all(t > 0 and f >= 1.0 for _, t, f in convs + copies)
    times = [t for _, t, _ in convs]
    assert times == sorted(times)  # more work never predicted faster
    plain = _c_calibration()
    costs = Calibration(
        2, 1e-5, 1e-5, 0.0, plain.blas, plain.numpy, "", c_run, c_step, convs, copies
    )
    c = costs.for_c_runner()
    assert c.runner == "c" and c.handoff_s == 0.0 and (c.fork_s, c.step_s) == (c_run, c_step)
    # a node keeps its generated-code time; its time in a run is the runner's one-thread time
    assert [row[1] for row in c.blas] == [row[1] for row in plain.blas]
    assert all(row[3] >= 1.0 for row in c.blas + c.numpy)


# ---------------------------------------------------------------------- matrix products
def _check_close(graph, args, rtol=1e-5):
    """Products: exactly generated code's results (the C steps run the kernel eager mode and
    generated code run for each product's size, NumPy's BLAS calls for the small ones:
    kernels/cnumpy_product.py), and the interpreter's within rounding."""
    _check(graph, args)
    steps = cgraph.c_steps(graph)
    arrays = [a.detach().numpy() for a in args]
    want = interpreter.run(graph, arrays)
    for threads in (1, 2):
        program = cgraph.CGraphProgram(graph, steps, None, threads)
        for got, w in zip(program(*arrays), want):
            assert got.dtype == w.dtype and got.shape == w.shape
            np.testing.assert_allclose(got, w, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_linear_layers_and_products_by_a_matrix_equal_the_interpreter(dtype):
    def layers(x, w1, b1, w2, w3, m):
        h = F.relu(F.linear(x, w1, b1))  # a linear epilogue
        y = F.linear(h, w2)  # no bias
        z = ember.matmul(F.linear(x, w3, b1), m)  # a product by a matrix, 3-d by 2-d
        return y, z

    shapes = [(2, 3, 20), (16, 20), (16,), (5, 16), (16, 20), (16, 7)]
    args = _tensors(shapes, 7, dtype)
    graph = _graph(layers, args)
    names = {n.op.name for n in graph.nodes if n.kind == "call"}
    assert {"fused_epilogue", "linear"} <= names, str(graph)
    _check_close(graph, args, 1e-5 if dtype == np.float32 else 1e-12)


def test_products_with_any_c_loop_epilogue_run_in_c():
    """A product's epilogue that is not a lone ReLU (GELU's erf, a residual read by rows, a
    bool result: the product in scratch) runs as the product's step and the
    loop's, one step; within rounding of the interpreter."""

    def layers(x, w1, b1, r, w2, m):
        h = F.gelu(F.linear(x, w1, b1))  # the loop over the product in place
        s = ember.matmul(h, m) + r  # a matmul's epilogue reading rows of r
        return h, s, F.linear(x, w2) * 2 > 1.0  # bool: the product in scratch

    shapes = [(2, 3, 20), (16, 20), (16,), (2, 3, 7), (5, 20), (16, 7)]
    for dtype, rtol in ((np.float32, 1e-5), (np.float64, 1e-12)):
        args = _tensors(shapes, 3, dtype)
        graph = _graph(layers, args)
        fused = [n for n in graph.nodes if n.kind == "call" and n.op.name == "fused_epilogue"]
        assert len(fused) == 3, str(graph)
        _check_close(graph, args, rtol)


def test_attention_layer_norm_and_view_steps_equal_the_interpreter():
    """An encoder layer's nodes without a product's step (attention with a float, bool or no
    mask, causal or not; layer norm; a head split's permutes, 3-d to 5-d; views: slices with
    negative steps, a broadcast) run in C."""

    def layer(x, w, b, m, keep):
        q = x.reshape(2, 6, 2, 4).permute(0, 2, 1, 3)
        k = x.reshape(2, 6, 2, 4).permute(2, 0, 1, 3).permute(1, 0, 2, 3) * 0.5
        a = F.scaled_dot_product_attention(q, k, q, attn_mask=m)
        c = F.scaled_dot_product_attention(q, k, k, attn_mask=keep, scale=0.3)
        d = F.scaled_dot_product_attention(q, k, q, is_causal=True)
        merged = (a + c + d).permute(0, 2, 1, 3).reshape(2, 6, 8)
        five = x.reshape(2, 3, 2, 2, 4).permute(4, 2, 0, 3, 1)
        views = (x[:, 1::2, 3], x[1, ::-2, None], b.expand(3, 2, 8))  # getitem, broadcast_to
        return F.layer_norm(merged, (8,), w, b, eps=1e-3), five, x.permute(2, 0, 1), *views

    for dtype, rtol in ((np.float32, 1e-5), (np.float64, 1e-12)):
        x, w, b, m = _tensors([(2, 6, 8), (8,), (8,), (2, 1, 6)], 5, dtype)
        keep = ember.tensor(np.random.default_rng(1).random((6, 6)) < 0.7)
        args = [x, w, b, m, keep]
        with ember.no_grad():
            graph = _graph(layer, args)
        names = [n.op.name for n in graph.nodes if n.kind == "call"]
        assert names.count("attention") == 3 and "layer_norm" in names, str(graph)
        assert names.count("permute") >= 4 and names.count("getitem") == 2, str(graph)
        assert "broadcast_to" in names, str(graph)
        _check_close(graph, args, rtol)


@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_the_example_models_inference_runs_in_c(name):
    example = models.example_step(name, batch=3)
    model = example.model
    with ember.no_grad():
        program = ember.function(lambda x: model(x)).compile(example.x)
    graph = program.graph
    args = [example.x] + [p for p in model.parameters()]
    assert [v.name for v in graph.inputs][0] == "x" and len(graph.inputs) == len(args)
    _check_close(graph, args)


def test_the_cost_model_runs_a_chain_of_small_nodes_on_one_thread():
    """Measured: generated code spends 50 us a node (its Python), the runner 10. No two
    nodes can run at once, but the runner alone beats generated code."""
    args = _tensors(models.CONV_CHAIN_SHAPES)
    graph = _graph(models.conv_chain, args)
    calls = [i for i, n in enumerate(graph.nodes) if n.kind == "call"]
    costs = _c_calibration().for_c_runner()
    plan = parallel.plan(graph, costs, measured={p: (50e-6, 10e-6) for p in calls})
    assert plan.parallel and len(plan.workers) == 1 and plan.order == calls, str(plan)
    assert "one thread" in plan.reason and "on one thread" in str(plan)
    # kernels that lose their own threads on the runner: generated code stays
    plan = parallel.plan(graph, costs, measured={p: (50e-6, 90e-6) for p in calls})
    assert not plan.parallel and not plan.workers
    program = parallel.ParallelProgram(
        graph, schedule=parallel.plan(graph, costs, measured={p: (5e-5, 1e-5) for p in calls})
    )
    assert program._c_program is not None and program._c_program.threads == 1
    arrays = [a.numpy() for a in args]
    _same(program(*arrays), _generated(graph, arrays))


def test_a_run_on_one_thread_shares_each_step_over_the_pool(monkeypatch):
    """Steps of a one-thread run have the pool to themselves (a large product splits its
    columns, a convolution its panels); beside other steps they run alone. The results are
    the same either way."""
    from ember.kernels import cgemm, gemm_tune

    # (a machine whose measurements send two rows to the few-rows kernel, sharing it; no packs,
    # whose sizes run ember's own GEMM)
    monkeypatch.setenv("EMBER_PREPACK", "0")
    few = dict.fromkeys(gemm_tune.DTYPES, (gemm_tune.SKINNY,) * 6)
    tuning = gemm_tune.GemmTuning("test", 0.0, 1e10, 1e10, {}, few)
    monkeypatch.setattr(cgemm, "tuning", lambda: tuning)
    args = _tensors([(2, 300), (2048, 300), (2048,), (8, 3, 32, 32), (32, 3, 3, 3)], 8)

    def model(x, w, b, image, k):
        return F.relu(F.linear(x, w, b)), F.relu(F.conv2d(image, k, padding=1))

    graph = _graph(model, args)
    steps = cgraph.c_steps(graph)
    arrays = [a.numpy() for a in args]
    one = cgraph.CGraphProgram(graph, steps, None, 1)(*arrays)
    two = cgraph.CGraphProgram(graph, cgraph.c_steps(graph), None, 2)(*arrays)
    _same(one, two)
    linear = next(s for s in steps if s.args.size == 19)
    assert linear.args[12] != 0 and linear.args[11] != 0  # the pool, and the few-rows kernel


@pytest.mark.parametrize("kernel", ["skinny", "own", "blas"])
def test_a_linear_step_runs_the_kernel_measured_for_its_rows(kernel, monkeypatch):
    """The C step of a product of few rows runs what `cgemm.matmul` would: the few-rows
    kernel, ember's own GEMM or the BLAS's (whose address it then holds), equal to the
    interpreter whichever it is."""
    from ember.kernels import cgemm, gemm_tune

    if kernel == "blas" and cgemm._functions(np.dtype(np.float32))[1] is None:
        pytest.skip("NumPy's BLAS is not an OpenBLAS ember can call")
    monkeypatch.delenv("EMBER_GEMM", raising=False)
    monkeypatch.setenv("EMBER_PREPACK", "0")  # (a pack's sizes run ember's own GEMM)
    code = {"skinny": gemm_tune.SKINNY, "own": gemm_tune.OWN, "blas": gemm_tune.BLAS}[kernel]
    few = dict.fromkeys(gemm_tune.DTYPES, (code,) * len(gemm_tune._FEW_ROWS))
    tuning = gemm_tune.GemmTuning("test", 1e9, 1e10, 1e10, {}, few)
    monkeypatch.setattr(cgemm, "tuning", lambda: tuning)
    args = _tensors([(40, 96), (80, 96), (80,)], 9)
    graph = _graph(lambda x, w, b: F.relu(F.linear(x, w, b)), args)
    steps = cgraph.c_steps(graph)
    linear = next(s for s in steps if s.args.size == 19)
    assert (linear.args[11] != 0) == (kernel == "skinny")
    assert (linear.args[16] != 0) == (kernel == "blas")
    _check_close(graph, args, 1e-5)


def test_a_broadcast_has_no_copy_step_and_adding_ones_copies_the_bytes():
    """A real broadcast is not its input's bytes: the copy step (which copied the output's size
    from the input, reading past it) is refused for it (the default executor chose the runner
    for the gradient of ``sum`` and got garbage), and the view's strided copy (zero strides)
    runs it instead; a broadcast that only adds dimensions of one is a copy and runs in C."""
    (x,) = _tensors([(4, 1)])
    wide = _graph(lambda x: ember.broadcast_to(x.reshape(4, 1), (4, 5)), [x], opt_level=0)
    assert csteps.copy_step(next(n for n in wide.nodes if n.target == "broadcast_to")) is None
    _check(wide, [x])
    ones = _graph(lambda x: ember.broadcast_to(x.reshape(4), (1, 4)), [x], opt_level=0)
    _check(ones, [x])


def test_every_product_size_class_rounds_alike_on_every_path():
    """A product's rounding depends on its size alone: the C step equals eager mode and
    generated code bit for bit whichever kernel the size gets (NumPy's BLAS calls for small
    products: a dot, a row or a column by gemv, gemm; a pack, ember's own GEMM, `skinny`, the
    BLAS's), and a parameter's first product (unpacked) equals its later ones (packed)."""
    # (the first four NumPy's, the others just past `cgemm.BLAS_ONE_THREAD`)
    shapes = [(1, 16, 8), (1, 40, 1), (3, 24, 1), (4, 33, 17), (1, 520, 520), (2, 300, 450)]
    shapes += [(5, 256, 256), (9, 200, 160), (17, 128, 130), (65, 64, 64), (130, 48, 48)]
    for dtype in (ember.float32, ember.float64):
        for m, k, n in shapes:
            layer = ember.nn.Linear(k, n, bias=m % 2 == 1).to(dtype)
            x = ember.randn(m, k, dtype=dtype)
            with ember.no_grad():
                eager = [layer(x).numpy().copy() for _ in range(3)]
            for later in eager[1:]:
                np.testing.assert_array_equal(later, eager[0], err_msg=str((m, k, n, dtype)))
            params = [layer.weight.detach()] + ([layer.bias.detach()] if m % 2 else [])
            args = [x, *params]
            graph = _graph(lambda x, *p: F.linear(x, *p), args)
            _check(graph, args)
            arrays = [a.numpy() for a in args]
            ran = cgraph.CGraphProgram(graph, cgraph.c_steps(graph), None, 1)(*arrays)[0]
            np.testing.assert_array_equal(ran, eager[0], err_msg=str((m, k, n, dtype)))
            # a product by a transposed view: NumPy's calls, `skinny` and the BLAS read it with
            # a transposing flag, which the runner's contiguous copy cannot repeat (no C
            # program); ember's own GEMM packs either layout into the same panels
            by_view = _graph(lambda x, w: ember.matmul(x, w.T), args[:2])
            if cgraph.c_steps(by_view) is not None:
                _check(by_view, args[:2])
            else:  # (a view of a single row or column is contiguous: it keeps its step)
                assert min(n, k) > 1
    # x @ x.T: NumPy computes a product of one array by its own transpose with syrk; no C step
    # repeats that, so the graph stays with generated code where the product is NumPy's
    for rows in (6, 700):
        x = _tensors([(rows, 50)], 1)[0]
        graph = _graph(lambda x: ember.matmul(x, x.T), [x])
        if rows * rows * 50 <= 1 << 18:
            assert cgraph.c_steps(graph) is None
        elif cgraph.c_steps(graph) is not None:  # (a kernel reading layouts has none)
            _check(graph, [x])


def test_a_frozen_constants_product_runs_on_its_pack_with_the_same_bits(tmp_path):
    """An imported model's weights are frozen graph constants: where ember's own GEMM runs
    their products, the step packs each once (kernels/cprepack.py) and equals generated code
    bit for bit; a smaller product keeps NumPy's calls."""
    pytest.importorskip("onnx")
    from ember.kernels import cprepack

    for m in (65, 3):
        model = ember.nn.Sequential(
            ember.nn.Linear(128, 384), ember.nn.GELU(), ember.nn.Linear(384, 64), ember.nn.ReLU()
        )
        x = ember.randn(m, 128)
        ember.onnx.export(model, str(tmp_path / "m.onnx"), x)
        imported = ember.onnx.load(str(tmp_path / "m.onnx"))
        imported(x)
        graph = imported.graph
        steps = cgraph.c_steps(graph)
        packed = [s for s in steps if any(isinstance(k, cprepack._Pack) for k in s.keep)]
        kernel = cgemm.product_kernel(m, 384, 128, np.dtype(np.float32), True)
        own = kernel in (cgemm.gemm_tune.OWN, cgemm.PACKED) and m * 384 * 128 > 1 << 18
        assert bool(packed) == own, (m, kernel)
        _check(graph, [x])


def test_vector_shaped_products_round_as_generated_code_rounds():
    """A matrix by a vector (M @ v), an outer product (k = 1) and a linear layer of one output
    are NumPy's BLAS calls eagerly and in generated code (kernels/cgemm.py `vector_shaped`):
    the runner's steps make the same calls (kernels/cnumpy_product.py), bit for bit."""

    def fn(m, v, u, x, w, b):
        return m @ v, u @ v[None, :300], F.linear(x, w, b), F.linear(x, w)

    # (each above BLAS_ONE_THREAD's multiply-adds: small products are NumPy's anyway)
    args = _tensors([(1500, 400), (400,), (1200, 1), (800, 400), (1, 400), (1,)], seed=3)
    _check(_graph(fn, args), args)
