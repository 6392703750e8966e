"""Regressions of the bugs hunt59's programs found, each against PyTorch."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch", reason="PyTorch (the reference peer) is not installed")


def test_backward_again_through_nodes_that_saved_nothing():
    """A node that saved no tensor runs again without retain_graph, as PyTorch's (first-order
    MAML: autograd.grad freed the inner graph, and the query loss's backward runs through the
    fast weights' SubBackward0 again); one that saved a tensor still refuses."""
    for lib in (torch, ember):
        x = lib.ones(3, requires_grad=True)
        g = lib.full((3,), 2.0)
        w = x - 0.1 * g
        (gw,) = lib.autograd.grad((w + 1).sum(), x)
        (w + 2).sum().backward()
        (w + 3).sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0, 2.0])
        np.testing.assert_array_equal(gw.numpy(), [1.0, 1.0, 1.0])
        y = x.exp().sum()
        y.backward()
        with pytest.raises(RuntimeError, match="second time"):
            y.backward()


@pytest.mark.filterwarnings("ignore:ember.compile")
def test_compiled_remainder_of_a_dynamic_size_compared_with_zero():
    """Under automatic dynamic shapes, ``n % 2 == 0`` of a symbolic size is decided at the
    traced call's sizes and kept as a guard (it was always False: a remainder was taken as
    never 0, as a bare symbol is); the same for ``== 1``."""

    def f(x):
        h = x[:-1]
        return h * 2 if h.shape[0] % 2 == 0 else -h, (h.shape[0] - 2) == 1

    cf = ember.compile(f)
    for rows in (8, 5, 6, 9, 3, 4):
        x = ember.randn(rows, 3)
        (want, want_flag), (got, got_flag) = f(x), cf(x)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
        assert got_flag == want_flag == (rows == 4)


@pytest.mark.filterwarnings("ignore:ember.compile")
def test_compiled_step_making_its_optimizer_on_the_first_call():
    """A compiled training step that makes its optimizer on its first call (kept in a dict
    the function closes over) runs as PyTorch's: the capture fails (the optimizer was not
    reachable before the call) and the call runs eagerly, the optimizer made once."""
    results = {}
    for lib in (torch, ember):
        lib.manual_seed(0)
        model = lib.nn.Linear(3, 1)
        with lib.no_grad():
            model.weight.copy_(lib.tensor([[0.1, -0.2, 0.3]]))
            model.bias.zero_()
        state = {}
        made = []

        def step(x, model=model, state=state, made=made, lib=lib):
            if "opt" not in state:
                made.append(1)
                state["opt"] = lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
            loss = model(x).pow(2).mean()
            state["opt"].zero_grad()
            loss.backward()
            state["opt"].step()
            return loss.detach()

        step = ember.compile(step) if lib is ember else step
        x = lib.tensor(np.arange(12, dtype=np.float32).reshape(4, 3) / 10)
        losses = [float(step(x)) for _ in range(3)]
        results[lib.__name__] = (losses, len(made), model.weight.detach().numpy())
    (tl, tm, tw), (el, em, ew) = results["torch"], results["ember"]
    np.testing.assert_allclose(el, tl, rtol=1e-5)
    assert tm == em == 1
    np.testing.assert_allclose(ew, tw, rtol=1e-5)


def test_deepcopy_of_a_parameter_leaves_its_grad():
    """copy.deepcopy of a Parameter (of a model) starts without .grad, as PyTorch's; a plain
    tensor's deepcopy keeps it (a twin trained after deepcopy accumulated onto the
    original's gradient)."""
    import copy

    for lib in (torch, ember):
        m = lib.nn.Linear(2, 1)
        m(lib.ones(1, 2)).sum().backward()
        w = lib.ones(2, requires_grad=True)
        (w * 3).sum().backward()
        assert copy.deepcopy(m).weight.grad is None
        assert copy.deepcopy(m.weight).grad is None
        np.testing.assert_array_equal(copy.deepcopy(w).grad.numpy(), [3.0, 3.0])
        assert m.weight.grad is not None


