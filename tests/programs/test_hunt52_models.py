"""Programs of hunt52 (models), each run on PyTorch and on ember (eagerly and, where a step is
marked, captured): a DDIM sampler over a GroupNorm UNet with a cosine schedule; a GCN with
sparse propagation and scatter_reduce aggregators; SimCLR, CLIP and distillation losses; a
BiLSTM-CRF with Viterbi decoding; beam search over a GRU decoder; a Neural ODE by RK4 with
LBFGS and a PINN with second derivatives; a capsule network with dynamic routing; bfloat16
autocast training with a disabled GradScaler; parametrizations and pruning; packed
sequences; a mix of tensor ops (fold/unfold, einsum, unique, scatter); a Gumbel / VQ
bottleneck; torch.compile with its arguments.
"""

import inspect
import math

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007, E501, E731, F841, B023, E702, E701, C408, SIM118


def ddim_sampler(torch, ctx):
    """A DDPM UNet-lite with sinusoidal time embeddings and GroupNorm, a cosine noise
    schedule (cumprod, clamp), q_sample with gather of schedule values, the epsilon loss
    trained two steps (captured), then a deterministic DDIM sampling loop under no_grad."""
    nn, F = torch.nn, torch.nn.functional
    T = 20
    s = 0.008
    t_ = torch.linspace(0, T, T + 1, dtype=torch.float64)
    f = torch.cos(((t_ / T) + s) / (1 + s) * math.pi / 2) ** 2
    abar = (f / f[0]).float()
    betas = (1 - abar[1:] / abar[:-1]).clamp(max=0.999)
    alphas_cumprod = torch.cumprod(1 - betas, 0)

    def emb(t, dim=8):
        half = dim // 2
        freqs = torch.exp(-math.log(10000) * torch.arange(half, dtype=torch.float32) / half)
        a = t.float()[:, None] * freqs[None]
        return torch.cat([a.sin(), a.cos()], -1)

    class Block(nn.Module):
        def __init__(self, c_in, c_out):
            super().__init__()
            self.conv1 = nn.Conv2d(c_in, c_out, 3, padding=1)
            self.norm = nn.GroupNorm(4, c_out)
            self.t = nn.Linear(8, c_out)
            self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1)
            self.skip = nn.Conv2d(c_in, c_out, 1) if c_in != c_out else nn.Identity()

        def forward(self, x, te):
            h = F.silu(self.norm(self.conv1(x)))
            h = h + self.t(te)[:, :, None, None]
            return self.conv2(F.silu(h)) + self.skip(x)

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.b1 = Block(1, 8)
            self.down = nn.Conv2d(8, 8, 3, stride=2, padding=1)
            self.b2 = Block(8, 8)
            self.up = nn.ConvTranspose2d(8, 8, 4, stride=2, padding=1)
            self.b3 = Block(16, 8)
            self.out = nn.Conv2d(8, 1, 1)

        def forward(self, x, t):
            te = emb(t)
            h1 = self.b1(x, te)
            h2 = self.b2(self.down(h1), te)
            h = self.b3(torch.cat([self.up(h2), h1], 1), te)
            return self.out(h)

    model = ctx.init(UNet())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(11)
    x0 = ctx.t(rng.standard_normal((3, 1, 8, 8)).astype(np.float32))

    @ctx.fn
    def step(x0, t, noise):
        ab = alphas_cumprod.gather(0, t).view(-1, 1, 1, 1)
        xt = ab.sqrt() * x0 + (1 - ab).sqrt() * noise
        loss = F.mse_loss(model(xt, t), noise)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    losses = []
    for i in range(2):
        t = ctx.t(rng.integers(0, T, 3))
        noise = ctx.t(rng.standard_normal((3, 1, 8, 8)).astype(np.float32))
        losses.append(step(x0, t, noise))
    model.eval()
    x = ctx.t(rng.standard_normal((2, 1, 8, 8)).astype(np.float32))
    with torch.no_grad():
        ts = list(range(T - 1, -1, -5))
        for i, t in enumerate(ts):
            tt = torch.full((2,), t, dtype=torch.long)
            eps = model(x, tt)
            ab = alphas_cumprod[t]
            ab_prev = alphas_cumprod[ts[i + 1]] if i + 1 < len(ts) else torch.tensor(1.0)
            x0_pred = ((x - (1 - ab).sqrt() * eps) / ab.sqrt()).clamp(-3, 3)
            x = ab_prev.sqrt() * x0_pred + (1 - ab_prev).sqrt() * eps
    return [betas, alphas_cumprod, losses, x]


