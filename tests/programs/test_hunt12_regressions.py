"""Focused regressions of the bugs the hunt12 programs found, each against PyTorch."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _both(fn):
    return [fn(torch), fn(ember)]


def test_a_pack_hook_running_ops_does_not_pack_its_own_saves():
    def run(L):
        n = [0]

        def pack(t):
            n[0] += 1
            return t * t

        x = L.tensor([0.5, 1.0, 2.0], requires_grad=True)
        with L.autograd.graph.saved_tensors_hooks(pack, lambda t: t.sqrt()):
            y = (x.exp() * x).sum()
        y.backward()
        return n[0], x.grad.numpy()

    (n_t, g_t), (n_e, g_e) = _both(run)
    assert n_e == n_t
    np.testing.assert_allclose(g_e, g_t, rtol=1e-6)


def test_global_module_forward_hooks_run_before_each_modules_own():
    def run(L):
        nn = L.nn
        log = []
        h1 = nn.modules.module.register_module_forward_pre_hook(
            lambda m, a: log.append(("pre", type(m).__name__))
        )
        h2 = nn.modules.module.register_module_forward_hook(
            lambda m, a, k, o: o + 1 if isinstance(m, nn.Linear) else None, with_kwargs=True
        )
        lin = nn.Linear(2, 2)
        lin.register_forward_hook(lambda m, a, o: log.append(("own", float(o.sum()))))
        with L.no_grad():
            lin.weight.zero_()
            lin.bias.zero_()
        y = nn.Sequential(lin, nn.ReLU())(L.ones(1, 2))
        h1.remove()
        h2.remove()
        return log, y.tolist(), lin(L.ones(1, 2)).tolist(), log[-1]

    expected, actual = _both(run)
    assert actual == expected


def test_jacobian_forward_mode_strategy():
    def f(L):
        return lambda x: L.sin(x) * x.sum()

    x = np.array([0.3, -1.2, 2.0])
    j_t = torch.autograd.functional.jacobian(
        f(torch), torch.tensor(x), vectorize=True, strategy="forward-mode"
    )
    j_e = ember.autograd.functional.jacobian(
        f(ember), ember.tensor(x), vectorize=True, strategy="forward-mode"
    )
    np.testing.assert_allclose(j_e.numpy(), j_t.numpy(), rtol=1e-12)
    with pytest.raises(NotImplementedError):
        ember.autograd.functional.jacobian(f(ember), ember.tensor(x), strategy="forward-mode")
    with pytest.raises(NotImplementedError):
        ember.autograd.functional.jacobian(
            f(ember), ember.tensor(x), vectorize=True, strategy="forward-mode", create_graph=True
        )


@pytest.mark.parametrize("driver", [None, "gels", "gelsy", "gelsd", "gelss"])
def test_lstsq_fields_follow_the_driver(driver):
    g = np.random.default_rng(0)
    A0, B0 = g.standard_normal((2, 4, 3)), g.standard_normal((2, 4, 2))
    D0 = np.sin(np.arange(12.0).reshape(4, 3))  # rank 2
    cases = [(A0, B0), (A0[0], B0[0, :, 0]), (A0[:, :3], B0[:, :3])]
    if driver != "gels":  # gels assumes full rank (PyTorch's result is garbage otherwise)
        cases.append((D0, B0[0]))
    for a, b in cases:
        t = torch.linalg.lstsq(torch.tensor(a), torch.tensor(b), driver=driver)
        e = ember.linalg.lstsq(ember.tensor(a), ember.tensor(b), driver=driver)
        for name in ("solution", "residuals", "rank", "singular_values"):
            x, y = getattr(t, name), getattr(e, name)
            assert tuple(y.shape) == tuple(x.shape) and str(y.dtype)[6:] == str(x.dtype)[6:], name
            np.testing.assert_allclose(y.numpy(), x.numpy(), rtol=1e-9, atol=1e-12, err_msg=name)
        assert not e.singular_values.requires_grad


def test_sparse_softmax_and_log_softmax():
    def run(L):
        i = L.tensor([[0, 0, 1, 2, 2, 0], [0, 2, 1, 0, 3, 2]])  # uncoalesced: (0, 2) twice
        s = L.sparse_coo_tensor(i, L.tensor([1.0, 2.0, 3.0, -1.0, 0.5, 0.25]), (3, 4))
        out = []
        for d in (0, 1, -1):
            out += [L.sparse.softmax(s, d).to_dense(), L.sparse.log_softmax(s, d).to_dense()]
        vv = L.tensor(np.arange(12.0).reshape(4, 3) / 5)  # hybrid: a dense dimension
        h = L.sparse_coo_tensor(L.tensor([[0, 1, 1, 3]]), vv, (5, 3))
        out += [L.sparse.softmax(h, 1).to_dense(), L.sparse.softmax(h, 0).to_dense()]
        w = L.tensor([1.0, 2.0, 3.0, -1.0, 0.5], requires_grad=True)
        t = L.sparse_coo_tensor(i[:, :5], w, (3, 4))
        (L.sparse.log_softmax(t, 1).to_dense() * L.arange(12.0).reshape(3, 4)).sum().backward()
        return [o.detach().numpy() for o in out] + [w.grad.numpy()]

    for e, a in zip(*_both(run)):
        np.testing.assert_allclose(a, e, rtol=1e-6, atol=1e-7)


def test_scatter_with_the_older_reduce_argument():
    def run(L):
        x = L.arange(1.0, 7.0).reshape(2, 3)
        i = L.tensor([[0, 0, 1], [1, 0, 0]])
        src = L.full((2, 3), 2.0)
        out = [
            x.scatter(0, i, src, reduce="add"),
            x.scatter(0, i, src, reduce="multiply"),
            x.clone().scatter_(1, i, 3.0, reduce="add"),
            L.scatter(x, 1, i, src, reduce="multiply"),
        ]
        return [o.numpy() for o in out]

    for e, a in zip(*_both(run)):
        np.testing.assert_array_equal(a, e)
    with pytest.raises(NotImplementedError):
        ember.zeros(3).scatter(0, ember.tensor([0]), 1.0, reduce="max")


def test_custom_function_with_save_for_forward_and_jvp():
    def run(L):
        class Exp(L.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                r = x.exp()
                ctx.save_for_backward(r)
                ctx.save_for_forward(r)
                return r

            @staticmethod
            def backward(ctx, g):
                (r,) = ctx.saved_tensors
                return g * r

            @staticmethod
            def jvp(ctx, t):
                (r,) = ctx.saved_tensors
                return t * r

        fw = L.autograd.forward_ad
        with fw.dual_level():
            x = fw.make_dual(L.tensor([0.0, 1.0]), L.tensor([1.0, 2.0]))
            tangent = fw.unpack_dual(Exp.apply(x)).tangent
        v = L.tensor([0.5, -1.0], requires_grad=True)
        Exp.apply(v).sum().backward()
        return tangent.numpy(), v.grad.numpy()

    for e, a in zip(*_both(run)):
        np.testing.assert_allclose(a, e, rtol=1e-6)


def test_global_module_backward_hooks():
    def run(L):
        nn, M = L.nn, L.nn.modules.module
        log = []
        h1 = M.register_module_full_backward_hook(
            lambda m, gi, go: log.append((type(m).__name__, tuple(go[0].shape)))
        )
        h2 = M.register_module_full_backward_pre_hook(
            lambda m, go: (go[0] * 2,) if isinstance(m, nn.ReLU) else None
        )
        net = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
        with L.no_grad():
            for p in net.parameters():
                p.fill_(0.5)
        x = L.ones(4, 2, requires_grad=True)
        net(x).sum().backward()
        h1.remove()
        h2.remove()
        first = x.grad.tolist()
        x.grad = None
        net(x).sum().backward()
        return log, first, x.grad.tolist()

    expected, actual = _both(run)
    assert actual == expected
