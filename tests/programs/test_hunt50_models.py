"""Programs of hunt50 (models), each run on PyTorch and on ember (eagerly and captured): a top-k
sparse autoencoder with tied weights; Gumbel-top-k sampling with its Plackett-Luce
log-probability; causal linear attention by cumulative sums, quadratic and chunked; sinusoidal
tables in Embedding.from_pretrained; batch-hard triplet mining; an SSIM loss; Monte-Carlo
dropout; N-BEATS with trend and seasonality bases; a two-tower retrieval model with logQ
correction; an FT-Transformer; a 1-D U-Net cropping skips by negative padding; farthest point
sampling with kNN grouping; an LSTMCell decoder with attention and scheduled sampling; MFCCs
by STFT, a mel filterbank and a DCT.
"""

import inspect
import math

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007, E501, E731, F841, B023, E702, E701, C408, SIM118


def sae_tied_topk(torch, ctx):
    """A top-k sparse autoencoder with tied weights (F.linear with W.t()), decoder columns
    renormalised in no_grad, an L1 penalty, and dead-latent counts."""
    nn, F = torch.nn, torch.nn.functional

    class SAE(nn.Module):
        def __init__(self, d=6, h=12, k=3):
            super().__init__()
            self.W = nn.Parameter(torch.randn(h, d) * 0.3)
            self.b_enc = nn.Parameter(torch.zeros(h))
            self.b_dec = nn.Parameter(torch.zeros(d))
            self.k = k

        def forward(self, x):
            pre = F.linear(x - self.b_dec, self.W, self.b_enc)
            vals, idx = pre.topk(self.k, dim=-1)
            z = torch.zeros_like(pre).scatter(-1, idx, F.relu(vals))
            return F.linear(z, self.W.t(), self.b_dec), z

    m = ctx.init(SAE())
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    rng = np.random.default_rng(0)
    x = ctx.t(rng.normal(size=(16, 6)).astype(np.float32))
    fired = torch.zeros(12, dtype=torch.long)
    out = []
    for _ in range(4):
        rec, z = m(x)
        loss = F.mse_loss(rec, x) + 1e-3 * z.abs().sum(-1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            m.W.data = torch.renorm(m.W.data, p=2, dim=0, maxnorm=1.0)
        fired += (z > 0).sum(0)
        out.append(loss.item())
    return [out, m.W, (fired == 0).sum(), z]


def gumbel_topk_sampler(torch, ctx):
    """Sampling k items without replacement by the Gumbel-top-k trick, and the log-probability
    of the ordered sample (Plackett-Luce) with logcumsumexp, differentiated in the logits."""
    logits = ctx.t(
        np.array([[1.0, 0.5, -0.3, 2.0, 0.1], [0.0, 0.0, 1.0, -1.0, 0.5]], np.float32),
        requires_grad=True,
    )
    g = torch.Generator().manual_seed(5)
    u = torch.rand(logits.shape, generator=g).clamp(1e-10, 1 - 1e-10)
    gumbel = -torch.log(-torch.log(u))
    _, idx = (logits.detach() + gumbel).topk(3, dim=-1)
    chosen = logits.gather(-1, idx)
    rest = logits.masked_fill(
        torch.zeros_like(logits, dtype=torch.bool).scatter(-1, idx, True), float("-inf")
    )
    tail = torch.logsumexp(rest, -1, keepdim=True)
    # denominators: logsumexp over the chosen items from position i on, plus the rest
    rev = chosen.flip(-1)
    cums = torch.logcumsumexp(rev, -1).flip(-1)
    denom = torch.logaddexp(cums, tail.expand_as(cums))
    logp = (chosen - denom).sum(-1)
    logp.sum().backward()
    return [idx, logp, logits.grad]


def causal_linear_attention(torch, ctx):
    """Causal linear attention (elu+1 features) by cumulative sums, checked against its
    quadratic masked form, and a chunked recurrent form with carried state."""
    F = torch.nn.functional
    rng = np.random.default_rng(1)
    B, H, T, D = 2, 2, 6, 4
    q = ctx.t(rng.normal(size=(B, H, T, D)).astype(np.float32), requires_grad=True)
    k = ctx.t(rng.normal(size=(B, H, T, D)).astype(np.float32), requires_grad=True)
    v = ctx.t(rng.normal(size=(B, H, T, D)).astype(np.float32), requires_grad=True)
    fq, fk = F.elu(q) + 1, F.elu(k) + 1
    kv = torch.einsum("bhtd,bhte->bhtde", fk, v).cumsum(2)
    num = torch.einsum("bhtd,bhtde->bhte", fq, kv)
    den = torch.einsum("bhtd,bhtd->bht", fq, fk.cumsum(2)).unsqueeze(-1)
    out = num / den
    scores = fq @ fk.transpose(-1, -2)
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    scores = scores.masked_fill(~mask, 0.0)
    quad = (scores / scores.sum(-1, keepdim=True)) @ v
    S = torch.zeros(B, H, D, D)
    z = torch.zeros(B, H, D)
    chunks = []
    for qc, kc, vc in zip(fq.split(2, 2), fk.split(2, 2), v.split(2, 2)):
        local = (qc @ kc.transpose(-1, -2)).tril()
        n = qc @ S + local @ vc
        d = (qc * z.unsqueeze(2)).sum(-1, keepdim=True) + local.sum(-1, keepdim=True)
        chunks.append(n / d)
        S = S + kc.transpose(-1, -2) @ vc
        z = z + kc.sum(2)
    rec = torch.cat(chunks, 2)
    out.pow(2).sum().backward()
    return [
        out,
        (out - quad).abs().max() < 1e-4,
        (out - rec).abs().max() < 1e-4,
        q.grad,
        k.grad,
        v.grad,
    ]


def sinusoid_from_pretrained(torch, ctx):
    """Sinusoidal tables loaded into Embedding.from_pretrained (frozen and not), a learned table
    initialised by copy_ under no_grad, padding_idx rows kept at zero gradient."""
    nn, F = torch.nn, torch.nn.functional
    T, D = 10, 6
    pos = torch.arange(T, dtype=torch.float32).unsqueeze(1)
    div = torch.exp(torch.arange(0, D, 2).float() * (-math.log(10000.0) / D))
    pe = torch.zeros(T, D)
    pe[:, 0::2] = torch.sin(pos * div)
    pe[:, 1::2] = torch.cos(pos * div)
    frozen = nn.Embedding.from_pretrained(pe, freeze=True)
    learned = nn.Embedding.from_pretrained(pe.clone(), freeze=False, padding_idx=0)
    tok = ctx.init(nn.Embedding(20, D, padding_idx=1))
    with torch.no_grad():
        tok.weight[2:5].copy_(pe[:3])
    ids = ctx.t(np.array([[1, 2, 3, 4], [5, 1, 1, 7]]))
    positions = torch.arange(4).expand(2, 4)
    h = tok(ids) + frozen(positions) + learned(positions)
    h.sum().backward()
    return [pe, h, frozen.weight.requires_grad, learned.weight.grad, tok.weight.grad]


def batch_hard_triplet(torch, ctx):
    """Batch-hard triplet mining with cdist and masks, a soft-margin variant, and a
    contrastive loss on the same embeddings."""
    nn, F = torch.nn, torch.nn.functional
    net = ctx.init(nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 4)))
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    rng = np.random.default_rng(2)
    x = ctx.t(rng.normal(size=(12, 5)).astype(np.float32))
    y = ctx.t(np.repeat(np.arange(4), 3))
    out = []

    @ctx.fn
    def step():
        e = F.normalize(net(x), dim=1)
        d = torch.cdist(e, e)
        same = y[:, None] == y[None, :]
        eye = torch.eye(12, dtype=torch.bool)
        hardest_pos = (d * (same & ~eye)).max(1).values
        hardest_neg = d.masked_fill(same, float("inf")).min(1).values
        hard = F.relu(hardest_pos - hardest_neg + 0.3).mean()
        soft = F.softplus(hardest_pos - hardest_neg).mean()
        contrast = torch.where(same & ~eye, d**2, F.relu(0.5 - d) ** 2)[~eye].mean()
        loss = hard + soft + contrast
        opt.zero_grad()
        loss.backward()
        opt.step()
        return [hard.item(), soft.item(), contrast.item()]

    for _ in range(3):
        out.append(step())
    return out


