"""What hunt46 fixed, reduced, each against PyTorch.

A traced tensor (inside ember.function) had no ``stride()`` or ``storage_offset()``: they are
the ones its eager counterpart would have now (``_views.layout``: a view's from its chain).

A traced ``.item()`` given as an op's number attribute (``F.pad(value=)``, ``addcmul(value=)``,
``lerp``'s weight, ``add``'s alpha, ``leaky_relu``'s slope, addmm's beta, a loss's margin, ...)
raised a TraceError from ``float()``: those functions compute with the item's graph value as a
tensor operand now (ops/_item_scalars.py, functional/_item_activations.py); those that need
the number (a norm's order, dropout's p) raise a TraceError naming the argument.

``torch.utils._pytree``, ``torch.sym_int``/``sym_float``/``sym_max``/``sym_min``,
``torch.overrides.has_torch_function``/``handle_torch_function`` and ``out=`` on
``torch.linalg``/``torch.special``/``torch.fft`` functions were missing.

Under ember.function, ``return m.weight.detach()`` after an optimizer step, a view of a
captured tensor or argument, or ``x.detach()`` of an argument returned a new tensor over a copy
(or the argument itself, still requiring grad): each is now the tensor, view or detach sharing
the memory, as PyTorch's (capture/graph_function.py ``_returned_inputs``).

``isinstance(mask, torch.Tensor)`` in a captured function was False (a graph value is not an
ember.Tensor instance), so such branches were silently skipped: a graph value's ``__class__``
is ember.Tensor to the user's code now (graph/symbolic_tensor.py).
"""

import collections

import numpy as np
import pytest

import ember
import ember.nn.functional as EF

torch = pytest.importorskip("torch")
import torch.nn.functional as TF  # noqa: E402
import torch.utils._pytree as tpytree  # noqa: E402


def test_traced_tensors_have_eager_strides_and_offsets():
    def probes(x):
        views = [
            x,
            x.transpose(0, 2),
            x[1:],
            x[:, 1, 2:],
            x.unsqueeze(1),
            x.permute(2, 0, 1),
            x.reshape(12, 5)[::2],
            x[..., 1],
            (x * 2).flatten(),
            x.expand(2, 3, 4, 5),
        ]
        pieces = [
            *x.chunk(2, 1),
            *x.unbind(2)[:2],
            *x.transpose(0, 1).split(1, 0),
            x.chunk(2, 1)[1][1:],
        ]
        return [(v.stride(), v.storage_offset()) for v in views + pieces] + [x.stride(-1)]

    a = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    expected = probes(torch.tensor(a))
    got = []
    f = ember.function(lambda x: got.append(probes(x)) or x * 2, executor="interpreter")
    f(ember.tensor(a))
    assert got[0] == expected == probes(ember.tensor(a))

    def symbolic(x):  # a view of a tensor of symbolic sizes: its layout is not known
        got.append(x.stride())
        with pytest.raises(ember.errors.TraceError, match="symbolic sizes"):
            x.t().stride()
        return x * 2

    spec = [ember.TensorSpec((None, 3))]
    ember.function(symbolic, input_signature=spec, executor="interpreter")(ember.ones(4, 3))
    assert got[-1] == (3, 1)


X = np.array(
    [[1.5, -2.0, 0.25, 0.0], [3.0, 0.5, -1.0, -0.5], [0.1, -0.1, 2.0, -3.0]], dtype=np.float32
)
Y = np.array(
    [[0.5, 1.0, -0.5, 2.0], [1.0, -1.0, 0.25, 0.75], [2.0, 0.3, -0.2, 1.0]], dtype=np.float32
)

