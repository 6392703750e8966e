"""Training programs of hunt15: a temporal convolution network (dilated causal convolutions
under weight_norm), a normalizing flow built from torch.distributions transforms, a CTC training
step, a tabular model with EmbeddingBag, a Gumbel-softmax VAE, a spectral_norm GAN step, WGAN-GP's
gradient penalty, per-sample gradients with torch.func, a warmup+cosine schedule with clipping
and accumulation, and a state_dict round trip mid-training.
"""

import io

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007


def tcn(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    wn = nn.utils.parametrizations.weight_norm

    class Chomp(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.n = n

        def forward(self, x):
            return x[:, :, : -self.n].contiguous()

    class TemporalBlock(nn.Module):
        def __init__(self, cin, cout, k, d):
            super().__init__()
            pad = (k - 1) * d
            self.net = nn.Sequential(
                wn(nn.Conv1d(cin, cout, k, padding=pad, dilation=d)),
                Chomp(pad),
                nn.ReLU(),
                wn(nn.Conv1d(cout, cout, k, padding=pad, dilation=d)),
                Chomp(pad),
                nn.ReLU(),
            )
            self.down = nn.Conv1d(cin, cout, 1) if cin != cout else None

        def forward(self, x):
            res = x if self.down is None else self.down(x)
            return F.relu(self.net(x) + res)

    model = ctx.init(nn.Sequential(TemporalBlock(2, 4, 3, 1), TemporalBlock(4, 4, 3, 4)))
    head = ctx.init(nn.Linear(4, 1), "head")
    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((3, 2, 12)).astype(np.float32))
    y = ctx.t(rng.standard_normal((3, 1)).astype(np.float32))
    opt = torch.optim.Adam(list(model.parameters()) + list(head.parameters()), lr=2e-3)

    @ctx.fn
    def step(x, y):
        h = model(x)
        loss = F.mse_loss(head(h[:, :, -1]), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    losses = [step(x, y) for _ in range(3)]
    # causality: changing the last input step does not change earlier outputs
    x2 = x.clone()
    x2[:, :, -1] += 1.0
    with torch.no_grad():
        same = torch.allclose(model(x)[:, :, :-1], model(x2)[:, :, :-1])
    conv = model[0].net[0]
    return [
        losses,
        same,
        sorted(model.state_dict().keys())[:6],
        conv.parametrizations.weight.original0.grad,
        conv.weight,
    ]


def flow_distributions(torch, ctx):
    nn = torch.nn
    D = torch.distributions
    T = torch.distributions.transforms

    class Coupling(nn.Module):
        def __init__(self, mask):
            super().__init__()
            self.register_buffer("mask", mask)
            self.s = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 2))
            self.t = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 2))

        def forward(self, x):
            xm = x * self.mask
            s = self.s(xm) * (1 - self.mask)
            t = self.t(xm) * (1 - self.mask)
            z = xm + (1 - self.mask) * (x * torch.exp(s) + t)
            return z, s.sum(dim=1)

    layers = nn.ModuleList(
        [
            Coupling(torch.tensor([1.0, 0.0])),
            Coupling(torch.tensor([0.0, 1.0])),
            Coupling(torch.tensor([1.0, 0.0])),
        ]
    )
    layers = ctx.init(layers)
    base = D.MultivariateNormal(torch.zeros(2), torch.eye(2))
    rng = np.random.default_rng(1)
    data = ctx.t((rng.standard_normal((16, 2)) * [2.0, 0.5] + [1.0, -1.0]).astype(np.float32))
    opt = torch.optim.Adam(layers.parameters(), lr=1e-2)

    @ctx.fn
    def step(data):
        z, logdet = data, torch.zeros(16)
        for layer in layers:
            z, ld = layer(z)
            logdet = logdet + ld
        loss = -(base.log_prob(z) + logdet).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    nll = [step(data) for _ in range(3)]
    # a fixed flow from transforms: log_prob via change of variables
    flow = D.TransformedDistribution(
        D.Normal(torch.zeros(2), torch.ones(2)),
        [
            T.AffineTransform(loc=torch.tensor([1.0, -1.0]), scale=torch.tensor([2.0, 0.5])),
            T.SigmoidTransform(),
        ],
    )
    pts = ctx.t(np.array([[0.3, 0.6], [0.9, 0.1]], dtype=np.float32))
    ind = D.Independent(D.Normal(torch.zeros(3), torch.ones(3) * 2), 1)
    comp = T.ComposeTransform([T.ExpTransform(), T.AffineTransform(0.0, 3.0)])
    y = comp(torch.tensor([0.5, -0.2]))
    return [
        nll,
        flow.log_prob(pts),
        ind.log_prob(torch.ones(2, 3)),
        ind.event_shape,
        y,
        comp.inv(y),
        comp.log_abs_det_jacobian(torch.tensor([0.5, -0.2]), y),
        D.kl_divergence(D.Normal(0.0, 1.0), D.Normal(torch.tensor(1.0), torch.tensor(2.0))),
    ]


