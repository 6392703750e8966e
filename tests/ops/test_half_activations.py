"""Activations over bfloat16 and float16 tensors compute in float32 and round once, as
PyTorch's CPU kernels do (their "opmath"): silu, the elu family, softplus, hardsigmoid,
hardswish, mish, logsigmoid and gelu, eagerly and captured (a graph's fused loop widens,
computes and rounds in one pass), values and gradients against PyTorch's own half-precision
results. (tanhshrink is a composite in PyTorch too, rounded op by op: left so.)"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
F = ember.nn.functional
TF = torch.nn.functional

NAMES = ["silu", "elu", "selu", "celu", "softplus", "hardsigmoid", "hardswish", "mish"]
NAMES += ["logsigmoid", "gelu"]


def _ulps(got, want, dtype) -> float:
    """The largest difference in units of the 16-bit type's eps at each value, values under
    2**-12 of the largest counted at that floor (a tail computed by cancellation, gelu's
    0.5 x (1 + erf(x / sqrt 2)) far below zero, has no relative accuracy in either
    framework)."""
    eps = float(ml_dtypes.finfo(dtype).eps)
    got, want = got.astype(np.float64), want.astype(np.float64)
    floor = np.abs(want).max() * 2.0**-12
    return float(np.max(np.abs(got - want) / (np.maximum(np.abs(want), floor) * eps)))


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("name", NAMES)
def test_half_precision_activation_rounds_once_as_pytorchs(name, dtype):
    r = np.random.default_rng(NAMES.index(name))
    x = (r.standard_normal(2000) * 4).astype(np.float32)
    g = r.standard_normal(2000).astype(np.float32)
    ed, td = getattr(ember, dtype), getattr(torch, dtype)
    ex = ember.tensor(x).to(ed).requires_grad_()
    tx = torch.tensor(x).to(td).requires_grad_()
    ey, ty = getattr(F, name)(ex), getattr(TF, name)(tx)
    ey.backward(ember.tensor(g).to(ed))
    ty.backward(torch.tensor(g).to(td))
    captured = ember.function(getattr(F, name))(ember.tensor(x).to(ed))
    np_dtype = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float16
    want = ty.detach().float().numpy()
    assert ey.dtype is ed and captured.dtype is ed
    # PyTorch's erf, exp and tanh are not ember's: a float32 ulp or two can move a rounding
    # (gelu's float16 values near zero by a few more: its own kernel's polynomial)
    limit = 12 if (name, dtype) == ("gelu", "float16") else 1
    assert _ulps(ey.detach().float().numpy(), want, np_dtype) <= limit
    assert _ulps(captured.float().numpy(), want, np_dtype) <= limit
    assert _ulps(ex.grad.float().numpy(), tx.grad.float().numpy(), np_dtype) <= 8
