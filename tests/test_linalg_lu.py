"""ember.linalg's LU functions against torch.linalg: pivots and info as PyTorch's (1-based
int32), the errors, float32, and lu's gradients through P, L and U together (the OpInfos in
tests/ops/opinfo_lu.py compare each function's values and gradients)."""

import numpy as np
import pytest
import torch

import ember

R = np.random.default_rng(7)
SINGULAR = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])


def test_lu_factor_ex_info_and_pivots_match_torch():
    a = np.stack([R.standard_normal((3, 3)), SINGULAR])
    t = torch.linalg.lu_factor_ex(torch.tensor(a))
    e = ember.linalg.lu_factor_ex(ember.tensor(a))
    assert type(e).__name__ == "linalg_lu_factor_ex" and e._fields == ("LU", "pivots", "info")
    assert str(e.pivots.dtype) == "ember.int32" and str(e.info.dtype) == "ember.int32"
    np.testing.assert_array_equal(e.pivots.numpy(), t.pivots.numpy())
    np.testing.assert_array_equal(e.info.numpy(), t.info.numpy())
    np.testing.assert_allclose(e.LU.numpy(), t.LU.numpy(), rtol=1e-12, atol=1e-12)
    with pytest.raises(ember.errors.LinAlgError, match=r"Batch element 1.*U\[3,3\]"):
        ember.linalg.lu_factor_ex(ember.tensor(a), check_errors=True)


def test_lu_factor_refuses_singular_and_unpivoted():
    for lib in (torch, ember):
        with pytest.raises(RuntimeError):
            lib.linalg.lu_factor(lib.tensor(SINGULAR))
        with pytest.raises(RuntimeError):
            lib.linalg.lu_factor(lib.tensor(np.eye(2)), pivot=False)
    P, L, U = ember.linalg.lu(ember.tensor(SINGULAR))  # lu factors it anyway
    np.testing.assert_allclose((P @ L @ U).numpy(), SINGULAR, atol=1e-12)


def test_float32_and_reconstruction():
    a = R.standard_normal((2, 4, 3)).astype(np.float32)
    P, L, U = ember.linalg.lu(ember.tensor(a))
    tP, tL, tU = torch.linalg.lu(torch.tensor(a))
    assert str(L.dtype) == "ember.float32"
    np.testing.assert_allclose(L.numpy(), tL.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(P.numpy(), tP.numpy())
    np.testing.assert_allclose((P @ L @ U).numpy(), a, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(3, 3), (2, 3, 5), (5, 3)])
def test_lu_gradient_through_all_three_factors(shape):
    a = R.standard_normal(shape)
    grads = []
    for lib in (torch, ember):
        x = lib.tensor(a, requires_grad=True)
        P, L, U = lib.linalg.lu(x)
        wl = lib.tensor(np.cos(np.arange(L.numel())).reshape(tuple(L.shape)))
        wu = lib.tensor(np.sin(np.arange(U.numel())).reshape(tuple(U.shape)))
        ((L * wl).sum() + (U * wu).sum() + (P @ L).sum()).backward()
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-9, atol=1e-10)


def test_lu_solve_refuses_mismatched_b():
    LU, piv = ember.linalg.lu_factor(ember.tensor(np.eye(3) + 0.1))
    with pytest.raises(ember.errors.ShapeError, match="lu_solve"):
        ember.linalg.lu_solve(LU, piv, ember.ones(4, 2))