def gcn_scatter(torch, ctx):
    """A GNN layer stack: symmetric degree normalisation from an edge list (index_add_,
    rsqrt with inf -> 0), sparse_coo_tensor + torch.sparse.mm propagation, scatter_reduce
    with amax/mean (include_self=False) for a GraphSAGE-max and mean aggregator, a global
    mean pool by index_reduce, trained two steps (captured step)."""
    nn, F = torch.nn, torch.nn.functional
    N = 7
    src = ctx.t(np.array([0, 1, 1, 2, 3, 4, 5, 5, 6, 2]))
    dst = ctx.t(np.array([1, 0, 2, 1, 4, 3, 6, 4, 5, 3]))
    batch = ctx.t(np.array([0, 0, 0, 0, 1, 1, 1]))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin1 = nn.Linear(4, 8)
            self.lin_max = nn.Linear(8, 8)
            self.lin_mean = nn.Linear(8, 8)
            self.head = nn.Linear(16, 2)

        def forward(self, x):
            loops = torch.arange(N)
            s, d = torch.cat([src, loops]), torch.cat([dst, loops])
            deg = torch.zeros(N).index_add_(0, d, torch.ones(d.shape[0]))
            dinv = deg.pow(-0.5)
            dinv = dinv.masked_fill(torch.isinf(dinv), 0)
            w = dinv[s] * dinv[d]
            A = torch.sparse_coo_tensor(torch.stack([d, s]), w, (N, N))
            h = F.relu(torch.sparse.mm(A, self.lin1(x)))
            msg = self.lin_max(h)[src]
            mx = torch.zeros(N, 8).scatter_reduce(
                0, dst[:, None].expand(-1, 8), msg, reduce="amax", include_self=False
            )
            mean = torch.zeros(N, 8).scatter_reduce(
                0,
                dst[:, None].expand(-1, 8),
                self.lin_mean(h)[src],
                reduce="mean",
                include_self=False,
            )
            h2 = torch.cat([mx, mean], 1)
            pooled = torch.zeros(2, 16).index_reduce_(0, batch, h2, "mean", include_self=False)
            return self.head(pooled)

    model = ctx.init(Net())
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    x = ctx.t(np.random.default_rng(12).standard_normal((N, 4)).astype(np.float32))
    y = ctx.t(np.array([0, 1]))

    @ctx.fn
    def step(x, y):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    losses = [step(x, y) for _ in range(2)]
    return [losses, list(model.state_dict().values())]


