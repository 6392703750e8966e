"""Programs of hunt57 on torch.func, custom autograd Functions, parametrizations and hooks,
each run on PyTorch and on ember: model ensembles by vmap over functional_call, per-example
gradients, Jacobians with auxiliary outputs, grad of grad, parametrized weights with right
inverses, new-style Functions with setup_context, and hooks taking keyword arguments.
"""

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007, E501, E731, F841, B023, C408, B006, E702, E701, E401, C416, UP031, B905, PIE810, SIM108, RUF005


def func_ensemble(torch, ctx):
    """An ensemble of three MLPs stacked with stack_module_state and run by vmap over
    functional_call (in_dims (0, 0, None)); per-example gradients by vmap(grad) with a buffer
    dict; jacrev with has_aux and argnums; jacfwd of a function of two inputs; hessian;
    grad of grad; vmap with out_dims and chunk_size."""
    nn = torch.nn
    tf = torch.func
    functional_call, grad, hessian, jacfwd, jacrev = (
        tf.functional_call,
        tf.grad,
        tf.hessian,
        tf.jacfwd,
        tf.jacrev,
    )
    stack_module_state, vmap = tf.stack_module_state, tf.vmap

    models = [
        ctx.init(nn.Sequential(nn.Linear(3, 5), nn.GELU(), nn.Linear(5, 2)), f"e{i}")
        for i in range(3)
    ]
    params, buffers = stack_module_state(models)
    base = models[0]
    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((4, 3)).astype(np.float32))
    y = ctx.t(rng.integers(0, 2, 4))

    def fmodel(p, b, x):
        return functional_call(base, (p, b), (x,))

    ens = ctx.fn(vmap(fmodel, in_dims=(0, 0, None)))(params, buffers, x)

    p0 = {k: v.detach() for k, v in base.named_parameters()}

    def loss_one(p, xi, yi):
        out = functional_call(base, p, (xi[None],))
        return nn.functional.cross_entropy(out, yi[None])

    per_ex = ctx.fn(vmap(grad(loss_one), in_dims=(None, 0, 0)))(p0, x, y)

    def f(a, b):
        out = torch.sin(a) * b.sum() + a.pow(2)
        return out, {"norm": out.norm()}

    a = ctx.t(rng.standard_normal(3))
    b = ctx.t(rng.standard_normal(2))
    (ja, jb), aux = jacrev(f, argnums=(0, 1), has_aux=True)(a, b)
    jf = jacfwd(lambda a, b: torch.tanh(a)[:, None] * b[None, :], argnums=1)(a, b)
    H = hessian(lambda v: (v.pow(3).sum() + v.prod()) * v.norm())(a)
    g2 = grad(grad(lambda t: torch.sin(t) * t.pow(2)))(ctx.t(np.array(0.7)))
    batched = vmap(lambda r: torch.outer(r, r).trace(), chunk_size=2)(x)
    swapped = vmap(lambda r: r * 2, out_dims=1)(x)
    return [ens, per_ex, ja, jb, aux, jf, H, g2, batched, swapped]


