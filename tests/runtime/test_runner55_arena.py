"""The C graph runner's arena (runtime/cgraph_memory.py): a checkpointed training step's
intermediate values share bytes as generated code's order frees them, so checkpointing lowers
the runner's held memory as it lowers generated code's plan; whatever order the threads claim
steps in (a priority that would run every recomputation first), the run waits where sharing
needs it and gives generated code's bits."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import ember
import ember.nn as nn
from ember.kernels import ccompile
from ember.plan.memory import plan_memory
from ember.runtime import cgraph
from ember.runtime.cgraph_memory import _weight
from ember.runtime.codegen import compile_graph
from ember.utils.checkpoint import checkpoint

needs_c = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")


@functools.cache
def _step_graph(ck: bool, blocks=4, d=32, batch=128):
    ember.manual_seed(0)
    layers = nn.ModuleList(
        nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d)) for _ in range(blocks)
    )

    def step(x):
        layers.zero_grad()
        h = x
        for b in layers:
            h = h + (checkpoint(b, h, use_reentrant=False) if ck else b(h))
        loss = (h * h).mean()
        loss.backward()
        return loss, [p.grad for p in layers.parameters()]

    x = ember.randn(batch, d)
    fn = ember.function(step, executor="codegen")
    fn(x)
    compiled = fn.compile(x)
    return compiled.graph, compiled.fed_arrays(x)


def _earliest_first(graph) -> list:
    """Call positions by depth from the inputs: every recomputation (its saved inputs ready
    early) ahead of the backward pass that needs it."""
    depth: dict = {}
    calls = []
    for p, node in enumerate(graph.nodes):
        depth[id(node)] = 1 + max((depth.get(id(v.node), 0) for v in node.inputs), default=0)
        if node.kind == "call":
            calls.append(p)
    return sorted(calls, key=lambda p: (depth[id(graph.nodes[p])], p))


@needs_c
def test_checkpointing_lowers_the_runner_arena_as_generated_codes_plan():
    sizes = {}
    for ck in (False, True):
        graph, arrays = _step_graph(ck)
        steps = cgraph.c_steps(graph)
        assert steps is not None, str(graph)
        program = cgraph.CGraphProgram(graph, steps, None, 1)
        # the runner holds its arena between calls, and the outputs (new arrays each run)
        # beside it where generated code has freed most temporaries by then: at most the
        # outputs' bytes over generated code's peak (and a few percent: views it copies)
        runner = plan_memory(graph, runner_bytes=program.held_bytes).peak_bytes
        generated = plan_memory(graph).peak_bytes
        outputs = sum(a.nbytes for a in program(*arrays))
        assert runner <= 1.03 * generated + outputs
        sizes[ck] = program._arena.size
        want = compile_graph(graph)(*arrays)
        for got, w in zip(program(*arrays), want):
            assert np.array_equal(got, w)
    assert sizes[True] <= 0.6 * sizes[False], sizes


@needs_c
@pytest.mark.parametrize("threads", [1, 2])
def test_any_claiming_order_waits_for_shared_bytes_and_gives_the_same_bits(threads):
    graph, arrays = _step_graph(True)
    steps = cgraph.c_steps(graph)
    hoisted = cgraph.CGraphProgram(graph, steps, _earliest_first(graph), threads)
    plain = cgraph.CGraphProgram(graph, cgraph.c_steps(graph), None, threads)
    assert hoisted._arena.size == plain._arena.size
    assert hoisted._arena.edges  # (the recomputations wait for the bytes they take)
    want = compile_graph(graph)(*arrays)
    for _ in range(10):
        for got, w in zip(hoisted(*arrays), want):
            assert np.array_equal(got, w)


@needs_c
@pytest.mark.parametrize("seed", range(6))
def test_random_branching_graphs_on_two_threads(seed):
    rng = np.random.default_rng(seed)
    n_in, shape = 3, (int(rng.integers(64, 4096)),)
    ops = [ember.add, ember.mul, ember.sub, ember.maximum]

    def program(*xs):
        values = list(xs)
        for _ in range(int(rng.integers(8, 30))):
            a, b = rng.choice(len(values), 2)
            op = ops[int(rng.integers(len(ops)))]
            values.append(op(values[a], values[b]) * 0.5)
        picks = rng.choice(len(values) - n_in, 2, replace=False) + n_in
        return [values[int(i)] for i in picks]

    arrays = [rng.standard_normal(shape).astype(np.float32) for _ in range(n_in)]
    graph = ember.trace(program, *[ember.tensor(a) for a in arrays]).graph
    steps = cgraph.c_steps(graph)
    assert steps is not None, str(graph)
    order = _earliest_first(graph)
    for priority in (None, order, order[::-1]):  # (any preference: a step runs once ready)
        run = cgraph.CGraphProgram(graph, cgraph.c_steps(graph), priority, 2)
        want = compile_graph(graph)(*arrays)
        for _ in range(5):
            assert all(np.array_equal(g, w) for g, w in zip(run(*arrays), want))
    # on two threads, the arena's orderings never lengthen the longest path past the work
    # shared over the threads
    calls = [n for n in graph.nodes if n.kind == "call"]
    weights = [_weight(n) for n in calls]
    plain = _longest_path(calls, weights, set())
    ordered = _longest_path(calls, weights, run._arena.edges)
    assert ordered <= max(plain, sum(weights) / 2) * (1 + 1e-9)


def _longest_path(calls, weights, edges) -> float:
    position = {id(n): p for p, n in enumerate(calls)}
    finish = []
    for p, node in enumerate(calls):
        before = {position[id(v.node)] for v in node.inputs if id(v.node) in position}
        before |= {t for t, s in edges if s == p}
        finish.append(max((finish[q] for q in before), default=0.0) + weights[p])
    return max(finish)


@needs_c
@pytest.mark.parametrize("threads", [1, 2])
def test_a_loop_writing_over_a_dying_operand_waits_for_its_other_readers(threads):
    # (RotaryEmbedding's rotation: two fused loops read both halves; the second takes the
    # first half's buffer for its result, and a priority order that ran it before the first
    # loop gave the first loop overwritten values)
    rng = np.random.default_rng(0)
    x, cos, sin = (
        rng.standard_normal(s).astype(np.float32)
        for s in ((2, 4, 3, 8), (2, 3, 1, 4), (2, 3, 1, 4))
    )

    def rotate(x, cos, sin):
        x = x.permute(0, 2, 1, 3) + 0.0
        a, b = x[..., :4] * 1.0, x[..., 4:] * 1.0
        return ember.cat([cos * a - sin * b, sin * a + cos * b], -1)

    fn = ember.function(rotate, executor="codegen")
    args = [ember.tensor(v) for v in (x, cos, sin)]
    fn(*args)
    compiled = fn.compile(*args)
    graph, arrays = compiled.graph, compiled.fed_arrays(*args)
    want = compile_graph(graph)(*arrays)
    order = _earliest_first(graph)
    for priority in (None, order, order[::-1]):
        run = cgraph.CGraphProgram(graph, cgraph.c_steps(graph), priority, threads)
        for _ in range(3):
            assert all(np.array_equal(g, w) for g, w in zip(run(*arrays), want))
