"""More programs of hunt55, each run on PyTorch and on ember: a zoo of tensor ops (scatter_reduce
and index_reduce modes, bucketize/searchsorted with a sorter, histc, bincount, kthvalue, mode,
gradient with coordinates, trapezoids, frexp/ldexp, integer division and bit operations with
wraparound, index_put/put/masked_scatter/the scatter family, as_strided, special functions) and
of layers (Bilinear, LPPool, max-unpooling, LocalResponseNorm, 3-D and circular padding,
grouped transposed and circular convolutions, InstanceNorm with running statistics, RMSNorm,
EmbeddingBag max, bidirectional RNN/LSTM with projections), with gradients; float64 default
dtype with LBFGS; generator and RNG-state juggling with every in-place sampler; an HF-style
model with gradient checkpointing under bf16 autocast and cast to bfloat16; autograd odds and
ends (hooks on non-leaves, inputs=, materialize_grads, functional jacobians and hessians);
torch.func's transforms at their less common arguments (vmap in_dims pytrees, out_dims,
chunk_size, nested vmap, vmap of solve and conv2d, jacrev argnums, vjp has_aux, linearize).
"""

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007, E501, E731, F841, B023, C408, B006, E702, E701, E401, C416, UP031, B905, PIE810, SIM108, RUF005


