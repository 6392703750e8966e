"""nn.utils against PyTorch: gradient clipping by norm (every norm type) and by value, and the
parameter/vector round trip."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ember
from ember import nn
from ember.nn import utils

from .compare import torch

tutils = torch.nn.utils


def _pairs(dtype=np.float32, scale=1.0):
    r = np.random.default_rng(3)
    grads = [r.standard_normal(s).astype(dtype) * scale for s in [(3, 4), (4,), (2, 2, 2)]]
    e_params, t_params = [], []
    for g in grads:
        e = nn.Parameter(
            ember.zeros(*g.shape, dtype=ember.float32 if dtype == np.float32 else ember.float64)
        )
        e.grad = ember.tensor(g)
        t = torch.nn.Parameter(torch.zeros(g.shape, dtype=torch.tensor(g).dtype))
        t.grad = torch.tensor(g)
        e_params.append(e)
        t_params.append(t)
    return e_params, t_params


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, math.inf, 0.5])
@pytest.mark.parametrize("max_norm", [0.5, 1000.0])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
def test_clip_grad_norm_matches_torch(norm_type, max_norm, dtype):
    e_params, t_params = _pairs(dtype)
    e_total = utils.clip_grad_norm_(e_params, max_norm, norm_type)
    t_total = tutils.clip_grad_norm_(t_params, max_norm, norm_type)
    rtol = 1e-6 if dtype == np.float32 else 1e-12
    assert e_total.dtype.name == str(t_total.dtype).replace("torch.", "")
    np.testing.assert_allclose(e_total.item(), t_total.item(), rtol=rtol)
    for e, t in zip(e_params, t_params):
        np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), rtol=rtol, atol=1e-7)


def test_clip_grad_norm_edge_cases():
    e_params, _ = _pairs()
    e_params[0].grad = ember.full((3, 4), float("inf"))
    with pytest.raises(RuntimeError, match="non-finite"):
        utils.clip_grad_norm_(e_params, 1.0, error_if_nonfinite=True)
    assert utils.clip_grad_norm_([nn.Parameter(ember.zeros(2))], 1.0).item() == 0.0
    with pytest.warns(UserWarning, match="empty generator"):
        utils.clip_grad_norm_((p for p in []), 1.0)
    single = nn.Parameter(ember.zeros(2))
    single.grad = ember.tensor([3.0, 4.0])
    assert utils.clip_grad_norm_(single, 1.0).item() == pytest.approx(5.0)
    np.testing.assert_allclose(single.grad.numpy(), [0.6, 0.8], rtol=1e-5)


def test_clip_grad_value_matches_torch():
    e_params, t_params = _pairs(scale=2.0)
    utils.clip_grad_value_(e_params, 0.7)
    tutils.clip_grad_value_(t_params, 0.7)
    for e, t in zip(e_params, t_params):
        np.testing.assert_array_equal(e.grad.numpy(), t.grad.numpy())


def test_parameters_vector_round_trip():
    net = nn.Sequential(nn.Linear(3, 2), nn.Linear(2, 1))
    vec = utils.parameters_to_vector(net.parameters())
    assert vec.shape == (11,)
    expected = np.concatenate([p.detach().numpy().reshape(-1) for p in net.parameters()])
    np.testing.assert_array_equal(vec.detach().numpy(), expected)
    utils.vector_to_parameters(ember.arange(11, dtype=ember.float32), net.parameters())
    assert net[0].weight.detach().numpy().tolist() == [[0, 1, 2], [3, 4, 5]]
    assert net[1].bias.detach().numpy().tolist() == [10.0]
    assert isinstance(net[0].weight, nn.Parameter)
    with pytest.raises(ember.ShapeError):
        utils.vector_to_parameters(ember.zeros(5), net.parameters())
