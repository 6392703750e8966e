"""Focused regressions for what hunt 11's programs found, each against PyTorch."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def test_inplace_on_a_copying_reshape_of_a_view_while_captured():
    # Barlow Twins' off_diagonal: the last flatten of a strided view copies, so an in-place op
    # on it leaves its base alone; while a graph was built the view positions raised
    def off_diagonal_pow(lib, c):
        n = c.shape[0]
        off = c.flatten()[:-1].view(n - 1, n + 1)[:, 1:].flatten()
        return off.pow_(2).sum(), c * 1

    a = np.arange(16, dtype=np.float32).reshape(4, 4) / 7
    want = [t.numpy() for t in off_diagonal_pow(torch, torch.tensor(a))]
    for f in (
        lambda c: off_diagonal_pow(ember, c),
        ember.function(lambda c: off_diagonal_pow(ember, c)),
    ):
        got = [t.numpy() for t in f(ember.tensor(a))]
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-6)


def test_range_and_tuple_items_index_as_lists():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    for lib in (torch, ember):
        x = lib.tensor(a)
        y = x.clone()
        y[range(2), [1, 3]] = -1.0
        got = [x[range(1, 3)], x[:, (0, 2)], x[range(0)], y]
        if lib is torch:
            want = [t.numpy() for t in got]
        else:
            for g, w in zip(got, want):
                np.testing.assert_array_equal(g.numpy(), w)


def test_captured_grad_without_create_graph_is_not_differentiated_again():
    # a saliency map returned from a compiled function whose input requires grad: the AOT
    # backward differentiated the recorded backward pass again (svd has no second derivative)
    a = np.array([[1.0, 0.2, -0.3], [0.4, 2.0, 0.1]], np.float32)

    def saliency(lib, x):
        s = lib.linalg.svdvals(x * 2).sum()
        (g,) = lib.autograd.grad(s, x)
        return g, s

    want = [t.detach().numpy() for t in saliency(torch, torch.tensor(a, requires_grad=True))]
    x = ember.tensor(a, requires_grad=True)
    g, s = ember.function(lambda x: saliency(ember, x))(x)
    assert not g.requires_grad and s.requires_grad
    for got, w in zip((g, s), want):
        np.testing.assert_allclose(got.detach().numpy(), w, rtol=1e-5, atol=1e-6)


def test_func_transforms_stay_differentiable_in_the_parameters_they_read():
    # a Hamiltonian network's loss on jacrev / grad / hessian of its energy trains the
    # parameters the energy reads, as torch.func composes with autograd
    w0 = np.array([[0.5, -1.0], [2.0, 0.3]], np.float32)
    x0 = np.array([1.0, 2.0], np.float32)
    results = []
    for lib in (torch, ember):
        w = lib.nn.Parameter(lib.tensor(w0))
        x = lib.tensor(x0)

        def f(x, lib=lib, w=w):
            return lib.tanh(w @ x).sum()

        j, g, h = lib.func.jacrev(f)(x), lib.func.grad(f)(x), lib.func.hessian(f)(x)
        flags = (j.requires_grad, g.requires_grad, h.requires_grad)
        (j.sum() + g.pow(2).sum() + h.sum()).backward()
        plain = lib.func.jacrev(lambda x, lib=lib: x**2)(x).requires_grad
        results.append((flags, plain, w.grad.numpy()))
    (tf, tp, tg), (ef, ep, eg) = results
    assert tf == ef == (True, True, True) and tp == ep is False
    np.testing.assert_allclose(eg, tg, rtol=1e-5)


def test_captured_host_values_of_constants_and_reassigned_buffers():
    # DINO: the crops' sizes grouped by unique_consecutive and cumsum'd into Python ints, and
    # the loss's center buffer reassigned under no_grad, inside a captured step
    results = []
    for lib in (torch, ember):

        class Center(lib.nn.Module):
            def __init__(s):
                super().__init__()
                s.register_buffer("center", lib.zeros(1, 3))

            def forward(s, crops):
                sizes = lib.tensor([c.shape[-1] for c in crops])
                ends = lib.cumsum(lib.unique_consecutive(sizes, return_counts=True)[1], 0)
                start, parts = 0, []
                for end in ends.tolist():
                    parts.append(lib.cat(crops[start:end]).mean(-1))
                    start = end
                y = lib.cat(parts)
                with lib.no_grad():
                    s.center = s.center * 0.9 + y.mean(0, keepdim=True) * 0.1
                return (y - s.center).pow(2).sum()

        m = Center()
        f = m if lib is torch else ember.function(m)
        crops = [lib.tensor(np.full((1, 3, n), n / 4, np.float32)) for n in (4, 4, 2, 2)]
        outs = [f(crops).item() for _ in range(3)]
        results.append((outs, m.center.numpy().copy(), isinstance(m.center, lib.Tensor)))
        if lib is ember:
            assert len(f._cache) == 1  # (the buffer keeps its identity: no trace per call)
    (to, tc, tt), (eo, ec, et) = results
    np.testing.assert_allclose(eo, to, rtol=1e-6)
    np.testing.assert_allclose(ec, tc, rtol=1e-6)
    assert tt and et