def tensor_op_zoo(torch, ctx):
    rng = np.random.default_rng(5)
    x = ctx.t(rng.standard_normal((4, 5)).astype(np.float32), requires_grad=True)
    i = ctx.t(rng.integers(0, 5, (4, 5)))
    v = ctx.t(np.sort(rng.standard_normal(10)).astype(np.float32))
    outs = []
    outs.append(
        torch.zeros(3, 5).scatter_reduce(0, i[:3] % 3, x[:3], reduce="amax", include_self=False)
    )
    outs.append(
        torch.ones(3, 5).scatter_reduce(0, i[:3] % 3, x[:3], reduce="mean", include_self=True)
    )
    outs.append(
        torch.zeros(3, 5).scatter_reduce(1, i[:3], x[:3], reduce="prod", include_self=False)
    )
    outs.append(torch.zeros(5, 5).index_reduce(0, i[:, 0], x, "amin", include_self=False))
    outs.append(torch.bucketize(x.detach(), v, right=True))
    outs.append(torch.searchsorted(v, x.detach(), side="left"))
    perm = ctx.t(rng.permutation(10))
    outs.append(
        torch.searchsorted(v[perm], x.detach().flatten()[:6], sorter=torch.argsort(v[perm]))
    )
    outs.append(torch.histc(x.detach(), bins=6, min=-2, max=2))
    outs.append(torch.bincount(i.flatten(), weights=x.detach().flatten(), minlength=7))
    outs.append(
        torch.unique_consecutive(
            torch.tensor([1, 1, 2, 2, 3, 1, 1]), return_inverse=True, return_counts=True
        )
    )
    outs.append(torch.take_along_dim(x, i % 5, dim=1))
    outs.append(torch.kthvalue(x, 2, dim=1))
    outs.append(torch.nanmedian(torch.where(x > 1, float("nan"), x), dim=0))
    outs.append(torch.mode(i, dim=1))
    outs.append(torch.cummax(x, 1))
    outs.append(torch.tril_indices(4, 5, offset=1))
    outs.append(torch.combinations(torch.arange(4), r=2, with_replacement=True))
    outs.append(torch.cartesian_prod(torch.arange(2), torch.arange(3)))
    outs.append(torch.block_diag(x[:2, :2], x[2:, 3:], torch.ones(1, 1)))
    outs.append(torch.vander(v[:4], N=3, increasing=True))
    outs.append(torch.diff(x, n=2, dim=1, prepend=x[:, :1], append=x[:, -1:]))
    outs.append(torch.gradient(x, spacing=0.5, dim=1)[0])
    outs.append(
        torch.gradient(x, spacing=(torch.tensor([0.0, 1.0, 3.0, 4.0]),), dim=0, edge_order=2)[0]
    )
    outs.append(torch.trapezoid(x, dx=0.1, dim=1))
    outs.append(torch.cumulative_trapezoid(x, dim=1))
    outs.append(torch.renorm(x, p=2, dim=0, maxnorm=1.0))
    outs.append(torch.lerp(x, torch.zeros_like(x), torch.full_like(x, 0.3)))
    m, e = torch.frexp(x.detach())
    outs += [m, e, torch.ldexp(m, e)]
    outs.append(torch.copysign(x, -1.0))
    outs.append(torch.nextafter(x.detach(), torch.zeros_like(x)))
    outs.append(torch.heaviside(x.detach(), torch.tensor(0.5)))
    outs.append(torch.logaddexp2(x, x * 0.5))
    outs.append(torch.float_power(x.detach(), 2))
    a = torch.tensor([-7, -3, 3, 7])
    outs += [
        torch.fmod(a, 3),
        torch.remainder(a, 3),
        torch.div(a, 2, rounding_mode="floor"),
        torch.div(a, 2, rounding_mode="trunc"),
        a // 2,
        a % -3,
    ]
    outs += [a << 2, a >> 1, a & 5, a | 8, a ^ 3, ~a, torch.bitwise_left_shift(a, 1)]
    outs.append(torch.tensor([250], dtype=torch.uint8) + torch.tensor([10], dtype=torch.uint8))
    outs.append(torch.tensor([127], dtype=torch.int8) + 1)
    y = x.detach().clone()
    y.index_put_(
        (torch.tensor([0, 0, 1]), torch.tensor([1, 1, 2])),
        torch.tensor([1.0, 2.0, 3.0]),
        accumulate=True,
    )
    outs.append(y)
    z = x.detach().clone()
    z.put_(torch.tensor([0, 7, 19]), torch.tensor([9.0, 8.0, 7.0]))
    outs.append(z)
    outs.append(x.masked_scatter(x > 0, torch.arange(20.0).reshape(4, 5)))
    outs.append(x.index_copy(0, torch.tensor([2, 0]), torch.ones(2, 5)))
    outs.append(x.index_fill(1, torch.tensor([1, 3]), -1.0))
    outs.append(torch.diagonal_scatter(x, torch.zeros(4), offset=1))
    outs.append(torch.select_scatter(x, torch.zeros(5), 0, 2))
    outs.append(torch.slice_scatter(x, torch.zeros(4, 2), dim=1, start=1, end=5, step=2))
    outs.append(x.as_strided((3, 3), (5, 1), 1))
    outs.append(x.unfold(1, 2, 2))
    outs.append(x.unflatten(1, (1, 5)).squeeze(1))
    outs.append(torch.addcdiv(x, x, x.abs() + 1, value=0.5))
    outs.append(torch.addcmul(x, x, x, value=-0.1))
    outs.append(torch.clamp(x, min=torch.full((5,), -0.5), max=torch.tensor(0.5)))
    outs.append(torch.logit(torch.sigmoid(x), eps=1e-6))
    outs.append(torch.xlogy(x.abs(), x.abs() + 1))
    outs.append(torch.special.entr(x.abs()))
    outs.append(torch.count_nonzero(x > 0, dim=1))
    outs.append(torch.aminmax(x, dim=0))
    outs.append(torch.var_mean(x, dim=1, correction=0))
    outs.append(torch.std(x, dim=0, unbiased=True, keepdim=True))
    outs.append(torch.nansum(torch.where(x > 1, float("nan"), x), dim=1))
    outs.append(torch.logcumsumexp(x, dim=1))
    outs.append(torch.cumprod(x, dim=0))
    outs.append(torch.signbit(x))
    outs.append(torch.isin(i, torch.tensor([1, 3])))
    outs.append(torch.isclose(x, x + 1e-7))
    outs.append(torch.rad2deg(x) + torch.deg2rad(x))
    outs.append(torch.atleast_3d(x).shape)
    outs.append(torch.hstack([x, x]).shape)
    outs.append(torch.dstack([x, x]))
    outs.append(torch.column_stack([v[:4], v[4:8]]))
    outs.append(torch.tensor_split(x, [1, 3], dim=1))
    outs.append(torch.hsplit(x, 5)[2])
    outs.append(torch.movedim(x.reshape(2, 2, 5), (0, 1), (2, 0)))
    outs.append(torch.swapaxes(x, 0, 1))
    outs.append(torch.narrow(x, 1, 1, 3))
    outs.append(torch.flatten(x.reshape(2, 2, 5), 0, 1))
    outs.append(torch.tile(x[:1, :2], (2, 3)))
    outs.append(x.new_full((2,), 3.5))
    outs.append(x.new_tensor([1, 2]))
    outs.append(torch.empty_like(x).fill_(2).sum())
    outs.append(torch.full((2, 2), 7).dtype)
    outs.append(torch.arange(0, 1, 0.25))
    outs.append(torch.range(0, 3))
    outs.append(torch.logspace(0, 2, 3, base=2))
    outs.append(torch.polygamma(1, x.abs() + 1))
    outs.append(torch.mvlgamma(x.abs() + 2, p=2))
    outs.append(torch.special.i0e(x))
    outs.append(torch.special.ndtri(torch.sigmoid(x)))
    outs.append(torch.special.log_ndtr(x))
    outs.append(torch.special.erfcx(x))
    outs.append(torch.special.xlog1py(x.abs(), x.abs()))
    outs.append(torch.special.sinc(x))
    outs.append(torch.special.multigammaln(x.abs() + 2, 3))
    outs.append(torch.special.softmax(x, 1))
    outs.append(torch.special.bessel_j0(x))
    outs.append(torch.special.zeta(x.detach().abs() + 2, torch.tensor(1.0)))
    diff_outs = [o for o in outs if isinstance(o, torch.Tensor) and o.requires_grad]
    loss = sum(o.float().sum() for o in diff_outs)
    loss.backward()
    outs.append(x.grad)
    return outs


