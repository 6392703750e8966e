"""Elementwise fusion: which nodes group, and the compiled C loops against the NumPy kernels
(random shapes, broadcasting, non-contiguous and zero-size inputs, float32 and float64, NaN and
Inf)."""

import numpy as np
import pytest

import ember
from ember.graph import interpreter
from ember.kernels import ccompile
from ember.transforms import DCE, optimize
from ember.transforms.fuse import FUSE
from ember.types import TensorType

needs_cc = pytest.mark.skipif(
    not ccompile.compiler_available(), reason="no C compiler: fused kernels fall back to NumPy"
)


def _fused(fn, *examples):
    graph = ember.trace(fn, *examples, opt_level=0).graph
    arrays = [e.numpy() for e in examples]
    fused, _ = optimize(graph.copy(), passes=[FUSE, DCE], check=arrays)
    fused.verify()
    return graph, fused


def _ops(graph):
    return [n.op.name for n in graph.nodes if n.kind == "call"]


def test_a_chain_becomes_one_node_returning_what_is_read_outside():
    def f(x, w, b):
        h = x * (1.702 * x).sigmoid()
        return h * w + b, h.sum()  # h is read by the reduction too: a second output

    graph, fused = _fused(f, ember.randn(4, 8), ember.randn(8), ember.randn(4, 1))
    assert _ops(fused) == ["fused_elementwise", "sum"]
    node = fused.nodes[[n.kind for n in fused.nodes].index("call")]
    assert len(node.outputs) == 2 and len(node.attrs["program"]) == 5


def test_groups_stay_convex_and_do_not_cross_reductions_or_control_flow():
    def f(x):
        a = x.exp()
        s = a.sum(axis=1, keepdims=True)  # not elementwise: a path out of the group and back
        y = a / s + a  # may not join a's group (it reads s, which needs a)
        z = ember.cond(x.sum() > 0, lambda v: (v * 2).tanh() + 1, lambda v: v - 1, y)
        return z

    graph, fused = _fused(f, ember.randn(3, 5))
    for node in fused.nodes:
        if node.kind == "call" and node.op.name == "cond":
            branch = node.attrs["true_branch"]
            assert "fused_elementwise" not in _ops(branch)  # bodies are left alone
    before = interpreter.run(graph, [np.ones((3, 5), np.float32)])
    after = interpreter.run(fused, [np.ones((3, 5), np.float32)])
    np.testing.assert_array_equal(before[0], after[0])


def test_single_ops_and_integer_ops_are_left_alone():
    def f(x, i):
        return x.exp(), (i + 1) * 3

    _, fused = _fused(f, ember.randn(3), ember.tensor([1, 2, 3]))
    assert "fused_elementwise" not in _ops(fused)


def test_a_single_op_large_enough_for_the_loops_threads_gets_a_loop_of_its_own():
    """(A broadcast where over 8x4x128x128 values, as the attention mask is, and not the same op
    over a transposed input, which the loop would copy first.)"""
    from ember.kernels.cfuse import PARALLEL_MIN

    def masked(mask, scores):
        return ember.where(mask, scores, -1e9)

    scores = ember.randn(8, 4, 128, 128)
    assert scores.numel() >= PARALLEL_MIN
    mask = ember.tensor(np.tril(np.ones((128, 128), bool)))
    _, fused = _fused(masked, mask, scores)
    assert _ops(fused) == ["fused_elementwise"]
    _, fused = _fused(lambda mask, scores: masked(mask, scores.transpose(2, 3)), mask, scores)
    assert "fused_elementwise" not in _ops(fused)
    _, fused = _fused(masked, mask[:4, :4], ember.randn(4, 4))  # small: NumPy's loop is as good
    assert "fused_elementwise" not in _ops(fused)


CHAINS = {
    "gelu_tanh": lambda x, w, b: nn_gelu(x) * w + b,
    "swish": lambda x, w, b: (x * (1.702 * x).sigmoid()) * w + b,
    "select": lambda x, w, b: ember.where(x > w, x - b, (x * b).exp()).abs(),
    "math": lambda x, w, b: (x.abs() + 1).log() + (w * 0.5).sin().cos() - b.erf().sqrt(),
    "minmax": lambda x, w, b: ember.maximum(x, w).relu() * ember.minimum(b, x) / (w * w + 1),
    "casts": lambda x, w, b: ((x > 0).to(x.dtype) + (w < b).to(x.dtype)) * x.neg(),
}


