"""Arena placement (offsets over lifetimes) and planned execution (``executor="arena"``)."""

import numpy as np
import pytest

import ember
from ember.models import example_step
from ember.plan import measure_peak, plan_memory
from ember.plan.arena import ALIGNMENT, place
from ember.plan.liveness import Buffer


def _no_two_live_buffers_share_bytes(buffers, arena):
    placed = [b for b in buffers if b.index in arena.offsets]
    for i, a in enumerate(placed):
        lo_a = arena.offsets[a.index]
        assert lo_a % ALIGNMENT == 0 and lo_a + a.nbytes <= arena.size
        for b in placed[i + 1 :]:
            if a.start <= b.end and b.start <= a.end:  # alive at the same time
                lo_b = arena.offsets[b.index]
                assert lo_a + a.nbytes <= lo_b or lo_b + b.nbytes <= lo_a, (a.name, b.name)


def test_best_fit_reuses_the_gap_of_a_dead_buffer():
    # a (0-1) and c (2-3) never live together: c takes a's bytes; b (0-3) sits beside them
    buffers = [
        Buffer(0, 4096, None, start=0, end=1),
        Buffer(1, 1024, None, start=0, end=3),
        Buffer(2, 4096, None, start=2, end=3),
    ]
    arena = place(buffers)
    assert arena.offsets[0] == arena.offsets[2]
    assert arena.size == arena.live_peak == 5120 and arena.total == 9216
    assert arena.fragmentation == 0.0


def test_a_graph_runs_in_its_arena_with_the_same_results():
    with ember.Graph() as g:
        x = ember.placeholder((64, 128), name="x")
        w = ember.placeholder((128, 128), name="w")
        h = (x @ w).tanh() * 2.0 + x
        y = (h @ w).exp().sum(1)
    g.set_outputs([y.value if hasattr(y, "value") else g.nodes[-1].outputs[0]])
    from ember.runtime.codegen import compile_graph

    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((64, 128)).astype(np.float32) * 0.1]
    arrays.append(rng.standard_normal((128, 128)).astype(np.float32) * 0.1)
    plain, planned = compile_graph(g), compile_graph(g, arena=True)
    assert planned.arena is not None and planned.arena_bytes >= planned.arena.size > 0
    assert "out=s_" in planned.source  # kernels write into their slots
    for _ in range(2):  # the second call reuses the slots the first one wrote
        np.testing.assert_allclose(planned(*arrays)[0], plain(*arrays)[0], rtol=1e-6)
    assert plan_memory(g).arena.size >= planned.arena.size


@pytest.mark.parametrize("name", ["mlp", "cnn", "gpt"])
def test_arenas_and_planned_execution_of_the_training_steps(name, bare_executors):  # noqa: F811
    runs = {}
    for executor in ("codegen", "arena"):
        example = example_step(name)
        example.step()
        fn = ember.function(example.step, executor=executor)
        plan = fn.compile().memory_plan
        if executor == "codegen":  # the arena of every buffer allocated during the call
            arena = plan.arena
            _no_two_live_buffers_share_bytes(plan.buffers, arena)
            # never below what is alive at once; dead buffers' bytes are shared
            assert arena.live_peak <= arena.size < arena.total
            assert plan.arena_bytes == arena.size and len(plan.offsets) == len(arena.offsets)
        fn()
        runs[executor] = example
        measured = measure_peak(fn)  # a second step
        if executor == "arena":
            assert abs(plan.peak_bytes - measured) <= 0.05 * measured, (plan.peak_bytes, measured)
    for p, q in zip(runs["arena"].model.parameters(), runs["codegen"].model.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6)
