"""Epilogue fusion (transforms/epilogue.py, kernels/cepilogue.py): which matmuls take their
readers as epilogues, and the blocked, compiled node against the reference kernels."""

import numpy as np
import pytest

import ember
from ember.graph import interpreter
from ember.kernels import ccompile
from ember.transforms import DCE, optimize
from ember.transforms.epilogue import EPILOGUE
from ember.transforms.fuse import FUSE

F = ember.nn.functional
needs_cc = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")


def _fused(fn, *examples):
    graph = ember.trace(fn, *examples, opt_level=0).graph
    arrays = [e.numpy() for e in examples]
    fused, _ = optimize(graph.copy(), passes=[FUSE, DCE, EPILOGUE], check=arrays)
    fused.verify()
    return graph, fused


def _ops(graph):
    return [n.op.name for n in graph.nodes if n.kind == "call"]


def test_a_linear_layer_and_its_activation_become_one_node():
    def f(x, w, b):
        return F.gelu(F.linear(x, w, b)) * 2

    graph, fused = _fused(f, ember.randn(8, 6), ember.randn(5, 6), ember.randn(5))
    assert _ops(fused) == ["fused_epilogue"]
    node = fused.nodes[-1]
    assert node.attrs["producer"].name == "linear" and node.attrs["n_producer"] == 3
    arrays = [
        np.random.default_rng(0).standard_normal(s).astype(np.float32)
        for s in ((8, 6), (5, 6), (5,))
    ]
    for got, want in zip(interpreter.run(fused, arrays), interpreter.run(graph, arrays)):
        np.testing.assert_array_equal(got, want)  # the reference kernel is the same arithmetic


def test_a_single_activation_and_inputs_read_by_rows_or_whole():
    def f(x, w, skip):
        return (x @ w).relu(), ((x @ w) * 0.5 + skip)

    _, fused = _fused(f, ember.randn(2, 3, 4), ember.randn(4, 5), ember.randn(2, 3, 5))
    # (no CSE here: two matmuls) a lone relu; a group reading a (2, 3, 5) input by rows
    assert _ops(fused) == ["fused_epilogue", "fused_epilogue"]
    kinds = [n.attrs["program"][0].op.name for n in fused.nodes if n.kind == "call"]
    assert sorted(kinds) == ["mul", "relu"]


def test_matmuls_that_cannot_take_an_epilogue_are_left_alone():
    def two_readers(x, w):
        y = x @ w
        return y.relu(), y

    def batched(a, b):
        return (a @ b).tanh()

    def partly_broadcast(x, w, c):
        return (x @ w) + c  # c is (2, 1, 5): constant over some rows only

    assert "fused_epilogue" not in _ops(
        _fused(two_readers, ember.randn(3, 4), ember.randn(4, 2))[1]
    )
    assert "fused_epilogue" not in _ops(
        _fused(batched, ember.randn(2, 3, 4), ember.randn(2, 4, 5))[1]
    )
    assert "fused_epilogue" not in _ops(
        _fused(partly_broadcast, ember.randn(2, 3, 4), ember.randn(4, 5), ember.randn(2, 1, 5))[1]
    )


@needs_cc
@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
@pytest.mark.parametrize("rows", [1, 7, 3000])
def test_compiled_epilogues_equal_the_reference(rows, dtype, monkeypatch):
    from ember.kernels import cepilogue

    # 64 KiB blocks: 3000 rows of 256 make 47 blocks of 64 rows and a short one
    monkeypatch.setattr(cepilogue, "BLOCK_BYTES", 1 << 16)
    rng = np.random.default_rng(rows)

    def f(x, w, b, skip):
        g = F.gelu(F.linear(x, w, b), approximate="tanh") + skip
        return g, g > 0  # two outputs, the second bool

    x, w, b, skip = (
        ember.tensor(rng.standard_normal(s).astype(dtype.np))
        for s in ((rows, 48), (256, 48), (256,), (rows, 256))
    )
    compiled = ember.trace(f, x, w, b, skip)  # O3; the conftest checks each compiled call
    assert "fused_epilogue" in _ops(compiled.graph)
    got = compiled(x, w, b, skip)
    want = f(x, w, b, skip)
    tol = 1e-5 if dtype is ember.float32 else 1e-12
    np.testing.assert_allclose(got[0].numpy(), want[0].numpy(), rtol=tol, atol=tol)
    agree = got[1].numpy() == want[1].numpy()
    assert agree.mean() > 0.999  # (a value at 0 may round to either side between orders)


