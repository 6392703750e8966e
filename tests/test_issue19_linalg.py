"""ember.linalg beyond the OpInfo comparisons (tests/ops/opinfo_issue19linalg.py): the errors a
singular or non-positive-definite matrix raises, the determinant's gradient at a singular
matrix, the old top-level spellings, capture under ``ember.function``, and ``ember.testing``."""

import numpy as np
import pytest

import ember
from ember.testing import assert_close, make_tensor

R = np.random.default_rng(1921)


def _t(a, grad=False):
    return ember.tensor(np.asarray(a, dtype=np.float64), requires_grad=grad)


def _spd(*shape):
    x = R.standard_normal(shape)
    return x @ np.swapaxes(x, -1, -2) + shape[-1] * np.eye(shape[-1])


SINGULAR = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])

# ---------------------------------------------------------------------------------- errors


def test_a_singular_matrix_raises_linalg_error_naming_op_and_batch_element():
    batch = np.stack([np.eye(3), np.eye(3), SINGULAR])
    with pytest.raises(ember.linalg.LinAlgError, match=r"linalg.inv: \(Batch element 2\)") as e:
        ember.linalg.inv(_t(batch))
    assert isinstance(e.value, ember.EmberError) and isinstance(e.value, RuntimeError)
    assert "singular" in str(e.value) and "diagonal element 3" in str(e.value)  # (as PyTorch)
    with pytest.raises(ember.linalg.LinAlgError, match=r"linalg.solve: \(Batch element 2\)"):
        ember.linalg.solve(_t(batch), _t(np.ones((3, 3, 1))))
    with pytest.raises(ember.linalg.LinAlgError, match=r"linalg.inv: The diagonal"):
        ember.inverse(_t(SINGULAR))


def test_cholesky_of_an_indefinite_matrix_names_the_leading_minor():
    a = _spd(2, 3, 3)
    a[1, 2, 2] = -50.0
    with pytest.raises(
        ember.linalg.LinAlgError,
        match=r"linalg.cholesky: \(Batch element 1\).*leading minor of order 3",
    ):
        ember.linalg.cholesky(_t(a))


def test_integer_and_half_inputs_are_refused_by_dtype():
    with pytest.raises(ember.DTypeError, match="linalg.inv"):
        ember.linalg.inv(ember.tensor(np.eye(2, dtype=np.int64)))
    with pytest.raises(ember.ShapeError, match="square"):
        ember.linalg.det(_t(np.ones((2, 3))))


def test_a_singular_matrix_under_capture_raises_when_the_graph_runs():
    fn = ember.function(lambda a: ember.linalg.inv(a).sum())
    assert np.isclose(fn(_t(2 * np.eye(3))).item(), 1.5)
    with pytest.raises(ember.linalg.LinAlgError, match="singular"):
        fn(_t(SINGULAR))


# -------------------------------------------------------------------------------- gradients


def _finite_difference(f, x, eps=1e-6):
    grad = np.zeros_like(x)
    for index in np.ndindex(*x.shape):
        up, down = x.copy(), x.copy()
        up[index] += eps
        down[index] -= eps
        grad[index] = (f(up) - f(down)) / (2 * eps)
    return grad


def test_det_gradient_at_a_singular_matrix_is_the_cofactor_matrix():
    """PyTorch 2.13 returns 0 here; det is a polynomial and its derivative is the cofactor
    matrix everywhere (for a rank n-1 matrix, a rank-one nonzero matrix)."""
    x = _t(SINGULAR, grad=True)
    ember.linalg.det(x).backward()
    expected = _finite_difference(lambda a: np.linalg.det(a), SINGULAR)
    np.testing.assert_allclose(x.grad.numpy(), expected, atol=1e-6)
    assert np.abs(expected).max() > 1


def test_second_derivative_of_logdet_matches_finite_differences():
    a = _spd(3, 3)
    x = _t(a, grad=True)
    (g,) = ember.autograd.grad(ember.logdet(x), [x], create_graph=True)
    (hv,) = ember.autograd.grad((g * g).sum(), [x])

    def first(m):
        return (np.linalg.inv(m).T ** 2).sum()

    np.testing.assert_allclose(hv.numpy(), _finite_difference(first, a), rtol=1e-5, atol=1e-7)


def test_qr_mode_r_has_no_gradient():
    x = _t(R.standard_normal((4, 3)), grad=True)
    _, r = ember.linalg.qr(x, mode="r")
    with pytest.raises(ember.AutogradError, match="mode='r'"):
        r.sum().backward()