def ssim_loss(torch, ctx):
    """SSIM with a Gaussian window by grouped conv2d, as a loss on a small conv net's output."""
    nn, F = torch.nn, torch.nn.functional

    def gaussian(ws, sigma):
        g = torch.exp(-((torch.arange(ws) - ws // 2) ** 2).float() / (2 * sigma**2))
        return g / g.sum()

    def ssim(a, b, ws=5):
        C = a.shape[1]
        g = gaussian(ws, 1.5)
        w = (g[:, None] @ g[None, :]).expand(C, 1, ws, ws).contiguous()
        mu_a = F.conv2d(a, w, padding=ws // 2, groups=C)
        mu_b = F.conv2d(b, w, padding=ws // 2, groups=C)
        saa = F.conv2d(a * a, w, padding=ws // 2, groups=C) - mu_a**2
        sbb = F.conv2d(b * b, w, padding=ws // 2, groups=C) - mu_b**2
        sab = F.conv2d(a * b, w, padding=ws // 2, groups=C) - mu_a * mu_b
        c1, c2 = 0.01**2, 0.03**2
        m = ((2 * mu_a * mu_b + c1) * (2 * sab + c2)) / (
            (mu_a**2 + mu_b**2 + c1) * (saa + sbb + c2)
        )
        return m.mean()

    net = ctx.init(
        nn.Sequential(
            nn.Conv2d(2, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 2, 3, padding=1), nn.Sigmoid()
        )
    )
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    rng = np.random.default_rng(3)
    x = ctx.t(rng.random((2, 2, 10, 10)).astype(np.float32))
    target = ctx.t(rng.random((2, 2, 10, 10)).astype(np.float32))
    out = []

    @ctx.fn
    def step():
        y = net(x)
        loss = 1 - ssim(y, target) + 0.1 * F.l1_loss(y, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    for _ in range(3):
        out.append(step())
    return [out, net[0].weight.grad]


def mc_dropout(torch, ctx):
    """Monte-Carlo dropout: the model in eval mode except its Dropout modules, many stochastic
    passes, predictive mean and variance; BatchNorm keeps its running statistics."""
    nn, F = torch.nn, torch.nn.functional
    net = ctx.init(
        nn.Sequential(
            nn.Linear(4, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 1)
        )
    )
    rng = np.random.default_rng(4)
    x = ctx.t(rng.normal(size=(8, 4)).astype(np.float32))
    net.train()
    net(x)  # running statistics updated once
    net.eval()
    for m in net.modules():
        if isinstance(m, nn.Dropout):
            m.train()
    with torch.no_grad():
        samples = torch.stack([net(x) for _ in range(10)])
    modes = [m.training for m in net.modules()]
    return [samples.mean(0), samples.var(0), modes, net[1].running_mean, net[1].num_batches_tracked]


def nbeats(torch, ctx):
    """N-BEATS blocks with polynomial (trend) and Fourier (seasonality) bases, doubly residual
    stacking, trained with an sMAPE-like loss."""
    nn, F = torch.nn, torch.nn.functional
    L, Hh = 8, 4
    t_back = torch.arange(L).float() / L
    t_fore = torch.arange(Hh).float() / Hh

    class Block(nn.Module):
        def __init__(self, basis_b, basis_f):
            super().__init__()
            self.fc = nn.Sequential(nn.Linear(L, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU())
            p = basis_b.shape[0]
            self.theta_b = nn.Linear(16, p, bias=False)
            self.theta_f = nn.Linear(16, p, bias=False)
            self.register_buffer("Bb", basis_b)
            self.register_buffer("Bf", basis_f)

        def forward(self, x):
            h = self.fc(x)
            return self.theta_b(h) @ self.Bb, self.theta_f(h) @ self.Bf

    poly_b = torch.stack([t_back**i for i in range(3)])
    poly_f = torch.stack([t_fore**i for i in range(3)])
    four_b = torch.cat(
        [torch.cos(2 * math.pi * k * t_back)[None] for k in range(2)]
        + [torch.sin(2 * math.pi * k * t_back)[None] for k in range(1, 3)]
    )
    four_f = torch.cat(
        [torch.cos(2 * math.pi * k * t_fore)[None] for k in range(2)]
        + [torch.sin(2 * math.pi * k * t_fore)[None] for k in range(1, 3)]
    )
    blocks = ctx.init(nn.ModuleList([Block(poly_b, poly_f), Block(four_b, four_f)]))
    # (SGD: Adam would turn gradients at rounding level, 1e-8, into steps of lr)
    opt = torch.optim.SGD(blocks.parameters(), lr=1e-2, momentum=0.9)
    rng = np.random.default_rng(5)
    series = ctx.t((np.sin(np.arange(40) / 3.0) + 0.1 * rng.normal(size=40) + 2).astype(np.float32))
    windows = series.unfold(0, L + Hh, 3)
    X, Y = windows[:, :L], windows[:, L:]
    out = []
    for _ in range(3):
        resid, fc = X, 0
        for b in blocks:
            back, fore = b(resid)
            resid = resid - back
            fc = fc + fore
        loss = (2 * (fc - Y).abs() / (fc.abs() + Y.abs() + 1e-8)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.append(loss.item())
    return [windows.shape, out, fc.detach()]


def two_tower_logq(torch, ctx):
    """A two-tower retrieval model with in-batch negatives, logQ correction from item
    frequencies, a learned temperature, and recall@k by topk."""
    nn, F = torch.nn, torch.nn.functional

    class Tower(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.emb = nn.Embedding(n, 8)
            self.mlp = nn.Sequential(nn.Linear(8, 8), nn.SiLU(), nn.Linear(8, 6))

        def forward(self, ids):
            return F.normalize(self.mlp(self.emb(ids)), dim=-1)

    users, items = ctx.init(Tower(10), "u"), ctx.init(Tower(15), "i")
    log_temp = nn.Parameter(torch.tensor(math.log(0.1)))
    opt = torch.optim.Adagrad(
        list(users.parameters()) + list(items.parameters()) + [log_temp], lr=0.1
    )
    rng = np.random.default_rng(6)
    u = ctx.t(rng.integers(0, 10, 8))
    i = ctx.t(rng.integers(0, 15, 8))
    freq = torch.bincount(i, minlength=15).float() + 1
    logq = torch.log(freq / freq.sum())[i]
    out = []

    @ctx.fn
    def step():
        s = users(u) @ items(i).t() / log_temp.exp().clamp(min=0.01)
        s = s - logq[None, :]
        labels = torch.arange(8)
        loss = F.cross_entropy(s, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    for _ in range(3):
        out.append(step())
    with torch.no_grad():
        all_items = items(torch.arange(15))
        top = (users(u) @ all_items.t()).topk(5, dim=1).indices
        recall = (top == i[:, None]).any(1).float().mean()
    return [out, log_temp, top, recall]


def ft_transformer(torch, ctx):
    """FT-Transformer: per-feature tokenisation of numeric features by broadcasting, embeddings
    of categorical ones with offsets, a CLS token, and a Transformer encoder."""
    nn, F = torch.nn, torch.nn.functional

    class FT(nn.Module):
        def __init__(self, n_num=3, cards=(4, 5), d=8):
            super().__init__()
            self.w = nn.Parameter(torch.randn(n_num, d) * 0.1)
            self.b = nn.Parameter(torch.zeros(n_num, d))
            self.register_buffer("offsets", torch.tensor([0] + list(cards[:-1])).cumsum(0))
            self.cat = nn.Embedding(sum(cards), d)
            self.cls = nn.Parameter(torch.zeros(1, 1, d))
            self.enc = nn.TransformerEncoder(
                nn.TransformerEncoderLayer(
                    d, 2, 16, dropout=0.0, batch_first=True, norm_first=True
                ),
                1,
                enable_nested_tensor=False,
            )
            self.head = nn.Sequential(nn.LayerNorm(d), nn.ReLU(), nn.Linear(d, 1))

        def forward(self, xn, xc):
            tn = xn.unsqueeze(-1) * self.w + self.b
            tc = self.cat(xc + self.offsets)
            t = torch.cat([self.cls.expand(xn.shape[0], -1, -1), tn, tc], 1)
            return self.head(self.enc(t)[:, 0]).squeeze(-1)

    m = ctx.init(FT())
    # (SGD: the key projection's bias gets a gradient of rounding noise only, softmax being
    # blind to it, which Adam would turn into steps of lr that differ by executor)
    opt = torch.optim.SGD(m.parameters(), lr=1e-2, momentum=0.9)
    rng = np.random.default_rng(7)
    xn = ctx.t(rng.normal(size=(6, 3)).astype(np.float32))
    xc = ctx.t(np.stack([rng.integers(0, 4, 6), rng.integers(0, 5, 6)], 1))
    y = ctx.t(rng.integers(0, 2, 6).astype(np.float32))
    out = []

    @ctx.fn
    def step():
        loss = F.binary_cross_entropy_with_logits(m(xn, xc), y, pos_weight=torch.tensor(2.0))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    for _ in range(3):
        out.append(step())
    return [out, m.offsets, m.cls.grad]


def unet1d_crop(torch, ctx):
    """A 1-D U-Net whose skip connections are cropped by negative padding, ConvTranspose1d
    upsampling with output_padding, and InstanceNorm1d."""
    nn, F = torch.nn, torch.nn.functional

    class U(nn.Module):
        def __init__(self):
            super().__init__()
            self.d1 = nn.Sequential(
                nn.Conv1d(1, 4, 3), nn.InstanceNorm1d(4, affine=True), nn.ReLU()
            )
            self.d2 = nn.Sequential(nn.Conv1d(4, 8, 3, stride=2), nn.ReLU())
            self.up = nn.ConvTranspose1d(8, 4, 3, stride=2, output_padding=1)
            self.out = nn.Conv1d(8, 1, 1)

        def forward(self, x):
            a = self.d1(x)
            b = self.d2(a)
            u = self.up(b)
            diff = a.shape[-1] - u.shape[-1]
            a_c = F.pad(a, (-(diff // 2), -(diff - diff // 2))) if diff > 0 else a
            u = F.pad(u, (0, max(0, -diff)))
            return self.out(torch.cat([a_c, u[..., : a_c.shape[-1]]], 1))

    m = ctx.init(U())
    rng = np.random.default_rng(8)
    x = ctx.t(rng.normal(size=(2, 1, 17)).astype(np.float32))
    y = m(x)
    y.pow(2).mean().backward()
    cropped = F.pad(torch.arange(10.0).reshape(1, 1, 10), (-2, -3))
    return [y, cropped, m.up.weight.grad, m.d1[1].weight.grad]


def farthest_point_sampling(torch, ctx):
    """Farthest point sampling in a Python loop, kNN grouping by topk on cdist, a batched
    gather with offsets, and a PointNet-style max pooled feature."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(9)
    B, N, S, K = 2, 20, 5, 4
    pts = ctx.t(rng.random((B, N, 3)).astype(np.float32))
    idx = torch.zeros(B, S, dtype=torch.long)
    dist = torch.full((B, N), float("inf"))
    far = torch.zeros(B, dtype=torch.long)
    batch = torch.arange(B)
    for i in range(S):
        idx[:, i] = far
        c = pts[batch, far].unsqueeze(1)
        dist = torch.minimum(dist, ((pts - c) ** 2).sum(-1))
        far = dist.argmax(-1)
    centers = pts[batch[:, None], idx]
    knn = torch.cdist(centers, pts).topk(K, largest=False).indices  # B, S, K
    flat = (knn + (batch * N)[:, None, None]).reshape(-1)
    groups = pts.reshape(-1, 3)[flat].reshape(B, S, K, 3) - centers.unsqueeze(2)
    mlp = ctx.init(nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 8)))
    feat = mlp(groups).max(dim=2).values
    feat.sum().backward()
    return [idx, knn, feat, mlp[0].weight.grad]


def lstmcell_scheduled_sampling(torch, ctx):
    """A decoder of nn.LSTMCell with Bahdanau attention over encoder states, scheduled
    sampling by torch.bernoulli draws, greedy feedback, and masked token loss."""
    nn, F = torch.nn, torch.nn.functional

    class Dec(nn.Module):
        def __init__(self, V=7, E=5, H=8):
            super().__init__()
            self.emb = nn.Embedding(V, E)
            self.cell = nn.LSTMCell(E + H, H)
            self.Wa = nn.Linear(H, H, bias=False)
            self.Ua = nn.Linear(H, H)
            self.va = nn.Linear(H, 1, bias=False)
            self.out = nn.Linear(2 * H, V)

        def forward(self, enc, enc_mask, tgt, p_teacher, g):
            B, T = tgt.shape
            h = enc.mean(1)
            c = torch.zeros_like(h)
            inp = tgt[:, 0]
            ctxv = torch.zeros_like(h)
            logits = []
            for t in range(1, T):
                h, c = self.cell(torch.cat([self.emb(inp), ctxv], -1), (h, c))
                e = self.va(torch.tanh(self.Wa(h).unsqueeze(1) + self.Ua(enc))).squeeze(-1)
                a = e.masked_fill(~enc_mask, -1e9).softmax(-1)
                ctxv = torch.bmm(a.unsqueeze(1), enc).squeeze(1)
                lg = self.out(torch.cat([h, ctxv], -1))
                logits.append(lg)
                teach = torch.bernoulli(torch.full((B,), p_teacher), generator=g).bool()
                inp = torch.where(teach, tgt[:, t], lg.argmax(-1))
            return torch.stack(logits, 1)

    m = ctx.init(Dec())
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    rng = np.random.default_rng(10)
    enc = ctx.t(rng.normal(size=(3, 4, 8)).astype(np.float32))
    enc_mask = ctx.t(np.array([[1, 1, 1, 0], [1, 1, 1, 1], [1, 1, 0, 0]], bool))
    tgt = ctx.t(np.array([[0, 3, 4, 1, 6], [0, 2, 2, 6, 6], [0, 5, 1, 3, 6]]))
    g = torch.Generator().manual_seed(2)
    out = []
    for p in (1.0, 0.7, 0.4):
        logits = m(enc, enc_mask, tgt, p, g)
        loss = F.cross_entropy(logits.reshape(-1, 7), tgt[:, 1:].reshape(-1), ignore_index=6)
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.append(loss.item())
    return out


def mfcc_dct(torch, ctx):
    """MFCCs: STFT power, a mel filterbank built with linspace and clamp, log, a DCT-II matrix,
    and delta features by a conv1d with replicate padding."""
    F = torch.nn.functional
    sr, n_fft, hop, n_mels, n_mfcc = 800, 64, 16, 10, 6
    t = torch.arange(400, dtype=torch.float64) / sr
    wav = torch.sin(2 * math.pi * 60 * t) + 0.3 * torch.sin(2 * math.pi * 170 * t)
    spec = torch.stft(
        wav,
        n_fft,
        hop,
        window=torch.hann_window(n_fft, dtype=torch.float64),
        return_complex=True,
        center=True,
        pad_mode="reflect",
    )
    power = spec.abs() ** 2  # F, T

    def hz_to_mel(f):
        return 2595 * math.log10(1 + f / 700)

    mels = torch.linspace(hz_to_mel(0), hz_to_mel(sr / 2), n_mels + 2, dtype=torch.float64)
    hz = 700 * (10 ** (mels / 2595) - 1)
    freqs = torch.linspace(0, sr / 2, n_fft // 2 + 1, dtype=torch.float64)
    lower = (freqs[None, :] - hz[:-2, None]) / (hz[1:-1, None] - hz[:-2, None])
    upper = (hz[2:, None] - freqs[None, :]) / (hz[2:, None] - hz[1:-1, None])
    fb = torch.clamp(torch.minimum(lower, upper), min=0)
    mel = torch.log(fb @ power + 1e-6)
    n = torch.arange(n_mels).double()
    k = torch.arange(n_mfcc).double()[:, None]
    dct = torch.cos(math.pi / n_mels * (n + 0.5) * k) * math.sqrt(2 / n_mels)
    dct[0] /= math.sqrt(2)
    mfcc = dct @ mel
    kernel = torch.tensor([[[-2.0, -1.0, 0.0, 1.0, 2.0]]], dtype=torch.float64) / 10
    delta = F.conv1d(F.pad(mfcc[:, None], (2, 2), mode="replicate"), kernel)[:, 0]
    return [power.shape, mfcc, delta]


PROGRAMS = [
    sae_tied_topk,
    gumbel_topk_sampler,
    causal_linear_attention,
    sinusoid_from_pretrained,
    batch_hard_triplet,
    ssim_loss,
    mc_dropout,
    nbeats,
    two_tower_logq,
    ft_transformer,
    unet1d_crop,
    farthest_point_sampling,
    lstmcell_scheduled_sampling,
    mfcc_dct,
]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


# the programs that mark steps for ember.function (the others run as in test_eager)
CAPTURED = [p for p in PROGRAMS if "@ctx.fn" in inspect.getsource(p)]


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
