"""The collective ops' ``effect`` rule (ops/_rules.py) as the passes read it, on a world of one
(no process group needed): a collective is never folded, merged, dropped, or moved past another
collective, and graphs holding one run on generated code without being timed."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.graph.rewrite import has_effects, is_pure, ordered_predecessors
from ember.ops._registry import apply
from ember.ops.collective import ALL_REDUCE, ALL_REDUCE_START, ALL_REDUCE_WAIT
from ember.plan.schedule import memory_aware_order

ONE = {"group": "world", "size": 1}


def _reduce(x, op="sum"):
    return apply(ALL_REDUCE, x, reduce_op=op, **ONE)


def _collectives(graph) -> list:
    return [n for n in graph.nodes if n.kind == "call" and n.op.effect is not None]


def test_fold_cse_and_dce_keep_collectives():
    def f(x):
        c = _reduce(ember.ones(3) * 2)  # constant operand: folding would run it at compile time
        a, b = _reduce(x), _reduce(x)  # equal calls: CSE would merge them
        _reduce(x + 1)  # unused: DCE would drop it
        return a + b + c

    fn = ember.function(f, opt_level=3)
    out = fn(ember.tensor([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(out.numpy(), [4.0, 6.0, 8.0])
    collectives = _collectives(fn.graph)
    assert len(collectives) == 4 and not any(is_pure(n) for n in collectives)
    assert has_effects(fn.graph)
    choice = fn.parallel_plan  # generated code, never timed on made-up inputs
    assert choice.chosen == "generated code" and not choice.measured
    assert "never timed" in str(choice) or choice.why == "no C compiler"


def test_the_scheduler_keeps_the_order_of_collectives():
    # greedy by memory, the small branch's collective would run first; the rule keeps the order
    def f(x, y):
        big = _reduce(x.reshape(1, -1).expand(64, 16).exp())
        small = _reduce(y * 2)
        return big.sum() + small.sum()

    traced = ember.trace(f, ember.ones(16), ember.ones(2), opt_level=0)
    graph = traced.captured_graph
    recorded = [n for n in _collectives(graph)]
    order = memory_aware_order(graph)
    assert [n for n in order if n in recorded] == recorded
    assert ordered_predecessors(graph.nodes) == {id(recorded[1]): recorded[0]}
    # without the rule's edge the greedy order would have swapped them: check the premise
    mul = next(n for n in graph.nodes if n.kind == "call" and n.op.name == "mul")
    exp = next(n for n in graph.nodes if n.kind == "call" and n.op.name == "exp")
    assert order.index(mul) < order.index(exp)


def test_start_and_wait_world_of_one_and_gradient():
    x = ember.tensor([1.0, -2.0], requires_grad=True)
    buffer, handle = apply(ALL_REDUCE_START, x, reduce_op="avg", **ONE)
    y = apply(ALL_REDUCE_WAIT, buffer, handle, reduce_op="avg", **ONE)
    assert int(handle.item()) < 0  # a world of one's handle: nothing in flight
    (y * 3).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])
    with pytest.raises(ember.EmberError, match="no gradient"):
        _reduce(ember.tensor([1.0], requires_grad=True), "max").sum().backward()
    with pytest.raises(ember.EmberError, match="reduce_op"):
        apply(ALL_REDUCE, x, reduce_op="mean", **ONE)


def test_several_ranks_without_ember_distributed_say_so(monkeypatch):
    from ember.ops import collective

    monkeypatch.setattr(collective, "_backend", [None])
    with pytest.raises(ember.EmberError, match="needs ember.distributed"):
        apply(ALL_REDUCE, ember.ones(2), reduce_op="sum", group="world", size=2)