def contrastive(torch, ctx):
    """SimCLR's NT-Xent over two augmented views (masked self-similarity, temperature,
    cross-entropy over 2N-1 candidates) and CLIP's symmetric loss with a learned
    logit_scale clamped by exp(); knowledge distillation with KLDivLoss(log_target=True) and
    a temperature, all in one captured step."""
    nn, F = torch.nn, torch.nn.functional

    class Enc(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(
                nn.Linear(6, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 8)
            )
            self.txt = nn.Linear(5, 8)
            self.logit_scale = nn.Parameter(torch.ones([]) * math.log(1 / 0.07))
            self.student = nn.Linear(6, 4)
            self.teacher = nn.Linear(6, 4)

    m = ctx.init(Enc())
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    rng = np.random.default_rng(13)

    def nt_xent(z1, z2, tau=0.5):
        z = F.normalize(torch.cat([z1, z2]), dim=1)
        n = z1.shape[0]
        sim = z @ z.t() / tau
        sim = sim.masked_fill(torch.eye(2 * n, dtype=torch.bool), float("-inf"))
        target = torch.cat([torch.arange(n, 2 * n), torch.arange(n)])
        return F.cross_entropy(sim, target)

    @ctx.fn
    def step(x1, x2, txt):
        img = F.normalize(m.net(x1), dim=-1)
        t = F.normalize(m.txt(txt), dim=-1)
        scale = m.logit_scale.exp().clamp(max=100)
        logits = scale * img @ t.t()
        labels = torch.arange(img.shape[0])
        clip = (F.cross_entropy(logits, labels) + F.cross_entropy(logits.t(), labels)) / 2
        simclr = nt_xent(m.net(x1), m.net(x2))
        T = 3.0
        with torch.no_grad():
            teacher = F.log_softmax(m.teacher(x1) / T, -1)
        kd = (
            nn.KLDivLoss(reduction="batchmean", log_target=True)(
                F.log_softmax(m.student(x1) / T, -1), teacher
            )
            * T
            * T
        )
        loss = clip + simclr + kd
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, clip, simclr, kd

    outs = []
    for _ in range(2):
        x1 = ctx.t(rng.standard_normal((6, 6)).astype(np.float32))
        x2 = x1 + ctx.t(rng.standard_normal((6, 6)).astype(np.float32) * 0.1)
        txt = ctx.t(rng.standard_normal((6, 5)).astype(np.float32))
        outs.append(step(x1, x2, txt))
    return [outs, list(m.state_dict().values())]


def bilstm_crf(torch, ctx):
    """A BiLSTM-CRF tagger: pack_padded_sequence(enforce_sorted=False), a CRF's forward
    algorithm with logsumexp over tag transitions and masks, the gold path score by gather,
    Viterbi decoding with max over dims and backtracking by index, two training steps."""
    nn = torch.nn
    V, E, H, K = 15, 6, 5, 4

    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, E, padding_idx=0)
            self.lstm = nn.LSTM(E, H, batch_first=True, bidirectional=True)
            self.proj = nn.Linear(2 * H, K)
            self.trans = nn.Parameter(torch.randn(K, K) * 0.1)
            self.start = nn.Parameter(torch.randn(K) * 0.1)
            self.end = nn.Parameter(torch.randn(K) * 0.1)

        def emissions(self, x, lengths):
            packed = nn.utils.rnn.pack_padded_sequence(
                self.emb(x), lengths, batch_first=True, enforce_sorted=False
            )
            out, _ = self.lstm(packed)
            out, _ = nn.utils.rnn.pad_packed_sequence(
                out, batch_first=True, total_length=x.shape[1]
            )
            return self.proj(out)

        def nll(self, em, tags, mask):
            B, T, _ = em.shape
            alpha = self.start + em[:, 0]
            score = self.start[tags[:, 0]] + em[:, 0].gather(1, tags[:, :1]).squeeze(1)
            for t in range(1, T):
                nxt = torch.logsumexp(alpha[:, :, None] + self.trans[None] + em[:, t, None], dim=1)
                m = mask[:, t, None]
                alpha = torch.where(m, nxt, alpha)
                step = self.trans[tags[:, t - 1], tags[:, t]] + em[:, t].gather(
                    1, tags[:, t : t + 1]
                ).squeeze(1)
                score = score + step * mask[:, t]
            last = tags.gather(1, (mask.sum(1) - 1)[:, None]).squeeze(1)
            score = score + self.end[last]
            return (torch.logsumexp(alpha + self.end, 1) - score).mean()

        def viterbi(self, em, mask):
            B, T, _ = em.shape
            v = self.start + em[:, 0]
            back = []
            for t in range(1, T):
                s, idx = (v[:, :, None] + self.trans[None]).max(1)
                s = s + em[:, t]
                m = mask[:, t, None]
                back.append(torch.where(m, idx, torch.arange(K).expand(B, K)))
                v = torch.where(m, s, v)
            v = v + self.end
            best, tag = v.max(1)
            path = [tag]
            for idx in reversed(back):
                tag = idx.gather(1, tag[:, None]).squeeze(1)
                path.append(tag)
            return best, torch.stack(path[::-1], 1)

    torch.manual_seed(0)
    model = ctx.init(Tagger())
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    rng = np.random.default_rng(14)
    lengths = ctx.t(np.array([4, 6, 3]))
    x = ctx.t(rng.integers(1, V, (3, 6)))
    mask = torch.arange(6)[None] < lengths[:, None]
    x = x.masked_fill(~mask, 0)
    tags = ctx.t(rng.integers(0, K, (3, 6))).masked_fill(~mask, 0)
    losses = []
    for _ in range(2):
        loss = model.nll(model.emissions(x, lengths), tags, mask)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss)
    with torch.no_grad():
        best, path = model.viterbi(model.emissions(x, lengths), mask)
    return [losses, best, path]


