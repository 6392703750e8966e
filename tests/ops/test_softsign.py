"""``softsign``, a primitive with a C expression (ops/elementwise.py only): PyTorch's values
and gradients (first and second order), and it fuses into compiled loops without anything
else knowing about it, equal to its NumPy kernel bit for bit (two IEEE roundings in each).
Its samples run in the conformance harness too (samples_elementwise.py,
samples_functional_act.py), and tests/ops/test_c_expressions.py checks its C expression."""

import numpy as np
import pytest

import ember
from ember.graph import interpreter
from ember.kernels import ccompile

F = ember.nn.functional
torch = pytest.importorskip("torch")


def _values(dtype):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(1000) * 10.0 ** rng.uniform(-3, 3, 1000)
    x[:6] = [0.0, -0.0, 1e30, -1e30, np.finfo(dtype).max, np.finfo(dtype).tiny]
    return x.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_values_and_gradients_equal_pytorchs(dtype):
    x = _values(dtype)
    g = np.random.default_rng(1).standard_normal(x.shape).astype(dtype)
    t = torch.tensor(x, requires_grad=True)
    e = ember.tensor(x, requires_grad=True)
    want = torch.nn.functional.softsign(t)
    got = F.softsign(e)
    assert got.dtype == ember.dtypes.from_numpy_dtype(np.dtype(dtype))
    np.testing.assert_array_equal(
        got.detach().numpy(), want.detach().numpy()
    )  # the same two roundings
    (got_grad,) = ember.autograd.grad(got, e, ember.tensor(g), create_graph=True)
    (want_grad,) = torch.autograd.grad(want, t, torch.tensor(g))
    # exactly g / (1 + |x|)^2 (long double), to its four roundings; below the smallest normal
    # number, where (1 + |x|)^2 overflows first, to within that number
    eps, tiny = np.finfo(dtype).eps, np.finfo(dtype).tiny
    wide, gw = x.astype(np.longdouble), g.astype(np.longdouble)
    exact = gw / (1 + np.abs(wide)) ** 2
    np.testing.assert_allclose(
        got_grad.detach().numpy(), exact.astype(dtype), rtol=4 * eps, atol=tiny
    )
    # PyTorch differentiates the quotient, g / (1 + |x|) less a nearly equal term: within a
    # few roundings of the larger term
    close = np.abs(got_grad.detach().numpy() - want_grad.detach().numpy()) <= 4 * eps * np.abs(
        g
    ) / (1 + np.abs(x))
    assert close.all()
    # the second derivative, through the VJP's own ember ops: -2 g sign(x) / (1 + |x|)^3
    (got_2,) = ember.autograd.grad(got_grad.sum(), e)
    exact_2 = -2 * gw * np.sign(wide) / (1 + np.abs(wide)) ** 3
    np.testing.assert_allclose(got_2.numpy(), exact_2.astype(dtype), rtol=16 * eps, atol=tiny)


def test_the_gradient_at_infinities_is_pytorchs_nan():
    # PyTorch differentiates its composite x / (1 + |x|): inf / inf at +-inf
    x = [float("inf"), -float("inf"), float("nan"), 0.0, 3.0]
    t = torch.tensor(x, requires_grad=True)
    e = ember.tensor(x, requires_grad=True)
    torch.nn.functional.softsign(t).sum().backward()
    F.softsign(e).sum().backward()
    np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), rtol=1e-6)
    f = ember.function(lambda v: ember.autograd.grad(F.softsign(v).sum(), v)[0])
    np.testing.assert_allclose(f(e.detach().requires_grad_()).numpy(), t.grad.numpy(), rtol=1e-6)


def test_the_module_and_the_functional_form_agree():
    x = ember.tensor(_values(np.float32))
    np.testing.assert_array_equal(ember.nn.Softsign()(x).numpy(), F.softsign(x).numpy())
    assert not hasattr(ember, "softsign")  # as in PyTorch: torch.nn.functional only


@pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_it_fuses_and_the_loop_equals_the_kernel_bit_for_bit(dtype):
    def f(x, w):
        return F.softsign(x * w) + w

    x, w = _values(dtype).reshape(10, 100), _values(dtype)[:100][::-1].copy()
    compiled = ember.function(f)
    got = compiled(ember.tensor(x), ember.tensor(w)).numpy()
    (node,) = [n for n in compiled.graph.nodes if n.kind == "call"]
    assert node.op.name == "fused_elementwise"
    assert [i.op.name for i in node.attrs["program"]] == ["mul", "softsign", "add"]
    want = interpreter.run(ember.trace(f, ember.tensor(x), ember.tensor(w)).graph, [x, w])[0]
    np.testing.assert_array_equal(got, want)
    assert got.tobytes() == want.tobytes()  # -0.0 and all
