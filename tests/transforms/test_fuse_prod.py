"""``prod`` as a fused reduction: its `ReductionRule` in ops/reduce.py is all it took (the fusion
pass and the C generators read the rule). Compiled loops over trailing axes, leading axes, both,
and the narrow column loop's fixed row blocks, against NumPy's product within the rounding a
product allows; NaN, infinities, zeros and empty reductions exactly."""

import numpy as np
import pytest

import ember
from ember.kernels import ccompile, cpool
from ember.transforms import DCE, optimize
from ember.transforms.fuse import FUSE

pytestmark = pytest.mark.skipif(
    not ccompile.compiler_available(), reason="no C compiler: fused kernels fall back to NumPy"
)


def _terms(shape, dtype, seed=0, spread=0.3):
    """Factors near 1 in magnitude (their logarithms uniform in +-``spread``), of either sign:
    long products neither overflow nor vanish."""
    rng = np.random.default_rng(seed)
    magnitude = np.exp(rng.uniform(-spread, spread, shape))
    return (magnitude * rng.choice([-1.0, 1.0], shape)).astype(dtype)


def _bound(terms, want, axes, keepdims):
    """How far two products of the same n terms, taken in different orders, may be apart: each
    of the n - 1 multiplications rounds by at most half an ulp (u = eps / 2), so each result is
    within (n - 1) u |exact| (to first order) of the exact product, and the two within twice
    that; |exact| is the product of the magnitudes (in float64: no overflow), plus subnormal
    slack."""
    n = terms.size // max(want.size, 1)
    exact = np.prod(np.abs(terms.astype(np.float64)), axis=axes, keepdims=keepdims)
    eps = np.finfo(terms.dtype).eps
    return 1.01 * max(n - 1, 0) * eps * exact + n * np.finfo(terms.dtype).smallest_subnormal


def _fused_graph(fn, *arrays):
    graph = ember.trace(fn, *map(ember.tensor, arrays), opt_level=0).graph
    fused, _ = optimize(graph.copy(), passes=[FUSE, DCE], check=list(arrays))
    return fused


def _compiled(fn, *arrays):
    """``fn`` compiled at O3 on ``arrays``, its results, and the ops in its graph."""
    compiled = ember.function(fn)
    results = compiled(*map(ember.tensor, arrays))
    results = results if isinstance(results, tuple) else (results,)
    ops = [n.op.name for n in compiled.graph.nodes if n.kind == "call"]
    return [r.numpy() for r in results], ops


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "shape, axes, keepdims",
    [
        ((64, 300), (1,), False),  # a row loop: each row's terms in SIMD lanes
        ((7, 129), (1,), True),
        ((300, 64), (0,), False),  # a column loop: rows taken in order into each output
        ((300, 3000), (0,), True),  # wide: its columns shared among threads
        ((8, 6, 10, 12), (0, 2, 3), False),  # a leading and a trailing block
    ],
)
def test_a_fused_product_is_within_rounding_of_numpys(dtype, shape, axes, keepdims):
    # a factor per kept position (the loop reads it once per reduced block), taken as many
    # times as the block has elements: closer to 1
    x = _terms(shape, dtype, 1)
    w = _terms(tuple(1 if a in axes else d for a, d in enumerate(shape))[1:], dtype, 2, 0.005)

    def f(x, w):
        return (x * w).prod(axes, keepdim=keepdims)

    fused = _fused_graph(f, x, w)
    node = next(n for n in fused.nodes if n.kind == "call")
    assert node.op.name == "fused_reduce" and node.attrs["program"][-1].op.name == "prod"
    (got,), ops = _compiled(f, x, w)
    assert ops == ["fused_reduce"]
    terms = x * w
    want = np.prod(terms, axis=axes, keepdims=keepdims)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert (np.abs(got - want) <= _bound(terms, want, axes, keepdims)).all()
    assert np.array_equal(np.sign(got), np.sign(want))


def test_a_product_and_a_sum_end_one_loop():
    x, w = _terms((50, 40), np.float32, 3), _terms((40,), np.float32, 4)
    (total, product), ops = _compiled(lambda x, w: ((x * w).sum(-1), (x * w).prod(-1)), x, w)
    assert ops == ["fused_reduce"]  # one pass: a pairwise sum and a product per row
    np.testing.assert_array_equal(total, np.sum(x * w, axis=-1))  # the sum keeps NumPy's bits
    want = np.prod(x * w, axis=-1)
    assert (np.abs(product - want) <= _bound(x * w, want, (1,), False)).all()


