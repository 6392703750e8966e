"""Programs exercising autograd's API surface: custom Functions with ctx flags, autograd.grad
with grad_outputs / allow_unused / retain_graph loops, autograd.functional, module hooks.
"""

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741


def custom_fn_flags(torch, ctx):
    once_differentiable = torch.autograd.function.once_differentiable

    class SortWithIdx(torch.autograd.Function):
        @staticmethod
        def forward(c, x):
            v, i = torch.sort(x, dim=-1)
            c.mark_non_differentiable(i)
            c.save_for_backward(i)
            return v, i

        @staticmethod
        @once_differentiable
        def backward(c, gv, gi):
            (i,) = c.saved_tensors
            g = torch.zeros_like(gv)
            g.scatter_(-1, i, gv)
            return g

    class Split2(torch.autograd.Function):
        @staticmethod
        def forward(c, x, w):
            c.set_materialize_grads(False)
            c.save_for_backward(x, w)
            c.flags = tuple(c.needs_input_grad)
            return x * w, x + w

        @staticmethod
        def backward(c, ga, gb):
            x, w = c.saved_tensors
            gx = gw = None
            if ga is not None:
                gx = ga * w if c.needs_input_grad[0] else None
                gw = ga * x if c.needs_input_grad[1] else None
            if gb is not None:
                gx = gb if gx is None else gx + gb
                if c.needs_input_grad[1]:
                    gw = gb if gw is None else gw + gb
            return gx, gw

    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((3, 5)).astype(np.float32), requires_grad=True)
    w = ctx.t(rng.standard_normal((3, 5)).astype(np.float32), requires_grad=True)
    v, i = SortWithIdx.apply(x)
    (v * torch.arange(5.0)).sum().backward()
    out = [v, i, i.requires_grad, x.grad]
    a, b = Split2.apply(x, w)
    a.sum().backward()  # b unused: its gradient arrives as None
    out += [x.grad, w.grad]
    c = ctx.t(rng.standard_normal((3, 5)).astype(np.float32))
    a2, b2 = Split2.apply(x, c)
    (b2 * 2).sum().backward()
    out += [x.grad]
    return out


def grad_api(torch, ctx):
    rng = np.random.default_rng(1)
    W = ctx.t(rng.standard_normal((4, 3)).astype(np.float32), requires_grad=True)
    b = ctx.t(rng.standard_normal(3).astype(np.float32), requires_grad=True)
    unused = ctx.t(np.ones(2, np.float32), requires_grad=True)
    x = ctx.t(rng.standard_normal((5, 4)).astype(np.float32))
    y = torch.tanh(x @ W + b)
    go = ctx.t(rng.standard_normal((5, 3)).astype(np.float32))
    out = []
    for k in range(3):  # retain_graph loop with varying grad_outputs
        gW, gb, gu = torch.autograd.grad(
            y, (W, b, unused), grad_outputs=go * (k + 1), retain_graph=True, allow_unused=True
        )
        out += [gW, gb, gu is None]
    gW2, gu2 = torch.autograd.grad(
        [y.sum(), (y**2).mean()], [W, unused], allow_unused=True, materialize_grads=True
    )
    out += [gW2, gu2]
    # gradient penalty style: create_graph and then backward
    y = torch.tanh(x @ W + b)
    (g,) = torch.autograd.grad(y.pow(2).sum(), W, create_graph=True)
    pen = g.norm() ** 2
    pen.backward()
    out += [pen, W.grad, b.grad]
    # torch.autograd.backward with explicit tensors and grads
    W.grad = None
    z = x @ W
    torch.autograd.backward([z], [torch.ones_like(z)], inputs=[W])
    out += [W.grad, b.grad]
    return out


def functional_ad(torch, ctx):
    AF = torch.autograd.functional
    rng = np.random.default_rng(2)
    A = ctx.t(rng.standard_normal((3, 3)).astype(np.float64))

    def f(x):
        return torch.sin(A @ x) * x

    def energy(x, y):
        return (x**2 * y).sum() + torch.exp(x @ A @ y)

    x = ctx.t(rng.standard_normal(3))
    y = ctx.t(rng.standard_normal(3) * 0.3)
    v = ctx.t(rng.standard_normal(3))
    fx, jv = AF.jvp(f, x, v)
    fx2, vj = AF.vjp(f, x, v)
    e, hv = AF.hvp(lambda x: energy(x, y), x, v)
    e2, vh = AF.vhp(lambda x: energy(x, y), x, v)
    J = AF.jacobian(f, x)
    H = AF.hessian(energy, (x, y))
    Jv = AF.jacobian(f, x, vectorize=True, strategy="forward-mode")
    return [fx, jv, fx2, vj, e, hv, vh, J, [list(h) for h in H], Jv]


def module_hooks(torch, ctx):
    nn = torch.nn
    torch.manual_seed(0)

    class Net(nn.Module):
        def __init__(s):
            super().__init__()
            s.fc1 = nn.Linear(4, 6)
            s.act = nn.ReLU()
            s.fc2 = nn.Linear(6, 2)

        def forward(s, x, scale=1.0):
            return s.fc2(s.act(s.fc1(x))) * scale

    net = ctx.init(Net())
    log = []

    def fwd_kw(mod, args, kwargs, output):
        log.append(("fwd", type(mod).__name__, sorted(kwargs), tuple(output.shape)))
        return output + 0.5 * kwargs.get("scale", 1.0)

    def pre_kw(mod, args, kwargs):
        kwargs = dict(kwargs)
        kwargs["scale"] = kwargs.get("scale", 1.0) * 2
        return args, kwargs

    def bwd(mod, gin, gout):
        log.append(("bwd", type(mod).__name__, len(gin), len(gout)))
        return (gin[0] * 0.5,)

    def bwd_pre(mod, gout):
        return (gout[0] * 3.0,)

    grads = {}
    h1 = net.register_forward_hook(fwd_kw, with_kwargs=True)
    h2 = net.register_forward_pre_hook(pre_kw, with_kwargs=True)
    h3 = net.fc2.register_full_backward_hook(bwd)
    h4 = net.fc1.register_full_backward_pre_hook(bwd_pre)

    def keep(m, gi, go):
        grads["act"] = go[0]

    h5 = net.act.register_full_backward_hook(keep)
    x = ctx.t(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4), requires_grad=True)
    y = net(x, scale=1.5)
    y.sum().backward()
    out = [y, x.grad, net.fc1.weight.grad, net.fc2.bias.grad, grads["act"], log[:]]
    for h in (h1, h2, h3, h4, h5):
        h.remove()
    net.zero_grad()
    x.grad = None
    y = net(x, scale=1.5)
    y.sum().backward()
    out += [y, x.grad, net.fc1.weight.grad, len(log)]
    # state_dict hooks
    seen = []
    net.register_state_dict_pre_hook(lambda m, prefix, keep_vars: seen.append(("pre", prefix)))

    def post(m, sd, prefix, local_metadata):
        sd[prefix + "extra"] = torch.tensor(7.0)

    net._register_state_dict_hook(post)
    sd = net.state_dict()
    out += [sorted(sd), seen]

    def load_pre(state_dict, prefix, *args):
        state_dict.pop(prefix + "extra", None)

    net._register_load_state_dict_pre_hook(load_pre, with_module=False)
    res = net.load_state_dict(sd)
    out += [sorted(res.missing_keys), sorted(res.unexpected_keys)]
    return out


PROGRAMS = [custom_fn_flags, grad_api, functional_ad, module_hooks]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program, rtol=1e-5, atol=1e-6)