def layer_zoo(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    mods = nn.ModuleDict(
        {
            "bil": nn.Bilinear(3, 4, 2),
            "unflat": nn.Unflatten(1, (2, 6)),
            "shuffle": nn.ChannelShuffle(2),
            "lp": nn.LPPool2d(2, 2),
            "lp1": nn.LPPool1d(3, 2, stride=1),
            "amax": nn.AdaptiveMaxPool2d((2, 3), return_indices=True),
            "mp": nn.MaxPool2d(2, return_indices=True),
            "unpool": nn.MaxUnpool2d(2),
            "cos": nn.CosineSimilarity(dim=1, eps=1e-6),
            "pd": nn.PairwiseDistance(p=1.5, keepdim=True),
            "sm2d": nn.Softmax2d(),
            "lrn": nn.LocalResponseNorm(3, alpha=1e-2, beta=0.75, k=2.0),
            "zp3": nn.ZeroPad3d((1, 0, 0, 1, 1, 0)),
            "cp2": nn.CircularPad2d((1, 2, 0, 1)),
            "rp": nn.ReflectionPad3d(1),
            "hs": nn.Hardshrink(0.3),
            "ss": nn.Softshrink(0.2),
            "glu": nn.GLU(dim=1),
            "thr": nn.Threshold(0.1, -2.0),
            "ctp": nn.ConvTranspose2d(
                4, 2, 3, stride=2, padding=1, output_padding=1, dilation=1, groups=2
            ),
            "c3": nn.Conv3d(2, 3, (1, 2, 2), padding="same", padding_mode="circular"),
            "c1": nn.Conv1d(4, 4, 3, padding=2, dilation=2, groups=4, padding_mode="reflect"),
            "inorm": nn.InstanceNorm2d(4, affine=True, track_running_stats=True),
            "gn": nn.GroupNorm(2, 4),
            "rms": nn.RMSNorm([4], eps=1e-5),
            "ln": nn.LayerNorm([4], elementwise_affine=False, bias=False),
            "emb": nn.Embedding(10, 4, max_norm=1.0, norm_type=2.0, scale_grad_by_freq=True),
            "ebag": nn.EmbeddingBag(10, 4, mode="max", padding_idx=0),
            "rnn": nn.RNN(
                4,
                3,
                num_layers=2,
                nonlinearity="relu",
                bidirectional=True,
                batch_first=True,
                dropout=0.0,
            ),
            "lstm": nn.LSTM(4, 6, proj_size=2, batch_first=True, bidirectional=True),
            "gru": nn.GRUCell(4, 3, bias=False),
            "up": nn.Upsample(scale_factor=1.5, mode="bilinear", align_corners=False),
            "upn": nn.UpsamplingNearest2d(scale_factor=2),
            "mish": nn.Mish(),
            "celu": nn.CELU(0.5),
            "selu": nn.SELU(),
            "logsig": nn.LogSigmoid(),
            "tanhs": nn.Tanhshrink(),
            "sofmin": nn.Softmin(dim=1),
            "hsig": nn.Hardsigmoid(),
            "hsw": nn.Hardswish(),
            "relu6": nn.ReLU6(),
            "elu": nn.ELU(alpha=0.7),
            "prelu": nn.PReLU(4, init=0.1),
            "lrelu": nn.LeakyReLU(0.2),
        }
    )
    ctx.init(mods)
    rng = np.random.default_rng(6)
    x = ctx.t(rng.standard_normal((2, 4, 6, 6)).astype(np.float32), requires_grad=True)
    s = ctx.t(rng.standard_normal((2, 5, 4)).astype(np.float32), requires_grad=True)
    a = ctx.t(rng.standard_normal((5, 3)).astype(np.float32), requires_grad=True)
    b = ctx.t(rng.standard_normal((5, 4)).astype(np.float32), requires_grad=True)
    idx = ctx.t(np.array([[1, 2, 2, 5], [0, 3, 3, 3]]))
    o = []
    o.append(mods["bil"](a, b))
    o.append(mods["unflat"](x.reshape(2, 12, 12)))
    o.append(mods["shuffle"](x))
    o.append(mods["lp"](x))
    o.append(mods["lp1"](s.transpose(1, 2)))
    v, ind = mods["amax"](x)
    o += [v, ind]
    v, ind = mods["mp"](x)
    o += [v, ind, mods["unpool"](v, ind, output_size=x.shape)]
    o.append(mods["cos"](a, b[:, :3]))
    o.append(mods["pd"](a, b[:, :3]))
    o.append(mods["sm2d"](x))
    o.append(mods["lrn"](x))
    x5 = x.reshape(2, 2, 2, 6, 6)
    o.append(mods["zp3"](x5))
    o.append(mods["cp2"](x))
    o.append(mods["rp"](x5))
    for k in (
        "hs",
        "ss",
        "thr",
        "mish",
        "celu",
        "selu",
        "logsig",
        "tanhs",
        "sofmin",
        "hsig",
        "hsw",
        "relu6",
        "elu",
        "prelu",
        "lrelu",
    ):
        o.append(mods[k](x))
    o.append(mods["glu"](x))
    o.append(mods["ctp"](x))
    o.append(mods["c3"](x5))
    o.append(mods["c1"](s.transpose(1, 2)))
    mods["inorm"].train()
    o.append(mods["inorm"](x))
    o.append(mods["inorm"].running_mean)
    mods["inorm"].eval()
    o.append(mods["inorm"](x))
    o.append(mods["gn"](x))
    o.append(mods["rms"](s))
    o.append(mods["ln"](s))
    o.append(mods["emb"](idx))
    o.append(mods["ebag"](idx))
    out, h = mods["rnn"](s)
    o += [out, h]
    out, (h, c) = mods["lstm"](s)
    o += [out, h, c]
    o.append(mods["gru"](s[:, 0]))
    o.append(mods["up"](x))
    o.append(mods["upn"](x))
    loss = sum(t.float().pow(2).mean() for t in o if t.dtype.is_floating_point)
    loss.backward()
    o += [
        x.grad,
        s.grad,
        a.grad,
        b.grad,
        mods["emb"].weight,
        mods["emb"].weight.grad,
        mods["prelu"].weight.grad,
        mods["lstm"].weight_hr_l0_reverse.grad,
    ]
    return o


def default_dtype_device(torch, ctx):
    nn = torch.nn
    old = torch.get_default_dtype()
    res = []
    try:
        torch.set_default_dtype(torch.float64)
        torch.manual_seed(0)
        m = nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4), nn.GELU(), nn.Linear(4, 1))
        res += [
            m[0].weight.dtype,
            torch.tensor([1.0]).dtype,
            torch.arange(3.0).dtype,
            torch.tensor(1).dtype,
            torch.randn(2).dtype,
            torch.tensor([1j]).dtype,
        ]
        x = torch.linspace(-1, 1, 12).reshape(4, 3)
        opt = torch.optim.LBFGS(
            m.parameters(), lr=0.5, max_iter=5, history_size=3, line_search_fn="strong_wolfe"
        )
        y = x.sum(1, keepdim=True) ** 2

        def closure():
            opt.zero_grad()
            l = ((m(x) - y) ** 2).mean()
            l.backward()
            return l

        for _ in range(2):
            res.append(opt.step(closure))
        res.append(m(x))
    finally:
        torch.set_default_dtype(old)
    res.append(torch.tensor([1.0]).dtype)
    with torch.device("cpu"):
        res.append(torch.ones(2).device.type)
    torch.set_default_device("cpu")
    try:
        res.append(str(torch.get_default_device()))
        res.append(torch.empty(0).device == torch.device("cpu"))
    finally:  # ("cpu" leaves PyTorch's device mode entered; None takes it out)
        torch.set_default_device(None)
    return res


