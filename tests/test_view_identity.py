"""Which shape methods return a new view of x and which x itself, for a call that changes
nothing, as PyTorch's (``x.reshape(x.shape) is not x``, ``x.flatten()`` of a 1-d x is x)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember

CALLS = {
    "reshape": lambda x, v: x.reshape(x.shape),
    "reshape_ints": lambda x, v: x.reshape(2, 3),
    "reshape_as": lambda x, v: x.reshape_as(x),
    "view": lambda x, v: x.view(2, 3),
    "view_minus_one": lambda x, v: v.view(-1),
    "view_as": lambda x, v: x.view_as(x),
    "flatten_1d": lambda x, v: v.flatten(),
    "flatten_2d": lambda x, v: x.flatten(),
    "flatten_one_dim": lambda x, v: x.flatten(1, 1),
    "ravel_1d": lambda x, v: v.ravel(),
    "squeeze": lambda x, v: x.squeeze(),
    "squeeze_dim": lambda x, v: x.squeeze(0),
    "expand": lambda x, v: x.expand(x.shape),
    "expand_as": lambda x, v: x.expand_as(x),
    "broadcast_to": lambda x, v: x.broadcast_to(x.shape),
    "permute": lambda x, v: x.permute(0, 1),
    "transpose_same": lambda x, v: x.transpose(1, 1),
    "contiguous": lambda x, v: x.contiguous(),
    "to_dtype": lambda x, v: x.to(x.dtype),
    "type_as": lambda x, v: x.type_as(x),
    "float": lambda x, v: x.float(),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_identity_shape_calls_return_what_pytorch_returns(name):
    results = []
    for lib in (torch, ember):
        x = lib.arange(6.0).reshape(2, 3)
        v = lib.arange(4.0)
        y = CALLS[name](x, v)
        source = v if "1d" in name or name == "view_minus_one" else x
        results.append(y is source)
        np.testing.assert_array_equal(y.numpy().ravel(), source.numpy().ravel())
        # (ember's broadcast views are read-only, as NumPy's: writes through them are refused)
        if y is not source and name not in ("expand", "expand_as", "broadcast_to"):
            with torch.no_grad() if lib is torch else ember.no_grad():
                y.reshape(-1)[0] = 100.0  # a view: the write shows in the source
            assert float(source.reshape(-1)[0]) == 100.0, (lib.__name__, name)
    assert results[1] == results[0], f"{name}: torch gives `is x` {results[0]}"


def test_broadcast_tensors_returns_a_tensor_of_the_shape_itself():
    for lib in (torch, ember):
        x, z = lib.ones(2, 3), lib.ones(3)
        a, b = lib.broadcast_tensors(x, z)
        assert a is x and b is not z, lib.__name__
