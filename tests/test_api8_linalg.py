"""PyTorch's older linear-algebra names (ops/legacy_linalg.py) beyond the OpInfo database
(tests/ops/opinfo_api8_linalg.py): captured under ember.function, the result types, the
removed functions' errors, lobpcg's preconditioner and refusals."""

import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
warnings.filterwarnings("ignore", message=".*deprecated.*", category=UserWarning)

R = np.random.default_rng(5)


def _t(a):
    return torch.tensor(a)


def test_lu_result_types():
    A = R.standard_normal((2, 4, 4))
    pair = ember.lu(ember.tensor(A))
    assert type(pair) is tuple and len(pair) == 2
    LU, pivots, info = ember.tensor(A).lu(get_infos=True)
    assert type(ember.tensor(A).lu(get_infos=True)).__name__ == "_lu_with_info"
    t = torch.lu(_t(A), get_infos=True)
    np.testing.assert_allclose(LU.numpy(), t.LU.numpy())
    np.testing.assert_array_equal(pivots.numpy(), t.pivots.numpy())
    assert info.dtype == ember.int32 and info.shape == (2,)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_captured_match_eager(dtype):
    A = R.standard_normal((3, 4, 4)).astype(dtype)
    b = R.standard_normal((3, 4, 2)).astype(dtype)
    geq = torch.geqrf(_t(R.standard_normal((5, 3)).astype(dtype)))

    def step(A, b, qa, tau, c):
        LU, piv = ember.lu(A)
        x = ember.lu_solve(b, LU, piv)
        s, coef = ember.triangular_solve(b, A, upper=False, transpose=True)
        q = ember.ormqr(qa, tau, c, transpose=True)
        return x, s, coef, q, ember.nuclear_norm(A), ember.frobenius_norm(A, (0, 2))

    args = [
        ember.tensor(A),
        ember.tensor(b),
        ember.tensor(geq.a.numpy()),
        ember.tensor(geq.tau.numpy()),
        ember.tensor(R.standard_normal((5, 2)).astype(dtype)),
    ]
    eager = step(*args)
    captured = ember.function(step)
    for _ in range(2):
        for e, c in zip(eager, captured(*args)):
            np.testing.assert_allclose(c.numpy(), e.numpy(), rtol=1e-5, atol=1e-6)
    # and against torch
    LU, piv = torch.lu(_t(A))
    ref = [
        torch.lu_solve(_t(b), LU, piv),
        *torch.triangular_solve(_t(b), _t(A), upper=False, transpose=True),
        torch.ormqr(geq.a, geq.tau, _t(args[4].numpy()), transpose=True),
        torch.nuclear_norm(_t(A)),
        torch.frobenius_norm(_t(A), (0, 2)),
    ]
    for e, t in zip(eager, ref):
        np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=2e-4, atol=2e-5)


def test_gradients_captured():
    A = R.standard_normal((4, 4)) + 4 * np.eye(4)
    b = R.standard_normal((4, 3))

    def loss(A, b):
        s, _ = ember.triangular_solve(b, A)
        return (s**2).sum() + ember.nuclear_norm(A)

    g_eager = ember.grad(loss, argnums=(0, 1))(ember.tensor(A), ember.tensor(b))
    At, bt = _t(A).requires_grad_(), _t(b).requires_grad_()
    s, _ = torch.triangular_solve(bt, At)
    ((s**2).sum() + torch.nuclear_norm(At)).backward()
    np.testing.assert_allclose(g_eager[0].numpy(), At.grad.numpy(), rtol=1e-9)
    np.testing.assert_allclose(g_eager[1].numpy(), bt.grad.numpy(), rtol=1e-9)


@pytest.mark.parametrize("name", ["lstsq", "matrix_rank", "symeig", "eig", "solve"])
def test_removed_functions_raise_pytorchs_error(name):
    A = R.standard_normal((3, 3))
    args = (A, A) if name in ("lstsq", "solve") else (A,)
    with pytest.raises(RuntimeError) as ours:
        getattr(ember, name)(*map(ember.tensor, args))
    with pytest.raises(RuntimeError) as theirs:
        getattr(torch, name)(*map(_t, args))
    assert str(ours.value) == str(theirs.value)
    assert hasattr(ember.Tensor, name) == hasattr(torch.Tensor, name)
    if hasattr(torch.Tensor, name):
        with pytest.raises(RuntimeError, match="deprecated since version 1.9"):
            getattr(ember.tensor(A), name)(*map(ember.tensor, args[1:]))


def test_lobpcg_preconditioner_and_refusals():
    Q, _ = np.linalg.qr(R.standard_normal((20, 20)))
    A = (Q * np.linspace(1.0, 50.0, 20)) @ Q.T
    iK = np.linalg.inv(A + np.eye(20))  # a (good) preconditioner
    e, x = ember.lobpcg(ember.tensor(A), k=3, iK=ember.tensor(iK), largest=False)
    np.testing.assert_allclose(e.numpy(), np.linalg.eigvalsh(A)[:3], rtol=1e-7)
    np.testing.assert_allclose(A @ x.numpy(), x.numpy() * e.numpy(), atol=1e-6)
    et, _ = torch.lobpcg(_t(A), k=3, iK=_t(iK), largest=False)
    np.testing.assert_allclose(e.numpy(), et.numpy(), rtol=1e-6)
    f32 = ember.lobpcg(ember.tensor(A.astype(np.float32)), k=2)
    assert f32[0].dtype == ember.float32 and f32[1].shape == (20, 2)
    with pytest.raises(ember.EmberError, match="generalized"):
        ember.lobpcg(ember.tensor(A), k=2, B=ember.tensor(np.eye(20)))
    with pytest.raises(ValueError, match="3 x the number"):
        ember.lobpcg(ember.tensor(A[:5, :5]), k=2)
    with pytest.raises(ember.ShapeError, match="batches"):
        ember.lobpcg(ember.tensor(np.stack([A, A])), k=2)


def test_svd_lowrank_is_a_good_approximation():
    # a decaying spectrum: the first singular values found to a few digits, as PyTorch's
    U0, _ = np.linalg.qr(R.standard_normal((60, 60)))
    V0, _ = np.linalg.qr(R.standard_normal((40, 40)))
    s0 = 2.0 ** -np.arange(40)
    A = (U0[:, :40] * s0) @ V0.T
    U, S, V = ember.svd_lowrank(ember.tensor(A), q=8, niter=3)
    np.testing.assert_allclose(S.numpy()[:4], s0[:4], rtol=1e-4)
    assert U.shape == (60, 8) and V.shape == (40, 8)
    np.testing.assert_allclose(U.numpy().T @ U.numpy(), np.eye(8), atol=1e-10)
    ref = torch.svd_lowrank(_t(A), q=8, niter=3)[1].numpy()
    np.testing.assert_allclose(S.numpy()[:4], ref[:4], rtol=1e-4)