def ctc_step(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    model = ctx.init(nn.GRU(5, 8, batch_first=False, bidirectional=True))
    proj = ctx.init(nn.Linear(16, 6), "proj")
    rng = np.random.default_rng(2)
    Tn, B = 9, 3
    x = ctx.t(rng.standard_normal((Tn, B, 5)).astype(np.float32))
    targets = ctx.t(np.array([1, 2, 2, 3, 4, 5, 1, 1, 2], dtype=np.int64))
    target_lengths = ctx.t(np.array([4, 2, 3]))
    input_lengths = ctx.t(np.array([9, 7, 8]))
    ctc = nn.CTCLoss(blank=0, reduction="mean", zero_infinity=True)
    opt = torch.optim.Adadelta(list(model.parameters()) + list(proj.parameters()), lr=1.0)

    @ctx.fn
    def step(x, targets, input_lengths, target_lengths):
        out, _ = model(x)
        logp = proj(out).log_softmax(-1)
        loss = ctc(logp, targets, input_lengths, target_lengths)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, logp.detach()

    losses = []
    for _ in range(2):
        loss, logp = step(x, targets, input_lengths, target_lengths)
        losses.append(loss)
    padded = torch.tensor([[1, 2, 2, 3], [4, 5, 0, 0], [1, 1, 2, 0]])
    per = F.ctc_loss(logp, padded, input_lengths, target_lengths, reduction="none")
    greedy = logp.argmax(-1).T
    return [losses, per, greedy, proj.weight.grad]


def tabular_bag(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class Tabular(nn.Module):
        def __init__(self):
            super().__init__()
            self.cat_embs = nn.ModuleList([nn.Embedding(5, 3), nn.Embedding(7, 4)])
            self.bag = nn.EmbeddingBag(10, 4, mode="sum")
            self.bag_max = nn.EmbeddingBag(10, 2, mode="max")
            self.bn = nn.BatchNorm1d(2)
            self.mlp = nn.Sequential(
                nn.Linear(3 + 4 + 4 + 2 + 2, 16), nn.ReLU(), nn.Dropout(0.0), nn.Linear(16, 1)
            )

        def forward(self, cats, conts, tags, offsets, weights):
            e = [emb(cats[:, i]) for i, emb in enumerate(self.cat_embs)]
            bag = self.bag(tags, offsets, per_sample_weights=weights)
            bmax = self.bag_max(tags, offsets)
            return self.mlp(torch.cat(e + [bag, bmax, self.bn(conts)], 1)).squeeze(1)

    model = ctx.init(Tabular())
    rng = np.random.default_rng(3)
    cats = ctx.t(np.stack([rng.integers(0, 5, 4), rng.integers(0, 7, 4)], 1))
    conts = ctx.t(rng.standard_normal((4, 2)).astype(np.float32))
    tags = ctx.t(np.array([1, 2, 4, 5, 4, 3, 2, 9]))
    offsets = ctx.t(np.array([0, 2, 3, 6]))
    weights = ctx.t(rng.random(8).astype(np.float32))
    y = ctx.t(np.array([1.0, 0.0, 1.0, 0.0], dtype=np.float32))
    opt = torch.optim.Adagrad(model.parameters(), lr=0.1)
    pos_weight = torch.tensor([2.0])

    @ctx.fn
    def step(cats, conts, tags, offsets, weights, y):
        logit = model(cats, conts, tags, offsets, weights)
        loss = F.binary_cross_entropy_with_logits(logit, y, pos_weight=pos_weight)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    out = [step(cats, conts, tags, offsets, weights, y) for _ in range(3)]
    model.eval()
    probs = torch.sigmoid(model(cats, conts, tags, offsets, weights))
    bag2d = F.embedding_bag(torch.tensor([[1, 2], [3, 4]]), model.bag.weight, mode="mean")
    return [
        out,
        probs,
        model.bn.running_var,
        model.bag.weight.grad,
        bag2d,
        model.bn.num_batches_tracked,
    ]


def gumbel_vae(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    N, K = 3, 4  # latent variables, categories

    class VAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, N * K))
            self.dec = nn.Sequential(nn.Linear(N * K, 16), nn.ReLU(), nn.Linear(16, 8))

        def forward(self, x, g, tau, hard):
            logits = self.enc(x).view(-1, N, K)
            y = F.softmax((logits + g) / tau, dim=-1)
            if hard:
                idx = y.argmax(-1, keepdim=True)
                y_hard = torch.zeros_like(y).scatter_(-1, idx, 1.0)
                y = (y_hard - y).detach() + y
            return self.dec(y.view(-1, N * K)), logits

    model = ctx.init(VAE())
    rng = np.random.default_rng(4)
    x = ctx.t((rng.random((6, 8)) > 0.5).astype(np.float32))
    u = rng.random((4, 6, N, K)).astype(np.float32)
    gs = ctx.t(-np.log(-np.log(u + 1e-10) + 1e-10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)

    @ctx.fn
    def train_step(x, g, tau, hard):
        recon, logits = model(x, g, tau, hard=hard)
        q = F.softmax(logits, -1)
        kl = (q * (torch.log(q + 1e-20) - np.log(1.0 / K))).sum((1, 2)).mean()
        bce = F.binary_cross_entropy_with_logits(recon, x, reduction="sum") / x.shape[0]
        loss = bce + kl
        opt.zero_grad()
        loss.backward()
        opt.step()
        return [loss, kl]

    out = []
    for step in range(4):
        tau = max(0.5, float(np.exp(-0.3 * step)))
        out.append(train_step(x, gs[step], tau, step % 2 == 1))
    return [out, model.enc[2].bias]


def sn_gan(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    SN = nn.utils.spectral_norm
    G = ctx.init(
        nn.Sequential(nn.Linear(4, 16), nn.LeakyReLU(0.2), nn.Linear(16, 6), nn.Tanh()), "G"
    )
    Dm = nn.Sequential(SN(nn.Linear(6, 16)), nn.LeakyReLU(0.2), SN(nn.Linear(16, 1)))
    Dm = ctx.init(Dm, "D")
    optG = torch.optim.Adam(G.parameters(), lr=2e-4, betas=(0.0, 0.9))
    optD = torch.optim.Adam(Dm.parameters(), lr=2e-4, betas=(0.0, 0.9))
    rng = np.random.default_rng(5)
    real = ctx.t(np.tanh(rng.standard_normal((8, 6))).astype(np.float32))
    zs = ctx.t(rng.standard_normal((3, 8, 4)).astype(np.float32))

    @ctx.fn
    def step(real, z):
        fake = G(z)
        d_loss = F.relu(1 - Dm(real)).mean() + F.relu(1 + Dm(fake.detach())).mean()
        optD.zero_grad()
        d_loss.backward()
        optD.step()
        g_loss = -Dm(fake).mean()
        optG.zero_grad()
        g_loss.backward()
        optG.step()
        return [d_loss, g_loss]

    out = [step(real, zs[i]) for i in range(3)]
    Dm.eval()
    with torch.no_grad():
        score = Dm(real)
        sigma = torch.linalg.matrix_norm(Dm[0].weight, ord=2)
    return [out, score, sigma, Dm[0].weight_u, Dm.state_dict()["2.weight_orig"]]


def wgan_gp(torch, ctx):
    nn = torch.nn
    critic = ctx.init(nn.Sequential(nn.Linear(3, 16), nn.Softplus(), nn.Linear(16, 1)), "C")
    gen = ctx.init(nn.Sequential(nn.Linear(2, 8), nn.ELU(), nn.Linear(8, 3)), "G")
    optC = torch.optim.RMSprop(critic.parameters(), lr=1e-3)
    optG = torch.optim.RMSprop(gen.parameters(), lr=1e-3)
    rng = np.random.default_rng(6)
    real = ctx.t(rng.standard_normal((6, 3)).astype(np.float32))
    z = ctx.t(rng.standard_normal((6, 2)).astype(np.float32))
    eps = ctx.t(rng.random((6, 1)).astype(np.float32))

    def critic_step(real, z, eps):
        fake = gen(z).detach()
        xhat = (eps * real + (1 - eps) * fake).requires_grad_(True)
        score = critic(xhat)
        (g,) = torch.autograd.grad(score.sum(), xhat, create_graph=True)
        gp = ((g.norm(2, dim=1) - 1) ** 2).mean()
        loss = critic(fake).mean() - critic(real).mean() + 10 * gp
        optC.zero_grad()
        loss.backward()
        optC.step()
        return loss, gp

    critic_step = ctx.fn(critic_step)
    out = []
    for _ in range(2):
        out.append(critic_step(real, z, eps))
        g_loss = -critic(gen(z)).mean()
        optG.zero_grad()
        g_loss.backward()
        optG.step()
        out.append(g_loss)
    return [out, critic[0].weight, gen[2].bias]


def per_sample_grads(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    from_func = torch.func
    model = ctx.init(nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 3)))
    params = {k: v.detach() for k, v in model.named_parameters()}
    buffers = {k: v.detach() for k, v in model.named_buffers()}
    rng = np.random.default_rng(7)
    x = ctx.t(rng.standard_normal((5, 4)).astype(np.float32))
    y = ctx.t(rng.integers(0, 3, 5))

    def loss_fn(p, b, xi, yi):
        out = from_func.functional_call(model, (p, b), (xi.unsqueeze(0),))
        return F.cross_entropy(out, yi.unsqueeze(0))

    grads = ctx.fn(from_func.vmap(from_func.grad(loss_fn), in_dims=(None, None, 0, 0)))(
        params, buffers, x, y
    )
    # DP-SGD: clip each example's gradient to norm 1, average, step
    norms = torch.sqrt(sum(g.flatten(1).pow(2).sum(1) for g in grads.values()))
    factor = (1.0 / (norms + 1e-6)).clamp(max=1.0)
    clipped = {k: (g * factor.view(-1, *[1] * (g.dim() - 1))).mean(0) for k, g in grads.items()}
    # the mean of per-sample gradients equals the batch gradient
    model.zero_grad()
    F.cross_entropy(model(x), y).backward()
    loss_v, g_v = from_func.grad_and_value(lambda p: loss_fn(p, buffers, x[0], y[0]))(params)
    return [grads, norms, clipped, {k: v.grad for k, v in model.named_parameters()}, loss_v, g_v]


def warmup_cosine_accum(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    model = ctx.init(nn.Sequential(nn.Linear(5, 8), nn.LayerNorm(8), nn.GELU(), nn.Linear(8, 2)))
    decay, no_decay = [], []
    for n, p in model.named_parameters():
        (no_decay if p.ndim == 1 else decay).append(p)
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
        lr=1e-2,
        betas=(0.9, 0.95),
    )
    warm = torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.1, total_iters=2)
    cos = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4, eta_min=1e-4)
    sched = torch.optim.lr_scheduler.SequentialLR(opt, [warm, cos], milestones=[2])
    rng = np.random.default_rng(8)
    xs = ctx.t(rng.standard_normal((6, 4, 5)).astype(np.float32))
    ys = ctx.t(rng.integers(0, 2, (6, 4)))
    accum = 3
    lrs, losses, norms = [], [], []

    @ctx.fn
    def micro(x, y):
        loss = F.cross_entropy(model(x), y) / accum
        loss.backward()
        return loss

    @ctx.fn
    def update():
        norm = nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        opt.step()
        opt.zero_grad()
        return norm

    for epoch in range(2):
        for i in range(6):
            loss = micro(xs[i], ys[i])
            if (i + 1) % accum == 0:
                norms.append(update())
                sched.step()
                lrs.append([g["lr"] for g in opt.param_groups])
            losses.append(loss.item())
    return [
        lrs,
        losses,
        norms,
        sched.get_last_lr(),
        model[3].weight,
        opt.state_dict()["state"][0]["step"],
    ]


