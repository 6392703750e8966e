"""log_softmax's ``dtype`` (a 16-bit input read as float32: ops/softmax.py,
kernels/csoftmax.py), gather's one-hot adjoint in graphs (ops/gather.py) and the per-reader
copies of broadcast expansions (transforms/fuse_expand.py), each against the form it
replaces, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.errors import DTypeError
from ember.kernels import csoftmax
from ember.ops._registry import apply
from ember.ops.softmax import LOG_SOFTMAX

BF16 = np.dtype(ember.bfloat16.np)


def _logits(shape, seed=0):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 6).astype(BF16)
    x.flat[5] = -np.inf
    return x


@pytest.mark.parametrize("shape, axis", [((257, 1000), 1), ((3, 40, 7), 1), ((5, 3), -1)])
def test_the_widened_kernel_is_the_float32_kernel_on_the_copy(shape, axis):
    x = _logits(shape)
    got = csoftmax.log_softmax(x, axis, np.float32)
    if got is None:
        pytest.skip("no C compiler")
    want = csoftmax.log_softmax(x.astype(np.float32), axis)
    assert got.dtype == np.float32
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_log_softmax_dtype_is_the_cast_then_the_op_with_its_gradient():
    x = ember.tensor(_logits((6, 9)), requires_grad=True)
    y = apply(LOG_SOFTMAX, x, axis=1, dtype=ember.float32)
    want_x = ember.tensor(_logits((6, 9)), requires_grad=True)
    want = apply(LOG_SOFTMAX, want_x.to(ember.float32), axis=1)
    assert y.dtype is ember.float32
    assert np.array_equal(y.detach().numpy(), want.detach().numpy())
    g = np.random.default_rng(1).standard_normal((6, 9)).astype(np.float32)
    y.backward(ember.tensor(g))
    want.backward(ember.tensor(g))
    assert x.grad.dtype is ember.bfloat16
    assert np.array_equal(x.grad.numpy(), want_x.grad.numpy())
    with pytest.raises(DTypeError, match="log_softmax"):
        apply(LOG_SOFTMAX, ember.zeros(3), axis=0, dtype=ember.float64)


def test_the_graph_reads_the_logits_in_16_bits(bare_executors):
    def loss(z, y):
        return ember.nn.functional.cross_entropy(z.to(ember.float32), y)

    z = ember.tensor(_logits((64, 300)))
    y = ember.tensor(np.random.default_rng(2).integers(0, 300, 64))
    fn = ember.function(loss)
    got = fn(z, y)
    graph = fn.compile(z, y).graph
    (node,) = [n for n in graph.nodes if n.target == "log_softmax"]
    assert node.inputs[0].dtype is ember.bfloat16 and node.attrs["dtype"] is ember.float32
    # (eagerly cross_entropy is one C op computing in double: the graph's composite at O0)
    want = ember.function(loss, opt_level=0)(z, y)
    assert np.array_equal(got.numpy(), want.numpy())


def test_the_one_hot_adjoint_is_the_scatter_bit_for_bit(bare_executors):
    """Negative indices count from the end; a -0.0 gradient becomes +0.0 as the scatter's sum
    of zeros makes it; rows of another float dtype too."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((16, 37)).astype(np.float32)
    index = rng.integers(-37, 37, (16, 1))
    g = rng.standard_normal((16, 1)).astype(np.float32)
    g[0, 0], g[1, 0] = -0.0, np.nan

    def grad(x, index, g):
        x = x.detach().requires_grad_(True)
        picked = ember.gather(x, 1, index)
        (dx,) = ember.autograd.grad(picked, x, g)
        return dx

    args = (ember.tensor(x), ember.tensor(index), ember.tensor(g))
    fn = ember.function(grad)
    got = fn(*args).numpy()
    assert not [n for n in fn.compile(*args).graph.nodes if n.target == "scatter_add"]
    want = grad(*args).numpy()  # eagerly: the scatter
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_an_expansion_read_by_two_loops_is_never_stored(bare_executors):
    """``where(positions == t, g, 0)`` read by a row sum and by the loop after it: each loop
    computes it; no value of the full shape but the result is stored."""

    def f(t, g, z):
        onehot = ember.where(ember.arange(500.0) == t, g, 0.0)
        return z - onehot * onehot.sum(1, keepdim=True)

    rng = np.random.default_rng(4)
    t = ember.tensor(rng.integers(0, 500, (128, 1)).astype(np.float32))
    g = ember.tensor(rng.standard_normal((128, 1)).astype(np.float32))
    z = ember.tensor(rng.standard_normal((128, 500)).astype(np.float32))
    fn = ember.function(f)
    got = fn(t, g, z)
    graph = fn.compile(t, g, z).graph
    full = [v for n in graph.call_nodes() for v in n.outputs if tuple(v.type.shape) == (128, 500)]
    assert len(full) == 1, str(graph)
    assert np.array_equal(got.numpy(), f(t, g, z).numpy())
