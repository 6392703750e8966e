"""Autograd and runtime programs of hunt54, each run on PyTorch and on ember: autograd.Function
with setup_context, vmap and once_differentiable, torch.func's transforms (has_aux, chunk_size,
out_dims, tied weights, linearize), autograd.grad's options (materialize_grads,
is_grads_batched), forward-mode AD, hooks (post-accumulate, module full backward and pre-hooks),
checkpointing variants, saved-tensor hooks, Generator objects, global switches and samplers.
"""

import collections

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007, E501, E731, F841, B023, C408, B006, E702, E701, E401, C416, UP031, B905, PIE810, SIM108, RUF005


def autograd_function_vmap(torch, ctx):
    """autograd.Functions: one with setup_context and generate_vmap_rule (run under vmap, grad
    and vmap(grad), jacobian), one with mark_non_differentiable and once_differentiable, one
    with set_materialize_grads(False) and two outputs."""

    class ScaledTanh(torch.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(x, scale):
            return torch.tanh(x) * scale

        @staticmethod
        def setup_context(ctx_, inputs, output):
            x, scale = inputs
            ctx_.save_for_backward(x)
            ctx_.scale = scale

        @staticmethod
        def backward(ctx_, g):
            (x,) = ctx_.saved_tensors
            return g * ctx_.scale * (1 - torch.tanh(x) ** 2), None

    class SortWithIdx(torch.autograd.Function):
        @staticmethod
        def forward(ctx_, x):
            vals, idx = x.sort(-1)
            ctx_.mark_non_differentiable(idx)
            ctx_.save_for_backward(idx)
            return vals, idx

        @staticmethod
        @torch.autograd.function.once_differentiable
        def backward(ctx_, gv, gi):
            (idx,) = ctx_.saved_tensors
            return torch.zeros_like(gv).scatter(-1, idx, gv)

    class Clamp(torch.autograd.Function):
        @staticmethod
        def forward(ctx_, x):
            ctx_.set_materialize_grads(False)
            ctx_.save_for_backward(x)
            return x.clamp(-1, 1), x * 2

        @staticmethod
        def backward(ctx_, g1, g2):
            (x,) = ctx_.saved_tensors
            out = torch.zeros_like(x)
            if g1 is not None:
                out = out + g1 * ((x > -1) & (x < 1))
            if g2 is not None:
                out = out + 2 * g2
            return out

    x = torch.linspace(-2, 2, 12).view(3, 4).requires_grad_()
    y = ScaledTanh.apply(x, 1.5)
    vals, idx = SortWithIdx.apply(x * torch.tensor([1.0, -1.0, 2.0, 0.5]))
    c1, c2 = Clamp.apply(x)
    (y.sum() + (vals * torch.arange(4.0)).sum() + c1.sum()).backward()
    g = x.grad.clone()
    vm = torch.func.vmap(ScaledTanh.apply, in_dims=(0, None))(x.detach(), 2.0)
    gr = torch.func.grad(lambda t: ScaledTanh.apply(t, 3.0).sum())(x.detach())
    per = torch.func.vmap(torch.func.grad(lambda t: ScaledTanh.apply(t, 0.5).pow(2).sum()))(
        x.detach()
    )
    jf = torch.autograd.functional.jacobian(lambda t: ScaledTanh.apply(t, 1.0), x.detach()[0])
    return [y, vals, idx, idx.requires_grad, c1, g, vm, gr, per, jf]


def func_transforms(torch, ctx):
    """torch.func: grad with has_aux over a functional_call, vmap(grad) with chunk_size,
    jacrev, jacfwd with has_aux, hessian, jvp, vjp with has_aux, vmap with in_dims/out_dims
    tuples and nested vmap, functional_call with tied weights and with a tuple of dicts
    (strict=False), linearize."""
    nn = torch.nn
    func = torch.func
    net = ctx.init(nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 2)))
    params = {k: v.detach() for k, v in net.named_parameters()}
    x = torch.linspace(-1, 1, 12).view(4, 3)

    def loss_fn(p, xb):
        out = func.functional_call(net, p, (xb,))
        return out.pow(2).sum(), out

    (g, out) = func.grad(loss_fn, has_aux=True)(params, x)
    per_ex = func.vmap(
        func.grad(lambda p, xi: loss_fn(p, xi.unsqueeze(0))[0]), in_dims=(None, 0), chunk_size=2
    )(params, x)
    jac = func.jacrev(lambda xi: func.functional_call(net, params, (xi,)))(x[0])
    jacf, aux = func.jacfwd(lambda xi: (net(xi).sin(), xi.sum()), has_aux=True)(x[1])
    hess = func.hessian(lambda xi: net(xi).pow(2).sum())(x[2])
    out_v, jvp_out = func.jvp(lambda xi: net(xi), (x[0],), (torch.ones(3),))
    out_vj, vjp_fn, aux2 = func.vjp(lambda xi: (net(xi), xi.norm()), x[0], has_aux=True)
    (ct,) = vjp_fn(torch.ones(2))
    vm2 = func.vmap(lambda a, b: (a * b, a.sum()), in_dims=(1, None), out_dims=(1, 0))(
        x, torch.arange(4.0)
    )
    vm3 = func.vmap(func.vmap(torch.dot))(x.view(2, 2, 3), x.view(2, 2, 3))

    # tied weights in functional_call
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Linear(3, 3, bias=False)
            self.dec = nn.Linear(3, 3, bias=False)
            self.dec.weight = self.enc.weight

        def forward(self, z):
            return self.dec(self.enc(z))

    tied = ctx.init(Tied(), "tied")
    new_w = torch.eye(3) * 2
    t_out = func.functional_call(tied, {"enc.weight": new_w}, (x,), tie_weights=True)
    t_out2 = func.functional_call(tied, ({"enc.weight": new_w}, {}), x, strict=False)
    lin_out, lin_fn = func.linearize(lambda xi: net(xi).exp(), x[0])
    return [
        g,
        out,
        per_ex,
        jac,
        jacf,
        aux,
        hess,
        out_v,
        jvp_out,
        out_vj,
        ct,
        aux2,
        vm2,
        vm3,
        t_out,
        t_out2,
        lin_fn(torch.ones(3)),
    ]


