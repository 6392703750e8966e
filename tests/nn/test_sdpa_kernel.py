"""`ember.nn.attention.sdpa_kernel` / `SDPBackend` and `ember.backends.cuda.sdp_kernel` against
PyTorch's CPU build: the switches they set, what they restore, and whether attention runs."""

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from torch.nn.attention import SDPBackend as TB
from torch.nn.attention import sdpa_kernel as t_sdpa_kernel

import ember
import ember.nn.functional as F
from ember.nn.attention import SDPBackend, sdpa_kernel

CASES = [
    "MATH",
    "FLASH_ATTENTION",
    "EFFICIENT_ATTENTION",
    "CUDNN_ATTENTION",
    "OVERRIDEABLE",
    "ERROR",
    ["EFFICIENT_ATTENTION", "MATH"],
    ["CUDNN_ATTENTION", "FLASH_ATTENTION"],
    [],
]


def _switches(lib):
    c = lib.backends.cuda
    return (
        c.flash_sdp_enabled(),
        c.math_sdp_enabled(),
        c.mem_efficient_sdp_enabled(),
        c.cudnn_sdp_enabled(),
    )


def _run(lib, f, q):
    try:
        return f.scaled_dot_product_attention(q, q, q).detach().numpy(), None
    except RuntimeError as e:
        return None, e


def test_enum_matches_torch():
    assert {m.name: m.value for m in SDPBackend} == {k: int(v) for k, v in TB.__members__.items()}
    assert str(SDPBackend.MATH) == str(TB.MATH)
    assert ember.backends.cuda.SDPBackend is SDPBackend


@pytest.mark.parametrize("case", CASES, ids=str)
def test_sdpa_kernel_matches_torch(case):
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 8)).astype(np.float32)
    pick = (
        (lambda enum: [getattr(enum, n) for n in case])
        if isinstance(case, list)
        else (lambda enum: getattr(enum, case))
    )
    before = _switches(ember)
    with t_sdpa_kernel(pick(TB)), sdpa_kernel(pick(SDPBackend)) as ctx:
        assert ctx == {}
        assert _switches(ember) == _switches(torch)
        want, t_err = _run(torch, TF, torch.tensor(x))
        got, e_err = _run(ember, F, ember.tensor(x))
    assert _switches(ember) == before == _switches(torch)
    assert (t_err is None) == (e_err is None)
    if want is not None:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    else:
        assert isinstance(e_err, ember.errors.EmberError)
        assert "scaled_dot_product_attention" in str(e_err) and "test_sdpa_kernel" in str(e_err)


def test_restored_after_an_exception_and_priority():
    with pytest.raises(ValueError):
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION, SDPBackend.MATH], set_priority=True):
            assert ember.backends.cuda.sdp_backends_enabled()[0] is SDPBackend.CUDNN_ATTENTION
            raise ValueError
    assert ember.backends.cuda.sdp_backends_enabled()[0] is SDPBackend.FLASH_ATTENTION
    assert all(_switches(ember))


def test_rejects_what_torch_rejects():
    for bad in ("math", 0, (SDPBackend.MATH,)):
        with pytest.raises(AssertionError):
            with sdpa_kernel(bad):
                pass


def test_deprecated_sdp_kernel():
    with pytest.warns(FutureWarning):
        with ember.backends.cuda.sdp_kernel(enable_flash=False, enable_math=False) as c:
            assert c == {}
            assert not ember.backends.cuda.math_sdp_enabled()
            assert ember.backends.cuda.mem_efficient_sdp_enabled()
            with pytest.raises(RuntimeError):
                F.scaled_dot_product_attention(*[ember.randn(1, 2, 4)] * 3)
    assert ember.backends.cuda.math_sdp_enabled()


def test_inside_function_capture():
    q = ember.randn(2, 4, 8)

    @ember.function
    def f(q):
        with sdpa_kernel(SDPBackend.MATH):
            return F.scaled_dot_product_attention(q, q, q)

    np.testing.assert_allclose(
        f(q).numpy(), F.scaled_dot_product_attention(q, q, q).numpy(), rtol=1e-5, atol=1e-6
    )