def beam_search(torch, ctx):
    """Beam search over a tiny GRU decoder: scores (B, beam) flattened with the vocabulary,
    topk over beam*V, beam origin by floor division, token by remainder, index_select of
    hidden states over the flattened beam, EOS finishing with masked_fill and length
    penalty."""
    nn, F = torch.nn, torch.nn.functional
    V, H, beam, B = 9, 6, 3, 2
    EOS = 1

    class Dec(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, H)
            self.gru = nn.GRUCell(H, H)
            self.out = nn.Linear(H, V)

    dec = ctx.init(Dec())
    dec.eval()
    h = ctx.t(np.random.default_rng(15).standard_normal((B, H)).astype(np.float32))
    with torch.no_grad():
        h = h.repeat_interleave(beam, 0)
        tokens = torch.zeros(B * beam, 1, dtype=torch.long)
        scores = torch.zeros(B, beam)
        scores[:, 1:] = float("-inf")
        finished = torch.zeros(B * beam, dtype=torch.bool)
        for step in range(5):
            h = dec.gru(dec.emb(tokens[:, -1]), h)
            logp = F.log_softmax(dec.out(h), -1)
            logp = logp.masked_fill(finished[:, None], float("-inf"))
            logp[:, EOS] = torch.where(finished, torch.zeros(()), logp[:, EOS])
            cand = (scores.view(-1, 1) + logp).view(B, beam * V)
            top, idx = cand.topk(beam, dim=1)
            origin = torch.div(idx, V, rounding_mode="floor")
            tok = idx % V
            flat = (origin + torch.arange(B)[:, None] * beam).view(-1)
            h = h.index_select(0, flat)
            tokens = torch.cat([tokens.index_select(0, flat), tok.view(-1, 1)], 1)
            finished = finished.index_select(0, flat) | (tok.view(-1) == EOS)
            scores = top
        lengths = (tokens != EOS).sum(1).float()
        final = scores.view(-1) / lengths**0.7
        best = final.view(B, beam).argmax(1)
    return [tokens, scores, final, best]