@needs_cc
def test_a_training_step_with_epilogues_equals_eager_steps():
    ember.manual_seed(0)
    model = ember.nn.Sequential(ember.nn.Linear(20, 32), ember.nn.GELU(), ember.nn.Linear(32, 3))
    twin = ember.nn.Sequential(ember.nn.Linear(20, 32), ember.nn.GELU(), ember.nn.Linear(32, 3))
    twin.load_state_dict(model.state_dict())
    x, y = ember.randn(64, 20), ember.randint(0, 3, (64,))

    def make_step(m):
        opt = ember.optim.SGD(m.parameters(), lr=0.1)

        def step():
            opt.zero_grad()
            loss = F.cross_entropy(m(x), y)
            loss.backward()
            opt.step()
            return loss

        return step

    compiled, eager = ember.function(make_step(model)), make_step(twin)
    for _ in range(3):
        np.testing.assert_allclose(compiled().detach().numpy(), eager().detach().numpy(), rtol=1e-5)
    # the GELU's backward ends in the first layer's bias gradient, a sum over the batch: one
    # fused_reduce (transforms/fuse.py), which the epilogue pass does not take (h/fred)
    assert "fused_reduce" in _ops(compiled.graphs["backward"])
    for p, q in zip(model.parameters(), twin.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6)


def _masked_bias_grad(x, w, m):
    h = (x @ w) * m  # a masked gradient, stored (returned), and its bias gradient
    return h, h.sum(0)


def _summed_only(x, w, m):
    return ((x @ w) * m).sum(0)  # the masked values are never stored


def _peak_elsewhere(x, w, m, y):
    h = (x @ w) * m
    return h, h.sum(0), y @ y.T  # a 16 MiB result: the peak is there, whatever the order


def _masked_args(*extra):
    x, w, m = ember.randn(512, 16), ember.randn(16, 512), ember.randn(512, 512) > 0
    return (x, w, m, *extra)


@needs_cc
def test_a_matmuls_masked_reader_writes_over_the_product_in_one_pass(bare_executors):
    from ember.plan import measure_peak, plan_memory
    from ember.plan.liveness import liveness
    from ember.transforms import epilogue

    args = _masked_args()
    # (generated code: the C runner, which holds every intermediate, could run the fused one)
    fn = ember.function(_masked_bias_grad, executor="codegen")  # O3
    graph = fn.compile(*args).graph
    # the loop's masked values take the product's buffer (ops/fused.py: overwrites_operand), so
    # splitting off its bias sum to make the rest an epilogue would lower no peak: one pass
    assert _ops(graph) == ["matmul", "fused_reduce"]
    matmul, loop = (n for n in graph.nodes if n.kind == "call")
    live = liveness(graph)
    assert live.buffer_of[id(loop.outputs[0])] is live.buffer_of[id(matmul.outputs[0])]
    split = graph.copy()  # what the pass would have made of it
    epilogue._split_and_fuse(split, next(n for n in split.nodes if n.kind == "call"))
    split.nodes = split.topological_order()
    assert _ops(split) == ["fused_epilogue", "sum"]
    assert plan_memory(graph).peak_bytes <= plan_memory(split).peak_bytes
    for got, want in zip(fn(*args), _masked_bias_grad(*args)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
    planned = fn.compile(*args).memory_plan.peak_bytes
    assert abs(measure_peak(fn, *args) - planned) < 0.05 * planned


def test_fused_reductions_stay_where_splitting_them_saves_nothing():
    args = _masked_args()
    # the loop holds the masked values only while it sums them: nothing to write over
    assert _ops(ember.function(_summed_only).compile(*args).graph) == ["matmul", "fused_reduce"]
    # stored, but the peak is another node's: the one-pass loop is kept
    args = _masked_args(ember.randn(2048, 16))
    ops = _ops(ember.function(_peak_elsewhere).compile(*args).graph)
    assert "fused_reduce" in ops and "fused_epilogue" not in ops
