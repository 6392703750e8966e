"""Programs of hunt60 on autograd extension points and module hooks as libraries use them:
custom Functions with once_differentiable, needs_input_grad, mark_non_differentiable,
set_materialize_grads(False), mark_dirty, and a differentiable backward used under
create_graph; torch.func jacrev/jacfwd/hessian/vjp(has_aux) on functional_call of a model;
vmap with nested in_dims, out_dims and chunk_size; forward pre-hooks and hooks with kwargs,
always_call, global module hooks, full backward pre-hooks; state_dict and load_state_dict
hooks; nested grad modes; retain_grad, backward(inputs=...), gradients of views.
"""

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007, E501, E731, F841, B023, C408, B006, E702, E701, E401, C416, UP031, B905, PIE810, SIM108, RUF005


def _x(ctx, shape, seed=0, grad=False):
    rng = np.random.default_rng(seed)
    return ctx.t(rng.standard_normal(shape).astype(np.float32), requires_grad=grad)


def once_differentiable_fn(torch, ctx):
    """A clamp-with-straight-through Function whose backward is @once_differentiable and
    looks at ctx.needs_input_grad to skip the bound's gradient; used inside a small model,
    called with a bound that requires grad and one that does not."""
    from_fn = torch.autograd.function

    class SoftClamp(torch.autograd.Function):
        @staticmethod
        def forward(ctx_, x, bound):
            ctx_.save_for_backward(x, bound)
            return torch.minimum(x, bound)

        @staticmethod
        @from_fn.once_differentiable
        def backward(ctx_, g):
            x, bound = ctx_.saved_tensors
            gx = gb = None
            if ctx_.needs_input_grad[0]:
                gx = g * (x <= bound).to(g.dtype) + 0.1 * g * (x > bound).to(g.dtype)
            if ctx_.needs_input_grad[1]:
                gb = (g * (x > bound).to(g.dtype)).sum(0)
            return gx, gb

    lin = ctx.init(torch.nn.Linear(4, 3))
    x = _x(ctx, (6, 4))
    bound = ctx.t(np.array([0.1, 0.2, 0.3], np.float32), requires_grad=True)
    y = SoftClamp.apply(lin(x), bound)
    y.sum().backward()
    fixed = ctx.t(np.array([0.0, 0.0, 0.0], np.float32))
    lin.zero_grad()
    y2 = SoftClamp.apply(lin(x), fixed)
    y2.pow(2).sum().backward()
    return [y, bound.grad, lin.weight.grad, y2, fixed.grad is None]


def non_differentiable_outputs(torch, ctx):
    """A top-k selection Function returning (values, indices): indices marked
    non-differentiable, set_materialize_grads(False) so an unused output's gradient arrives as
    None; and a Function returning a mask alongside."""

    class TopK(torch.autograd.Function):
        @staticmethod
        def forward(ctx_, x, k):
            ctx_.set_materialize_grads(False)
            vals, idx = x.topk(k, dim=-1)
            ctx_.mark_non_differentiable(idx)
            ctx_.save_for_backward(idx)
            ctx_.shape = x.shape
            return vals, idx

        @staticmethod
        def backward(ctx_, gvals, gidx):
            if gvals is None:
                return None, None
            (idx,) = ctx_.saved_tensors
            gx = torch.zeros(ctx_.shape, dtype=gvals.dtype).scatter(-1, idx, gvals)
            return gx, None

    x = _x(ctx, (3, 7), 1, grad=True)
    vals, idx = TopK.apply(x * 2, 3)
    flags = [vals.requires_grad, idx.requires_grad, idx.dtype]
    (vals * ctx.t(np.arange(3, dtype=np.float32))).sum().backward()
    g1 = x.grad.clone()
    x.grad = None
    vals2, idx2 = TopK.apply(x + 1, 2)
    (vals2.sum() + idx2.float().sum() * 0).backward()
    return [vals, idx, flags, g1, x.grad]


