"""batch_norm_eval's shape rule: the common case's shortcut types what `_check` types, and any
other operands still reach `_check`'s errors (PyTorch refuses them too)."""

import numpy as np
import pytest
import torch

import ember
from ember.errors import EmberError
from ember.ops.batch_norm import BATCH_NORM_EVAL
from ember.types import TensorType

F = ember.nn.functional


def _types(shape, dtype, channel_shape=None, channel_dtype=None):
    x = TensorType(shape, dtype)
    p = TensorType(channel_shape or (shape[1],), channel_dtype or dtype)
    return x, p, p, p, p


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
def test_common_case_types_the_input(dtype):
    got = BATCH_NORM_EVAL.infer(*_types((2, 3, 4, 5), dtype), eps=1e-5)
    assert got == TensorType((2, 3, 4, 5), dtype)


def test_half_input_with_float32_statistics_takes_the_checks_path():
    got = BATCH_NORM_EVAL.infer(
        *_types((2, 3, 4), ember.bfloat16, channel_dtype=ember.float32), eps=1e-5
    )
    assert got == TensorType((2, 3, 4), ember.bfloat16)


@pytest.mark.parametrize(
    "channel_shape,channel_dtype", [((4,), None), ((3,), ember.float64), ((1, 3), None)]
)
def test_the_rule_refuses_other_operands(channel_shape, channel_dtype):
    with pytest.raises(EmberError, match="per-channel"):
        BATCH_NORM_EVAL.infer(
            *_types((2, 3, 4), ember.float32, channel_shape, channel_dtype), eps=1e-5
        )


@pytest.mark.parametrize("channel_shape", [(4,), (1, 3)])
def test_a_channel_count_off_the_input_is_refused_as_by_pytorch(channel_shape):
    x = np.ones((2, 3, 4), np.float32)
    p = np.ones(channel_shape, np.float32)
    with pytest.raises(RuntimeError):
        torch.nn.functional.batch_norm(
            torch.from_numpy(x), *(torch.from_numpy(p) for _ in range(4)), training=False
        )
    with pytest.raises(RuntimeError):
        F.batch_norm(ember.tensor(x), *(ember.tensor(p) for _ in range(4)), training=False)


def test_eval_values_match_pytorch():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 4, 4)).astype(np.float32)
    mean, weight, bias = (rng.standard_normal(3).astype(np.float32) for _ in range(3))
    var = rng.uniform(0.5, 2.0, 3).astype(np.float32)
    args = (x, mean, var, weight, bias)
    got = F.batch_norm(*(ember.tensor(a) for a in args), training=False, eps=1e-3)
    want = torch.nn.functional.batch_norm(
        *(torch.from_numpy(a) for a in args), training=False, eps=1e-3
    )
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
