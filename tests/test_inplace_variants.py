"""In-place method variants: every ``Tensor.name_`` of PyTorch whose ``name`` ember has exists
in ember too, and ``mvlgamma_`` writes PyTorch's values into self."""

from __future__ import annotations

import numpy as np
import torch

import ember

NOT_IN_EMBER: set = set()


def test_every_inplace_variant_of_an_ember_method_exists():
    missing = [
        name
        for name in dir(torch.Tensor)
        if name.endswith("_")
        and not name.startswith("_")
        and hasattr(ember.Tensor, name[:-1])
        and not hasattr(ember.Tensor, name)
    ]
    assert sorted(missing) == sorted(NOT_IN_EMBER)


def test_mvlgamma_in_place_as_pytorch():
    rng = np.random.default_rng(0)
    v = rng.uniform(2.0, 5.0, (6,))
    t = torch.tensor(v)
    t.mvlgamma_(3)
    e = ember.tensor(v)
    assert e.mvlgamma_(p=3) is e
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-12)