def custom_functions(torch, ctx):
    """New-style autograd.Functions: forward without ctx plus setup_context, a
    mark_non_differentiable index output, needs_input_grad, set_materialize_grads(False)
    receiving None, mark_dirty for an in-place op, once_differentiable, non-tensor
    arguments, and a Function used twice in one graph (double backward through one)."""
    Function = torch.autograd.Function
    once_differentiable = torch.autograd.function.once_differentiable

    class SortedTopk(Function):
        @staticmethod
        def forward(x, k):
            vals, idx = x.topk(k, dim=-1)
            return vals, idx

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, k = inputs
            vals, idx = output
            ctx.mark_non_differentiable(idx)
            ctx.save_for_backward(idx)
            ctx.shape = x.shape

        @staticmethod
        def backward(ctx, gvals, gidx):
            (idx,) = ctx.saved_tensors
            g = gvals.new_zeros(ctx.shape)
            return g.scatter(-1, idx, gvals), None

    class Split(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, g1, g2):
            out = 0
            if g1 is not None:
                out = out + 2 * g1
            if g2 is not None:
                out = out + 3 * g2
            return out

    class ScaleInplace(Function):
        @staticmethod
        def forward(ctx, x, s):
            ctx.mark_dirty(x)
            ctx.s = s
            ctx.flags = list(ctx.needs_input_grad)
            return x.mul_(s)

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            return g * ctx.s, None

    class Cube(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x**3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 3 * x**2

    rng = np.random.default_rng(1)
    x = ctx.t(rng.standard_normal((2, 5)), requires_grad=True)
    vals, idx = SortedTopk.apply(x, 2)
    (vals * ctx.t(np.array([1.0, 2.0]))).sum().backward()
    out = [vals, idx, x.grad, idx.requires_grad]
    z = ctx.t(rng.standard_normal(3), requires_grad=True)
    a, b = Split.apply(z)
    a.sum().backward()
    out.append(z.grad)
    w = ctx.t(rng.standard_normal(3), requires_grad=True)
    h = w * 1.0
    h2 = ScaleInplace.apply(h, 2.5)
    (h2 * h2).sum().backward()
    out += [w.grad, h is h2]
    c = ctx.t(rng.standard_normal(3), requires_grad=True)
    y = Cube.apply(c) + Cube.apply(c * 2)
    (g,) = torch.autograd.grad(y.sum(), c, create_graph=True)
    (gg,) = torch.autograd.grad(g.sum(), c)
    out += [g, gg]
    return out


def parametrizations(torch, ctx):
    """register_parametrization with a symmetric parametrization with right_inverse, two
    stacked parametrizations, the cached() context, training through them, weight_norm from
    nn.utils.parametrizations, remove_parametrizations leaving the parametrized value, and
    the state_dict keys the parametrized module writes."""
    nn = torch.nn
    P = torch.nn.utils.parametrize

    class Symmetric(nn.Module):
        def forward(self, X):
            return X.triu() + X.triu(1).transpose(-1, -2)

        def right_inverse(self, A):
            return A.triu()

    class Scale(nn.Module):
        def __init__(self):
            super().__init__()
            self.s = nn.Parameter(torch.tensor(1.5))

        def forward(self, X):
            return X * self.s

        def right_inverse(self, X):
            return X / self.s

    lin = ctx.init(nn.Linear(4, 4), "lin")
    P.register_parametrization(lin, "weight", Symmetric())
    P.register_parametrization(lin, "weight", Scale())
    keys = sorted(lin.state_dict().keys())
    rng = np.random.default_rng(2)
    x = ctx.t(rng.standard_normal((3, 4)).astype(np.float32))
    opt = torch.optim.SGD(lin.parameters(), lr=0.1)
    losses = []
    for _ in range(3):
        with P.cached():
            loss = lin(x).pow(2).mean() + lin(x * 2).abs().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    W = lin.weight.detach().clone()
    sym = torch.allclose(W, W.T)
    lin.weight = torch.eye(4)  # through right_inverse chain
    W2 = lin.weight.detach().clone()
    P.remove_parametrizations(lin, "weight", leave_parametrized=True)
    after = [type(lin.weight).__name__, P.is_parametrized(lin)]

    conv = ctx.init(nn.Conv1d(2, 3, 3), "conv")
    conv = torch.nn.utils.parametrizations.weight_norm(conv, name="weight", dim=0)
    wkeys = sorted(conv.state_dict().keys())
    xc = ctx.t(rng.standard_normal((2, 2, 6)).astype(np.float32))
    lc = conv(xc).pow(2).sum()
    lc.backward()
    g = conv.parametrizations.weight.original0.grad
    v = conv.parametrizations.weight.original1.grad
    return [keys, losses, W, sym, W2, after, wkeys, g, v, lin.weight]


def hooks_with_kwargs(torch, ctx):
    """Forward pre-hooks with with_kwargs rewriting a keyword, forward hooks with_kwargs and
    prepend ordering, full backward pre-hooks scaling grad_output, full backward hooks
    reading grad_input, tensor hooks on an intermediate, retain_grad, state_dict
    post-hooks and load_state_dict post-hooks reporting incompatible keys."""
    nn = torch.nn
    calls = []

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)

        def forward(self, x, scale=1.0, shift=None):
            y = self.lin(x) * scale
            if shift is not None:
                y = y + shift
            return y

    blk = ctx.init(Block(), "blk")

    def pre(mod, args, kwargs):
        calls.append(("pre", sorted(kwargs)))
        kwargs = dict(kwargs)
        kwargs["scale"] = kwargs.get("scale", 1.0) * 2
        return args, kwargs

    def fwd(mod, args, kwargs, out):
        calls.append(("fwd", len(args)))
        return out + 1

    def fwd_first(mod, args, out):
        calls.append(("first",))

    h1 = blk.register_forward_pre_hook(pre, with_kwargs=True)
    h2 = blk.register_forward_hook(fwd, with_kwargs=True)
    h3 = blk.register_forward_hook(fwd_first, prepend=True)
    grads = {}

    def bpre(mod, grad_output):
        grads["bpre"] = grad_output[0].clone()
        return (grad_output[0] * 0.5,)

    def bfull(mod, grad_input, grad_output):
        grads["gin"] = grad_input[0].clone()

    blk.lin.register_full_backward_pre_hook(bpre)
    blk.lin.register_full_backward_hook(bfull)
    rng = np.random.default_rng(3)
    x = ctx.t(rng.standard_normal((2, 3)).astype(np.float32), requires_grad=True)
    y = blk(x, scale=3.0, shift=ctx.t(np.ones(3, np.float32)))
    mid = y * y
    mid.retain_grad()
    mid.register_hook(lambda g: g * 2)
    mid.sum().backward()
    out = [y, x.grad, grads["bpre"], grads["gin"], mid.grad, blk.lin.weight.grad, calls]
    h1.remove()
    h2.remove()
    h3.remove()
    out.append(blk(x))

    def sd_post(module, state_dict, prefix, local_metadata):
        state_dict[prefix + "extra"] = torch.tensor(7.0)

    blk._register_state_dict_hook(sd_post)
    sd = blk.state_dict()
    out.append(sorted(sd.keys()))
    seen = []

    def load_post(module, incompatible):
        seen.append((sorted(incompatible.missing_keys), sorted(incompatible.unexpected_keys)))
        incompatible.unexpected_keys.clear()

    blk.register_load_state_dict_post_hook(load_post)
    res = blk.load_state_dict(sd, strict=True)
    out.append(seen)
    out.append([list(res.missing_keys), list(res.unexpected_keys)])
    return out