def neural_ode_pinn(torch, ctx):
    """A Neural ODE integrated by fixed-step RK4 (backprop through the solver) fit to a
    spiral, and a PINN for u'' + u = 0 with second derivatives by autograd.grad
    (create_graph=True) and a boundary loss, each trained two steps with LBFGS/Adam."""
    nn = torch.nn
    f = ctx.init(nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 2)), "ode")

    def rk4(y, dt, n):
        ys = [y]
        for _ in range(n):
            k1 = f(y)
            k2 = f(y + dt / 2 * k1)
            k3 = f(y + dt / 2 * k2)
            k4 = f(y + dt * k3)
            y = y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
            ys.append(y)
        return torch.stack(ys, 1)

    t = torch.linspace(0, 1, 9)
    target = torch.stack([torch.cos(3 * t), torch.sin(3 * t)], -1)[None].repeat(
        2, 1, 1
    ) * torch.tensor([[[1.0]], [[0.5]]])
    y0 = target[:, 0]
    opt = torch.optim.LBFGS(
        f.parameters(), lr=0.5, max_iter=4, history_size=5, line_search_fn="strong_wolfe"
    )

    def closure():
        opt.zero_grad()
        loss = (rk4(y0, 1 / 8, 8) - target).pow(2).mean()
        loss.backward()
        return loss

    ode_losses = [opt.step(closure) for _ in range(2)]
    u = ctx.init(nn.Sequential(nn.Linear(1, 12), nn.Tanh(), nn.Linear(12, 1)), "pinn")
    opt2 = torch.optim.Adam(u.parameters(), lr=0.01)
    xs = torch.linspace(0, math.pi, 11)[:, None].requires_grad_(True)
    pinn_losses = []
    for _ in range(2):
        out = u(xs)
        du = torch.autograd.grad(out.sum(), xs, create_graph=True)[0]
        d2u = torch.autograd.grad(du.sum(), xs, create_graph=True)[0]
        res = (d2u + out).pow(2).mean()
        bc = (u(torch.zeros(1, 1)) - 0).pow(2).sum() + (u(torch.full((1, 1), math.pi / 2)) - 1).pow(
            2
        ).sum()
        loss = res + bc
        opt2.zero_grad()
        loss.backward()
        opt2.step()
        pinn_losses.append(loss)
    return [ode_losses, pinn_losses, list(f.state_dict().values()), list(u.state_dict().values())]


def capsnet(torch, ctx):
    """A capsule layer: primary capsules by conv and view, squash, dynamic routing by
    agreement (softmax over output capsules, einsum predictions, three iterations with
    detached intermediate routing), margin loss and a masked reconstruction."""
    nn, F = torch.nn, torch.nn.functional

    def squash(s, dim=-1):
        n2 = (s**2).sum(dim, keepdim=True)
        return n2 / (1 + n2) * s / torch.sqrt(n2 + 1e-8)

    class Caps(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(1, 16, 3, stride=2)
            self.W = nn.Parameter(torch.randn(1, 32, 3, 6, 4) * 0.1)
            self.rec = nn.Linear(18, 49)

        def forward(self, x, y):
            u = (
                self.conv(x)
                .view(x.shape[0], 4, 4, 4, 4)
                .permute(0, 2, 3, 4, 1)
                .reshape(x.shape[0], -1, 4)[:, :32]
            )
            u = squash(u)
            u_hat = torch.einsum(
                "bidk,bik->bid",
                self.W.expand(x.shape[0], -1, -1, -1, -1).reshape(x.shape[0], 32, 18, 4),
                u,
            ).view(x.shape[0], 32, 3, 6)
            b = torch.zeros(x.shape[0], 32, 3)
            for it in range(3):
                c = F.softmax(b, dim=2)
                uh = u_hat if it == 2 else u_hat.detach()
                v = squash((c[..., None] * uh).sum(1))
                if it < 2:
                    b = b + (uh * v[:, None]).sum(-1)
            lengths = v.norm(dim=-1)
            onehot = F.one_hot(y, 3).float()
            margin = (
                (
                    onehot * F.relu(0.9 - lengths) ** 2
                    + 0.5 * (1 - onehot) * F.relu(lengths - 0.1) ** 2
                )
                .sum(1)
                .mean()
            )
            rec = torch.sigmoid(self.rec((v * onehot[..., None]).flatten(1)))
            return margin, rec, lengths

    torch.manual_seed(0)
    m = ctx.init(Caps())
    x = ctx.t(np.random.default_rng(16).random((2, 1, 9, 9)).astype(np.float32))
    y = ctx.t(np.array([0, 2]))
    margin, rec, lengths = m(x, y)
    loss = margin + 0.0005 * F.mse_loss(rec, x[:, 0, 1:8, 1:8].reshape(2, -1), reduction="sum")
    loss.backward()
    return [margin, rec, lengths, m.W.grad, m.conv.weight.grad]


def autocast_train(torch, ctx):
    """torch.autocast('cpu', dtype=torch.bfloat16) forward with a GradScaler(enabled=False)
    (the CPU path), matmul/linear in bfloat16 and softmax/loss in float32, custom_fwd-free
    casts with .float(), then the same step without autocast; dtypes recorded."""
    nn, F = torch.nn, torch.nn.functional
    model = ctx.init(
        nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 4))
    )
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    scaler = (
        torch.amp.GradScaler("cpu", enabled=False)
        if hasattr(torch, "amp")
        else torch.cuda.amp.GradScaler(enabled=False)
    )
    rng = np.random.default_rng(17)
    x = ctx.t(rng.standard_normal((6, 8)).astype(np.float32))
    y = ctx.t(rng.integers(0, 4, 6))
    dtypes = []
    losses = []
    for step in range(2):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            h = model[0](x)
            logits = model(x)
            dtypes += [
                h.dtype,
                logits.dtype,
                torch.get_autocast_dtype("cpu")
                if hasattr(torch, "get_autocast_dtype")
                else torch.bfloat16,
                torch.is_autocast_enabled("cpu") if hasattr(torch, "is_autocast_enabled") else True,
            ]
            loss = F.cross_entropy(logits.float(), y)
            dtypes.append(F.softmax(logits, -1).dtype)
            with torch.autocast("cpu", enabled=False):
                dtypes.append(model[0](x).dtype)
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        losses.append(loss)
    return [
        losses,
        dtypes,
        scaler.get_scale(),
        scaler.is_enabled(),
        list(model.state_dict().values()),
    ]


