"""Focused regressions for what hunt 11's programs found, each against PyTorch."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def test_inplace_on_a_copying_reshape_of_a_view_while_captured():
    # Barlow Twins' off_diagonal: the last flatten of a strided view copies, so an in-place op
    # on it leaves its base alone; while a graph was built the view positions raised
    def off_diagonal_pow(lib, c):
        n = c.shape[0]
        off = c.flatten()[:-1].view(n - 1, n + 1)[:, 1:].flatten()
        return off.pow_(2).sum(), c * 1

    a = np.arange(16, dtype=np.float32).reshape(4, 4) / 7
    want = [t.numpy() for t in off_diagonal_pow(torch, torch.tensor(a))]
    for f in (
        lambda c: off_diagonal_pow(ember, c),
        ember.function(lambda c: off_diagonal_pow(ember, c)),
    ):
        got = [t.numpy() for t in f(ember.tensor(a))]
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-6)


def test_range_and_tuple_items_index_as_lists():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    for lib in (torch, ember):
        x = lib.tensor(a)
        y = x.clone()
        y[range(2), [1, 3]] = -1.0
        got = [x[range(1, 3)], x[:, (0, 2)], x[range(0)], y]
        if lib is torch:
            want = [t.numpy() for t in got]
        else:
            for g, w in zip(got, want):
                np.testing.assert_array_equal(g.numpy(), w)