def nn_gelu(x):
    return ember.nn.functional.gelu(x, approximate="tanh")


SHAPES = [
    ((64, 33), (33,), (64, 1)),  # a row and a column broadcast
    ((7, 1, 5), (4, 5), ()),  # a broadcast in the middle, a scalar
    ((300000,), (300000,), (1,)),  # long enough for threads
    (((1 << 20) + 77,), ((1 << 20) + 77,), ()),  # and for non-temporal stores, with a tail
    ((0, 4), (4,), (0, 1)),  # zero-size
    ((2, 3, 4, 5), (2, 1, 4, 1), (5,)),
]


@needs_cc
@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
@pytest.mark.parametrize("chain", sorted(CHAINS))
def test_compiled_loops_equal_the_numpy_kernels(chain, dtype):
    rng = np.random.default_rng(0)
    fn = CHAINS[chain]
    for shapes in SHAPES:
        arrays = [rng.standard_normal(s).astype(dtype.np) for s in shapes]
        if arrays[0].size > 8:
            arrays[0].reshape(-1)[:4] = [np.nan, np.inf, -np.inf, -0.0]
        tensors = [ember.tensor(a) for a in arrays]
        compiled = ember.function(fn)  # O3: fused, run as C (the conftest compares every
        got = compiled(*tensors)  # compiled call with the interpreter, ulp-tight)
        assert "fused_elementwise" in _ops(compiled.graph)
        want = fn(*tensors)  # eager: the NumPy kernels one by one
        eps = np.finfo(dtype.np).eps
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=16 * eps, atol=16 * eps)


@needs_cc
def test_non_contiguous_inputs_are_read_correctly():
    x = ember.randn(6, 8)
    w = ember.randn(8, 6)

    @ember.function
    def f(a, b):
        return (a * 2 + b).tanh() - a

    f(x, w.permute(1, 0))  # traced on any layout; arrays may come strided
    program = f._last_entry.program
    strided = w.numpy().T  # a transposed view
    got = program(x.numpy(), strided)[0]
    want = np.tanh(x.numpy() * 2 + strided) - x.numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@needs_cc
def test_the_fused_chain_source_is_one_vectorized_loop():
    from ember.kernels import cfuse

    def f(x, w, b):
        return (x * (1.702 * x).sigmoid()) * w + b

    x = ember.randn(1024)
    _, fused = _fused(f, x, x, x)
    node = next(n for n in fused.nodes if n.kind == "call")
    source = cfuse.source_of(
        node.attrs["program"],
        node.attrs["outputs"],
        list(node.attrs["out_types"]),
        [v.type for v in node.inputs],
    )
    # one loop over a range of elements, which the entry point hands to the thread pool for
    # long arrays; for long ranges, its middle part runs in blocks written with streaming stores
    assert "static void part(void *job_, long lo, long hi)" in source
    assert f"if (pool && n > {cfuse.PARALLEL_MIN}) pool(part, &job, count, align);" in source
    # (1024 elements never stream: no streaming blocks are written for them)
    assert source.count("#pragma omp simd") == 1 and "__builtin_ia32_movntdq256" not in source
    assert "omp parallel" not in source  # no OpenMP runtime: the pool's threads never spin
    assert 'simd("notinbranch")' in source  # exp from the vector math library
    long = TensorType((1 << 26,), ember.float32)
    source = cfuse.source_of(
        node.attrs["program"], node.attrs["outputs"], [long], [long] * len(node.inputs)
    )
    assert source.count("#pragma omp simd") == 3 and "__builtin_ia32_movntdq256" in source