def rng_state_juggling(torch, ctx):
    res = []
    torch.manual_seed(1)
    s = torch.get_rng_state()
    a = torch.rand(3)
    torch.set_rng_state(s)
    b = torch.rand(3)
    res += [a, b]
    with torch.random.fork_rng():
        torch.manual_seed(99)
        c = torch.randn(2)
    d = torch.randn(2)
    res += [c, d]
    g = torch.Generator().manual_seed(5)
    gs = g.get_state()
    e = torch.randint(0, 10, (5,), generator=g)
    g.set_state(gs)
    f = torch.randint(0, 10, (5,), generator=g)
    res += [e, f, g.initial_seed()]
    res.append(torch.randperm(6, generator=torch.Generator().manual_seed(3)))
    res.append(
        torch.normal(
            mean=torch.zeros(3), std=torch.ones(3) * 2, generator=torch.Generator().manual_seed(4)
        )
    )
    res.append(torch.empty(4).uniform_(-1, 1, generator=torch.Generator().manual_seed(2)))
    res.append(torch.empty(4).exponential_(2.0, generator=torch.Generator().manual_seed(2)))
    res.append(torch.empty(4).geometric_(0.3, generator=torch.Generator().manual_seed(2)))
    res.append(torch.empty(4).log_normal_(0.0, 0.5, generator=torch.Generator().manual_seed(2)))
    res.append(torch.empty(4).cauchy_(generator=torch.Generator().manual_seed(2)))
    res.append(
        torch.empty(5, dtype=torch.int64).random_(0, 7, generator=torch.Generator().manual_seed(2))
    )
    res.append(torch.bernoulli(torch.full((6,), 0.4), generator=torch.Generator().manual_seed(2)))
    res.append(torch.poisson(torch.full((4,), 3.0), generator=torch.Generator().manual_seed(2)))
    res.append(torch.rand(2, 3, generator=torch.Generator().manual_seed(7), dtype=torch.float64))
    res.append(torch.randn(3, dtype=torch.bfloat16).float())
    res.append(torch.randint_like(torch.zeros(4), 3, 9))
    res.append(torch.seed() > 0)
    torch.manual_seed(0)
    res.append(torch.initial_seed())
    return res


