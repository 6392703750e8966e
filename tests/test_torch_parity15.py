"""PyTorch 2.13 behaviours ember differed in (helper diff15), each compared with torch itself."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _lib_grad_of_grad(lib, f, xs):
    x = lib.tensor(xs, requires_grad=True)
    (g,) = lib.autograd.grad(f(lib, x).sum(), x, create_graph=True)
    w = lib.tensor(xs[::-1].copy())
    (gg,) = lib.autograd.grad((g * w).sum(), x)  # (no allow_unused: torch reaches x)
    x2 = lib.tensor(xs, requires_grad=True)
    (g2,) = lib.autograd.grad(f(lib, x2).sum(), x2, create_graph=True)
    (g2 * w).sum().backward()
    return g.detach().numpy(), gg.numpy(), x2.grad.numpy()


def test_second_order_through_piecewise_linear_activations_is_zeros():
    # torch's threshold/leaky/hardtanh backward ops differentiate to zeros in their input, so a
    # gradient of a gradient reaches x as zeros (ember's VJPs returned None: x unused)
    xs = np.array([1.5, -2.0, 3.0, -0.25, 7.0])
    cases = {
        "relu": lambda L, x: L.nn.functional.relu(x),
        "relu6": lambda L, x: L.nn.functional.relu6(x),
        "leaky_relu": lambda L, x: L.nn.functional.leaky_relu(x, 0.1),
        "hardtanh": lambda L, x: L.nn.functional.hardtanh(x, -1.0, 2.0),
        # a network: relu's zeros plus the product's nonzero second derivative
        "mm_relu": lambda L, x: L.nn.functional.relu(x[:4].reshape(2, 2) @ x[1:].reshape(2, 2)),
    }
    for name, f in cases.items():
        want = _lib_grad_of_grad(torch, f, xs)
        got = _lib_grad_of_grad(ember, f, xs)
        for w, g in zip(want, got):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=0, err_msg=name)


def _expand_writes(lib):
    out = []
    b = lib.zeros(2, 3)
    b.expand(2, 3)[0, 1] = 4.0  # same shape: a writable view of b
    b.expand_as(b).mul_(2)
    b.broadcast_to((1, 2, 3)).add_(1)  # a unit axis in front: still no repeated element
    out.append(b)
    c = lib.zeros(3, 2).t()  # non-contiguous
    c.expand(1, 2, 3).fill_(5.0)
    out.append(c)
    x = lib.tensor([1.0, -2.0, 3.0], requires_grad=True)
    y = x * 1
    y.expand(1, 3).mul_(lib.tensor([2.0, 3.0, 4.0]))  # autograd through the write into y
    y.sum().backward()
    out += [y.detach(), x.grad]
    return out


def test_expand_without_repeats_is_a_writable_view():
    for want, got in zip(_expand_writes(torch), _expand_writes(ember)):
        np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
    # repeated elements: both refuse the in-place op with a RuntimeError
    for lib in (torch, ember):
        e = lib.zeros(1, 3).expand(2, 3)
        with pytest.raises(RuntimeError, match="single memory location"):
            e.add_(1)
        with lib.no_grad(), pytest.raises(RuntimeError, match="single memory location"):
            e.mul_(2)


def _as_strided_in_place(lib):
    x = lib.arange(12.0)
    assert x.as_strided_((2, 3), (1, 2), 1) is x
    shape = (tuple(x.shape), x.stride(), x.storage_offset(), x.tolist())
    x.mul_(10)  # the window is a view of the same memory
    w = lib.arange(6.0, requires_grad=True)
    y = w * 1
    y.as_strided_((2, 2), (1, 2))
    (y * lib.tensor([[1.0, 2.0], [3.0, 4.0]])).sum().backward()
    o = lib.arange(6.0)
    o.as_strided_((2, 3), (0, 1))  # rows repeat one memory row: in-place writes refused
    with pytest.raises(RuntimeError):
        o.add_(1)
    return shape, x.tolist(), w.grad.tolist(), o.tolist()


def test_as_strided_and_addbmm_in_place():
    assert _as_strided_in_place(ember) == _as_strided_in_place(torch)
    for lib in (torch, ember):
        b1, b2 = lib.arange(24.0).reshape(2, 3, 4), lib.ones(2, 4, 2)
        x = lib.ones(3, 2)
        assert x.addbmm_(b1, b2, beta=0.5, alpha=2) is x
        if lib is torch:
            want = x.numpy()
    np.testing.assert_array_equal(x.numpy(), want)


def _adam_tensor_betas(lib, cls, steps=3):
    p = lib.nn.Parameter(lib.tensor([1.0, -2.0, 3.0], dtype=lib.float64))
    betas = (lib.tensor(0.8, dtype=lib.float64), lib.tensor([0.99], dtype=lib.float64))
    opt = cls(lib, p, betas)
    for _ in range(steps):
        opt.zero_grad()
        (p * p * lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64)).sum().backward()
        opt.step()
        with lib.no_grad():
            betas[0].fill_(0.7)  # the group keeps the tensors: the next step reads the change
    return p.detach().numpy().copy(), tuple(opt.param_groups[0]["betas"][1].shape)


def test_adam_and_adamw_take_tensor_betas():
    for make in (
        lambda L, p, b: L.optim.Adam([p], lr=L.tensor(0.1), betas=b),
        lambda L, p, b: L.optim.AdamW([p], lr=0.1, betas=b, amsgrad=True),
    ):
        want, got = _adam_tensor_betas(torch, make), _adam_tensor_betas(ember, make)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
        assert got[1] == want[1] == ()
    p = ember.nn.Parameter(ember.ones(2))
    for betas, match in (
        ((ember.tensor(0.9), 0.999), "both floats or both Tensors"),
        ((ember.tensor([0.9, 0.8]), ember.tensor(0.9)), "1-element"),
        ((ember.tensor(1.5), ember.tensor(0.9)), "betas"),
    ):
        with pytest.raises(ValueError, match=match):
            ember.optim.Adam([p], betas=betas)


def _channels_last_facts(lib):
    cl = lib.channels_last
    x = lib.tensor(np.arange(120.0).reshape(2, 3, 4, 5))
    y = x.to(memory_format=cl)
    facts = [
        y.stride(),
        y.is_contiguous(),
        y.is_contiguous(memory_format=cl),
        y.to(memory_format=cl) is y,
        x.contiguous(memory_format=cl).stride(),
        y.contiguous().stride(),
        x.clone(memory_format=cl).stride(),
        y.clone().stride(),  # preserve_format
        lib.zeros_like(y).stride(),
        lib.empty(2, 3, 4, 5, memory_format=cl).stride(),
        y.to(lib.float32).stride(),
        (y * 2 + 1).stride(),
        y.permute(0, 2, 3, 1).is_contiguous(),
        lib.ones(2, 1, 4, 5).is_contiguous(memory_format=cl),  # one channel: both orders
        lib.randn(1, 2, 3, 4, 5).to(memory_format=lib.channels_last_3d).stride(),
        lib.nn.Conv2d(3, 4, 3).to(memory_format=cl).weight.stride(),
        y.tolist() == x.tolist(),
    ]
    with pytest.raises(RuntimeError, match="rank 4"):
        lib.zeros(2, 3, 4).to(memory_format=cl)
    w = lib.tensor(np.linspace(-1, 1, 24).reshape(1, 2, 3, 4), requires_grad=True)
    (w.to(memory_format=cl) ** 2).sum().backward()
    facts.append(np.round(w.grad.numpy(), 12).tolist())
    return facts


def test_channels_last_strides_as_pytorch():
    got, want = _channels_last_facts(ember), _channels_last_facts(torch)
    for k, (g, w) in enumerate(zip(got, want)):
        assert g == w, (k, g, w)


def test_inference_tensors_cannot_be_saved_for_backward():
    # a product saves its other operand for the gradient (refused); a sum saves nothing (allowed)
    for lib in (torch, ember):
        with lib.inference_mode():
            x, idx = lib.ones(3), lib.tensor([0, 2])
        w = lib.ones(3, requires_grad=True)
        for f in (lambda: w * x, lambda: x @ w, lambda: w[idx]):
            with pytest.raises(RuntimeError, match="Inference tensors cannot be saved"):
                f()
        (w + x).sum().backward()
        (w * x.clone()).sum().backward()
        with lib.no_grad():
            w * x
        assert w.grad.tolist() == [2.0, 2.0, 2.0]


def _hook_cases(lib):
    calls = []

    class Lists(lib.nn.Module):
        def forward(self, x):
            return [x * 2, x * 3]

    m = Lists()
    m.register_full_backward_hook(lambda mod, gi, go: calls.append("list"))
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    out = m(x)
    (out[0].sum() + out[1].sum()).backward()
    r = lib.nn.Sequential(lib.nn.ReLU(inplace=True))
    r.register_full_backward_hook(lambda mod, gi, go: calls.append("relu"))
    xi = lib.tensor([-1.0, 2.0], requires_grad=True) * 1
    with pytest.raises(RuntimeError, match="is a view and is being modified inplace"):
        r(xi)

    class Same(lib.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t

        @staticmethod
        def backward(ctx, g):
            return g

    with pytest.raises(RuntimeError, match="created inside a custom Function"):
        Same.apply(xi).mul_(2)
    y = Same.apply(lib.ones(2))  # no history: in-place allowed
    y.mul_(2)
    return calls, type(out).__name__, x.grad.tolist(), xi.tolist(), y.tolist()


def test_backward_hooks_watch_tensors_and_tuples_and_protect_their_inputs():
    assert _hook_cases(ember) == _hook_cases(torch)


def test_captured_step_refuses_a_sparse_embedding_gradient_as_eager_torch():
    def make(lib, cls, **kw):
        emb = lib.nn.Embedding(5, 3, sparse=True)
        opt = cls(emb.parameters(), lr=0.1, **kw)

        def step(i):
            opt.zero_grad()
            emb(i).sum().backward()
            opt.step()

        return step

    for name, kw, match in (
        ("Adam", {}, "Adam does not support sparse gradients"),
        ("AdamW", {}, "Adam does not support sparse gradients"),
        ("SGD", {"weight_decay": 0.1}, "add\\(sparse, dense\\) is not supported"),
    ):
        with pytest.raises(RuntimeError, match=match):
            make(torch, getattr(torch.optim, name), **kw)(torch.tensor([1, 2]))
        with pytest.raises(RuntimeError, match=match):
            ember.function(make(ember, getattr(ember.optim, name), **kw))(ember.tensor([1, 2]))