def module_api(torch, ctx):
    """Module bookkeeping: apply with an init function, named_modules with a prefix and
    remove_duplicate=False over shared submodules, named_parameters(recurse=False), a
    non-persistent buffer, load_state_dict(strict=False)'s result, to(float64),
    requires_grad_ on a part, zero_grad(set_to_none=False), get_submodule/get_parameter,
    ModuleDict/ParameterDict/ParameterList, and the module's repr."""
    nn = torch.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            shared = nn.Linear(3, 3)
            self.blocks = nn.ModuleDict({"a": shared, "b": nn.Sequential(shared, nn.ReLU())})
            self.scales = nn.ParameterDict({"s1": nn.Parameter(torch.ones(3))})
            self.extra = nn.ParameterList(
                [nn.Parameter(torch.zeros(3)), nn.Parameter(torch.ones(1))]
            )
            self.register_buffer("running", torch.zeros(3), persistent=False)
            self.register_buffer("count", torch.tensor(0))
            self.head = nn.Linear(3, 2, bias=False)

        def forward(self, x):
            x = self.blocks["b"](self.blocks["a"](x)) * self.scales["s1"] + self.extra[0]
            if self.training:
                self.running.mul_(0.9).add_(x.detach().mean(0), alpha=0.1)
                self.count += 1
            return self.head(x) * self.extra[1]

    net = Net()

    def init(m):
        if isinstance(m, nn.Linear):
            with torch.no_grad():
                m.weight.copy_(
                    torch.arange(m.weight.numel(), dtype=torch.float32).reshape(m.weight.shape) / 10
                    - 0.3
                )
                if m.bias is not None:
                    m.bias.fill_(0.05)

    net.apply(init)
    names = [n for n, _ in net.named_modules(prefix="net", remove_duplicate=False)]
    uniq = [n for n, _ in net.named_modules()]
    own = [n for n, _ in net.named_parameters(recurse=False)]
    allp = [n for n, _ in net.named_parameters()]
    keys = sorted(net.state_dict().keys())
    sd = net.state_dict()
    sd.pop("head.weight")
    sd["bogus"] = torch.zeros(1)
    res = net.load_state_dict(sd, strict=False)
    net2 = Net().apply(init).to(torch.float64)
    net2.blocks.requires_grad_(False)
    x = ctx.t(np.linspace(-1, 1, 6).reshape(2, 3))
    out2 = net2(x)
    out2.sum().backward()
    flags = [p.grad is None for p in net2.parameters()]
    net2.zero_grad(set_to_none=False)
    zeroed = [None if p.grad is None else float(p.grad.abs().sum()) for p in net2.parameters()]
    sub = net2.get_submodule("blocks.b.0")
    par = net2.get_parameter("extra.1")
    return [
        names,
        uniq,
        own,
        allp,
        keys,
        sorted(res.missing_keys),
        sorted(res.unexpected_keys),
        out2,
        net2.running,
        net2.count,
        flags,
        zeroed,
        sub is net2.blocks["a"],
        par,
        str(out2.dtype).split(".")[-1],
        repr(net).replace("ember.", "torch."),
        sum(p.numel() for p in net.parameters()),
    ]


PROGRAMS = [func_ensemble, custom_functions, parametrizations, hooks_with_kwargs, module_api]
CAPTURED = [func_ensemble]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
