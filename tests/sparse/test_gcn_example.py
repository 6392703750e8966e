"""examples/gcn.py, small: the GCN learns the communities from the graph (well above the same
network without edges), and its ember.function step computes what the eager step computes;
its normalized adjacency equals D^-1/2 (A + I) D^-1/2 computed densely."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import ember

_PATH = Path(__file__).resolve().parents[2] / "examples" / "gcn.py"


@pytest.fixture(scope="module")
def gcn():
    spec = importlib.util.spec_from_file_location("gcn_example", _PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_normalized_adjacency_is_the_dense_formula(gcn):
    rng = np.random.default_rng(0)
    labels, edges = gcn.sbm_graph(60, 3, 0.3, 0.02, rng)
    dense = np.zeros((60, 60))
    dense[edges[0], edges[1]] = dense[edges[1], edges[0]] = 1
    assert not np.any(np.diag(dense))
    dense += np.eye(60)
    scale = 1 / np.sqrt(dense.sum(1))
    want = scale[:, None] * dense * scale[None, :]
    got = gcn.normalized_adjacency(edges, 60)
    assert got.is_coalesced()
    np.testing.assert_allclose(got.to_dense().numpy(), want, rtol=1e-6)


def test_small_gcn_trains_eagerly_and_captured(gcn):
    problem = gcn.make_problem(nodes=400, communities=4, degree_in=5.0, degree_out=1.0, seed=1)
    eager = gcn.train(problem, epochs=40)
    captured = gcn.train(problem, epochs=40, capture=True)
    alone = gcn.train(dict(problem, adjacency=gcn.identity_adjacency(400)), epochs=40)
    assert eager[0] >= 0.85, eager
    assert eager[0] > alone[0] + 0.3, (eager, alone)
    assert captured[0] == pytest.approx(eager[0], abs=0.01)
    np.testing.assert_allclose(captured[2], eager[2], rtol=1e-4)
    assert isinstance(problem["adjacency"], ember.sparse.SparseTensor)
