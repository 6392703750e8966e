"""runtime/executors.py: every executor prepares a graph into a program with one interface, and
an unknown executor name fails with the valid ones listed."""

import numpy as np
import pytest

import ember
from ember.graph import interpreter
from ember.runtime.executors import EXECUTORS, get_executor


def _graph():
    def f(x, w):
        return (x @ w).relu().sum(axis=1) * 2.0

    return ember.trace(f, ember.randn(4, 3), ember.randn(3, 5), opt_level=0).graph


def test_the_public_names_are_registered_in_order():
    assert tuple(EXECUTORS) == ("codegen", "interpreter", "parallel", "arena", "auto")
    assert all(get_executor(name).name == name for name in EXECUTORS)


@pytest.mark.parametrize("name", list(EXECUTORS))
def test_every_program_runs_like_the_interpreter_and_shows_its_parts(name):
    graph = _graph()
    arrays = [np.random.default_rng(0).standard_normal(v.type.shape) for v in graph.inputs]
    arrays = [a.astype(v.type.dtype.np) for a, v in zip(arrays, graph.inputs)]
    program = get_executor(name).prepare(graph)
    for got, want in zip(program(*arrays), interpreter.run(graph, arrays)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert program.graph is graph and "def " in program.source
    assert isinstance(program.in_place, dict) and program.arena_bytes >= 0
    assert (program.arena is not None) == (name == "arena")
    assert get_executor(name).parallel_plan(program) is not None


@pytest.mark.parametrize(
    "make",
    [
        lambda: get_executor("fast"),
        lambda: ember.trace(lambda x: x + 1, ember.ones(2), executor="fast"),
        lambda: ember.function(lambda x: x + 1, executor="fast"),
    ],
)
def test_an_unknown_executor_lists_the_valid_names(make):
    with pytest.raises(
        ValueError, match="'codegen', 'interpreter', 'parallel', 'arena', 'auto'.*'fast'"
    ):
        make()