def hf_checkpointing_bf16(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    from_ckpt = torch.utils.checkpoint.checkpoint

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(8, 16)
            self.fc2 = nn.Linear(16, 8)
            self.drop = nn.Dropout(0.0)

        def forward(self, x, scale=1.0):
            return x + self.fc2(self.drop(F.silu(self.fc1(x)))) * scale

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList([Block() for _ in range(3)])
            self.gradient_checkpointing = True
            self.head = nn.Linear(8, 2)

        def forward(self, x):
            for blk in self.blocks:
                if self.gradient_checkpointing and self.training:
                    x = from_ckpt(blk.__call__, x, 0.5, use_reentrant=False)
                else:
                    x = blk(x, scale=0.5)
            return self.head(x)

    torch.manual_seed(0)
    model = ctx.init(Model())
    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((4, 8)).astype(np.float32))
    y = ctx.t(rng.integers(0, 2, 4))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, fused=None)
    losses = []
    for _ in range(3):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(x)
            loss = F.cross_entropy(logits.float(), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        ev = model(x)
    mb = ctx.init(Model(), "bf")
    mb.to(torch.bfloat16)
    out_b = mb(x.to(torch.bfloat16))
    out_b.float().sum().backward()
    return [
        losses,
        logits.dtype,
        ev,
        out_b.float(),
        mb.head.weight.grad.dtype,
        mb.head.weight.grad.float(),
    ]


def autograd_misc(torch, ctx):
    rng = np.random.default_rng(1)
    x = ctx.t(rng.standard_normal((3, 4)).astype(np.float32), requires_grad=True)
    w = ctx.t(rng.standard_normal((4, 2)).astype(np.float32), requires_grad=True)
    u = ctx.t(rng.standard_normal((2,)).astype(np.float32), requires_grad=True)
    h = x @ w
    h.retain_grad()
    seen = []
    h.register_hook(lambda g: seen.append(g.sum().item()) or g * 2)
    loss = (h.tanh() ** 2).sum()
    gx, gu = torch.autograd.grad(
        loss, [x, u], retain_graph=True, allow_unused=True, materialize_grads=True
    )
    loss.backward(inputs=[w])
    res = [gx, gu, w.grad, x.grad, h.grad, seen]
    with torch.no_grad():
        with torch.enable_grad():
            z = (x * 2).sum()
        res.append(z.requires_grad)
    torch.set_grad_enabled(False)
    res.append((x * 2).requires_grad)
    torch.set_grad_enabled(True)

    @torch.no_grad()
    def f(t):
        return t * 3

    res.append(f(x).requires_grad)

    @torch.inference_mode(mode=False)
    def g(t):
        return t * 3

    res.append(g(x).requires_grad)
    jac = torch.autograd.functional.jacobian(
        lambda a: (a**2).sum(0), x[0:2].detach(), vectorize=True
    )
    hes = torch.autograd.functional.hessian(lambda a: (a**3).sum(), x[0].detach())
    jvp = torch.autograd.functional.jvp(lambda a: a.sin(), x.detach(), torch.ones(3, 4))
    vhp = torch.autograd.functional.vhp(lambda a: (a**3).sum(), x[0].detach(), torch.ones(4))
    res += [jac, hes, list(jvp), list(vhp)]
    jr, aux = torch.func.jacrev(lambda a: ((a**2).sum(), a.mean()), has_aux=True)(x[0].detach())
    res += [jr, aux]
    res.append(torch.func.hessian(lambda a: (a.sin() * a).sum())(x[0].detach()))
    res.append(torch.func.jacfwd(lambda a: a.exp() @ w.detach(), randomness="same")(x[0].detach()))
    x2 = x.detach().requires_grad_()
    y2 = x2.exp()
    (g1,) = torch.autograd.grad(y2.sum(), x2, create_graph=True)
    (g2,) = torch.autograd.grad(g1.sum(), x2)
    res += [g1, g2]
    y3 = (x.detach() * 2).requires_grad_()
    res.append([y3.is_leaf, y3.grad_fn is None])
    a = torch.ones(2, requires_grad=True)
    b = a * 2
    b.backward(torch.tensor([1.0, 0.5]))
    b2 = a * 3
    b2.backward(torch.tensor([1.0, 1.0]))
    res.append(a.grad)
    a.grad = None
    (a**2).sum().backward()
    res.append(a.grad)
    return res


def func_transforms_more(torch, ctx):
    f = torch.func
    F = torch.nn.functional
    rng = np.random.default_rng(12)
    x = ctx.t(rng.standard_normal((4, 3)).astype(np.float32))
    y = ctx.t(rng.standard_normal((4, 3)).astype(np.float32))
    A = ctx.t((rng.standard_normal((4, 3, 3)) + 3 * np.eye(3)).astype(np.float32))
    img = ctx.t(rng.standard_normal((5, 2, 6, 6)).astype(np.float32))
    w = ctx.t(rng.standard_normal((3, 2, 3, 3)).astype(np.float32))
    out = []
    out.append(f.vmap(lambda a, b: (a * b).sum(), in_dims=(0, None))(x, y[0]))
    out.append(
        f.vmap(lambda d: d["a"] + d["b"][0], in_dims=({"a": 0, "b": (None,)},))(
            {"a": x, "b": (y[0],)}
        )
    )
    out.append(f.vmap(lambda a: (a, a.sum()), out_dims=(1, 0))(x))
    out.append(f.vmap(torch.linalg.solve)(A, x))
    out.append(f.vmap(lambda im: F.conv2d(im[None], w, padding=1)[0])(img))
    out.append(f.vmap(f.vmap(lambda a, b: a * b))(x, y))
    out.append(f.vmap(lambda a: a @ A[0], chunk_size=2)(x))
    out.append(f.jacrev(lambda a, b: (a * b).sin(), argnums=(0, 1))(x[0], y[0]))
    o, vjp_fn, aux = f.vjp(lambda a: (a.exp(), a.sum()), x, has_aux=True)
    out += [o, vjp_fn(torch.ones_like(o))[0], aux]
    out.append(f.jvp(lambda a: a.tanh() * 2, (x,), (torch.ones_like(x),)))
    yv, jfn = f.linearize(lambda a: a.sin().sum(0), x)
    out += [yv, jfn(torch.ones_like(x))]
    out.append(f.vmap(f.grad(lambda a, b: ((a - b) ** 2).sum()))(x, y))
    out.append(f.grad_and_value(lambda a: (a**3).sum(), has_aux=False)(x[0]))
    out.append(f.vmap(f.jacfwd(lambda a: a.softmax(-1)))(x))
    out.append(f.hessian(lambda a: (a.sin() * a.cos()).sum())(x[0]))
    return out


PROGRAMS = [
    tensor_op_zoo,
    layer_zoo,
    default_dtype_device,
    rng_state_juggling,
    hf_checkpointing_bf16,
    autograd_misc,
    func_transforms_more,
]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_eager(program):
    check_program(program)