def autograd_grad_options(torch, ctx):
    """autograd.grad with allow_unused, materialize_grads, is_grads_batched, create_graph;
    autograd.functional hvp, vhp, jacobian (vectorize, forward-mode, tuple inputs), hessian,
    vjp, jvp; forward_ad dual numbers."""
    x = torch.linspace(-1, 1, 6).view(2, 3).requires_grad_()
    w = torch.ones(3, requires_grad=True)
    unused = torch.ones(2, requires_grad=True)
    y = (x * w).sin().sum(1)
    g = torch.autograd.grad(y.sum(), [x, w, unused], allow_unused=True, retain_graph=True)
    g2 = torch.autograd.grad(
        y.sum(), [x, unused], allow_unused=True, materialize_grads=True, retain_graph=True
    )
    eye = torch.eye(2)
    gb = torch.autograd.grad(y, x, grad_outputs=eye, is_grads_batched=True, retain_graph=True)
    (gx,) = torch.autograd.grad(y.sum(), x, create_graph=True)
    (gg,) = torch.autograd.grad(gx.pow(2).sum(), x)
    f = lambda a: (a**3).sum()
    hvp = torch.autograd.functional.hvp(f, x.detach(), torch.ones(2, 3))
    vhp = torch.autograd.functional.vhp(f, x.detach(), torch.ones(2, 3))
    jv = torch.autograd.functional.jacobian(
        lambda a: a.sin() * 2, x.detach()[0], vectorize=True, strategy="forward-mode"
    )
    jr = torch.autograd.functional.jacobian(
        lambda a, b: (a * b, a + b), (x.detach()[0], w.detach()), create_graph=False
    )
    hs = torch.autograd.functional.hessian(
        lambda a: (a.exp() * a).sum(), x.detach()[1], vectorize=True
    )
    vjp = torch.autograd.functional.vjp(lambda a: a.cumsum(0), x.detach()[0], torch.ones(3))
    jvp = torch.autograd.functional.jvp(lambda a: a.cumprod(0), x.detach()[0], torch.ones(3))
    import importlib

    fwAD = importlib.import_module(torch.__name__ + ".autograd.forward_ad")
    with fwAD.dual_level():
        d = fwAD.make_dual(x.detach(), torch.ones_like(x))
        out = (d.sin() * d).sum(-1)
        p, t = fwAD.unpack_dual(out)
        tt = fwAD.unpack_dual(out).tangent
    return [g[0], g[1], g[2], g2[1], gb, gx, gg, hvp, vhp, jv, jr, hs, vjp, jvp, p, t, tt]