@needs_cc
@pytest.mark.parametrize("threads", [1, 2, 3, 8])  # 8: more threads than cores
def test_long_loops_with_several_outputs_into_misaligned_memory(threads):
    from ember.kernels import cfuse, cpool

    def f(x, w):
        y = (x * w).tanh()
        return y, y > 0.25, (x - w).exp()

    n = (1 << 21) + 13
    rng = np.random.default_rng(1)
    x, w = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    _, fused = _fused(f, ember.tensor(x), ember.tensor(w))
    node = next(n for n in fused.nodes if n.kind == "call")
    run = cfuse.build(node)
    want = node.op.kernel(x, w, **node.attrs)  # the NumPy reference kernel
    before = cpool.get_num_threads()
    cpool.set_num_threads(threads)
    try:
        plain = run(x, w)
        # outputs written into memory that starts 4, 1 and 8 bytes past an alignment boundary
        out = [np.empty(n + 1, np.float32)[1:], np.empty(n + 1, np.bool_)[1:]]
        out.append(np.empty(n + 2, np.float32)[2:])
        into = run(x, w, out=out)
    finally:
        cpool.set_num_threads(before)
    assert all(a is b for a, b in zip(into, out))
    for got in (plain, into):
        for g, r in zip(got, want):
            np.testing.assert_allclose(g, r, rtol=4e-7, atol=1e-7)


@needs_cc
def test_a_fused_parameter_update_is_written_into_the_parameters_memory():
    model = ember.nn.Linear(300, 200)
    opt = ember.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    @ember.function
    def step(x):
        opt.zero_grad()
        (model(x) ** 2).mean().backward()
        opt.step()

    x = ember.randn(8, 300)
    step(x)  # creates the momentum buffers
    weight = model.weight._data
    before = weight.copy()
    eager = ember.nn.Linear(300, 200)
    eager.load_state_dict(model.state_dict())
    eager_opt = ember.optim.SGD(eager.parameters(), lr=0.1, momentum=0.9)
    eager_opt.state.update(
        {
            q: {k: v.clone() for k, v in opt.state[p].items()}
            for p, q in zip(model.parameters(), eager.parameters())
        }
    )
    step(x)
    eager_opt.zero_grad()
    (eager(x) ** 2).mean().backward()
    eager_opt.step()
    assert model.weight._data is weight and not np.array_equal(weight, before)  # same memory
    assert "out=(" in step.code  # the fused loop wrote the new values there
    np.testing.assert_allclose(
        model.weight.detach().numpy(), eager.weight.detach().numpy(), rtol=1e-6, atol=1e-7
    )


# ------------------------------------------------------------------------------ reductions


def test_a_group_may_end_in_reductions_over_its_trailing_axes():
    def f(x, w):
        d = x - x.mean(-1, keepdim=True)
        var = (d * d).sum(-1, keepdim=True)  # joins d's group: one pass computes d and var
        peak = (d * w).amax(-1)  # the same axes: a second reduction ending the same group
        return d / (var + 1), peak

    _, fused = _fused(f, ember.randn(4, 6), ember.randn(6))
    ops = _ops(fused)
    assert ops.count("fused_reduce") == 1
    node = next(n for n in fused.nodes if n.kind == "call" and n.op.name == "fused_reduce")
    names = [entry.op.name for entry in node.attrs["program"]]
    assert names[-2:] == ["sum", "max"] and "div" not in names  # nothing reads a reduction


def test_reductions_that_cannot_end_a_group_are_left_alone():
    def middle(x):
        return (x * 2).sum(1)  # between two kept axes (leading ones: test_fuse_leading.py)

    def partly_broadcast(x, c):
        return (x * c).sum((1, 2))  # c varies across axis 1 but not axis 2

    def integer(i):
        return (i * 2).sum(-1)

    _, fused = _fused(middle, ember.randn(3, 4, 5))
    assert "fused_reduce" not in _ops(fused)
    _, fused = _fused(partly_broadcast, ember.randn(2, 3, 4), ember.randn(3, 1))
    assert "fused_reduce" not in _ops(fused)
    _, fused = _fused(integer, ember.tensor([[1, 2], [3, 4]]))
    assert "fused_reduce" not in _ops(fused)


REDUCING = {
    "sum_sq": lambda x, w: ((x - w) * (x - w)).sum(-1, keepdim=True),
    "softmax_den": lambda x, w: (x - w).exp().sum(-1),
    "max_min": lambda x, w: ((x * w).amax(-1), (x + w).amin(-1, keepdim=True)),
    "all_axes": lambda x, w: (x * x + 1).sum(),  # (w varies across one axis only)
    "two_axes": lambda x, w: (x.tanh() * x).sum((-2, -1)),
}