# fn(lib, F, x, y, s): s is a 0-d tensor whose .item() is given as the attribute
ITEM_CASES = {
    "pad": lambda T, F, x, y, s: F.pad(x, (1, 2, 0, 1), value=s.item()),
    "pad_int": lambda T, F, x, y, s: F.pad((x * 10).int(), (1, 1), value=(s * 10).item()),
    "addcmul": lambda T, F, x, y, s: T.addcmul(x, y, x, value=s.item()),
    "addcdiv_": lambda T, F, x, y, s: x.clone().addcdiv_(y, x.abs() + 1, value=-s.item()),
    "lerp": lambda T, F, x, y, s: T.lerp(x, y, s.item()),
    "lerp_far": lambda T, F, x, y, s: x.lerp(y, s.item() + 0.5),
    "add_alpha": lambda T, F, x, y, s: T.add(x, y, alpha=s.item()),
    "sub_": lambda T, F, x, y, s: x.clone().sub_(y, alpha=s.item()),
    "add_int": lambda T, F, x, y, s: T.add(x.long(), y.long(), alpha=(s * 10).long().item()),
    "leaky_relu": lambda T, F, x, y, s: F.leaky_relu(x, s.item()),
    "elu": lambda T, F, x, y, s: F.elu(x, alpha=s.item()),
    "celu": lambda T, F, x, y, s: F.celu(x, alpha=s.item() + 1),
    "softplus": lambda T, F, x, y, s: F.softplus(x, beta=s.item() * 3, threshold=s.item() * 5),
    "hardtanh": lambda T, F, x, y, s: F.hardtanh(x, -s.item(), s.item() * 5),
    "threshold": lambda T, F, x, y, s: F.threshold(x, s.item(), -7.0),
    "hardshrink": lambda T, F, x, y, s: F.hardshrink(x, s.item()),
    "softshrink": lambda T, F, x, y, s: F.softshrink(x, s.item()),
    "rrelu_eval": lambda T, F, x, y, s: F.rrelu(x, s.item() / 2, s.item()),
    "nan_to_num": lambda T, F, x, y, s: T.nan_to_num(x.log(), nan=s.item(), neginf=-s.item()),
    "addmm": lambda T, F, x, y, s: T.addmm(x, y, y.t() @ x, beta=s.item(), alpha=s.item() * 2),
    "addmm_beta0": lambda T, F, x, y, s: T.addmm(x.log(), y, y.t() @ x, beta=s.item() * 0),
    "baddbmm": lambda T, F, x, y, s: T.baddbmm(x[None], y[None], (y.t() @ x)[None], alpha=s.item()),
    "addmv": lambda T, F, x, y, s: T.addmv(x[:, 0], x, y[0], beta=s.item()),
    "addr": lambda T, F, x, y, s: T.addr(x, x[:, 0], y[0], alpha=s.item()),
    "index_add": lambda T, F, x, y, s: x.index_add(0, T.tensor([0, 2]), y[:2], alpha=s.item()),
    "smooth_l1": lambda T, F, x, y, s: F.smooth_l1_loss(x, y, beta=s.item()),
    "huber": lambda T, F, x, y, s: F.huber_loss(x, y, delta=s.item()),
    "margin_ranking": lambda T, F, x, y, s: F.margin_ranking_loss(
        x, y, (x - y).sign(), margin=s.item()
    ),
    "cosine_eps": lambda T, F, x, y, s: F.cosine_similarity(x, y, eps=s.item()),
    "layer_norm_eps": lambda T, F, x, y, s: F.layer_norm(x, (4,), eps=s.item()),
    "label_smoothing": lambda T, F, x, y, s: F.cross_entropy(
        x, T.tensor([0, 1, 3]), label_smoothing=s.item()
    ),
    "sdpa_scale": lambda T, F, x, y, s: F.scaled_dot_product_attention(
        x[None], y[None], x[None], scale=s.item()
    ),
    "logit_eps": lambda T, F, x, y, s: T.logit(x.sigmoid(), eps=s.item() / 10),
    "linspace": lambda T, F, x, y, s: T.linspace(-s.item(), 2.0, 7),
    "renorm": lambda T, F, x, y, s: T.renorm(x, 2, 0, s.item() * 5),
    "gradient": lambda T, F, x, y, s: T.gradient(x, spacing=s.item(), dim=1)[0],
    "trapezoid": lambda T, F, x, y, s: T.trapezoid(x, dx=s.item()),
}


def _close(a, b) -> bool:
    return np.allclose(a, b, rtol=1e-5, atol=1e-6, equal_nan=True)


