"""Regressions found by differential fuzzing against PyTorch (tests/torch_diff_fuzzing.py,
seeds 100000 on): each case runs on both frameworks and compares."""

import numpy as np
import pytest
import torch

import ember


def _both(fn):
    return fn(torch), fn(ember)


@pytest.mark.parametrize("name", ["cummax", "cummin"])
@pytest.mark.parametrize("dim", [-4, 3, 7])
def test_running_extrema_of_an_empty_tensor_ignore_the_dim(name, dim):
    # PyTorch returns the empty result before it reads the dim (cumsum checks it)
    t, e = _both(lambda T: getattr(T, name)(T.ones(3, 0, 3, requires_grad=True), dim))
    assert tuple(e.values.shape) == tuple(t.values.shape) == (3, 0, 3)
    assert tuple(e.indices.shape) == tuple(t.indices.shape)
    assert e.values.requires_grad == t.values.requires_grad
    for T in (torch, ember):
        with pytest.raises(IndexError):
            getattr(T, name)(T.ones(()), dim)
    np.testing.assert_array_equal(e.indices.numpy(), t.indices.numpy())
