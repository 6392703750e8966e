"""Divergences from PyTorch 2.13 found by running its OpInfo samples through ember
(/work/prompts/run.py) with bool and integer dtypes."""

from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("dtype", ["bool", "int64", "uint8"])
@pytest.mark.parametrize("reduction", ["mean", "none", "sum"])
def test_cosine_embedding_loss_of_bools_and_integers(dtype, reduction):
    rng = np.random.default_rng(0)
    a, b = (rng.integers(0, 3, (4, 5)).astype(dtype) for _ in range(2))
    target = np.array([1, -1, 1, -1])

    def loss(m):
        return m.nn.functional.cosine_embedding_loss(
            m.tensor(a), m.tensor(b), m.tensor(target), margin=0.1, reduction=reduction
        )

    want, got = loss(torch), loss(ember)
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