def test_slogdet_of_an_exactly_singular_matrix_is_exact():
    # (rank 2: LU with partial pivoting leaves an exact zero pivot in any order of rounding;
    # the opinfo database leaves this sample out, PyTorch's answer there depending on its CPU)
    a = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])
    for x in (_t(a), _t(a).mT, _t(np.stack([a, np.eye(3)]))[0]):
        sign, logabs = ember.linalg.slogdet(x)
        assert sign.item() == 0.0 and logabs.item() == -np.inf
        assert ember.logdet(x).item() == -np.inf
        assert ember.linalg.det(x).item() == 0.0


# ----------------------------------------------------------------------- old spellings


def test_old_top_level_spellings_and_methods():
    a = _t(R.standard_normal((3, 3)) + 3 * np.eye(3))
    np.testing.assert_allclose(a.inverse().numpy(), np.linalg.inv(a.numpy()))
    np.testing.assert_allclose(a.det().item(), np.linalg.det(a.numpy()))
    np.testing.assert_allclose(ember.det(a).item(), np.linalg.det(a.numpy()))
    sign, logabs = a.slogdet()
    np.testing.assert_allclose(sign.item() * np.exp(logabs.item()), np.linalg.det(a.numpy()))
    assert np.isnan(ember.logdet(_t(np.diag([-1.0, 2.0]))).item())
    np.testing.assert_allclose(a.matrix_power(3).numpy(), np.linalg.matrix_power(a.numpy(), 3))
    u, s, v = a.svd()
    np.testing.assert_allclose((u * s.unsqueeze(-2)).matmul(v.mT).numpy(), a.numpy(), atol=1e-12)
    np.testing.assert_allclose(a.pinverse().numpy(), np.linalg.pinv(a.numpy()), atol=1e-12)
    spd = _t(_spd(3, 3))
    np.testing.assert_allclose(spd.cholesky().numpy(), np.linalg.cholesky(spd.numpy()))
    q, r = ember.qr(a)
    np.testing.assert_allclose(q.matmul(r).numpy(), a.numpy(), atol=1e-12)


def test_named_results():
    a = _t(_spd(2, 3, 3))
    out = ember.linalg.eigh(a)
    assert out.eigenvalues.shape == (2, 3) and out.eigenvectors.shape == (2, 3, 3)
    out = ember.linalg.slogdet(a)
    assert out.sign.shape == (2,) and out.logabsdet.shape == (2,)
    out = ember.linalg.svd(a)
    assert out.U.shape == out.Vh.shape == (2, 3, 3) and out.S.shape == (2, 3)
    out = ember.linalg.lstsq(a, _t(np.ones((2, 3, 1))))
    assert out.solution.shape == (2, 3, 1) and out.rank.dtype is ember.int64
    assert ember.linalg.qr(a).Q.shape == (2, 3, 3)


# -------------------------------------------------------------------------------- capture


def _gaussian_nll(cov, x):
    """A multivariate normal's negative log-likelihood, as a Gaussian-process model writes
    it: cholesky, a triangular solve, the log-determinant from the factor's diagonal."""
    L = ember.linalg.cholesky(cov)
    z = ember.linalg.solve_triangular(L, x.unsqueeze(-1), upper=False)
    logdet = 2 * ember.log(ember.diagonal(L, 0, -2, -1)).sum(-1)
    return 0.5 * ((z.squeeze(-1) ** 2).sum(-1) + logdet).sum()


