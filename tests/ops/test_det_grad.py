"""det's gradient (ops/spectral.py): eagerly, where every matrix is invertible, PyTorch's
conj(det) A^-H, equal to PyTorch's first and second derivatives (real and complex batches);
with an exactly singular matrix in the batch the SVD's cofactor matrix, nonzero where the
cofactors are (PyTorch 2.13 gives 0 there), equal to the analytic cofactors; a captured
graph's gradient equals the eager one."""

from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("complex_", [False, True])
def test_invertible_batches_match_pytorch_to_second_order(complex_):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((6, 4, 4)) + (1j * rng.standard_normal((6, 4, 4)) if complex_ else 0)
    g = rng.standard_normal(6) + (1j * rng.standard_normal(6) if complex_ else 0)
    x, t = ember.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    (ex,) = ember.autograd.grad(ember.linalg.det(x), x, ember.tensor(g), create_graph=True)
    (tx,) = torch.autograd.grad(torch.linalg.det(t), t, torch.tensor(g), create_graph=True)
    np.testing.assert_allclose(ex.detach().numpy(), tx.detach().numpy(), rtol=1e-10, atol=1e-12)
    (ex2,) = ember.autograd.grad(ex.real.sum() if complex_ else ex.sum(), x)
    (tx2,) = torch.autograd.grad(tx.real.sum() if complex_ else tx.sum(), t)
    np.testing.assert_allclose(ex2.numpy(), tx2.numpy(), rtol=1e-9, atol=1e-10)


def test_a_singular_matrix_gets_its_cofactors():
    a = np.array([[[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]], np.eye(3) * 2])
    x = ember.tensor(a, requires_grad=True)
    ember.linalg.det(x).sum().backward()
    m = a[0]
    cof = np.array(
        [[(-1) ** (i + j) * np.linalg.det(np.delete(np.delete(m, i, 0), j, 1)) for j in range(3)]
         for i in range(3)]
    )  # fmt: skip
    np.testing.assert_allclose(x.grad.numpy()[0], cof, atol=1e-12)
    np.testing.assert_allclose(x.grad.numpy()[1], np.eye(3) * 4, atol=1e-12)


def test_the_captured_gradient_equals_the_eager_one():
    a = np.random.default_rng(1).standard_normal((3, 5, 5))

    def grad(m):
        return ember.autograd.grad(ember.linalg.det(m).sum(), m)[0]

    x = ember.tensor(a, requires_grad=True)
    eager = grad(x).numpy()
    captured = ember.function(grad)(ember.tensor(a, requires_grad=True)).numpy()
    np.testing.assert_allclose(captured, eager, rtol=1e-10, atol=1e-12)