def parametrizations(torch, ctx):
    """nn.utils.parametrizations: weight_norm, spectral_norm (power iterations, eval), an
    orthogonal parametrization, a custom register_parametrization (symmetric matrix), and
    torch.nn.utils.prune l1_unstructured + remove; trained one step."""
    nn = torch.nn
    P = nn.utils.parametrize

    class Sym(nn.Module):
        def forward(self, X):
            return X.triu() + X.triu(1).transpose(0, 1)

    torch.manual_seed(0)
    lin1 = nn.utils.parametrizations.weight_norm(nn.Linear(4, 5))
    lin2 = nn.Linear(5, 5)
    P.register_parametrization(lin2, "weight", Sym())
    lin3 = nn.utils.parametrizations.spectral_norm(nn.Linear(5, 3), n_power_iterations=2)
    model = nn.Sequential(lin1, nn.Tanh(), lin2, nn.Tanh(), lin3)
    ctx.init(model)
    x = ctx.t(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4))
    out1 = model(x)
    out1.sum().backward()
    g = [
        lin1.parametrizations.weight.original0.grad,
        lin1.parametrizations.weight.original1.grad,
        lin2.parametrizations.weight.original.grad,
    ]
    lin3.eval()
    out2 = model(x)
    w_sym = lin2.weight
    pr = nn.Linear(6, 3)
    ctx.init(pr, "pr")
    import importlib

    prune = importlib.import_module(torch.__name__ + ".nn.utils.prune")
    prune.l1_unstructured(pr, "weight", amount=0.4)
    mask = pr.weight_mask.clone()
    prune.remove(pr, "weight")
    names = sorted(n for n, _ in model.named_parameters())
    return [
        out1,
        out2,
        g,
        w_sym,
        torch.allclose(w_sym, w_sym.t()),
        mask,
        pr.weight,
        names,
        P.is_parametrized(lin2),
    ]