def grad_hooks(torch, ctx):
    """register_post_accumulate_grad_hook on every parameter, a module's full backward hook and
    backward pre-hook (changing a gradient) on a two-input two-output module, handles
    removed, retain_grad and a tensor hook."""
    nn = torch.nn
    net = ctx.init(nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)))
    log = []
    handles = []
    for name, p in net.named_parameters():
        handles.append(
            p.register_post_accumulate_grad_hook(
                lambda param, name=name: log.append((name, param.grad.sum().item()))
            )
        )

    class Two(nn.Module):
        def forward(self, a, b):
            return a * b, a + b

    two = Two()
    bw = []
    h2 = two.register_full_backward_hook(
        lambda m, gin, gout: bw.append(
            [None if g is None else g.sum() for g in gin] + [g.sum() for g in gout]
        )
    )
    h3 = two.register_full_backward_pre_hook(lambda m, gout: (gout[0] * 2, gout[1]))
    x = torch.linspace(-1, 1, 6).view(2, 3)
    a = net(x)
    b = torch.ones(2, 2, requires_grad=True)
    o1, o2 = two(a, b)
    (o1.sum() + o2.pow(2).sum()).backward()
    for h in handles:
        h.remove()
    h2.remove()
    net.zero_grad()
    net(x).sum().backward()
    y = torch.ones(3, requires_grad=True)
    z = y * 2
    z.retain_grad()
    hz = z.register_hook(lambda g: g * 10)
    (z * z).sum().backward()
    return [log, bw, b.grad, net[0].weight.grad, z.grad, y.grad, z.is_leaf, z.grad_fn.name()]


def checkpoint_variants(torch, ctx):
    """torch.utils.checkpoint with use_reentrant False and True around Dropout blocks (RNG
    state preserved), checkpoint_sequential, a checkpointed function of several arguments
    with determinism_check and debug."""
    nn = torch.nn
    import importlib

    cp = importlib.import_module(torch.__name__ + ".utils.checkpoint")
    blocks = ctx.init(
        nn.Sequential(
            *[nn.Sequential(nn.Linear(6, 6), nn.GELU(), nn.Dropout(0.2)) for _ in range(4)]
        )
    )
    x = torch.linspace(-1, 1, 18).view(3, 6).requires_grad_()
    torch.manual_seed(2)
    h = x
    for i, blk in enumerate(blocks):
        if i % 2 == 0:
            h = cp.checkpoint(blk, h, use_reentrant=False, preserve_rng_state=True)
        else:
            h = cp.checkpoint(blk, h, use_reentrant=True)
    h2 = cp.checkpoint_sequential(blocks, 2, h, use_reentrant=False)

    def fn(a, b, flag):
        return (a * b).tanh() if flag else a

    h3 = cp.checkpoint(
        fn, h2, h2.detach() + 1, True, use_reentrant=False, determinism_check="default", debug=False
    )
    loss = h3.pow(2).sum()
    loss.backward()
    return [h, h2, h3, x.grad, blocks[0][0].weight.grad, blocks[3][0].bias.grad]


def misc_autograd(torch, ctx):
    """backward(inputs=...), autograd.backward with grad_tensors, saved_tensors_hooks and
    save_on_cpu, einsum in sublist and ellipsis forms, vmap randomness 'different' and
    'same', forward hooks with kwargs and always_call, functional_call and
    stateless.functional_call."""
    nn = torch.nn
    x = torch.linspace(-1, 1, 6).view(2, 3).requires_grad_()
    w = torch.ones(3, requires_grad=True)
    y = (x * w).tanh().sum()
    y.backward(inputs=[w])
    g_w, g_x = w.grad.clone(), x.grad
    z1 = (x**2).sum()
    z2 = (x * w).sum()
    torch.autograd.backward([z1, z2], grad_tensors=[torch.tensor(2.0), torch.tensor(0.5)])
    packed = []

    def pack(t):
        packed.append(t.shape)
        return t * 1

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        q = (x.exp() * w).sum()
    q.backward()
    with torch.autograd.graph.save_on_cpu(pin_memory=False):
        r = (x.sin() * x.cos()).sum()
    r.backward()
    e1 = torch.einsum(x, [0, 1], w.detach(), [1], [0])
    e2 = torch.einsum("...j,j->...", x, w)
    e3 = torch.einsum("ij,kj->ik", [x, x])
    bm = torch.func.vmap(lambda t: torch.nn.functional.dropout(t, 0.5), randomness="different")(
        torch.ones(4, 6)
    )
    bs = torch.func.vmap(lambda t: t + torch.rand(()), randomness="same")(torch.zeros(3))
    m = nn.Linear(3, 2)
    ctx.init(m)
    calls = []
    m.register_forward_hook(
        lambda mod, args, kwargs, out: calls.append(sorted(kwargs)),
        with_kwargs=True,
        always_call=True,
    )
    out = torch.func.functional_call(m, {"weight": torch.ones(2, 3), "bias": torch.zeros(2)}, (x,))
    out2 = torch.nn.utils.stateless.functional_call(m, {"bias": torch.ones(2)}, x)
    return [
        g_w,
        g_x,
        x.grad,
        w.grad,
        len(packed) > 0,
        e1,
        e2,
        e3,
        bm.shape,
        (bm == 0).any(),
        bs,
        out,
        out2,
        calls,
    ]


