"""A fused reduction's elementwise result may take the buffer of a dying operand (ops/fused.py's
``overwrites_operand`` on ``fused_reduce``; plan/liveness.py, runtime/codegen.py): the C loop
reads each element of its operands before writing the same element of that result, in every
layout (a row loop, a column loop, both, a whole-tensor reduction split over threads, half
precision), so writing it over an operand gives the bits of a fresh array. The masked
gradient of a ReLU before a max pooling and its bias gradient (a CNN's backward) then hold one
activation-sized buffer, not two."""

import numpy as np
import pytest

import ember
from ember.kernels import ccompile, cfuse, cpool
from ember.plan import measure_peak
from ember.plan.liveness import liveness

pytestmark = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")


def _fused_reduce_node(fn, *args):
    graph = ember.function(fn).compile(*args).graph
    nodes = [n for n in graph.nodes if n.kind == "call" and n.op.name == "fused_reduce"]
    assert len(nodes) == 1, [n.op.name for n in graph.nodes if n.kind == "call"]
    return nodes[0]


def _masked_and(reduce):
    """A function of (mask, g) returning an elementwise result and a reduction of it (one
    fused_reduce node)."""

    def fn(m, g):
        t = ember.where(m, g * 1.5, 0.0)
        return t, reduce(t)

    return fn


CASES = {  # name: (function of (mask, g), shape of g)
    "leading and trailing": (_masked_and(lambda t: t.sum((0, 2, 3))), (16, 8, 30, 30)),
    "trailing rows": (_masked_and(lambda t: t.sum(-1)), (64, 3000)),
    "leading columns": (_masked_and(lambda t: t.sum(0)), (3000, 64)),
    "whole tensor": (_masked_and(lambda t: t.sum()), (1 << 19,)),
    "maximum": (_masked_and(lambda t: t.amax(-1)), (300, 500)),
}


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.bfloat16], ids=str)
@pytest.mark.parametrize("case", CASES, ids=str)
def test_a_fused_reduction_written_over_its_operand_equals_a_fresh_result(case, dtype, threads):
    fn, shape = CASES[case]
    rng = np.random.default_rng(0)
    g = ember.tensor(rng.standard_normal(shape)).to(dtype)
    m = ember.tensor(rng.random(shape) < 0.6)
    node = _fused_reduce_node(fn, m, g)
    run = cfuse.build(node)
    saved = cpool.get_num_threads()
    cpool.set_num_threads(threads)
    try:
        # (the node's operands in its order: the mask is the bool one)
        args = [m.numpy() if v.type.dtype is ember.bool else g.numpy() for v in node.inputs]
        at = next(i for i, v in enumerate(node.inputs) if v.type.dtype is not ember.bool)
        fresh = run(*args)
        operand = args[at] = args[at].copy()
        outs = [None] * len(fresh)
        outs[0] = operand  # the elementwise result written over the operand it reads
        over = run(*args, out=tuple(outs))
    finally:
        cpool.set_num_threads(saved)
    assert over[0] is operand
    for a, b in zip(fresh, over):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()


def test_the_cnn_backward_holds_one_activation_sized_buffer_at_the_pooling(bare_executors):
    # conv -> leaky ReLU -> max pool, backward: the pooling's gradient (pool_scatter) dies in
    # the fused loop that scales it by the activation's slope and sums the bias gradient, which
    # writes over it (a ReLU's mask moves before the scatter instead: test_scatter_masks.py)
    conv = ember.nn.Conv2d(3, 16, 3, padding=1)
    opt = ember.optim.SGD(conv.parameters(), lr=0.01)

    def step(x):
        opt.zero_grad()
        activation = ember.nn.functional.leaky_relu(conv(x), 0.1)
        loss = ember.nn.functional.max_pool2d(activation, 2).square().sum()
        loss.backward()
        opt.step()
        return loss

    fn = ember.function(step)
    x = ember.randn(8, 3, 32, 32)
    program = fn.compile(x)
    graph = program.graph
    fused = [n for n in graph.nodes if n.kind == "call" and n.op.name == "fused_reduce"]
    masked = [n for n in fused if any(v.node.op.name == "pool_scatter" for v in n.inputs)]
    assert masked, str(graph)
    live = liveness(graph)
    for node in masked:  # the masked gradient is written over the pooling's gradient
        scattered = next(v for v in node.inputs if v.node.op.name == "pool_scatter")
        assert live.buffer_of[id(node.outputs[0])] is live.buffer_of[id(scattered)]
    fn(x)  # (the first calls compile and fill the kernels' scratch)
    fn(x)
    measured = measure_peak(fn, x)
    assert abs(measured - program.memory_plan.peak_bytes) <= 0.05 * measured
    # the same step eagerly, from the same weights: the same loss and update
    weight, bias = conv.weight.detach().clone(), conv.bias.detach().clone()
    loss = fn(x)
    got = conv.weight.detach().clone()
    with ember.no_grad():
        conv.weight.copy_(weight)
        conv.bias.copy_(bias)
    np.testing.assert_allclose(step(x).item(), loss.item(), rtol=1e-5)
    np.testing.assert_allclose(
        conv.weight.detach().numpy(), got.detach().numpy(), rtol=1e-5, atol=1e-6
    )
