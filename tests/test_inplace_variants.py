"""In-place method variants: every ``Tensor.name_`` of PyTorch whose ``name`` ember has exists
in ember too, and ``addbmm_``/``mvlgamma_`` write PyTorch's values into self."""

from __future__ import annotations

import numpy as np
import torch

import ember

# (as_strided_ changes a tensor's strides in place: ember tensors' layouts are NumPy's)
NOT_IN_EMBER = {"as_strided_"}


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


def test_addbmm_and_mvlgamma_in_place_as_pytorch():
    rng = np.random.default_rng(0)
    x, b1, b2 = (
        rng.standard_normal((3, 4)),
        rng.standard_normal((2, 3, 5)),
        rng.standard_normal((2, 5, 4)),
    )
    t = torch.tensor(x)
    t.addbmm_(torch.tensor(b1), torch.tensor(b2), beta=0.5, alpha=2.0)
    e = ember.tensor(x)
    out = e.addbmm_(ember.tensor(b1), ember.tensor(b2), beta=0.5, alpha=2.0)
    assert out is e
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-12, atol=1e-12)

    v = rng.uniform(2.0, 5.0, (6,))
    t = torch.tensor(v)
    t.mvlgamma_(3)
    e = ember.tensor(v)
    assert e.mvlgamma_(p=3) is e
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-12)
