"""ember's SGD and Adam/AdamW round as PyTorch 2.13's do: each ``a + c * b`` with a number
``c`` is PyTorch's ``add(b, alpha=c)``, one fused multiply-add, and Adam's moving average its
``lerp_`` kernel, ``fma(w, g - m, m)`` / ``fma(w - 1, g - m, g)`` (optim/sgd.py, optim/adam.py,
kernels/coptim.py, ops/pointwise_composite.py `lerp_fused`). SGD agrees bit for bit in float32
over 20 steps, per-tensor (foreach=False) and multi-tensor alike, with and without a C
compiler. Adam agrees to a few units in the last place: PyTorch's float32 ``sqrt`` on x86 is
not IEEE's correctly rounded one (it differs in the last bit of about one value in six), which
no portable kernel reproduces."""

from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

_R = np.random.default_rng(59)
_W = _R.standard_normal((7, 9)).astype(np.float32)
_GRADS = [_R.standard_normal((7, 9)).astype(np.float32) for _ in range(20)]


def _steps(m, name, kwargs):
    p = m.nn.Parameter(m.tensor(_W.copy()))
    q = m.nn.Parameter(m.tensor(_W[:3].copy() * 2))  # (a second tensor: the foreach lists)
    opt = getattr(m.optim, name)([p, q], **kwargs)
    for g in _GRADS:
        p.grad = m.tensor(g.copy())
        q.grad = m.tensor(g[:3].copy() * -0.5)
        opt.step()
    return np.asarray(p.detach().numpy()), np.asarray(q.detach().numpy())


SGD_CASES = [
    {"lr": 0.1},
    {"lr": 0.1, "weight_decay": 0.01},
    {"lr": 0.05, "momentum": 0.9},
    {"lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01},
    {"lr": 0.05, "momentum": 0.9, "dampening": 0.1, "maximize": True, "weight_decay": 0.02},
]


@pytest.mark.parametrize("foreach", [False, True])
@pytest.mark.parametrize("kwargs", SGD_CASES, ids=str)
def test_sgd_equals_pytorch_bit_for_bit(kwargs, foreach):
    for t, e in zip(_steps(torch, "SGD", dict(kwargs, foreach=foreach)),
                    _steps(ember, "SGD", dict(kwargs, foreach=foreach))):  # fmt: skip
        np.testing.assert_array_equal(e, t)


ADAM_CASES = [
    ("Adam", {"lr": 0.01}),
    ("Adam", {"lr": 0.01, "weight_decay": 0.01}),
    ("Adam", {"lr": 0.01, "amsgrad": True}),
    ("Adam", {"lr": 0.01, "maximize": True, "amsgrad": True, "weight_decay": 0.1}),
    ("Adam", {"lr": 0.01, "betas": (0.3, 0.99)}),  # (lerp's other side: weight 0.7)
    ("AdamW", {"lr": 0.01}),
    ("AdamW", {"lr": 0.01, "amsgrad": True}),
]


@pytest.mark.parametrize("foreach", [False, True])
@pytest.mark.parametrize("name,kwargs", ADAM_CASES, ids=str)
def test_adam_agrees_with_pytorch_to_its_sqrt(name, kwargs, foreach):
    # (each step moves a parameter by about lr; sqrt's last bit in the denominator changes
    # that by a relative 2**-24, so 20 steps differ by far less than 20 * lr * 2**-22, plus
    # the parameter's own rounding where a step's difference tips it: a few float32 ulps)
    tol = 20 * kwargs["lr"] * 2.0**-22
    for t, e in zip(_steps(torch, name, dict(kwargs, foreach=foreach)),
                    _steps(ember, name, dict(kwargs, foreach=foreach))):  # fmt: skip
        np.testing.assert_allclose(e, t, rtol=4 * 2.0**-23, atol=tol)


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "float16"])
@pytest.mark.parametrize("weight", [0.1, 0.3, 0.5, 0.9, -0.2, 1.5])
def test_lerp_with_a_number_weight_is_pytorchs_fused_kernel(dtype, weight):
    a = _R.standard_normal(999)
    b = _R.standard_normal(999) * 3
    t = torch.tensor(a, dtype=getattr(torch, dtype)).lerp(
        torch.tensor(b, dtype=getattr(torch, dtype)), weight
    )
    e = ember.tensor(a, dtype=getattr(ember, dtype)).lerp(
        ember.tensor(b, dtype=getattr(ember, dtype)), weight
    )
    np.testing.assert_array_equal(e.double().numpy(), t.double().numpy())
