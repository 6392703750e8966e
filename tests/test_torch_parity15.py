"""PyTorch 2.13 behaviours ember differed in (helper diff15), each compared with torch itself."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _lib_grad_of_grad(lib, f, xs):
    x = lib.tensor(xs, requires_grad=True)
    (g,) = lib.autograd.grad(f(lib, x).sum(), x, create_graph=True)
    w = lib.tensor(xs[::-1].copy())
    (gg,) = lib.autograd.grad((g * w).sum(), x)  # (no allow_unused: torch reaches x)
    x2 = lib.tensor(xs, requires_grad=True)
    (g2,) = lib.autograd.grad(f(lib, x2).sum(), x2, create_graph=True)
    (g2 * w).sum().backward()
    return g.detach().numpy(), gg.numpy(), x2.grad.numpy()


def test_second_order_through_piecewise_linear_activations_is_zeros():
    # torch's threshold/leaky/hardtanh backward ops differentiate to zeros in their input, so a
    # gradient of a gradient reaches x as zeros (ember's VJPs returned None: x unused)
    xs = np.array([1.5, -2.0, 3.0, -0.25, 7.0])
    cases = {
        "relu": lambda L, x: L.nn.functional.relu(x),
        "relu6": lambda L, x: L.nn.functional.relu6(x),
        "leaky_relu": lambda L, x: L.nn.functional.leaky_relu(x, 0.1),
        "hardtanh": lambda L, x: L.nn.functional.hardtanh(x, -1.0, 2.0),
        # a network: relu's zeros plus the product's nonzero second derivative
        "mm_relu": lambda L, x: L.nn.functional.relu(x[:4].reshape(2, 2) @ x[1:].reshape(2, 2)),
    }
    for name, f in cases.items():
        want = _lib_grad_of_grad(torch, f, xs)
        got = _lib_grad_of_grad(ember, f, xs)
        for w, g in zip(want, got):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=0, err_msg=name)