@pytest.mark.filterwarnings("ignore:ember.compile")
def test_captured_backward_gives_a_sparse_embedding_its_sparse_gradient():
    """A captured backward through F.embedding(sparse=True) leaves the weight a sparse COO
    gradient (it was the dense one, so ``.coalesce()`` failed); a gradient accumulated onto
    the previous call's sparse one is refused by ember.function (it was baked into the graph
    as a constant) and runs eagerly under ember.compile, as PyTorch's sums."""
    results = {}
    for lib in (torch, ember):
        emb = lib.nn.Embedding(6, 2, sparse=True)
        with lib.no_grad():
            emb.weight.copy_(lib.tensor(np.arange(12, dtype=np.float32).reshape(6, 2)))

        def f(idx, emb=emb):
            loss = emb(idx).pow(2).sum()
            loss.backward()
            return loss.detach()

        fn = ember.function(f) if lib is ember else f
        out = []
        for idx in ([1, 3, 1], [2, 3, 0]):
            emb.weight.grad = None
            out.append(float(fn(lib.tensor(idx))))
            g = emb.weight.grad
            out.append((g.is_sparse, g.coalesce().indices().tolist(), g.to_dense().tolist()))
        if lib is ember:
            with pytest.raises(ember.TraceError, match="sparse embedding"):
                fn(lib.tensor([5, 4, 5]))
            fn = ember.compile(f)
        fn(lib.tensor([5, 4, 5]))
        out.append(emb.weight.grad.to_dense().tolist())
        results[lib.__name__] = out
    assert results["ember"] == results["torch"]


@pytest.mark.parametrize("captured", [False, True], ids=["eager", "captured"])
def test_gradient_penalty_through_lstm_and_gru(captured):
    """The gradient of a gradient through nn.LSTM (two layers) and a bidirectional nn.GRU, a
    recurrent critic's gradient penalty: the fused layers' backward had no VJP ("the op
    lstm_layer_grad has no gradient"); a recorded backward now runs a differentiable
    step-by-step composite, eagerly and in a captured step, as PyTorch's double backward."""
    rng = np.random.default_rng(0)
    x0 = rng.standard_normal((2, 3, 3)).astype(np.float32)
    results, weights = {}, {}
    for lib in (torch, ember):
        lib.manual_seed(0)
        lstm = lib.nn.LSTM(3, 4, num_layers=2, batch_first=True)
        gru = lib.nn.GRU(4, 2, batch_first=True, bidirectional=True)
        mods = {"lstm": lstm, "gru": gru}
        for name, m in mods.items():
            if lib is torch:
                weights[name] = {k: v.detach().numpy().copy() for k, v in m.state_dict().items()}
            else:
                m.load_state_dict({k: ember.tensor(v) for k, v in weights[name].items()})

        def penalty(x, lstm=lstm, gru=gru, lib=lib):
            x = x.requires_grad_()
            h, _ = lstm(x)
            out, hn = gru(h)
            score = out.pow(2).sum() + hn.sum()
            (g,) = lib.autograd.grad(score, x, create_graph=True)
            pen = (g.flatten(1).norm(dim=1) - 1).pow(2).mean()
            pen.backward()
            return pen.detach()

        run = ember.function(penalty) if captured and lib is ember else penalty
        pen = run(lib.tensor(x0))
        grads = [p.grad.numpy().copy() for m in mods.values() for p in m.parameters()]
        results[lib.__name__] = [pen.numpy()] + grads
    for got, want in zip(results["ember"], results["torch"]):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)


def test_func_grad_of_parameters_and_a_plain_batch_and_strict_tied_call():
    """torch.func.grad_and_value over (parameters that require grad, a batch that does not)
    with argnums=(0, 1): each leaf that does not require grad becomes a fresh one (it raised
    "input 2 does not require grad"); functional_call(strict=True) counts a name tied to a
    given one as given (it asked for out.weight of a tied embedding)."""
    rng = np.random.default_rng(0)
    x0 = rng.standard_normal((4, 3)).astype(np.float32)
    results = []
    for lib in (torch, ember):
        lin = lib.nn.Linear(3, 2)
        with lib.no_grad():
            lin.weight.copy_(lib.tensor(np.arange(6, dtype=np.float32).reshape(2, 3) / 5))
            lin.bias.fill_(0.1)

        def loss(p, x, lin=lin, lib=lib):
            return lib.func.functional_call(lin, p, (x,)).pow(2).mean()

        (gp, gx), value = lib.func.grad_and_value(loss, argnums=(0, 1))(
            dict(lin.named_parameters()), lib.tensor(x0)
        )
        emb = lib.nn.Embedding(5, 3)
        head = lib.nn.Linear(3, 5, bias=False)
        head.weight = emb.weight
        tied = lib.nn.Sequential(emb, head)
        out = lib.func.functional_call(tied, {"0.weight": lib.ones(5, 3)}, (lib.tensor([1, 2]),),
                                       strict=True)  # fmt: skip
        with pytest.raises(RuntimeError, match="1.weight"):
            lib.func.functional_call(tied, {"0.weight": lib.ones(5, 3)}, (lib.tensor([1]),),
                                     strict=True, tie_weights=False)  # fmt: skip
        found = [gp["weight"], gp["bias"], gx, value, out]
        results.append([t.detach().numpy() for t in found])
    for want, got in zip(*results):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