def generator_objects(torch, ctx):
    """torch.Generator objects passed to randn, randint, randperm, multinomial, rand, uniform_,
    normal_, bernoulli, exponential_, normal; get_state/set_state replay, initial_seed,
    DataLoader(generator=...) and random_split with fractions."""
    g = torch.Generator().manual_seed(123)
    g2 = torch.Generator()
    g2.manual_seed(7)
    a = torch.randn(3, 4, generator=g)
    b = torch.randint(0, 10, (5,), generator=g)
    c = torch.randperm(8, generator=g)
    p = torch.tensor([0.1, 0.2, 0.3, 0.4])
    d = torch.multinomial(p, 3, generator=g2)
    e = torch.rand(2, generator=g2)
    st = g.get_state()
    f1 = torch.randn(4, generator=g)
    g.set_state(st)
    f2 = torch.randn(4, generator=g)
    h = torch.empty(5).uniform_(-1, 1, generator=g2)
    i = torch.empty(5).normal_(2, 3, generator=g2)
    j = torch.bernoulli(torch.full((6,), 0.5), generator=g2)
    k = torch.empty(4).exponential_(generator=g2)
    ds = torch.utils.data.TensorDataset(torch.arange(10.0))
    dl = torch.utils.data.DataLoader(
        ds, batch_size=3, shuffle=True, generator=torch.Generator().manual_seed(3)
    )
    order = [b_[0] for b_ in dl]
    sub = torch.utils.data.random_split(
        range(10), [0.7, 0.3], generator=torch.Generator().manual_seed(1)
    )
    seed = g.initial_seed()
    return [
        a,
        b,
        c,
        d,
        e,
        f1,
        f2,
        h,
        i,
        j,
        k,
        order,
        list(sub[0]),
        seed,
        torch.normal(0.0, 1.0, (3,), generator=g),
    ]


def global_switches(torch, ctx):
    """Global switches: cudnn flags, allow_tf32, float32 matmul precision, deterministic
    algorithms, set_num_threads, set_default_dtype(float64) and the dtypes factories then
    give, inference_mode and no_grad as decorators with enable_grad inside, set_grad_enabled
    as a call, anomaly detection."""
    nn = torch.nn
    precision = torch.get_float32_matmul_precision()
    cudnn = torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.deterministic = True
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.set_float32_matmul_precision("high")
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.set_num_threads(torch.get_num_threads())
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        a = torch.tensor([1.0, 2.0])
        b = torch.arange(3.0)
        c = torch.zeros(2)
        lin = nn.Linear(2, 2)
        d = torch.tensor(3.5) * torch.ones(1, dtype=torch.float32)
        cplx = torch.tensor([1 + 2j])
        dtypes = [
            a.dtype,
            b.dtype,
            c.dtype,
            lin.weight.dtype,
            d.dtype,
            cplx.dtype,
            torch.randn(2).dtype,
            torch.linspace(0, 1, 3).dtype,
        ]
    finally:
        torch.set_default_dtype(old)

    @torch.inference_mode()
    def infer(x):
        return x * 2

    @torch.no_grad()
    def ng(x):
        with torch.enable_grad():
            y = x * 3
        return y, (x * 3).requires_grad

    x = torch.ones(2, requires_grad=True).to(dev)
    y = infer(x)
    z, flag = ng(x)
    prev = torch.is_grad_enabled()
    torch.set_grad_enabled(False)
    w = x * 2
    torch.set_grad_enabled(True)
    with torch.autograd.set_detect_anomaly(True):
        v = (x * 2).sum()
        v.backward()
    with torch.autograd.detect_anomaly(check_nan=False):
        pass
    with torch.inference_mode(mode=False):
        u = x * 2
    results = [
        dtypes,
        y.requires_grad,
        y.is_inference(),
        z.requires_grad,
        flag,
        w.requires_grad,
        u.requires_grad,
        prev,
        x.grad,
        torch.are_deterministic_algorithms_enabled(),
        torch.get_float32_matmul_precision(),
        dev.type,
        str(x.device),
    ]
    # (the switches are process-wide: put them back, for the tests that run after)
    torch.use_deterministic_algorithms(False)
    torch.set_float32_matmul_precision(precision)
    torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic = cudnn
    torch.backends.cuda.matmul.allow_tf32 = tf32
    return results


