"""Suite-wide checks.

Every graph that generated code runs anywhere in the suite is also run by the reference
interpreter on copies of the same inputs, and the two must give identical outputs (the
interpreter is the specification of every faster executor). Graphs that draw random numbers are
left out: running them twice would advance the generators twice.
"""

import numpy as np
import pytest

from ember.graph import Graph
from ember.runtime import codegen, interpreter


def _draws_random_numbers(graph) -> bool:
    # a cond branch or loop body (a graph-valued attribute) may draw too
    return any(
        n.kind == "call"
        and (
            n.op.kind == "random"
            or any(isinstance(a, Graph) and _draws_random_numbers(a) for a in n.attrs.values())
        )
        for n in graph.nodes
    )


@pytest.fixture(autouse=True)
def generated_code_equals_the_interpreter(monkeypatch):
    original = codegen.CompiledGraph.__call__

    def checked(self, *arrays):
        if _draws_random_numbers(self.graph):
            return original(self, *arrays)
        # the interpreter first, on copies: generated code may update inputs in place
        expected = interpreter.run(self.graph, [np.array(a, copy=True) for a in arrays])
        results = original(self, *arrays)
        assert len(results) == len(expected)
        for i, (got, want) in enumerate(zip(results, expected)):
            np.testing.assert_array_equal(
                np.asarray(got), want, err_msg=f"graph {self.graph.name}: output {i}"
            )
        return results

    monkeypatch.setattr(codegen.CompiledGraph, "__call__", checked)
    yield
