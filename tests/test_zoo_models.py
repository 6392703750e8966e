"""The zoo's models (ember.zoo) against their PyTorch twins, built from the same source.

For every model, in float64 on both sides (so the tolerances can be tight and state what they
cover: rounding of sums of at most a few thousand terms, far below 1e-9 relative), with weights
copied by `zoo.copy_weights`: the same loss and the same parameter gradients in eager mode, the
same loss after an optimizer step; and the ``ember.function``-captured training step gives the
same losses as the eager step on an identical model, step after step.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import zoo

torch = pytest.importorskip("torch")

# float64 rounding through a few layers of sums: relative 1e-9 leaves a margin of ~1e4 over
# eps * sqrt(reduction length) for the sizes below. A gradient that is zero in exact arithmetic
# (a BatchNorm's bias feeding another BatchNorm) is rounding noise on both sides, so each
# gradient's error is measured against the largest gradient of the whole model.
RTOL = 1e-9


def _pair(name):
    spec = zoo.SPECS[name]
    ember.manual_seed(0)
    model = zoo.build(name, ember, **spec.test_sizes).double()
    twin = zoo.build(name, torch, **spec.test_sizes).double()
    zoo.copy_weights(model, twin)
    x, y = zoo.inputs(name, spec.test_batch, seed=1, **spec.test_sizes)
    if x.dtype == np.float32:
        x = x.astype(np.float64)
    return model, twin, x, y


def _close(got, want, scale, what):
    err = float(np.max(np.abs(np.asarray(got) - np.asarray(want)), initial=0.0))
    assert err <= RTOL * scale, f"{what}: max error {err:.3g} > {RTOL} * {scale:.3g}"


@pytest.mark.parametrize("name", zoo.ZOO)
def test_twins_agree_in_loss_gradients_and_step(name):
    model, twin, x, y = _pair(name)
    ex, ey = ember.tensor(x), ember.tensor(y)
    tx, ty = torch.from_numpy(x), torch.from_numpy(y)
    opt = zoo.optimizer(name, ember, model.parameters())
    topt = zoo.optimizer(name, torch, twin.parameters())

    losses = []
    for step in range(2):
        opt.zero_grad()
        topt.zero_grad()
        loss = zoo.loss(ember, model(ex), ey)
        tloss = zoo.loss(torch, twin(tx), ty)
        loss.backward()
        tloss.backward()
        _close(loss.item(), tloss.item(), abs(tloss.item()), f"{name} loss, step {step}")
        losses.append(loss.item())
        grads = dict(model.named_parameters())
        want = {k: p.grad.numpy() for k, p in twin.named_parameters()}
        assert set(grads) == set(want)
        scale = max(float(np.abs(g).max()) for g in want.values())
        for key, g in want.items():
            assert grads[key].grad is not None, f"{name}: no gradient for {key}"
            _close(grads[key].grad.numpy(), g, scale, f"{name} d{key}, step {step}")
        opt.step()
        topt.step()
    assert losses[0] != losses[1]  # the step changed the weights


@pytest.mark.parametrize("name", zoo.ZOO)
def test_function_step_matches_eager(name):
    model, _, x, y = _pair(name)
    ember.manual_seed(1)
    other = zoo.build(name, ember, **zoo.SPECS[name].test_sizes).double()
    zoo.copy_weights(model, other)
    ex, ey = ember.tensor(x), ember.tensor(y)

    def step_of(m):
        opt = zoo.optimizer(name, ember, m.parameters())

        def step():
            opt.zero_grad()
            loss = zoo.loss(ember, m(ex), ey)
            loss.backward()
            opt.step()
            return loss

        return step

    eager, captured = step_of(model), ember.function(step_of(other))
    for n in range(3):
        want = eager().item()
        _close(captured().item(), want, abs(want), f"{name} ember.function step {n}")


def test_copy_weights_refuses_mismatched_models():
    a = zoo.build("mlp", ember, in_features=4, hidden=3, classes=2)
    with pytest.raises(ValueError, match="shape"):
        zoo.copy_weights(a, zoo.build("mlp", torch, in_features=5, hidden=3, classes=2))
    with pytest.raises(ValueError, match="names differ"):
        zoo.copy_weights(a, zoo.build("cnn", torch, image=8, classes=2))


def test_unknown_names_and_sizes_are_refused():
    with pytest.raises(ValueError, match="unknown zoo model"):
        zoo.build("alexnet", ember)
    with pytest.raises(ValueError, match="unknown size"):
        zoo.build("mlp", ember, depth=3)