def rnn_utils(torch, ctx):
    """Variable-length sequences: pack_sequence (enforce_sorted=False), a GRU over it with
    h0, pad_packed_sequence, sorting lengths with sort(descending=True) and unsorting with
    the inverse permutation (argsort), unpad_sequence/unpack_sequence, and an LSTM with
    proj_size."""
    nn = torch.nn
    R = nn.utils.rnn
    rng = np.random.default_rng(18)
    seqs = [ctx.t(rng.standard_normal((n, 3)).astype(np.float32)) for n in [4, 2, 5, 2, 3]]
    gru = ctx.init(nn.GRU(3, 4, num_layers=2, bidirectional=True), "gru")
    lstm = ctx.init(nn.LSTM(3, 6, proj_size=2, batch_first=True), "lstm")
    packed = R.pack_sequence(seqs, enforce_sorted=False)
    h0 = torch.zeros(4, 5, 4)
    out, hn = gru(packed, h0)
    padded, lens = R.pad_packed_sequence(out)
    lengths = torch.tensor([len(s) for s in seqs])
    sorted_len, perm = lengths.sort(descending=True)
    inv = perm.argsort()
    padded_b = R.pad_sequence(seqs, batch_first=True)
    o2, (h2, c2) = lstm(R.pack_padded_sequence(padded_b[perm], sorted_len, batch_first=True))
    o2, _ = R.pad_packed_sequence(o2, batch_first=True)
    o2 = o2[inv]
    unp = R.unpad_sequence(padded_b, lengths, batch_first=True)
    unk = R.unpack_sequence(packed)
    (padded.sum() + o2.pow(2).sum()).backward()
    return [
        padded,
        lens,
        hn,
        perm,
        inv,
        o2,
        h2[:, inv],
        c2,
        [u.shape[0] for u in unp],
        [u.sum() for u in unk],
        gru.weight_hh_l1_reverse.grad,
    ]


def tensor_ops_mix(torch, ctx):
    """im2col with F.unfold/F.fold (overlap-add), as_strided sliding windows, einsum
    contractions, tensordot, kron, cartesian_prod, combinations, tril_indices, unique with
    counts/inverse, unique_consecutive, diff with prepend, cummax, take_along_dim,
    scatter with reduce, masked_scatter, index_copy, narrow_copy, block_diag, cdist p=1."""
    F = torch.nn.functional
    rng = np.random.default_rng(19)
    x = ctx.t(rng.standard_normal((2, 3, 6, 6)).astype(np.float32), requires_grad=True)
    cols = F.unfold(x, kernel_size=3, stride=2, padding=1)
    back = F.fold(cols, output_size=(6, 6), kernel_size=3, stride=2, padding=1)
    v = ctx.t(np.arange(10.0, dtype=np.float32))
    win = v.as_strided((4, 4), (2, 1))
    a = ctx.t(rng.standard_normal((3, 4)).astype(np.float32))
    b = ctx.t(rng.standard_normal((4, 5)).astype(np.float32))
    out = [cols, back, win]
    out.append(torch.einsum("ij,jk->ik", a, b))
    out.append(torch.einsum("bchw,c->bhw", x, ctx.t(np.array([1.0, -1, 0.5], np.float32))))
    out.append(torch.einsum("ii->i", a[:, :3]))
    out.append(torch.tensordot(a, b, dims=([1], [0])))
    out.append(torch.kron(a[:2, :2], b[:2, :2]))
    out.append(torch.cartesian_prod(v[:3], v[3:5]))
    out.append(torch.combinations(v[:4], r=2))
    out.append(torch.tril_indices(4, 3, -1))
    labels = ctx.t(np.array([3, 1, 3, 2, 2, 2, 1]))
    u, inv, cnt = torch.unique(labels, return_inverse=True, return_counts=True)
    out += [u, inv, cnt]
    out += list(torch.unique_consecutive(labels, return_counts=True))
    out.append(torch.diff(v, n=2, prepend=ctx.t(np.array([0.0, 0.0], np.float32))))
    out += list(torch.cummax(a, 1))
    out.append(torch.take_along_dim(a, a.argsort(1)[:, :2], 1))
    out.append(
        torch.zeros(3, 4).scatter(1, ctx.t(np.array([[0, 1], [2, 3], [1, 1]])), 2.0, reduce="add")
    )
    m = a > 0
    out.append(torch.zeros(3, 4).masked_scatter(m, torch.arange(12.0)))
    out.append(torch.zeros(5, 4).index_copy(0, ctx.t(np.array([4, 0, 2])), a))
    out.append(torch.block_diag(a[:1, :2], b[:2, :1]))
    out.append(torch.cdist(a, a + 1, p=1))
    out.append(torch.vander(v[:4], N=3, increasing=True))
    out.append(torch.bucketize(a, ctx.t(np.array([-1.0, 0, 1], np.float32)), right=True))
    (cols.sum() + back.pow(2).sum() + out[4].sum()).backward()
    out.append(x.grad)
    return out


