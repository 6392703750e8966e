"""Edge cases PyTorch's own module samples (common_modules.module_db) exercise, against torch:
BatchNorm on an empty batch in training, and KL divergence's targets outside (0, inf)."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_batch_norm_trains_on_an_empty_batch(dims):
    """An empty batch: an empty result, the running statistics unchanged, zero gradients for
    the affine parameters, one more batch counted (PyTorch refuses one value per channel
    only)."""
    shape = (0, 5) + (2,) * dims
    results = []
    for lib in (torch, ember):
        module = getattr(lib.nn, f"BatchNorm{dims}d")(5)
        x = lib.ones(shape, requires_grad=True)
        y = module(x)
        y.sum().backward()
        results.append(
            (
                tuple(y.shape),
                module.running_mean.numpy().copy(),
                module.running_var.numpy().copy(),
                int(module.num_batches_tracked),
                module.weight.grad.numpy().copy(),
                module.bias.grad.numpy().copy(),
                tuple(x.grad.shape),
            )
        )
    for want, got in zip(*results):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    with pytest.raises(ember.EmberError, match="more than 1 value per channel"):
        ember.nn.BatchNorm1d(5)(ember.ones(1, 5))


@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div_matches_torch_at_zero_and_negative_targets(log_target):
    x = np.array([0.5, -1.0, 2.0, 0.3, 1.0, -0.2])
    t = np.array([0.0, -0.5, 0.7, 1.0, 2.5, 0.0])
    outs = []
    for lib in (torch, ember):
        xs = lib.tensor(x, requires_grad=True)
        y = lib.nn.functional.kl_div(xs, lib.tensor(t), reduction="none", log_target=log_target)
        y.sum().backward()
        outs.append((y.detach().numpy(), xs.grad.numpy()))
    for want, got in zip(*outs):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, equal_nan=True)