def test_item_as_an_op_attribute():
    s = np.float32(0.3)
    expected = {}
    for name, fn in ITEM_CASES.items():
        xt, yt = (torch.tensor(a, requires_grad=True) for a in (X, Y))
        out = fn(torch, TF, xt, yt, torch.tensor(s))
        grads = ()
        if out.requires_grad:
            grads = torch.autograd.grad(out.sum(), (xt, yt), allow_unused=True)
        expected[name] = (out, grads)

    def step(x, y, t):  # every case in one captured function: one trace, one compile
        results = {}
        for name, fn in ITEM_CASES.items():
            out = fn(ember, EF, x, y, t)
            grads = ()
            if expected[name][1]:
                grads = ember.autograd.grad(out.sum(), (x, y), allow_unused=True)
            results[name] = (out, *grads)
        return results

    xe, ye = (ember.tensor(a, requires_grad=True) for a in (X, Y))
    captured = ember.function(step, executor="interpreter")(xe, ye, ember.tensor(s))
    failures = []
    for name, (out, grads) in expected.items():
        got, *got_grads = captured[name]
        if str(got.dtype) != str(out.dtype).replace("torch", "ember") or not _close(
            got.detach().numpy(), out.detach().numpy()
        ):
            failures.append(f"{name}: {got} != {out}")
        for g, ge in zip(got_grads, grads):
            if (ge is None) != (g is None) or (g is not None and not _close(g, ge)):
                failures.append(f"{name} gradient: {g} != {ge}")
    assert not failures, "\n".join(failures)


def test_item_bounds_of_random_draws_match_eager():
    fns = [
        lambda x, s: x.clone().uniform_(-s.item(), s.item()),
        lambda x, s: ember.normal(s.item(), s.item() * 2, (3, 2)),
        lambda x, s: x.clone().normal_(s.item(), 1.0),
        lambda x, s: x.clone().exponential_(1 / s.item()),
    ]
    x, s = ember.zeros(3, 2), ember.tensor(0.3)
    for fn in fns:
        ember.manual_seed(0)
        eager = fn(x, s)
        ember.manual_seed(0)
        captured = ember.function(fn, executor="interpreter")(x, s)
        assert captured.shape == (3, 2) and np.allclose(captured.numpy(), eager.numpy())


def test_item_attributes_that_need_the_number_raise_a_trace_error_at_the_line():
    x = ember.tensor(X)
    for fn in (
        lambda x, s: EF.dropout(x, p=s.item()),
        lambda x, s: ember.linalg.vector_norm(x, ord=s.item()),
        lambda x, s: EF.normalize(x, p=s.item()),
        lambda x, s: ember.cdist(x, x, p=s.item()),
        lambda x, s: EF.group_norm(x[None], 1, eps=s.item()),
    ):
        with pytest.raises(ember.errors.TraceError, match=r"\.item\(\).*test_hunt46_regressions"):
            ember.function(fn)(x, ember.tensor(0.3))


def test_pytree_matches_torch():
    nt = collections.namedtuple("NT", "a b")
    trees = [
        {"a": [1, (2, 3)], "b": collections.OrderedDict(x=4), "c": None},
        nt(1, [2]),
        collections.defaultdict(int, {"x": 1}),
        collections.deque([1, 2], maxlen=3),
        5,
        [],
        {"b": 1, "a": 2},
    ]
    pt = ember.utils._pytree
    for tree in trees:
        (leaves, spec), (tleaves, tspec) = pt.tree_flatten(tree), tpytree.tree_flatten(tree)
        assert leaves == tleaves and repr(spec) == repr(tspec)
        assert (spec.num_leaves, spec.num_nodes) == (tspec.num_leaves, tspec.num_nodes)
        rebuilt = pt.tree_unflatten([v for v in leaves], spec)
        assert rebuilt == tree and type(rebuilt) is type(tree)
    x = ember.ones(2)
    out = pt.tree_map(lambda a, b: a + b, {"p": x, "q": [x, 1]}, {"p": x, "q": [x, 2]})
    assert out["p"].tolist() == [2.0, 2.0] and out["q"][1] == 3
    assert pt.tree_map_only(int, lambda v: v * 2, [1, "a", 2.0]) == [2, "a", 2.0]
    # ember.Tensor selects a captured function's tensors too (not instances of it)
    doubled = ember.function(
        lambda b: pt.tree_map_only(ember.Tensor, lambda t: t * 2, b), executor="interpreter"
    )({"x": x, "n": 3})
    assert doubled["x"].tolist() == [2.0, 2.0] and doubled["n"] == 3
    assert pt.tree_map_only(ember.nn.Parameter, lambda t: 0, [x]) == [x]
    assert pt.tree_leaves(ember.Size([2, 3])) == [2, 3]
    with pytest.raises(ValueError):
        pt.tree_unflatten([1], pt.tree_structure([1, (2, 3)]))
    with pytest.raises(ValueError):
        pt.tree_map(lambda a, b: a, [1, 2], [1])