def gumbel_vq(torch, ctx):
    """A discrete VAE bottleneck: F.gumbel_softmax(hard=True) straight-through codes under a
    seed, a VQ-VAE codebook lookup with cdist/argmin, a commitment loss and the
    straight-through estimator z + (q - z).detach(), EMA codebook update with index_add_."""
    nn, F = torch.nn, torch.nn.functional
    enc = ctx.init(nn.Linear(6, 8), "enc")
    book = ctx.init(nn.Embedding(5, 4), "book")
    rng = np.random.default_rng(20)
    x = ctx.t(rng.standard_normal((7, 6)).astype(np.float32))
    logits = enc(x)
    torch.manual_seed(3)
    y_hard = F.gumbel_softmax(logits, tau=0.5, hard=True)
    y_soft = F.gumbel_softmax(logits, tau=2.0, hard=False, dim=0)
    z = logits.view(14, 4)
    d = torch.cdist(z, book.weight)
    codes = d.argmin(1)
    q = book(codes)
    commit = F.mse_loss(z, q.detach()) + 0.25 * F.mse_loss(q, z.detach())
    st = z + (q - z).detach()
    loss = (
        commit
        + st.pow(2).mean()
        + (y_hard * ctx.t(np.arange(8, dtype=np.float32))).sum()
        + y_soft.max()
    )
    loss.backward()
    with torch.no_grad():
        counts = torch.zeros(5).index_add_(0, codes, torch.ones(14))
        sums = torch.zeros(5, 4).index_add_(0, codes, z)
        new_book = torch.where(
            counts[:, None] > 0, sums / counts.clamp(min=1)[:, None], book.weight
        )
    return [y_hard, y_soft, codes, q, loss, enc.weight.grad, book.weight.grad, counts, new_book]


def compile_modes(torch, ctx):
    """torch.compile(model) with mode='reduce-overhead', fullgraph=True, dynamic=True and a
    backend argument; a compiled function with varying batch size; torch.compiler.disable on
    a helper; results equal to eager."""
    nn = torch.nn
    model = ctx.init(nn.Sequential(nn.Linear(4, 8), nn.SiLU(), nn.Linear(8, 2)))
    cm = torch.compile(model, mode="reduce-overhead", fullgraph=True, dynamic=True)

    @torch.compile(backend="inductor", dynamic=False)
    def f(a, b):
        return (a @ b).softmax(-1).sum(0)

    @torch.compiler.disable
    def helper(t):
        return t.tolist()

    rng = np.random.default_rng(21)
    outs = []
    for n in (3, 5, 3):
        x = ctx.t(rng.standard_normal((n, 4)).astype(np.float32))
        outs.append(cm(x))
        outs.append(model(x))
    a = ctx.t(rng.standard_normal((3, 4)).astype(np.float32))
    outs.append(f(a, a.t()))
    outs.append(helper(outs[0][0]))
    loss = cm(a).sum()
    loss.backward()
    outs.append(model[0].weight.grad)
    return outs


PROGRAMS = [
    ddim_sampler,
    gcn_scatter,
    contrastive,
    bilstm_crf,
    beam_search,
    neural_ode_pinn,
    capsnet,
    autocast_train,
    parametrizations,
    rnn_utils,
    tensor_ops_mix,
    gumbel_vq,
    compile_modes,
]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


# the programs that mark steps for ember.function (the others run as in test_eager)
CAPTURED = [p for p in PROGRAMS if "@ctx.fn" in inspect.getsource(p)]


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