def mark_dirty_inplace(torch, ctx):
    """An in-place leaky ReLU Function that mark_dirty's its input: applied to a non-leaf in a
    network, the result is the same tensor (object identity) and gradients flow; its version
    counter moved."""

    class LeakyInplace(torch.autograd.Function):
        @staticmethod
        def forward(ctx_, x, slope):
            mask = x < 0
            x[mask] *= slope
            ctx_.mark_dirty(x)
            ctx_.save_for_backward(mask)
            ctx_.slope = slope
            return x

        @staticmethod
        def backward(ctx_, g):
            (mask,) = ctx_.saved_tensors
            return torch.where(mask, g * ctx_.slope, g), None

    net = ctx.init(torch.nn.Sequential(torch.nn.Linear(5, 6), torch.nn.Linear(6, 2)))
    x = _x(ctx, (4, 5), 2)
    h = net[0](x)
    v0 = h._version
    h2 = LeakyInplace.apply(h, 0.1)
    same = h2 is h
    out = net[1](h2)
    out.pow(2).sum().backward()
    return [out, same, h._version > v0, net[0].weight.grad, net[1].weight.grad]


def differentiable_backward_penalty(torch, ctx):
    """A softplus Function whose backward is written in differentiable ops, so a WGAN-style
    gradient penalty (autograd.grad with create_graph=True, then backward) differentiates
    through it twice; compared with the built-in softplus."""

    class MySoftplus(torch.autograd.Function):
        @staticmethod
        def forward(ctx_, x):
            ctx_.save_for_backward(x)
            return torch.log1p(torch.exp(-x.abs())) + x.clamp(min=0)

        @staticmethod
        def backward(ctx_, g):
            (x,) = ctx_.saved_tensors
            return g * torch.sigmoid(x)

    out = []
    for use_custom in (True, False):
        D = ctx.init(torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1)), f"D{use_custom}")
        x = _x(ctx, (5, 3), 3, grad=True)
        act = MySoftplus.apply if use_custom else torch.nn.functional.softplus
        score = act(D(x)).sum()
        (gx,) = torch.autograd.grad(score, x, create_graph=True)
        penalty = ((gx.norm(2, dim=1) - 1) ** 2).mean()
        penalty.backward()
        out += [score, penalty, D[0].weight.grad, x.grad]
    return out


def func_jacobians_of_model(torch, ctx):
    """torch.func on a real model: jacrev of the outputs w.r.t. the parameters dict through
    functional_call, jacfwd w.r.t. the input, hessian of a scalar loss w.r.t. the input, vjp
    with has_aux returning the logits, and grad with argnums=(0, 1)."""
    nn = torch.nn
    fc = torch.func
    model = ctx.init(nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)))
    params = {k: v.detach() for k, v in model.named_parameters()}
    x = _x(ctx, (3,), 4)

    def f(p, x):
        return fc.functional_call(model, p, (x,))

    jp = fc.jacrev(f)(params, x)
    jx = fc.jacfwd(f, argnums=1)(params, x)
    hx = fc.hessian(lambda x: f(params, x).pow(2).sum())(x)

    def loss_aux(x):
        logits = f(params, x)
        return logits.logsumexp(-1), logits

    val, vjp_fn, aux = fc.vjp(loss_aux, x, has_aux=True)
    (gvjp,) = vjp_fn(torch.ones_like(val))
    ga, gb = fc.grad(lambda w, b: (x @ w.T + b).sin().sum(), argnums=(0, 1))(params["0.weight"], params["0.bias"])
    return [jp["0.weight"], jp["2.bias"], jx, hx, val, aux, gvjp, ga, gb]