def test_sym_helpers_overrides_and_out_on_namespaces():
    for a, b in ((3, 2.5), (1, 2.5), (2, 3), (-1.5, -2)):
        for name in ("sym_max", "sym_min"):
            got, want = getattr(ember, name)(a, b), getattr(torch, name)(a, b)
            assert got == want and type(got) is type(want)
    assert ember.sym_int(-3.7) == torch.sym_int(-3.7) == -3 and ember.sym_float(3) == 3.0
    assert not ember.overrides.has_torch_function((ember.ones(1), 2))

    class Wrapper:
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            return ("handled", func.__name__)

    assert ember.overrides.has_torch_function_variadic(ember.ones(1), Wrapper())
    assert ember.overrides.handle_torch_function(ember.add, (Wrapper(),), 1) == ("handled", "add")

    a = np.array([[2.0, 1.0], [1.0, 3.0]], dtype=np.float32)
    for name, out_shape in (
        ("linalg.inv", (2, 2)),
        ("special.expit", (2, 2)),
        ("linalg.vector_norm", ()),
    ):
        space, fn = name.split(".")
        out = ember.empty(out_shape)
        result = getattr(getattr(ember, space), fn)(ember.tensor(a), out=out)
        expected = getattr(getattr(torch, space), fn)(torch.tensor(a))
        assert result is out and np.allclose(out.numpy(), expected.numpy(), rtol=1e-6)
    out = ember.empty((2, 2), dtype=ember.complex64)
    ember.fft.fft(ember.tensor(a), out=out)
    assert np.allclose(out.numpy(), torch.fft.fft(torch.tensor(a)).numpy())


def test_captured_tensors_are_tensors_to_the_users_code():
    seen = []

    def f(x, mask):  # PyTorch code that branches on isinstance(..., torch.Tensor)
        seen.append((isinstance(mask, ember.Tensor), mask.__class__ is ember.Tensor))
        if isinstance(mask, ember.Tensor):
            x = x.masked_fill(mask, 0.0)
        return x * 1

    x, m = ember.ones(3), ember.tensor([True, False, True])
    captured = ember.function(f, executor="interpreter")(x, m)
    assert captured.tolist() == f(x, m).tolist() == [0.0, 1.0, 0.0]
    assert seen[0] == (True, True) and not isinstance(m, ember.nn.Parameter)


def test_returned_detach_and_views_share_memory():
    model = ember.nn.Linear(3, 2)
    opt = ember.optim.SGD(model.parameters(), lr=0.1)

    def step(x):
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
        return model.weight.detach(), model.bias.detach().view(1, 2), model.weight

    f = ember.function(step, executor="interpreter")
    for _ in range(2):
        d, b, w = f(ember.ones(4, 3))
        assert w is model.weight and not d.requires_grad
        assert d.data_ptr() == model.weight.data_ptr() and b.data_ptr() == model.bias.data_ptr()
        with ember.no_grad():
            model.weight.add_(1.0)
        assert ember.equal(d, model.weight)

    def g(x):
        return x.detach(), x.t(), x.detach()[1:]

    x = ember.randn(2, 3, requires_grad=True)
    d, t, s = ember.function(g, executor="interpreter")(x)
    assert d is not x and not d.requires_grad and d.data_ptr() == x.data_ptr()
    assert t.data_ptr() == x.data_ptr() and t.stride() == (1, 3) and t.requires_grad
    assert s.storage_offset() == 3 and not s.requires_grad
