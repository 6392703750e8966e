"""``ember.func`` (PyTorch's torch.func transforms) against torch.func on the same inputs:
per-sample gradients (vmap of grad through functional_call), Jacobians, Hessians, vjp/jvp,
vmap's in_dims/out_dims and randomness, functional_call's restoring and tied weights."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import nn

torch = pytest.importorskip("torch")

rng = np.random.default_rng(0)


def _pair(shape):
    a = rng.standard_normal(shape)
    return ember.tensor(a), torch.tensor(a)


def _close(e, t, rtol=1e-10):
    if isinstance(t, (tuple, list)):
        assert len(e) == len(t)
        for a, b in zip(e, t):
            _close(a, b, rtol)
        return
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=rtol, atol=1e-12)


def _f(lib, x, y):
    return (lib.sin(x) * y).sum() + (x * x * y).sum()


def test_grad_and_value_jacobians_hessian_match_torch():
    (ex, tx), (ey, ty) = _pair((3,)), _pair((3,))
    _close(
        ember.func.grad(lambda x, y: _f(ember, x, y))(ex, ey),
        torch.func.grad(lambda x, y: _f(torch, x, y))(tx, ty),
    )
    _close(
        ember.func.grad(lambda x, y: _f(ember, x, y), argnums=(0, 1))(ex, ey),
        torch.func.grad(lambda x, y: _f(torch, x, y), argnums=(0, 1))(tx, ty),
    )
    g, v = ember.func.grad_and_value(lambda x: (x**3).sum())(ex)
    tg, tv = torch.func.grad_and_value(lambda x: (x**3).sum())(tx)
    _close((g, v), (tg, tv))
    g, (v, aux) = ember.func.grad_and_value(lambda x: ((x**2).sum(), x + 1), has_aux=True)(ex)
    _close((g, v, aux), (2 * tx, (tx**2).sum(), tx + 1))
    for name in ("jacrev", "jacfwd"):
        _close(
            getattr(ember.func, name)(lambda x, y: ember.sin(x) * y, argnums=(0, 1))(ex, ey),
            getattr(torch.func, name)(lambda x, y: torch.sin(x) * y, argnums=(0, 1))(tx, ty),
        )
    _close(
        ember.func.hessian(lambda x: _f(ember, x, ey))(ex),
        torch.func.hessian(lambda x: _f(torch, x, ty))(tx),
    )


def test_vjp_and_jvp_match_torch():
    (ex, tx), (ev, tv) = _pair((4,)), _pair((4,))
    out, fn = ember.func.vjp(lambda x: ember.tanh(x) * x, ex)
    tout, tfn = torch.func.vjp(lambda x: torch.tanh(x) * x, tx)
    _close(out, tout)
    _close(fn(ev), tfn(tv))
    _close(fn(ev), tfn(tv))  # twice: the graph is kept
    _close(
        ember.func.jvp(lambda x: ember.exp(x).cumsum(0), (ex,), (ev,)),
        torch.func.jvp(lambda x: torch.exp(x).cumsum(0), (tx,), (tv,)),
    )


def _models(lib):
    lib.manual_seed(0)
    return lib.nn.Sequential(lib.nn.Linear(4, 5), lib.nn.Tanh(), lib.nn.Linear(5, 2))


def test_per_sample_gradients_with_vmap_grad_functional_call():
    tm = _models(torch)
    em = _models(ember)
    em.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    (ex, tx), (ey, ty) = _pair((6, 4)), _pair((6, 2))

    def loss(lib, model):
        def f(params, x, y):
            out = lib.func.functional_call(model, params, (x.unsqueeze(0),))
            return ((out - y.unsqueeze(0)) ** 2).mean()

        return f

    tp = {k: v.detach() for k, v in tm.named_parameters()}
    ep = {k: v.detach() for k, v in em.named_parameters()}
    per_t = torch.func.vmap(torch.func.grad(loss(torch, tm)), in_dims=(None, 0, 0))(
        tp, tx.float(), ty.float()
    )
    per_e = ember.func.vmap(ember.func.grad(loss(ember, em)), in_dims=(None, 0, 0))(
        ep, ex.float(), ey.float()
    )
    assert set(per_e) == set(per_t)
    for k in per_t:
        assert tuple(per_e[k].shape) == tuple(per_t[k].shape) == (6,) + tuple(tp[k].shape)
        _close(per_e[k], per_t[k], rtol=2e-5)
    # the module's own parameters are back in place
    assert all(p is q for p, q in zip(em.parameters(), dict(em.named_parameters()).values()))
    assert isinstance(em[0].weight, nn.Parameter)


def test_vmap_dims_structures_and_randomness():
    (ea, ta), (eb, tb) = _pair((3, 5)), _pair((5, 3))

    def f(lib, a, b):
        return {"s": a * b, "t": (a.sum(), a - b)}

    got = ember.vmap(lambda a, b: f(ember, a, b), in_dims=(1, 0))(ea, eb)
    want = torch.vmap(lambda a, b: f(torch, a, b), in_dims=(1, 0))(ta, tb)
    _close(got["s"], want["s"])
    _close(got["t"], want["t"])
    got = ember.vmap(lambda a, b: (a * b, b), in_dims=(1, None), out_dims=(1, 0))(ea, eb[0])
    want = torch.vmap(lambda a, b: (a * b, b), in_dims=(1, None), out_dims=(1, 0))(ta, tb[0])
    _close(got, want)
    with pytest.raises(ember.ShapeError, match="one size"):
        ember.vmap(lambda a, b: a + b)(ea, eb)
    with pytest.raises(ember.EmberError, match="random"):
        ember.vmap(lambda a: a + ember.rand(()))(ea)
    same = ember.vmap(lambda a: ember.rand(()) + 0 * a.sum(), randomness="same")(ea)
    assert len(set(same.tolist())) == 1
    different = ember.vmap(lambda a: ember.rand(()) + 0 * a.sum(), randomness="different")(ea)
    assert len(set(different.tolist())) == 3


def test_functional_call_ties_restores_and_refuses():
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(3, 3, bias=False)
            self.b = nn.Linear(3, 3, bias=False)
            self.b.weight = self.a.weight
            self.register_buffer("shift", ember.ones(3))

        def forward(self, x):
            return self.b(self.a(x)) + self.shift

    m = Tied()
    original = m.a.weight
    eye = ember.eye(3)
    out = ember.func.functional_call(
        m, {"a.weight": eye, "shift": ember.zeros(3)}, ember.ones(1, 3)
    )
    np.testing.assert_array_equal(out.numpy(), [[1.0, 1.0, 1.0]])  # b.weight followed a.weight
    untied = ember.func.functional_call(
        m, {"a.weight": eye}, (ember.ones(1, 3),), tie_weights=False
    )
    assert not np.allclose(untied.detach().numpy(), 2.0)
    assert m.a.weight is original and m.b.weight is original
    np.testing.assert_array_equal(m.shift.numpy(), [1.0, 1.0, 1.0])
    with pytest.raises(ember.EmberError, match="no parameter or buffer"):
        ember.func.functional_call(m, {"c.weight": eye}, ember.ones(1, 3))
    with pytest.raises(ember.EmberError, match="strict"):
        ember.func.functional_call(m, {"a.weight": eye}, ember.ones(1, 3), strict=True)


def test_stack_module_state_and_ensembles():
    models = [_models(ember) for _ in range(3)]
    params, buffers = ember.func.stack_module_state(models)
    assert params["0.weight"].shape == (3, 5, 4) and buffers == {}
    x = ember.randn(2, 4)
    base = models[0]
    out = ember.vmap(lambda p: ember.func.functional_call(base, p, (x,)))(params)
    for i, m in enumerate(models):
        np.testing.assert_allclose(out[i].detach().numpy(), m(x).detach().numpy(), rtol=1e-6)


def test_func_transforms_inside_a_captured_function_equal_eager():
    """vmap and grad take graph values, and gradients asked for with create_graph inside a
    captured function require grad, so Jacobians of Jacobians (hessian, jacrev of jacrev,
    autograd.functional's hvp / jvp / hessian) are not zeros there."""
    fn, AF = ember.func, ember.autograd.functional

    def f(z):
        return (z.sin() * z).sum() + (z[0] * z[1]) ** 2

    def everything(z, xs):
        return (
            fn.hessian(f)(z),
            fn.jacrev(fn.jacrev(lambda v: (v**3).sum()))(z),
            fn.vmap(fn.grad(lambda v: (v * v.exp()).sum()))(xs),
            fn.vmap(lambda a, b: a * b, in_dims=(0, None))(xs, z),
            AF.hessian(f, z),
            AF.hvp(f, z, ember.ones(3))[1],
            AF.jvp(lambda v: v.exp(), z, ember.ones(3))[1],
        )

    z = ember.tensor(np.array([0.3, -0.7, 1.1], np.float32))
    xs = ember.tensor(np.arange(6, dtype=np.float32).reshape(2, 3) / 5)
    for want, got in zip(everything(z, xs), ember.function(everything)(z, xs)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


def test_hessian_takes_vectorize_and_outer_jacobian_strategy_as_pytorch():
    def f(x, y):
        return (x.sin() * y).sum() + (x * x * y.exp()).sum()

    xv, yv = np.array([0.3, 0.7]), np.array([1.5, -0.5])

    def run(lib, **kw):
        h = lib.autograd.functional.hessian(f, (lib.tensor(xv), lib.tensor(yv)), **kw)
        return [b.detach().numpy() for row in h for b in row]

    want = run(torch)
    for kw in (
        dict(vectorize=True),
        dict(vectorize=True, outer_jacobian_strategy="forward-mode"),
    ):
        for got, ref in zip(run(ember, **kw), want):
            np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)
    x, y = ember.tensor(xv), ember.tensor(yv)
    AF = ember.autograd.functional
    for kw, kind in (
        (dict(outer_jacobian_strategy="forward-mode"), NotImplementedError),
        (dict(outer_jacobian_strategy="bad"), ValueError),
        (dict(vectorize=True, outer_jacobian_strategy="forward-mode", create_graph=True),
         NotImplementedError),
        (dict(vectorize=True, outer_jacobian_strategy="forward-mode", strict=True), RuntimeError),
    ):  # fmt: skip
        with pytest.raises(kind):
            AF.hessian(f, (x, y), **kw)
        with pytest.raises(Exception):  # noqa: B017 (PyTorch refuses each one too)
            torch.autograd.functional.hessian(f, (torch.tensor(xv), torch.tensor(yv)), **kw)