def vmap_nested_dims(torch, ctx):
    """vmap over a function of a dict and a tuple with per-leaf in_dims (None for shared
    weights), out_dims=(0, 1), chunk_size=2, nested vmap for a pairwise kernel matrix, and
    vmap(grad) per-sample gradients with functional_call including a BatchNorm buffer in eval."""
    nn = torch.nn
    fc = torch.func
    xs = _x(ctx, (5, 3), 5)
    ys = _x(ctx, (3, 5), 6)
    w = _x(ctx, (3, 3), 7)

    def f(d, pair):
        a, b = pair
        h = d["x"] @ d["w"] + b
        return h.sum(), h * a

    s, h = fc.vmap(f, in_dims=({"x": 0, "w": None}, (None, 1)), out_dims=(0, 1), chunk_size=2)({"x": xs, "w": w}, (2.0, ys))
    rbf = fc.vmap(fc.vmap(lambda a, b: torch.exp(-((a - b) ** 2).sum()), in_dims=(None, 0)), in_dims=(0, None))(xs, xs)
    model = ctx.init(nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 1))).eval()
    params = {k: v.detach() for k, v in model.named_parameters()}
    buffers = {k: v for k, v in model.named_buffers()}
    targets = _x(ctx, (5,), 8)

    def loss(p, b, x, t):
        out = fc.functional_call(model, (p, b), (x.unsqueeze(0),))
        return (out.squeeze() - t) ** 2

    per = fc.vmap(fc.grad(loss), in_dims=(None, None, 0, 0))(params, buffers, xs, targets)
    return [s, h, rbf, per["0.weight"], per["3.bias"]]


def hooks_with_kwargs(torch, ctx):
    """Hooks as adapter libraries write them: a forward pre-hook with_kwargs rewriting a
    keyword argument, a forward hook with_kwargs reading it and replacing the output,
    always_call=True running after a forward that raised, a global
    register_module_forward_hook counting calls, and a full backward pre-hook scaling the
    output gradient."""
    nn = torch.nn

    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x, scale=1.0, fail=False):
            if fail:
                raise ValueError("boom")
            return self.lin(x) * scale

    m = ctx.init(Scaled())
    seen, calls = [], []

    def pre(mod, args, kwargs):
        kwargs = dict(kwargs)
        kwargs["scale"] = kwargs.get("scale", 1.0) * 2
        return args, kwargs

    def post(mod, args, kwargs, output):
        seen.append(kwargs["scale"])
        return output + 1

    def always(mod, args, kwargs, output):
        calls.append("always")

    h1 = m.register_forward_pre_hook(pre, with_kwargs=True)
    h2 = m.register_forward_hook(post, with_kwargs=True)
    h3 = m.register_forward_hook(always, with_kwargs=True, always_call=True)
    glob = nn.modules.module.register_module_forward_hook(lambda mod, inp, out: calls.append(type(mod).__name__))
    x = _x(ctx, (3, 4), 9, grad=True)
    y = m(x, scale=0.5)
    try:
        m(x, fail=True)
    except ValueError:
        calls.append("raised")
    glob.remove()
    m.lin.register_full_backward_pre_hook(lambda mod, gout: (gout[0] * 10,))
    y.sum().backward()
    h1.remove(); h2.remove(); h3.remove()
    y_plain = m(x)
    return [y, seen, calls, x.grad, m.lin.weight.grad, y_plain]


def state_dict_hooks(torch, ctx):
    """state_dict and load_state_dict hooks: a post-hook renaming keys for an old checkpoint
    format, a load pre-hook translating them back, a load post-hook clearing expected
    missing keys from the result, and register_state_dict_pre_hook seeing the prefix."""
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(3, 3)
            self.register_buffer("step", torch.zeros((), dtype=torch.int64))
            self.register_buffer("cache", torch.zeros(3), persistent=False)
            self._register_state_dict_hook(Block._rename)
            self._register_load_state_dict_pre_hook(Block._unrename, with_module=True)
            self.register_load_state_dict_post_hook(Block._post)

        def forward(self, x):
            return self.proj(x) + self.cache

        @staticmethod
        def _rename(module, sd, prefix, local_metadata):
            for k in list(sd):
                if k.startswith(prefix + "proj."):
                    sd[k.replace("proj.", "dense.")] = sd.pop(k)
            return sd

        @staticmethod
        def _unrename(module, sd, prefix, local_metadata, strict, missing, unexpected, errors):
            for k in list(sd):
                if k.startswith(prefix + "dense."):
                    sd[k.replace("dense.", "proj.")] = sd.pop(k)

        @staticmethod
        def _post(module, incompatible):
            incompatible.missing_keys[:] = [k for k in incompatible.missing_keys if not k.endswith("step")]

    prefixes = []
    net = nn.Sequential(Block(), Block())
    net.register_state_dict_pre_hook(lambda mod, prefix, keep_vars: prefixes.append(prefix))
    net[1].register_state_dict_pre_hook(lambda mod, prefix, keep_vars: prefixes.append(prefix))
    net = ctx.init(net)
    prefixes.clear()
    sd = net.state_dict()
    keys = list(sd)
    net2 = nn.Sequential(Block(), Block())
    sd2 = {k: v for k, v in sd.items() if not k.endswith("step")}
    res = net2.load_state_dict(sd2, strict=True)
    x = _x(ctx, (2, 3), 10)
    return [keys, prefixes, sorted(res.missing_keys), sorted(res.unexpected_keys), net2(x), net(x)]