def loader_samplers(torch, ctx):
    """Samplers: SubsetRandomSampler with a generator, DistributedSampler (shuffle with
    set_epoch, drop_last), RandomSampler with replacement, default_collate of namedtuples
    and dicts of NumPy arrays, Subset with drop_last, a custom collate_fn, BatchSampler."""
    D = torch.utils.data
    (
        DataLoader,
        TensorDataset,
        SubsetRandomSampler,
        SequentialSampler,
        RandomSampler,
        Subset,
        default_collate,
    ) = (
        D.DataLoader,
        D.TensorDataset,
        D.SubsetRandomSampler,
        D.SequentialSampler,
        D.RandomSampler,
        D.Subset,
        D.default_collate,
    )
    import importlib

    DistributedSampler = importlib.import_module(
        torch.__name__ + ".utils.data.distributed"
    ).DistributedSampler
    ds = TensorDataset(torch.arange(20.0).view(10, 2), torch.arange(10))
    g = torch.Generator().manual_seed(0)
    out = []
    out.append(
        [
            b[1]
            for b in DataLoader(
                ds, batch_size=3, sampler=SubsetRandomSampler([1, 3, 5, 7, 9], generator=g)
            )
        ]
    )
    ds_sampler = DistributedSampler(
        ds, num_replicas=3, rank=1, shuffle=True, seed=4, drop_last=False
    )
    ds_sampler.set_epoch(2)
    out.append(list(ds_sampler))
    out.append(len(ds_sampler))
    ds_sampler2 = DistributedSampler(ds, num_replicas=4, rank=3, shuffle=False, drop_last=True)
    out.append(list(ds_sampler2))
    out.append(
        list(
            RandomSampler(
                ds, replacement=True, num_samples=6, generator=torch.Generator().manual_seed(2)
            )
        )
    )
    out.append(list(RandomSampler(ds, generator=torch.Generator().manual_seed(2))))
    Point = collections.namedtuple("Point", ["x", "y"])
    batch = default_collate([Point(torch.ones(2), 1), Point(torch.zeros(2), 2)])
    out.append([type(batch).__name__, batch.x, batch.y])
    batch2 = default_collate(
        [{"a": np.ones(2), "b": 1.5, "c": "s"}, {"a": np.zeros(2), "b": 2.5, "c": "t"}]
    )
    out.append([batch2["a"], batch2["b"], batch2["c"]])
    dl = DataLoader(
        Subset(ds, [0, 2, 4, 6]), batch_size=2, drop_last=True, shuffle=False, pin_memory=True
    )
    out.append([b[0] for b in dl])
    out.append(len(dl))

    def collate(items):
        xs, ys = zip(*items)
        return torch.stack(xs), torch.tensor(ys)

    dl2 = DataLoader(
        ds,
        batch_size=4,
        collate_fn=collate,
        num_workers=0,
        shuffle=True,
        generator=torch.Generator().manual_seed(9),
    )
    out.append([b[1] for b in dl2])
    bs = torch.utils.data.BatchSampler(SequentialSampler(range(7)), batch_size=3, drop_last=False)
    out.append(list(bs))
    return out


PROGRAMS = [
    autograd_function_vmap,
    func_transforms,
    autograd_grad_options,
    grad_hooks,
    checkpoint_variants,
    misc_autograd,
    generator_objects,
    global_switches,
    loader_samplers,
]
TOLERANCES = {}


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program, **TOLERANCES.get(program.__name__, {}))