def test_linalg_under_ember_function_matches_eager_values_and_gradients():
    cov, x = _spd(4, 3, 3), R.standard_normal((4, 3))

    def step(c, v):
        c = (c + c.mT) / 2
        loss = _gaussian_nll(c, v) + ember.linalg.slogdet(c).logabsdet.sum()
        loss = loss + ember.linalg.solve(c, v).sum() + ember.linalg.eigvalsh(c).sum()
        u, s, vh = ember.linalg.svd(c, full_matrices=False)
        loss = loss + s.sum() + ember.linalg.det(c).sum() + ember.linalg.inv(c).sum()
        loss = loss + ember.linalg.pinv(c).sum() + ember.linalg.qr(c).R.abs().sum()
        loss.backward()
        return loss

    eager_c, eager_x = _t(cov, grad=True), _t(x, grad=True)
    expected = step(eager_c, eager_x)
    compiled = ember.function(step)
    c, v = _t(cov, grad=True), _t(x, grad=True)
    got = compiled(c, v)
    np.testing.assert_allclose(got.detach().numpy(), expected.detach().numpy(), rtol=1e-10)
    np.testing.assert_allclose(c.grad.numpy(), eager_c.grad.numpy(), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(v.grad.numpy(), eager_x.grad.numpy(), rtol=1e-8, atol=1e-10)
    text = str(compiled.graph)
    for name in ("cholesky(", "solve_triangular(", "slogdet(", "linalg_svd(", "pinv(", "qr("):
        assert name in text, name


def test_torch_style_program_runs_after_the_rename():
    """A least-squares fit as a PyTorch program writes it, with ``torch`` renamed."""
    torch = ember  # noqa: F841  (the rename is the point)
    X = torch.tensor(R.standard_normal((20, 3)))
    w = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    y = X @ w
    sol = torch.linalg.lstsq(X, y.unsqueeze(-1)).solution.squeeze(-1)
    torch.testing.assert_close(sol, w)
    assert torch.linalg.matrix_rank(X).item() == 3
    torch.testing.assert_close(torch.linalg.pinv(X) @ y, w)
    torch.testing.assert_close(torch.linalg.cross(w, w), torch.zeros(3, dtype=torch.float64))


# -------------------------------------------------------------------------- ember.testing


def test_assert_close_reports_like_pytorch():
    a = ember.tensor([1.0, 2.0, 3.0])
    assert_close(a, ember.tensor([1.0, 2.0 + 1e-7, 3.0]))
    with pytest.raises(AssertionError) as e:
        assert_close(a, ember.tensor([1.0, 2.5, 3.0]))
    text = str(e.value)
    assert text.startswith("Tensor-likes are not close!")
    assert "Mismatched elements: 1 / 3 (33.3%)" in text
    assert "Greatest absolute difference: 0.5 at index (1,) (up to 1e-05 allowed)" in text
    assert "(up to 1.3e-06 allowed)" in text
    with pytest.raises(AssertionError, match="attribute 'dtype' do not match"):
        assert_close(a, a.double())
    assert_close(a, a.double(), check_dtype=False)
    with pytest.raises(AssertionError, match="attribute 'shape'"):
        assert_close(a, a[:2])
    with pytest.raises(AssertionError, match=r"Scalars are not close!\n\nExpected 1.5 but got"):
        assert_close(1.0, 1.5)
    with pytest.raises(AssertionError, match=r"The failure occurred for item \[1\]"):
        assert_close([a, a], [a, a + 1])
    with pytest.raises(AssertionError, match=r"item \['w'\]"):
        assert_close({"w": a}, {"w": a * 2})
    with pytest.raises(AssertionError, match="^mine$"):
        assert_close(a, a + 1, msg="mine")
    with pytest.raises(ValueError, match="rtol"):
        assert_close(a, a, atol=1.0)
    assert_close(a, a + 0.1, rtol=0.0, atol=0.2)
    nan = ember.tensor([float("nan"), 1.0])
    with pytest.raises(AssertionError):
        assert_close(nan, nan)
    assert_close(nan, nan, equal_nan=True)
    inf = ember.tensor([float("inf")])
    assert_close(inf, inf)
    with pytest.raises(AssertionError):
        assert_close(ember.tensor([1, 2]), ember.tensor([1, 3]))  # integers: exact
    with pytest.raises(TypeError):
        assert_close(a, 1.0)


def test_assert_close_float16_tolerance_is_pytorchs():
    a = ember.tensor([1.0], dtype=ember.float16)
    assert_close(a, ember.tensor([1.0009765625], dtype=ember.float16))  # 1 ulp: within 1e-3


def test_make_tensor_draws_in_range_repeatably():
    ember.manual_seed(3)
    a = make_tensor(4, 5, dtype=ember.float32, low=-1, high=2)
    ember.manual_seed(3)
    b = make_tensor((4, 5), dtype=ember.float32, low=-1, high=2)
    assert a.shape == (4, 5) and a.dtype is ember.float32
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert a.numpy().min() >= -1 and a.numpy().max() <= 2
    ints = make_tensor(1000, dtype=ember.uint8, exclude_zero=True)
    assert ints.dtype is ember.uint8 and 1 <= ints.numpy().min() and ints.numpy().max() <= 9
    signed = make_tensor(1000, dtype=ember.int64).numpy()
    assert signed.min() == -9 and signed.max() == 9
    g = make_tensor(2, 3, dtype=ember.float64, requires_grad=True, noncontiguous=True)
    assert g.requires_grad and g.is_leaf and g.shape == (2, 3)
    assert make_tensor(3, dtype=ember.bool).dtype is ember.bool
    with pytest.raises(ValueError, match="CPU"):
        make_tensor(2, dtype=ember.float32, device="cuda")
    with pytest.raises(ValueError, match="floating"):
        make_tensor(2, dtype=ember.int32, requires_grad=True)
