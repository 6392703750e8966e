"""VJPs that run their backward op, a product or a view op by its kernel, undispatched, where
the backward records nothing (ops/_unrecorded.py `direct`, `apply_direct`): a linear layer's
bias sum and a ReLU's gradient, batched products, reshape and permute, gelu, softmax and
log_softmax. Each against the dispatched path bit for bit, PyTorch, and double backward."""

from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _arrays(*shapes, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


def _grads(lib, program, arrays, steps=2):
    tensors = [lib.tensor(a, requires_grad=True) for a in arrays]
    for _ in range(steps):  # (the second backward takes the kept signatures)
        program(lib, *tensors).backward()
    return [t.grad for t in tensors]


def _layer_grads(lib, xs, ws, bs, program, steps=2):
    x = lib.tensor(xs, requires_grad=True)
    w = lib.tensor(ws, requires_grad=True)
    b = lib.tensor(bs, requires_grad=True)
    for _ in range(steps):  # (the second backward takes the kept signatures)
        program(lib, x, w, b).backward()
    return [t.grad.numpy() for t in (x, w, b)]


LAYER_PROGRAMS = [
    # a 2-d linear layer's bias gradient: the sum's kernel, undispatched; then the ReLU's
    lambda L, x, w, b: (L.nn.functional.relu(L.nn.functional.linear(x, w, b)) * 1.5).sum(),
    # 3-d rows: the dispatched sums
    lambda L, x, w, b: L.nn.functional.linear(x.reshape(2, 3, 4), w, b).relu().pow(2).sum(),
]


@pytest.mark.parametrize("program", LAYER_PROGRAMS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_linear_bias_and_relu_gradients_as_dispatched_and_torch(program, dtype, monkeypatch):
    xs, ws, bs = _arrays((6, 4), (5, 4), (5,), dtype=dtype, seed=11)
    xs[0, :2] = np.nan  # (a NaN result passes its gradient through the ReLU, as PyTorch's)
    got = _layer_grads(ember, xs, ws, bs, program)
    want = _layer_grads(torch, xs, ws, bs, program)
    from ember.ops import elementwise, linalg

    monkeypatch.setattr(elementwise, "direct", lambda *a, **k: None)
    monkeypatch.setattr(linalg, "direct", lambda *a, **k: None)
    slow = _layer_grads(ember, xs, ws, bs, program)
    for g, s, t in zip(got, slow, want):
        np.testing.assert_array_equal(g, s)
        np.testing.assert_allclose(g, t, rtol=1e-5 if dtype == np.float32 else 1e-12)


def test_linear_and_relu_double_backward_match_torch():
    xs, ws, bs = _arrays((3, 4), (2, 4), (2,), dtype=np.float64, seed=12)

    def second(lib):
        x, w, b = (lib.tensor(a, requires_grad=True) for a in (xs, ws, bs))
        y = lib.nn.functional.relu(lib.nn.functional.linear(x, w, b)) ** 2
        gw, gb = lib.autograd.grad(y.sum(), (w, b), create_graph=True)
        (gw.pow(2).sum() + gb.pow(2).sum()).backward()
        return [t.grad.numpy() for t in (x, w, b)]

    for g, t in zip(second(ember), second(torch)):
        np.testing.assert_allclose(g, t, rtol=1e-12)


@pytest.mark.parametrize(
    "prepare, shape",
    [
        (lambda x: x, (6, 4)),  # contiguous: a view (the shortcut)
        (lambda x: x.t(), (24,)),  # transposed: copied, PyTorch's UnsafeViewBackward0
        (lambda x: x[:, :4], (16,)),  # strided, copied
        (lambda x: x.t(), (3, 8)),  # copied
        (lambda x: x.t().t(), (8, 3)),  # contiguous again
    ],
)
def test_reshape_node_names_and_gradients_match_torch(prepare, shape):
    (xs,) = _arrays((4, 6), dtype=np.float64, seed=13)
    results = []
    for lib in (ember, torch):
        x = lib.tensor(xs, requires_grad=True)
        y = prepare(x * 1.0).reshape(shape)
        (y * lib.arange(y.numel(), dtype=lib.float64).reshape(shape)).sum().backward()
        results.append((type(y.grad_fn).__name__, x.grad.numpy()))
    (name, grad), (want_name, want_grad) = results
    assert name == want_name
    np.testing.assert_array_equal(grad, want_grad)


PRODUCT_PROGRAMS = [
    lambda L, a, b, w: (a @ b).pow(2).sum(),  # batched by batched: the transposes, the products
    lambda L, a, b, w: (a @ w).pow(2).sum(),  # batched by a matrix: rows folded
    lambda L, a, b, w: L.nn.functional.linear(a, w.t(), w[0]).pow(2).sum(),  # 3-d+ rows, bias
    lambda L, a, b, w: (a.permute(0, 1, 3, 2).reshape(2, 3, 20) * 2.0).sum(),  # view VJPs
]


@pytest.mark.parametrize("program", PRODUCT_PROGRAMS)
def test_product_and_view_gradients_as_dispatched_and_torch(program, monkeypatch):
    arrays = _arrays((2, 3, 4, 5), (2, 3, 5, 4), (5, 6), dtype=np.float64, seed=14)
    got = _grads(ember, program, arrays)
    want = _grads(torch, program, arrays)
    from ember.ops import linalg, shape

    monkeypatch.setattr(linalg, "direct", lambda *a, **k: None)
    monkeypatch.setattr(shape, "direct", lambda *a, **k: None)
    slow = _grads(ember, program, arrays)
    for g, s, t in zip(got, slow, want):
        assert (g is None) == (s is None) == (t is None)
        if g is not None:
            np.testing.assert_array_equal(g.numpy(), s.numpy())
            np.testing.assert_allclose(g.numpy(), t.numpy(), rtol=1e-12)


ACTIVATION_PROGRAMS = [
    lambda L, x: (L.nn.functional.gelu(x) * x).sum(),
    lambda L, x: (L.nn.functional.gelu(x, approximate="tanh") * x).sum(),
    lambda L, x: (L.softmax(x, -1) * x).sum(),
    lambda L, x: (L.log_softmax(x, 0) * x).sum(),
]


@pytest.mark.parametrize("program", ACTIVATION_PROGRAMS)
def test_activation_backward_ops_as_dispatched_torch_and_twice(program, monkeypatch):
    (xs,) = _arrays((3, 5), dtype=np.float64, seed=15)
    got = _grads(ember, lambda L, x: program(L, x), [xs])[0].numpy()
    from ember.ops import _unrecorded

    monkeypatch.setattr(_unrecorded, "direct", lambda *a, **k: None)
    slow = _grads(ember, lambda L, x: program(L, x), [xs])[0].numpy()
    np.testing.assert_array_equal(got, slow)
    second = []
    for lib in (ember, torch):
        x = lib.tensor(xs, requires_grad=True)
        (g,) = lib.autograd.grad(program(lib, x), x, create_graph=True)
        (g * g).sum().backward()
        second.append((g.detach().numpy(), x.grad.numpy()))
    np.testing.assert_allclose(got, 2 * second[1][0], rtol=1e-12)  # (two backwards)
    np.testing.assert_allclose(second[0][1], second[1][1], rtol=1e-10)