@pytest.mark.parametrize("axis", [0, 1])
def test_nan_infinities_and_zeros_propagate_as_in_numpy(axis):
    x = _terms((6, 40), np.float64, 5)
    x[0, 3] = np.nan  # NaN wins
    x[1, 7], x[1, 9] = np.inf, 0.0  # inf * 0: NaN
    x[2, 11] = -np.inf  # a signed infinity
    x[3, 13] = 0.0  # a signed zero
    x[4, :] = 1e200  # overflow to inf
    (got,), ops = _compiled(lambda x: (x * 2.0).prod(axis), x)
    assert ops == ["fused_reduce"]
    want = np.prod(x * 2.0, axis=axis)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    special = ~np.isfinite(want) | (want == 0)
    np.testing.assert_array_equal(got[special], want[special])  # signs included
    np.testing.assert_array_equal(np.signbit(got[special]), np.signbit(want[special]))


def test_an_empty_product_is_one():
    x = np.zeros((3, 0), np.float32)
    (got,), ops = _compiled(lambda x: (x * 2.0).prod(1), x)
    assert ops == ["fused_reduce"]
    np.testing.assert_array_equal(got, np.ones(3, np.float32))


def test_narrow_column_loops_multiply_their_row_blocks_the_same_whatever_the_threads():
    from ember.kernels import creduce

    x, w = _terms((4096, 80), np.float32, 6, 0.1), _terms((80,), np.float32, 7, 0.001)
    fn = ember.function(lambda x, w: (x * w).prod(0))
    before = cpool.get_num_threads()
    try:
        results = []
        for threads in (1, 2, 3):
            cpool.set_num_threads(threads)
            results.append(fn(ember.tensor(x), ember.tensor(w)).numpy())
    finally:
        cpool.set_num_threads(before)
    terms, blocks = x * w, creduce.ROW_BLOCKS
    edges = [b * len(x) // blocks for b in range(blocks + 1)]
    want = np.prod(terms[edges[0] : edges[1]], axis=0)  # each block in row order (NumPy's)
    for b in range(1, blocks):
        want = want * np.prod(terms[edges[b] : edges[b + 1]], axis=0)  # then block by block
    for got in results:  # the same bits whatever the thread count: the blocks are fixed
        np.testing.assert_array_equal(got, want)


def test_a_group_that_absorbed_a_broadcast_keeps_its_shape_in_every_implementation():
    # grad of sum((z - t)**2 / v) with v (2, 1): ones(1, 1) broadcast to (2, 3), divided by v,
    # fuses into a loop over (2, 3) whose operands are (1, 1) and (2, 1); the NumPy kernel of
    # the fused node (the interpreter's) used to return (2, 1). conftest checks every fused
    # node's C loop against that kernel, so this fails there if they disagree.
    rng = np.random.default_rng(0)
    t = ember.tensor(rng.random((2, 3)))
    v = ember.tensor(rng.random((2, 1)) + 1)
    z = ember.tensor(rng.random((2, 3)))
    f = ember.function(lambda z: ember.grad(lambda z: ((z - t) ** 2 / v).sum())(z))
    np.testing.assert_allclose(f(z).numpy(), (2 * (z - t) / v).numpy(), rtol=1e-12)
    graph = f.graph
    assert any(n.kind == "call" and n.op.fused is not None for n in graph.nodes)
    from ember.graph import interpreter

    (out,) = interpreter.run(graph, [z.numpy(), t.numpy(), v.numpy()])
    np.testing.assert_allclose(out, (2 * (z - t) / v).numpy(), rtol=1e-12)


def test_a_fused_node_whose_program_does_not_broadcast_to_its_stated_shape_is_refused():
    from ember.graph import Graph
    from ember.ops import REGISTRY
    from ember.ops.program import Input, Instr, Program
    from ember.types import TensorType

    g = Graph()
    a = g.add_input(TensorType((2, 1), ember.float64))
    program = Program((Instr(REGISTRY["neg"], (Input(0),)),))
    with pytest.raises(ember.EmberError, match="does not broadcast"):
        g.add_call(
            REGISTRY["fused_elementwise"],
            [a],
            {
                "program": program,
                "outputs": (0,),
                "out_types": (TensorType((5, 3), ember.float64),),
            },
        )
