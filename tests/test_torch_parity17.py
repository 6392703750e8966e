"""Second-order gradients (create_graph) through the piecewise-linear activations, prelu, the
smooth activations and max pooling, compared with PyTorch 2.13 in float64 (helper diff17)."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

_R = np.random.default_rng(17)


def _away(a, kinks, margin=0.05):
    """``a`` with values near a kink moved off it (finite differences and the masks agree)."""
    a = a.copy()
    for k in kinks:
        near = np.abs(a - k) < margin
        a[near] = k + margin * np.where(a[near] >= k, 2, -2)
    return a


X1 = _away(_R.standard_normal((2, 9)) * 2, (-0.5, 0.0, 0.5))
X4 = _away(_R.standard_normal((2, 3, 4, 4)), (0.0,))
X3 = _R.standard_normal((2, 3, 8))
X5 = _R.standard_normal((1, 2, 4, 4, 4))


def _F(lib):
    return lib.nn.functional


def _nn_prelu(lib, x):
    m = lib.nn.PReLU(3).double()
    with lib.no_grad():
        m.weight.copy_(lib.tensor([0.25, -0.1, 0.7]))
    return m(x), m.weight


CASES = {
    "threshold": (lambda L, x: _F(L).threshold(x, 0.5, -1.0), [X1]),
    "hardshrink": (lambda L, x: _F(L).hardshrink(x, 0.5), [X1]),
    "softshrink": (lambda L, x: _F(L).softshrink(x, 0.5), [X1]),
    "prelu/one": (lambda L, x, w: _F(L).prelu(x, w), [X4, np.array([0.25])]),
    "prelu/channels": (lambda L, x, w: _F(L).prelu(x, w), [X4, np.array([0.25, -0.1, 0.7])]),
    "elu": (lambda L, x: _F(L).elu(x, 1.3), [X1]),
    "selu": (lambda L, x: _F(L).selu(x), [X1]),
    "softplus": (lambda L, x: _F(L).softplus(x, 2.0, 3.0), [X1]),
    "hardswish": (lambda L, x: _F(L).hardswish(x), [_away(X1 * 2, (-3.0, 3.0))]),
    "silu": (lambda L, x: _F(L).silu(x), [X1]),
    "mish": (lambda L, x: _F(L).mish(x), [X1]),
    "logsigmoid": (lambda L, x: _F(L).logsigmoid(x), [X1]),
    "max_pool1d": (lambda L, x: _F(L).max_pool1d(x, 2), [X3]),
    "max_pool1d/indices": (
        lambda L, x: _F(L).max_pool1d(x, 3, 2, 1, return_indices=True)[0],
        [X3],
    ),
    "max_pool2d/overlapping": (lambda L, x: _F(L).max_pool2d(x, 3, 1, 1), [X4]),
    "max_pool2d/indices": (lambda L, x: _F(L).max_pool2d(x, 2, return_indices=True)[0], [X4]),
    "max_pool3d": (lambda L, x: _F(L).max_pool3d(x, 2), [X5]),
    "max_pool3d/indices": (lambda L, x: _F(L).max_pool3d(x, 2, return_indices=True)[0], [X5]),
    "adaptive_max_pool1d": (lambda L, x: _F(L).adaptive_max_pool1d(x, 3), [X3]),
    "adaptive_max_pool2d/indices": (
        lambda L, x: _F(L).adaptive_max_pool2d(x, (3, 2), return_indices=True)[0],
        [X4],
    ),
}
# (celu: PyTorch's float64 gradient is off by ~4e-8 relative, its 1 / alpha rounded to float32;
# hardsigmoid: PyTorch has no double backward)


def _second_order(lib, f, arrays, quadratic):
    """First gradients of a loss in every operand (create_graph, a non-uniform upstream
    gradient ``up``), then for each the gradient of a weighted sum of it in every operand and
    in ``up`` (None where it does not reach one). ``quadratic`` adds ``sum(c * out**2)``, whose
    upstream gradient depends on the operands."""
    ts = [lib.tensor(a, requires_grad=True) for a in arrays]
    out = f(lib, *ts)
    n = out.numel()
    up = lib.tensor(np.linspace(-1.0, 1.0, n).reshape(tuple(out.shape)), requires_grad=True)
    loss = (out * up).sum()
    if quadratic:
        loss = loss + (out * out * lib.tensor(np.sin(np.arange(n)).reshape(tuple(out.shape)))).sum()
    firsts = lib.autograd.grad(loss, ts, create_graph=True)
    result = []
    for g in firsts:
        w = lib.tensor(np.cos(np.arange(g.numel())).reshape(tuple(g.shape)))
        second = lib.autograd.grad((g * w).sum(), [*ts, up], allow_unused=True, retain_graph=True)
        second = [None if s is None else s.numpy() for s in second]
        result.append((g.requires_grad, g.detach().numpy(), second))
    return result


def test_second_order_gradients_match_torch():
    # before: with a loss linear in the result, threshold/hardshrink/softshrink's and max
    # pooling's second derivative in x, and prelu's d/dx of dL/dx and d/dw of dL/dw, were None
    # (x unused) where torch gives zeros; their backward ops now differentiate to those zeros
    # (max pooling's through its saved indices: pool_scatter's VJP in them)
    for name, (f, arrays) in CASES.items():
        for quadratic in (False, True):
            want = _second_order(torch, f, arrays, quadratic)
            got = _second_order(ember, f, arrays, quadratic)
            for k, ((wr, wg, ws), (gr, gg, gs)) in enumerate(zip(want, got)):
                where = f"{name} quadratic={quadratic} operand {k}"
                assert gr == wr, where
                np.testing.assert_allclose(gg, wg, rtol=1e-12, atol=1e-14, err_msg=where)
                for j, (w2, g2) in enumerate(zip(ws, gs)):
                    assert (g2 is None) == (w2 is None), f"{where} second {j}"
                    if w2 is not None:
                        np.testing.assert_allclose(
                            g2, w2, rtol=1e-12, atol=1e-14, err_msg=f"{where} second {j}"
                        )


def test_nn_prelu_second_order_in_weight():
    # nn.PReLU with three channels: the weight's gradient differentiates in x, the input's in w
    def run(lib):
        x = lib.tensor(X4, requires_grad=True)
        out, weight = _nn_prelu(lib, x)
        up = lib.tensor(np.sin(np.arange(out.numel())).reshape(tuple(out.shape)))
        gx, gw = lib.autograd.grad((out * up).sum(), [x, weight], create_graph=True)
        c = lib.tensor(np.cos(np.arange(gx.numel())).reshape(tuple(gx.shape)))
        second = lib.autograd.grad((gx * c).sum() + (gw * gw).sum(), [x, weight])
        return [t.detach().numpy() for t in (gx, gw, *second)]

    for w, g in zip(run(torch), run(ember)):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)


def _gradient_penalty_step(lib, params, x):
    """A critic's gradient penalty through the ops (the second derivative reaches the
    parameters through each backward op's VJP): the penalty and its parameter gradients."""
    F = _F(lib)
    w1, a, w2 = params
    h = F.prelu((x @ w1).reshape(2, 2, 3), a)
    h = F.threshold(F.softshrink(h, 0.1), -0.3, -0.5)
    h = F.max_pool1d(F.hardshrink(h, 0.05), 2, 1)
    out = h.reshape(2, -1) @ w2
    (gx,) = lib.autograd.grad(out.sum(), x, create_graph=True)
    penalty = ((gx * gx).sum(1) - 1).pow(2).mean()
    return (penalty, *lib.autograd.grad(penalty, params))


