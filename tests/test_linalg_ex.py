"""torch.linalg's ``*_ex`` forms (cholesky_ex, inv_ex, solve_ex) against PyTorch: results,
LAPACK's int32 info, the partial results where a matrix fails, check_errors, gradients."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

R = np.random.default_rng(0)
M = R.standard_normal((3, 4, 4))
SPD = M @ M.transpose(0, 2, 1) + np.eye(4)
NOT_PD = SPD.copy()
NOT_PD[1] = np.diag([1.0, 1, 1, 1]) + np.array([[0, 2.0, 0, 0], [2, 0, 0, 0], [0] * 4, [0] * 4])
SINGULAR = np.array([[1.0, 2], [2, 4]])

CASES = [
    ("cholesky_ex", (SPD,), {}),
    ("cholesky_ex", (SPD,), {"upper": True}),
    ("cholesky_ex", (NOT_PD,), {}),
    ("inv_ex", (M,), {}),
    ("inv_ex", (SINGULAR,), {}),
    ("solve_ex", (M, R.standard_normal((3, 4, 2))), {}),
    ("solve_ex", (M, R.standard_normal((3, 4))), {}),
    ("solve_ex", (M, R.standard_normal((3, 2, 4))), {"left": False}),
    ("solve_ex", (SINGULAR, np.ones((2, 1))), {}),
    ("solve_ex", (SINGULAR, np.ones(2)), {}),
]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_ex_forms_match_pytorch(case, dtype):
    name, args, kwargs = CASES[case]
    t = getattr(torch.linalg, name)(*[torch.tensor(a.astype(dtype)) for a in args], **kwargs)
    e = getattr(ember.linalg, name)(*[ember.tensor(a.astype(dtype)) for a in args], **kwargs)
    assert type(e).__name__ == type(t).__name__
    for field in e._fields:
        assert hasattr(t, field)
    for got, want in zip(e, t):
        got, want = got.numpy(), want.numpy()
        assert got.dtype == want.dtype and got.shape == want.shape
        tol = 1e-5 if dtype == "float32" else 1e-10
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True)


@pytest.mark.parametrize("name", ["cholesky_ex", "inv_ex"])
def test_ex_forms_differentiate_as_pytorch(name):
    x, t = ember.tensor(SPD, requires_grad=True), torch.tensor(SPD, requires_grad=True)
    getattr(ember.linalg, name)(x)[0].sum().backward()
    getattr(torch.linalg, name)(t)[0].sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-9)


def test_check_errors_raises_linalg_error():
    with pytest.raises(RuntimeError):
        torch.linalg.cholesky_ex(torch.tensor(NOT_PD), check_errors=True)
    with pytest.raises(ember.linalg.LinAlgError, match="cholesky_ex.*batch element 1"):
        ember.linalg.cholesky_ex(ember.tensor(NOT_PD), check_errors=True)
    with pytest.raises(RuntimeError, match="inv_ex"):
        ember.linalg.inv_ex(ember.tensor(SINGULAR), check_errors=True)


def test_ex_forms_capture():
    f = ember.function(lambda a, b: ember.linalg.solve_ex(a, b))
    result, info = f(ember.tensor(M), ember.tensor(M[:, :, :2]))
    np.testing.assert_allclose(result.numpy(), np.linalg.solve(M, M[:, :, :2]), atol=1e-10)
    assert info.dtype == ember.int32 and tuple(info.shape) == (3,) and not info.numpy().any()
