"""PyTorch 2.13 behaviours ember differed in (helper diff16), each compared with torch itself."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _second_order(lib, f, arrays, wrt):
    """The gradient of ``f`` in operand ``wrt`` (create_graph, a non-uniform upstream gradient),
    then the gradient of a weighted sum of it in every operand and the upstream gradient (None
    where it does not reach one)."""
    ts = [lib.tensor(a, requires_grad=True) for a in arrays]
    out = f(lib, *ts)
    up = lib.tensor(np.linspace(-1.0, 1.0, out.numel()).reshape(tuple(out.shape)))
    up.requires_grad_(True)
    (g,) = lib.autograd.grad(out, ts[wrt], grad_outputs=up, create_graph=True)
    w = lib.tensor(np.cos(np.arange(g.numel())).reshape(tuple(g.shape)))
    second = lib.autograd.grad((g * w).sum(), [*ts, up], allow_unused=True)
    return g.requires_grad, g.detach().numpy(), [None if s is None else s.numpy() for s in second]


def test_second_order_gradients_reach_operands_as_torchs():
    # copysign's gradient is g * (result / input) in PyTorch, differentiable in both operands
    # (zeros up to rounding); ember's read the sign bits, so a second-order gradient said
    # input and other were unused (None)
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((2, 3, 8)), rng.standard_normal((2, 3, 8))
    x[0, 0, :3] = [0.0, -0.0, 2.0]
    y[0, 0, :3] = [-1.0, 1.0, -0.0]
    cases = {
        "copysign/input": (lambda L, a, b: L.copysign(a, b), [x, y], 0),
        "copysign/input/broadcast": (lambda L, a, b: L.copysign(a, b), [x, y[:1, :1]], 0),
    }
    for name, (f, arrays, wrt) in cases.items():
        want = _second_order(torch, f, arrays, wrt)
        got = _second_order(ember, f, arrays, wrt)
        assert got[0] == want[0], name
        np.testing.assert_allclose(got[1], want[1], rtol=1e-15, atol=0, err_msg=name)
        for i, (g, w) in enumerate(zip(got[2], want[2])):
            assert (g is None) == (w is None), (name, i)
            if w is None:
                continue
            if i == 0:
                # at input zeros both are NaN (PyTorch's 0 * (1 / 0) of its masked division,
                # which ember's formula follows); compared elsewhere
                assert np.isnan(w[x == 0]).all() and np.isnan(g[x == 0]).all(), name
                g, w = g[x != 0], w[x != 0]
            # result / input is exactly +-1 at finite nonzero inputs; what remains in the
            # second derivative is rounding of g / x - g * r / x^2 (a few ulps of g / x)
            scale = np.abs(want[1]).max() / np.abs(x[x != 0]).min()
            np.testing.assert_allclose(g, w, rtol=0, atol=8 * scale * 2.0**-52, err_msg=name)
    # and its first-order gradient keeps a half input's dtype (ember's came back float32)
    for lib in (torch, ember):
        a = lib.tensor(x[0, 0], dtype=lib.float16, requires_grad=True)
        lib.copysign(a, lib.tensor(y[0, 0], dtype=lib.float16)).sum().backward()
        assert a.grad.dtype == lib.float16, lib.__name__
