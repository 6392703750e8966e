"""A training step over a symbolic batch with each optimizer whose recorded update has a lone
elementwise op (ops/add_scaled.py): the fusion pass's layout planner met the graph's symbolic
input sizes (plan/layout.py `c_strides`) and raised; the step equals the eager one."""

import numpy as np
import pytest

import ember
import ember.nn as nn
from ember import models


@pytest.mark.parametrize(
    "make",
    [
        lambda p: ember.optim.Adam(p, lr=1e-3),
        lambda p: ember.optim.AdamW(p, lr=1e-3, amsgrad=True),
        lambda p: ember.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01),
    ],
    ids=["Adam", "AdamW", "SGD"],
)
def test_a_symbolic_batch_step_equals_eager(make):
    ember.manual_seed(0)
    eager, model = models.cnn(1, 28, 10), models.cnn(1, 28, 10)
    model.load_state_dict(eager.state_dict())
    opt, eager_opt = make(model.parameters()), make(eager.parameters())

    def step(model, opt, x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    specs = [ember.TensorSpec((None, 1, 28, 28)), ember.TensorSpec((None,), ember.int64)]
    f = ember.function(step, input_signature=specs)
    rng = np.random.default_rng(0)
    for batch in (4, 3, 4):
        x = ember.tensor(rng.standard_normal((batch, 1, 28, 28)), dtype=ember.float32)
        y = ember.tensor(rng.integers(0, 10, batch))
        got, want = f(model, opt, x, y).item(), step(eager, eager_opt, x, y).item()
        # (float32 steps whose fused loops may sum in another order than eager's kernels)
        assert abs(got - want) <= 1e-5 * max(1.0, abs(want))
    for p, q in zip(model.parameters(), eager.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-4, atol=1e-5)