@needs_cc
@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
@pytest.mark.parametrize("case", sorted(REDUCING))
def test_compiled_reductions_equal_numpy(case, dtype):
    fn = REDUCING[case]
    rng = np.random.default_rng(2)
    for shape in [(4, 8), (3, 5, 7), (2, 0, 3), (1, 1), (700, 520)]:  # the last: threads
        x = rng.standard_normal(shape).astype(dtype.np)
        w = rng.standard_normal(shape[-1]).astype(dtype.np)
        if x.size > 8:
            x.reshape(-1)[[1, 2, 3]] = [np.nan, np.inf, -np.inf]
        if case == "two_axes" and len(shape) < 3 or case == "max_min" and 0 in shape:
            continue  # (a 2-d input has no two trailing axes to spare; no max of nothing)
        compiled = ember.function(fn)
        got = compiled(ember.tensor(x), ember.tensor(w))
        assert "fused_reduce" in _ops(compiled.graph)
        want = fn(ember.tensor(x), ember.tensor(w))
        for g, r in zip(*(t if isinstance(t, tuple) else (t,) for t in (got, want))):
            # summed in NumPy's order: equal unless a term came from the vector math library
            eps = np.finfo(dtype.np).eps
            np.testing.assert_allclose(g.numpy(), r.numpy(), rtol=64 * eps, atol=64 * eps)


@needs_cc
def test_fused_sums_equal_numpy_bit_for_bit_when_their_terms_do():
    rng = np.random.default_rng(3)
    for rows, length in [(3, 5), (2, 128), (2, 129), (4, 1000), (1, 100003)]:
        x = rng.standard_normal((rows, length)).astype(np.float32)
        w = rng.standard_normal(length).astype(np.float32)
        compiled = ember.function(lambda x, w: (x * w - x).sum(-1))
        got = compiled(ember.tensor(x), ember.tensor(w)).numpy()
        np.testing.assert_array_equal(got, np.sum(x * w - x, axis=-1))


def test_groups_that_would_need_each_other_are_not_both_fused():
    # G -> clip (not fusable) -> H, and G's later member reads H: each group is convex on its
    # own, but two fused nodes would form a cycle. The smaller group is dissolved.
    def f(x, w):
        a = (x * 2).exp()  # group G starts
        c = a.clip(-100.0)  # not fusable: leaves G
        h = (w * 3).neg()  # group H starts
        h2 = h * c  # H reads G through the clip
        return (a + h).tanh() + 1, h2 + 1  # G grows with a read of H

    graph, fused = _fused(f, ember.randn(3, 4), ember.randn(3, 4))
    fused.verify()  # acyclic, every input defined
    x, w = np.ones((3, 4), np.float32), np.full((3, 4), 0.5, np.float32)
    for got, want in zip(interpreter.run(fused, [x, w]), interpreter.run(graph, [x, w])):
        np.testing.assert_array_equal(got, want)


def test_a_weighted_binary_cross_entropy_gradient_compiles():
    # the graph where the cycle above was first seen: the loss's backward
    rng = np.random.default_rng(0)
    p, t, w = (ember.tensor(rng.uniform(0.1, 0.9, (3, 4))) for _ in range(3))

    def loss(p, t, w):
        return ember.nn.functional.binary_cross_entropy(p, t, w, reduction="mean")

    got = ember.trace(ember.grad(loss, argnums=(0, 1)), p, t, w)(p, t, w)
    want = ember.grad(loss, argnums=(0, 1))(p, t, w)
    for g, e in zip(got, want):
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-12, atol=1e-14)


def test_groups_merge_through_a_node_that_reads_both():
    # an Adam-like update: the two moments start their own groups (each from an input), and
    # the parameter update reads both: one group, one pass over memory
    def f(p, g, m, v):
        m2 = m * 0.9 + g * 0.1
        v2 = v * 0.999 + g * g * 0.001
        return m2, v2, p - 0.01 * m2 / (v2.sqrt() + 1e-8)

    _, fused = _fused(f, *(ember.rand(4, 5) for _ in range(4)))
    assert _ops(fused) == ["fused_elementwise"]


def test_groups_do_not_merge_where_one_would_read_the_others_reduction():
    def f(x):
        a = x.exp()
        s = a.sum(axis=1, keepdims=True)  # ends a's group
        return (a / s) + a  # reads a's group twice, once through its reduction

    graph, fused = _fused(f, ember.randn(3, 5))
    for node in fused.nodes:  # no fused node reads its own reduction
        if node.kind == "call" and node.op.name.startswith("fused_"):
            assert not any(v.node is node for v in node.inputs)