def checkpoint_roundtrip(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    def make():
        return nn.Sequential(
            nn.Conv2d(1, 3, 3),
            nn.BatchNorm2d(3),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(3, 2),
        )

    model = ctx.init(make())
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    rng = np.random.default_rng(9)
    x = ctx.t(rng.standard_normal((4, 1, 6, 6)).astype(np.float32))
    y = ctx.t(np.array([0, 1, 1, 0]))

    def train(m, o, s, n):
        def one(x, y):
            loss = F.cross_entropy(m(x), y)
            o.zero_grad()
            loss.backward()
            o.step()
            return loss

        one = ctx.fn(one)
        res = []
        for _ in range(n):
            res.append(one(x, y).item())
            s.step()
        return res

    first = train(model, opt, sched, 3)
    buf = io.BytesIO()
    torch.save(
        {
            "model": model.state_dict(),
            "opt": opt.state_dict(),
            "sched": sched.state_dict(),
            "epoch": 3,
        },
        buf,
    )
    buf.seek(0)
    ck = torch.load(buf, weights_only=True)
    model2 = make()
    model2.load_state_dict(ck["model"])
    opt2 = torch.optim.SGD(model2.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    opt2.load_state_dict(ck["opt"])
    sched2 = torch.optim.lr_scheduler.StepLR(opt2, step_size=2, gamma=0.5)
    sched2.load_state_dict(ck["sched"])
    cont_a = train(model, opt, sched, 2)
    cont_b = train(model2, opt2, sched2, 2)
    return [
        first,
        cont_a,
        cont_b,
        ck["epoch"],
        sched2.get_last_lr(),
        model2[1].running_mean,
        model2[5].weight,
        opt2.state_dict()["state"][0]["momentum_buffer"],
        opt2.state_dict()["param_groups"][0]["params"],
    ]


PROGRAMS = [
    tcn,
    flow_distributions,
    ctc_step,
    tabular_bag,
    gumbel_vae,
    sn_gan,
    wgan_gp,
    per_sample_grads,
    warmup_cosine_accum,
    checkpoint_roundtrip,
]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize(
    "program", [wgan_gp, ctc_step, warmup_cosine_accum], ids=lambda p: p.__name__
)
def test_captured(program):
    check_program(program, capture=True)
