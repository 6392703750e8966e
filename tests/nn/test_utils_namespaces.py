"""PyTorch's ``torch.nn.utils`` submodules on ember: ``clip_grad``, ``stateless`` (its
deprecated functional_call), ``memory_format`` (convert_conv2d/3d_weight_memory_format), each
against PyTorch's."""

import warnings

import numpy as np
import pytest
import torch

import ember
import ember.nn.utils.clip_grad as clip_grad
import ember.nn.utils.stateless as stateless


def _twins(seed=0):
    torch.manual_seed(seed)
    tm = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    em = ember.nn.Sequential(ember.nn.Linear(3, 4), ember.nn.Tanh(), ember.nn.Linear(4, 2))
    em.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    return tm, em


@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf")])
def test_clip_grad_module_matches_torch(norm_type):
    tm, em = _twins()
    x = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    (tm(torch.tensor(x)) ** 2).sum().backward()
    (em(ember.tensor(x)) ** 2).sum().backward()
    t_total = torch.nn.utils.clip_grad.clip_grad_norm_(tm.parameters(), 0.5, norm_type)
    e_total = clip_grad.clip_grad_norm_(em.parameters(), 0.5, norm_type)
    np.testing.assert_allclose(float(e_total), float(t_total), rtol=1e-5)
    for tp, ep in zip(tm.parameters(), em.parameters()):
        np.testing.assert_allclose(ep.grad.numpy(), tp.grad.numpy(), rtol=1e-5, atol=1e-7)
    torch.nn.utils.clip_grad.clip_grad_value_(tm.parameters(), 0.01)
    clip_grad.clip_grad_value_(em.parameters(), 0.01)
    for tp, ep in zip(tm.parameters(), em.parameters()):
        np.testing.assert_allclose(ep.grad.numpy(), tp.grad.numpy(), rtol=1e-6)
    assert ember.nn.utils.clip_grad_norm_ is clip_grad.clip_grad_norm_


def test_stateless_functional_call_warns_and_matches_torch():
    tm, em = _twins(1)
    x = np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32)
    w = np.random.default_rng(2).standard_normal((2, 4)).astype(np.float32)
    with pytest.warns(FutureWarning, match="deprecated"):
        got = stateless.functional_call(em, {"2.weight": ember.tensor(w)}, (ember.tensor(x),))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        want = torch.nn.utils.stateless.functional_call(
            tm, {"2.weight": torch.tensor(w)}, (torch.tensor(x),)
        )
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5)
    assert em[2].weight.shape == (2, 4) and not np.allclose(em[2].weight.detach().numpy(), w)
    with pytest.raises(ember.errors.EmberError, match="stateless.functional_call"):
        with pytest.warns(FutureWarning):
            stateless.functional_call(em, {"nope": ember.zeros(1)}, (ember.tensor(x),))


@pytest.mark.parametrize("dims", [2, 3])
def test_convert_conv_weight_memory_format(dims):
    conv = getattr(ember.nn, f"Conv{dims}d")
    tconv = getattr(ember.nn, f"ConvTranspose{dims}d")
    model = ember.nn.Sequential(conv(3, 4, 3), ember.nn.Sequential(tconv(4, 2, 3)))
    before = [p.detach().numpy().copy() for p in model.parameters()]
    params = list(model.parameters())
    fmt = ember.channels_last if dims == 2 else ember.channels_last_3d
    fn = getattr(ember.nn.utils, f"convert_conv{dims}d_weight_memory_format")
    assert fn(model, fmt) is model
    assert list(model.parameters()) == params  # the same Parameters, as PyTorch's .data swap
    for b, p in zip(before, model.parameters()):
        np.testing.assert_array_equal(b, p.detach().numpy())
    x = ember.randn(1, 3, *([6] * dims))
    assert model(x).shape[:2] == (1, 2)
    assert ember.nn.utils.memory_format.convert_conv2d_weight_memory_format is (
        ember.nn.utils.convert_conv2d_weight_memory_format
    )
