"""var/std/var_mean/std_mean gradients as PyTorch 2.13's var_backward
(ops/variance.py): an infinite upstream gradient gives +-inf (not NaN), and first and second
derivatives over dims, keepdim, correction and unbiased match PyTorch's in float64."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

X = np.array([[1.0, 2.0, 4.0, -0.5], [3.0, 3.5, -2.0, 7.0], [0.25, 0.0, 1.5, 2.0]])

CALLS = [
    ("var", lambda lib, x: x.var()),
    ("var_dim", lambda lib, x: x.var(1)),
    ("var_dim_keepdim", lambda lib, x: x.var(0, keepdim=True)),
    ("var_dims", lambda lib, x: x.var((0, 1))),
    ("var_biased", lambda lib, x: x.var(1, unbiased=False)),
    ("var_correction2", lambda lib, x: x.var(1, correction=2)),
    ("var_positional_unbiased", lambda lib, x: x.var(False)),
    ("std", lambda lib, x: x.std()),
    ("std_dim", lambda lib, x: x.std(1, keepdim=True)),
    ("std_correction0", lambda lib, x: lib.std(x, 0, correction=0)),
    ("var_mean", lambda lib, x: lib.var_mean(x, 1)[0]),
    ("var_mean_sum", lambda lib, x: sum(t.sum() for t in lib.var_mean(x, 1, correction=0))),
    ("std_mean", lambda lib, x: lib.std_mean(x, 0)[0]),
]


def _grads(lib, fn, upstream, twice=False):
    x = lib.tensor(X, dtype=lib.float64, requires_grad=True)
    y = fn(lib, x)
    g = lib.full(tuple(y.shape), upstream, dtype=lib.float64)
    (gx,) = lib.autograd.grad(y, x, g, create_graph=twice)
    if not twice:
        return gx.detach().numpy()
    # a second derivative: the gradient of a weighted sum of the first
    w = lib.tensor(np.linspace(-1.0, 2.0, X.size).reshape(X.shape), dtype=lib.float64)
    (ggx,) = lib.autograd.grad((gx * w).sum(), x)
    return ggx.numpy()


@pytest.mark.parametrize("name,fn", CALLS, ids=[c[0] for c in CALLS])
@pytest.mark.parametrize("upstream", [float("inf"), float("-inf"), 0.75])
def test_first_derivative_as_pytorch(name, fn, upstream):
    expected = _grads(torch, fn, upstream)
    got = _grads(ember, fn, upstream)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name,fn", CALLS, ids=[c[0] for c in CALLS])
def test_second_derivative_as_pytorch(name, fn):
    expected = _grads(torch, fn, 1.25, twice=True)
    got = _grads(ember, fn, 1.25, twice=True)
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)


def test_values_float32_and_edge_counts_as_pytorch():
    x = np.random.default_rng(3).standard_normal((5, 7)).astype(np.float32) + 1e4
    for args in [(), (1,), (0,)]:
        np.testing.assert_allclose(
            ember.tensor(x).var(*args).numpy(), torch.tensor(x).var(*args).numpy(), rtol=1e-5
        )
    one = np.array([[2.0, 3.0]])
    for correction in (0, 1, 2):
        want = torch.tensor(one).var(0, correction=correction).numpy()
        got = ember.tensor(one).var(0, correction=correction).numpy()
        np.testing.assert_array_equal(got, want)  # (N <= correction: inf or NaN, as PyTorch)


def test_captured_var_gradient_matches_eager():
    def step(x):
        return ember.autograd.grad(x.var(1).sum() * float("inf"), x)[0]

    x = ember.tensor(X, requires_grad=True)
    eager = step(x)
    captured = ember.function(step)(x)
    np.testing.assert_array_equal(captured.numpy(), eager.numpy())
    assert np.isinf(eager.numpy()).all()


def test_onnx_export_with_symbolic_sizes():
    ort = pytest.importorskip("onnxruntime")
    import io

    def f(x):
        return x.var(1, keepdim=True) * 2 + x.std(0, correction=0).sum()

    buffer = io.BytesIO()
    x = ember.randn(3, 5)
    ember.onnx.export(f, buffer, input_signature=[ember.TensorSpec((None, None))])
    session = ort.InferenceSession(buffer.getvalue())
    x7 = np.random.default_rng(1).standard_normal((7, 4)).astype(np.float32)
    (got,) = session.run(None, {session.get_inputs()[0].name: x7})
    want = f(torch.tensor(x7)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert x.var().shape == ()
