"""Regressions of the bugs hunt59's programs found, each against PyTorch."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch", reason="PyTorch (the reference peer) is not installed")


def test_backward_again_through_nodes_that_saved_nothing():
    """A node that saved no tensor runs again without retain_graph, as PyTorch's (first-order
    MAML: autograd.grad freed the inner graph, and the query loss's backward runs through the
    fast weights' SubBackward0 again); one that saved a tensor still refuses."""
    for lib in (torch, ember):
        x = lib.ones(3, requires_grad=True)
        g = lib.full((3,), 2.0)
        w = x - 0.1 * g
        (gw,) = lib.autograd.grad((w + 1).sum(), x)
        (w + 2).sum().backward()
        (w + 3).sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0, 2.0])
        np.testing.assert_array_equal(gw.numpy(), [1.0, 1.0, 1.0])
        y = x.exp().sum()
        y.backward()
        with pytest.raises(RuntimeError, match="second time"):
            y.backward()