def grad_mode_nesting(torch, ctx):
    """Nested grad modes: enable_grad inside no_grad inside inference_mode, set_grad_enabled
    used as a function and a context, no_grad as a method decorator and on a generator,
    inference_mode(False); is_grad_enabled/is_inference_mode_enabled and requires_grad of the
    results at each level."""
    w = _x(ctx, (3,), 11, grad=True)
    rec = []
    with torch.inference_mode():
        a = w * 2
        rec += [torch.is_inference_mode_enabled(), a.requires_grad, a.is_inference()]
        with torch.inference_mode(False):
            rec += [torch.is_inference_mode_enabled(), torch.is_grad_enabled()]
    with torch.no_grad():
        b = w * 2
        with torch.enable_grad():
            c = w * 3
            rec += [torch.is_grad_enabled()]
        rec += [b.requires_grad, c.requires_grad, torch.is_grad_enabled()]
    prev = torch.is_grad_enabled()
    torch.set_grad_enabled(False)
    d = w + 1
    torch.set_grad_enabled(prev)
    with torch.set_grad_enabled(False):
        e = w + 1
    rec += [d.requires_grad, e.requires_grad, torch.is_grad_enabled()]

    class Evaluator:
        @torch.no_grad()
        def score(self, t):
            return (t * w).sum()

    @torch.no_grad()
    def gen(n):
        for i in range(n):
            yield w * i

    s = Evaluator().score(w)
    outs = list(gen(3))
    rec += [s.requires_grad, [o.requires_grad for o in outs], torch.is_grad_enabled()]
    (c.sum() * 2).backward()
    return [rec, w.grad, s, outs]


def retain_and_inputs(torch, ctx):
    """retain_grad on intermediate results and on a view, backward with gradient= for a
    non-scalar output, backward(inputs=[...]) accumulating only into chosen leaves, retain_graph
    for a second backward, and grads of a tensor that was used through two views."""
    lin = ctx.init(torch.nn.Linear(4, 3))
    x = _x(ctx, (5, 4), 12, grad=True)
    h = lin(x)
    h.retain_grad()
    v = h[:, 1:]
    v.retain_grad()
    out = torch.tanh(v) * 2 + h[:, :1]
    g = ctx.t(np.linspace(-1, 1, 10, dtype=np.float32).reshape(5, 2))
    out.backward(gradient=g, retain_graph=True)
    r1 = [h.grad.clone(), v.grad.clone(), x.grad.clone(), lin.weight.grad.clone()]
    out.sum().backward(inputs=[x])
    r2 = [x.grad.clone(), lin.weight.grad.clone()]
    z = _x(ctx, (6,), 13, grad=True)
    a, b = z.view(2, 3), z[::2]
    (a.exp().sum() + (b * b).sum()).backward()
    return r1 + r2 + [z.grad, h.is_leaf, h.requires_grad, v.grad_fn is not None]


PROGRAMS = [once_differentiable_fn, non_differentiable_outputs, mark_dirty_inplace, differentiable_backward_penalty, func_jacobians_of_model, vmap_nested_dims, hooks_with_kwargs, state_dict_hooks, grad_mode_nesting, retain_and_inputs]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program, rtol=1e-4, atol=1e-5)
