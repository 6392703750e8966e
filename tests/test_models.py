"""The built-in models and their reference training steps (ember.models.example_step)."""

import numpy as np
import pytest

import ember
from ember import models


@pytest.mark.parametrize("name", models.EXAMPLE_STEPS)
def test_example_step_trains_and_captures_the_same(name):
    eager, captured = models.example_step(name, batch=4), models.example_step(name, batch=4)
    step = ember.function(captured.step)
    for _ in range(3):
        expected, got = eager.step().item(), step().item()
        np.testing.assert_allclose(got, expected, rtol=1e-5)
    # AdamW turns a rounding difference in a near-zero gradient into up to lr (1e-3) per step
    atol = 1e-5 if name == "gpt" else 1e-6
    for (key, p), q in zip(eager.model.named_parameters(), captured.model.parameters()):
        np.testing.assert_allclose(
            q.detach().numpy(), p.detach().numpy(), rtol=1e-4, atol=atol, err_msg=key
        )
    # the first step creates the optimizer's buffers (momentum, Adam's moments): one retrace
    assert step.stats.traces <= 2


def test_example_step_rejects_unknown_names():
    with pytest.raises(ValueError, match="unknown example step 'vgg'"):
        models.example_step("vgg")


def test_gpt_block_checks_heads():
    with pytest.raises(ValueError, match="not divisible"):
        models.GPTBlock(d_model=10, heads=4)