def test_gradient_penalty_eager_and_captured():
    arrays = [_R.standard_normal((4, 6)), np.array([0.2, -0.4]), _R.standard_normal((4, 1))]
    x = _R.standard_normal((2, 4))

    def run(lib, step):
        params = [lib.tensor(a, requires_grad=True) for a in arrays]
        return [t.detach().numpy() for t in step(lib, params, lib.tensor(x, requires_grad=True))]

    want = run(torch, _gradient_penalty_step)
    captured = ember.function(
        lambda p0, p1, p2, x: _gradient_penalty_step(ember, [p0, p1, p2], x),
        executor="interpreter",  # (the C loops of the ops: tests/ops/test_c_expressions.py)
    )
    for got in (run(ember, _gradient_penalty_step), run(ember, lambda L, p, x: captured(*p, x))):
        for w, g in zip(want, got):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)


def test_forward_mode_matches_torch():
    # forward mode differentiates the tape's backward pass again: the backward ops' VJPs in
    # the incoming gradient (max pooling's: pool_gather at the saved indices) give the tangents
    for name, (f, arrays) in CASES.items():
        tangents = [np.cos(np.arange(a.size)).reshape(a.shape) for a in arrays]

        def jvp(lib):
            fn = lambda *ts: f(lib, *ts)  # noqa: E731
            out, tangent = lib.func.jvp(
                fn, tuple(lib.tensor(a) for a in arrays), tuple(lib.tensor(t) for t in tangents)
            )
            return out.detach().numpy(), tangent.detach().numpy()

        for w, g in zip(jvp(torch), jvp(ember)):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14, err_msg=name)
