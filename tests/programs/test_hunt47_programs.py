"""Programs of hunt47, each run on PyTorch and on ember (eagerly, and with its steps in
ember.function where they are capturable): a VAE with the reparameterization trick and
torch.distributions' KL; a GRU seq2seq with additive attention and teacher forcing; a
contrastive step (InfoNCE, triplet losses, cosine embedding loss); PointNet with T-nets by bmm;
capsule routing; Gumbel-softmax and nearest-code VQ with straight-through estimators; a WaveNet
of dilated causal convolutions with gated activations; a Set Transformer over masked sets;
knowledge distillation (KLDiv with a temperature); mixup and cutmix with label smoothing;
param groups with LambdaLR/CosineAnnealingWarmRestarts in SequentialLR, OneCycleLR and
gradient clipping; an EMA AveragedModel, parameters_to_vector, ModuleDict and ParameterList;
module hooks, torch.save/torch.load(weights_only) and grad-mode nesting; einsum; index,
sort and scan ops; complex FFT layers; dtype promotion of integer and bool tensors; a step's
Python (iteration over a tensor, keyword arguments, namedtuple and dict results); WGAN-GP; a
KV-cache decoder with tied weights; STFT features; EmbeddingBag with distributions; a
bfloat16 autocast step with GradScaler; optimizer steps in post-accumulate-grad hooks;
sixty-odd tensor ops (linear algebra, special functions, scatters with host-data repeats) in
one captured function.
"""

import collections
import io
import math

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007, E501, E731, F841, B023

Out = collections.namedtuple("Out", "loss logits")


def vae(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions

    class VAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Sequential(nn.Linear(6, 16), nn.ReLU())
            self.mu = nn.Linear(16, 3)
            self.logvar = nn.Linear(16, 3)
            self.dec = nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Linear(16, 6))

        def forward(self, x, eps):
            h = self.enc(x)
            mu, logvar = self.mu(h), self.logvar(h)
            std = torch.exp(0.5 * logvar)
            z = mu + eps * std
            q = D.Normal(mu, std)
            p = D.Normal(torch.zeros_like(mu), torch.ones_like(std))
            kl = D.kl_divergence(q, p).sum(-1).mean()
            kl2 = (-0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp(), dim=1)).mean()
            rec = F.binary_cross_entropy_with_logits(self.dec(z), x, reduction="sum") / x.shape[0]
            return rec, kl, kl2, q.log_prob(z).sum(-1), q.entropy().sum(-1)

    model = ctx.init(VAE())
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    rng = np.random.default_rng(0)
    x = ctx.t((rng.uniform(size=(8, 6)) > 0.5).astype(np.float32))
    eps = ctx.t(rng.normal(size=(3, 8, 3)).astype(np.float32))

    @ctx.fn
    def step(x, e):
        rec, kl, kl2, lp, ent = model(x, e)
        loss = rec + kl
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.detach(), kl.item(), kl2, lp, ent

    hist = [step(x, eps[i]) for i in range(3)]
    return [hist, model.state_dict()]


def seq2seq_attn(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    V, E, H, S, T, B = 9, 5, 6, 5, 4, 3

    class Enc(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, E, padding_idx=0)
            self.gru = nn.GRU(E, H, batch_first=True, bidirectional=True)
            self.fc = nn.Linear(2 * H, H)

        def forward(self, src):
            out, h = self.gru(self.emb(src))
            h = torch.tanh(self.fc(torch.cat((h[-2], h[-1]), dim=1)))
            return out, h

    class Attn(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = nn.Linear(3 * H, H)
            self.v = nn.Linear(H, 1, bias=False)

        def forward(self, hidden, enc_out, mask):
            L = enc_out.shape[1]
            hidden = hidden.unsqueeze(1).repeat(1, L, 1)
            energy = torch.tanh(self.attn(torch.cat((hidden, enc_out), dim=2)))
            a = self.v(energy).squeeze(2)
            a = a.masked_fill(mask == 0, -1e10)
            return F.softmax(a, dim=1)

    class Dec(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention = Attn()
            self.emb = nn.Embedding(V, E)
            self.rnn = nn.GRU(2 * H + E, H)
            self.fc = nn.Linear(3 * H + E, V)

        def forward(self, inp, hidden, enc_out, mask):
            emb = self.emb(inp.unsqueeze(0))
            a = self.attention(hidden, enc_out, mask).unsqueeze(1)
            weighted = torch.bmm(a, enc_out).permute(1, 0, 2)
            out, hidden = self.rnn(torch.cat((emb, weighted), dim=2), hidden.unsqueeze(0))
            pred = self.fc(torch.cat((out.squeeze(0), weighted.squeeze(0), emb.squeeze(0)), dim=1))
            return pred, hidden.squeeze(0), a.squeeze(1)

    class S2S(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc, self.dec = Enc(), Dec()

        def forward(self, src, trg, tf_mask):
            outs = torch.zeros(trg.shape[0], trg.shape[1], V)
            enc_out, hidden = self.enc(src)
            mask = src != 0
            inp = trg[:, 0]
            for t in range(1, trg.shape[1]):
                out, hidden, _ = self.dec(inp, hidden, enc_out, mask)
                outs[:, t] = out
                top1 = out.argmax(1)
                inp = trg[:, t] if tf_mask[t] else top1
            return outs

    model = ctx.init(S2S())
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    rng = np.random.default_rng(1)
    src = ctx.t(np.array([[3, 4, 5, 2, 0], [1, 2, 3, 4, 5], [6, 7, 0, 0, 0]]))
    trg = ctx.t(rng.integers(1, V, size=(B, T)))
    tf = [True, True, False, True]
    crit = nn.CrossEntropyLoss(ignore_index=0, label_smoothing=0.1)

    @ctx.fn
    def step(src, trg):
        out = model(src, trg, tf)
        loss = crit(out[:, 1:].reshape(-1, V), trg[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.item()

    hist = [step(src, trg) for _ in range(3)]
    return [hist, model.dec.fc.weight]


def contrastive(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    enc = ctx.init(nn.Sequential(nn.Linear(5, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 4)))
    opt = torch.optim.SGD(enc.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-4)
    rng = np.random.default_rng(2)
    a = ctx.t(rng.normal(size=(6, 5)).astype(np.float32))
    p = ctx.t(rng.normal(size=(6, 5)).astype(np.float32))
    n = ctx.t(rng.normal(size=(6, 5)).astype(np.float32))
    tl = nn.TripletMarginLoss(margin=0.5, p=2)
    tld = nn.TripletMarginWithDistanceLoss(
        distance_function=lambda x, y: 1 - F.cosine_similarity(x, y), margin=0.3, swap=True
    )
    cel = nn.CosineEmbeddingLoss(margin=0.1)

    @ctx.fn
    def step(a, p, n):
        za, zp, zn = enc(a), enc(p), enc(n)
        ea, ep = F.normalize(za, dim=1), F.normalize(zp, dim=1)
        logits = ea @ ep.T / 0.1
        labels = torch.arange(ea.shape[0])
        info = (F.cross_entropy(logits, labels) + F.cross_entropy(logits.T, labels)) / 2
        t = tl(za, zp, zn) + tld(za, zp, zn)
        y = torch.ones(za.shape[0])
        y[::2] = -1
        c = cel(za, zn, y)
        loss = info + t + c
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item(), info.detach(), (logits.argmax(1) == labels).sum()

    hist = [step(a, p, n) for _ in range(3)]
    d = torch.cdist(enc(a), enc(n))
    pd = F.pairwise_distance(a, n, keepdim=True)
    return [
        hist,
        enc.state_dict(),
        d,
        pd,
        F.triplet_margin_loss(a, p, n, reduction="none", swap=True),
    ]


def pointnet(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class TNet(nn.Module):
        def __init__(self, k):
            super().__init__()
            self.k = k
            self.conv = nn.Conv1d(k, 16, 1)
            self.fc = nn.Linear(16, k * k)

        def forward(self, x):
            b = x.size(0)
            h = F.relu(self.conv(x))
            h = torch.max(h, 2, keepdim=True)[0].view(-1, 16)
            iden = torch.eye(self.k).flatten().view(1, self.k * self.k).repeat(b, 1)
            return (self.fc(h) + iden).view(-1, self.k, self.k)

    class PN(nn.Module):
        def __init__(self):
            super().__init__()
            self.t3 = TNet(3)
            self.c1 = nn.Conv1d(
                3, 8, 1, bias=False
            )  # (a bias before batch norm: its gradient is rounding noise, which Adam scales up)
            self.bn1 = nn.BatchNorm1d(8)
            self.t8 = TNet(8)
            self.c2 = nn.Conv1d(8, 16, 1)
            self.fc = nn.Linear(16, 4)

        def forward(self, x):
            t = self.t3(x)
            x = torch.bmm(x.transpose(2, 1), t).transpose(2, 1)
            x = F.relu(self.bn1(self.c1(x)))
            tf = self.t8(x)
            x = torch.bmm(tf, x)
            x = self.c2(x)
            g, idx = x.max(dim=2)
            reg = torch.linalg.norm(
                torch.eye(8)[None] - torch.bmm(tf, tf.transpose(1, 2)), dim=(1, 2)
            ).mean()
            return F.log_softmax(self.fc(g), -1), reg, idx

    model = ctx.init(PN())
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.99), amsgrad=True)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    rng = np.random.default_rng(3)
    x = ctx.t(rng.normal(size=(4, 3, 10)).astype(np.float32))
    y = ctx.t(np.array([0, 1, 2, 3]))

    @ctx.fn
    def step(x, y):
        out, reg, idx = model(x)
        loss = F.nll_loss(out, y) + 0.001 * reg
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item(), idx

    hist = []
    for _ in range(3):
        hist.append(step(x, y))
        sched.step()
    model.eval()
    with torch.no_grad():
        out, reg, idx = model(x)
    return [hist, out, reg, sched.get_last_lr(), model.bn1.running_var]


def capsule(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    def squash(s, dim=-1):
        n2 = (s**2).sum(dim=dim, keepdim=True)
        return n2 / (1 + n2) * s / torch.sqrt(n2 + 1e-8)

    class Caps(nn.Module):
        def __init__(self, n_in=6, d_in=4, n_out=3, d_out=5, iters=3):
            super().__init__()
            self.W = nn.Parameter(torch.randn(1, n_in, n_out, d_out, d_in) * 0.1)
            self.iters = iters
            self.n_out = n_out

        def forward(self, u):
            b = u.shape[0]
            u = u[:, :, None, :, None]
            u_hat = torch.matmul(self.W, u).squeeze(-1)  # b, n_in, n_out, d_out
            logits = torch.zeros(b, u_hat.shape[1], self.n_out, 1)
            for i in range(self.iters):
                c = F.softmax(logits, dim=2)
                s = (c * u_hat).sum(dim=1, keepdim=True)
                v = squash(s)
                if i < self.iters - 1:
                    logits = logits + (u_hat * v).sum(-1, keepdim=True)
            return v.squeeze(1)

    caps = ctx.init(Caps())
    opt = torch.optim.Adagrad(caps.parameters(), lr=0.1)
    rng = np.random.default_rng(4)
    u = ctx.t(rng.normal(size=(2, 6, 4)).astype(np.float32))
    y = ctx.t(np.array([1, 2]))

    @ctx.fn
    def step(u, y):
        v = caps(u)
        lengths = v.norm(dim=-1)
        T = F.one_hot(y, 3).float()
        loss = (
            (T * F.relu(0.9 - lengths) ** 2 + 0.5 * (1 - T) * F.relu(lengths - 0.1) ** 2)
            .sum(1)
            .mean()
        )
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item(), lengths.detach()

    hist = [step(u, y) for _ in range(3)]
    return [hist, caps.W.grad]


def gumbel_vq(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    K, D = 5, 4

    class VQ(nn.Module):
        def __init__(self):
            super().__init__()
            self.codebook = nn.Embedding(K, D)
            self.proj = nn.Linear(D, K)

        def forward(self, z, g):
            # gumbel softmax with explicit noise (hard ST)
            logits = self.proj(z)
            y = F.softmax((logits + g) / 0.5, dim=-1)
            idx = y.argmax(-1, keepdim=True)
            hard = torch.zeros_like(logits).scatter_(-1, idx, 1.0)
            yst = hard - y.detach() + y
            zq_g = yst @ self.codebook.weight
            # nearest-neighbour VQ with ST
            d = (
                z.pow(2).sum(1, keepdim=True)
                - 2 * z @ self.codebook.weight.t()
                + self.codebook.weight.pow(2).sum(1)
            )
            codes = d.argmin(1)
            zq = self.codebook(codes)
            commit = F.mse_loss(z, zq.detach())
            cb = F.mse_loss(zq, z.detach())
            zq_st = z + (zq - z).detach()
            perplex = torch.exp(
                -(
                    F.one_hot(codes, K).float().mean(0)
                    * torch.log(F.one_hot(codes, K).float().mean(0) + 1e-10)
                ).sum()
            )
            return zq_st, zq_g, commit, cb, codes, perplex

    vq = ctx.init(VQ())
    enc = ctx.init(nn.Linear(3, D), "enc")
    opt = torch.optim.Adam(list(vq.parameters()) + list(enc.parameters()), lr=1e-2)
    rng = np.random.default_rng(5)
    x = ctx.t(rng.normal(size=(7, 3)).astype(np.float32))
    u = rng.uniform(1e-6, 1 - 1e-6, size=(3, 7, K))
    g = ctx.t((-np.log(-np.log(u))).astype(np.float32))

    @ctx.fn
    def step(x, g):
        z = enc(x)
        zq_st, zq_g, commit, cb, codes, perplex = vq(z, g)
        loss = zq_st.pow(2).mean() + zq_g.abs().mean() + 0.25 * commit + cb
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item(), codes, perplex

    hist = [step(x, g[i]) for i in range(3)]
    # F.gumbel_softmax shapes/one-hotness only (random)
    gs = F.gumbel_softmax(torch.zeros(4, K), tau=1.0, hard=True)
    return [hist, vq.codebook.weight, enc.weight.grad, list(gs.shape), gs.sum(-1)]


def wavenet(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class CausalConv(nn.Conv1d):
        def __init__(self, cin, cout, k, dilation):
            super().__init__(cin, cout, k, dilation=dilation)
            self.left = (k - 1) * dilation

        def forward(self, x):
            return super().forward(F.pad(x, (self.left, 0)))

    class Block(nn.Module):
        def __init__(self, c, d):
            super().__init__()
            self.filt = CausalConv(c, c, 2, d)
            self.gate = CausalConv(c, c, 2, d)
            self.res = nn.Conv1d(c, c, 1)
            self.skip = nn.Conv1d(c, c, 1)

        def forward(self, x):
            h = torch.tanh(self.filt(x)) * torch.sigmoid(self.gate(x))
            return x + self.res(h), self.skip(h)

    class WaveNet(nn.Module):
        def __init__(self, q=8, c=6):
            super().__init__()
            self.inp = CausalConv(q, c, 2, 1)
            self.blocks = nn.ModuleList([Block(c, 2**i) for i in range(3)])
            self.out = nn.Sequential(nn.ReLU(), nn.Conv1d(c, c, 1), nn.ReLU(), nn.Conv1d(c, q, 1))

        def forward(self, x):
            x = self.inp(F.one_hot(x, 8).float().transpose(1, 2))
            skips = 0
            for b in self.blocks:
                x, s = b(x)
                skips = skips + s
            return self.out(skips)

    model = ctx.init(WaveNet())
    opt = torch.optim.Adamax(model.parameters(), lr=1e-2)
    rng = np.random.default_rng(6)
    seq = ctx.t(rng.integers(0, 8, size=(2, 17)))

    def mu_law(x, mu=7):
        return torch.sign(x) * torch.log1p(mu * torch.abs(x)) / math.log1p(mu)

    @ctx.fn
    def step(seq):
        logits = model(seq[:, :-1])
        loss = F.cross_entropy(logits, seq[:, 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    hist = [step(seq) for _ in range(3)]
    sig = torch.linspace(-1, 1, 9)
    enc = ((mu_law(sig) + 1) / 2 * 7 + 0.5).long()
    return [hist, enc, model.blocks[2].filt.weight.grad, model.blocks[2].filt.dilation]


def set_transformer(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class MAB(nn.Module):
        def __init__(self, d, h):
            super().__init__()
            self.mha = nn.MultiheadAttention(d, h, batch_first=True)
            self.ln0, self.ln1 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.ff = nn.Linear(d, d)

        def forward(self, x, y, mask=None):
            h = self.ln0(x + self.mha(x, y, y, key_padding_mask=mask, need_weights=False)[0])
            return self.ln1(h + F.relu(self.ff(h)))

    class PMA(nn.Module):
        def __init__(self, d, h, k):
            super().__init__()
            self.S = nn.Parameter(torch.empty(1, k, d))
            nn.init.xavier_uniform_(self.S)
            self.mab = MAB(d, h)

        def forward(self, x, mask):
            return self.mab(self.S.repeat(x.size(0), 1, 1), x, mask)

    class DeepSets(nn.Module):
        def __init__(self):
            super().__init__()
            self.phi = nn.Sequential(nn.Linear(3, 8), nn.ELU())
            self.sab = MAB(8, 2)
            self.pma = PMA(8, 2, 1)
            self.rho = nn.Linear(8, 1)

        def forward(self, x, mask):
            h = self.phi(x)
            h = self.sab(h, h, mask)
            s1 = (h * (~mask).unsqueeze(-1)).sum(1) / (~mask).sum(1, keepdim=True)
            p = self.pma(h, mask).squeeze(1)
            return self.rho(p + s1).squeeze(-1)

    model = ctx.init(DeepSets())
    opt = torch.optim.RAdam(model.parameters(), lr=1e-2)
    rng = np.random.default_rng(0)
    x = ctx.t(rng.normal(size=(3, 5, 3)).astype(np.float32))
    mask = ctx.t(np.array([[0, 0, 0, 1, 1], [0, 0, 0, 0, 0], [0, 0, 1, 1, 1]], dtype=bool))
    y = x.masked_fill(mask.unsqueeze(-1), 0).sum((1, 2))

    @ctx.fn
    def step(x, mask, y):
        loss = F.smooth_l1_loss(model(x, mask), y, beta=0.5)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    hist = [step(x, mask, y) for _ in range(3)]
    perm = ctx.t(np.array([4, 2, 0, 1, 3]))
    with torch.no_grad():
        a = model(x, mask)
        b = model(x[:, perm], mask[:, perm])
    return [hist, a, b]


def distill(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    teacher = ctx.init(
        nn.Sequential(
            nn.Linear(6, 16), nn.GELU(approximate="tanh"), nn.Dropout(0.0), nn.Linear(16, 4)
        ),
        "t",
    )
    student = ctx.init(nn.Sequential(nn.Linear(6, 4)), "s")
    teacher.eval()
    for p in teacher.parameters():
        p.requires_grad_(False)
    opt = torch.optim.SGD(student.parameters(), lr=0.5)
    T = 3.0
    kld = nn.KLDivLoss(reduction="batchmean")
    rng = np.random.default_rng(1)
    x = ctx.t(rng.normal(size=(10, 6)).astype(np.float32))
    y = ctx.t(rng.integers(0, 4, size=10))

    @ctx.fn
    def step(x, y):
        with torch.no_grad():
            tl = teacher(x)
        sl = student(x)
        soft = kld(F.log_softmax(sl / T, dim=-1), F.softmax(tl / T, dim=-1)) * T * T
        soft2 = F.kl_div(
            F.log_softmax(sl / T, -1), F.log_softmax(tl / T, -1), reduction="sum", log_target=True
        )
        hard = F.cross_entropy(sl, y)
        loss = 0.7 * soft + 0.3 * hard
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item(), soft2.detach(), tl.requires_grad

    hist = [step(x, y) for _ in range(3)]
    return [hist, student[0].weight, teacher[0].weight.grad is None]


def mixup_cutmix(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    model = ctx.init(
        nn.Sequential(
            nn.Conv2d(1, 4, 3, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(4, 3),
        )
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    rng = np.random.default_rng(2)
    x = ctx.t(rng.normal(size=(4, 1, 6, 6)).astype(np.float32))
    y = ctx.t(rng.integers(0, 3, size=4))
    perm = ctx.t(np.array([2, 0, 3, 1]))
    lam = 0.3

    def one_hot_smooth(y, n, eps=0.1):
        return torch.full((y.size(0), n), eps / (n - 1)).scatter_(1, y.unsqueeze(1), 1 - eps)

    @ctx.fn
    def step(x, y, perm):
        xm = lam * x + (1 - lam) * x[perm]
        ya, yb = y, y[perm]
        out = model(xm)
        loss = lam * F.cross_entropy(out, ya, label_smoothing=0.1) + (1 - lam) * F.cross_entropy(
            out, yb, label_smoothing=0.1
        )
        # cutmix
        xc = x.clone()
        xc[:, :, 1:4, 2:5] = x[perm, :, 1:4, 2:5]
        lam_c = 1 - (3 * 3) / (6 * 6)
        tgt = lam_c * one_hot_smooth(ya, 3) + (1 - lam_c) * one_hot_smooth(yb, 3)
        loss = loss + torch.sum(-tgt * F.log_softmax(model(xc), -1), -1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    hist = [step(x, y, perm) for _ in range(3)]
    beta = torch.distributions.Beta(torch.tensor([0.4]), torch.tensor([0.4]))
    s = beta.sample((5,))
    rp = torch.randperm(6)
    return [
        hist,
        model[0].weight,
        list(s.shape),
        sorted(rp.tolist()),
        beta.mean,
        beta.log_prob(torch.tensor([0.3])),
    ]


def schedulers(torch, ctx):
    nn = torch.nn
    model = ctx.init(nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1)))
    decay, no_decay = [], []
    for n_, p in model.named_parameters():
        (no_decay if n_.endswith("bias") else decay).append(p)
    opt = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": 0.1},
            {"params": no_decay, "weight_decay": 0.0, "lr": 5e-3},
        ],
        lr=1e-2,
    )
    lo = torch.optim.lr_scheduler
    s1 = lo.LambdaLR(opt, lr_lambda=[lambda e: (e + 1) / 3, lambda e: 1.0])
    s2 = lo.CosineAnnealingWarmRestarts(opt, T_0=3, T_mult=2, eta_min=1e-4)
    sched = lo.SequentialLR(opt, [s1, s2], milestones=[2])
    rng = np.random.default_rng(3)
    x = ctx.t(rng.normal(size=(8, 3)).astype(np.float32))
    y = ctx.t(rng.normal(size=(8, 1)).astype(np.float32))

    @ctx.fn
    def step(x, y):
        loss = torch.nn.functional.huber_loss(model(x), y, delta=0.5)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_value_(model.parameters(), 0.05)
        gn = nn.utils.clip_grad_norm_(decay, 0.1, norm_type=2.0)
        opt.step()
        return loss.item(), gn

    hist = []
    for _ in range(6):
        hist.append(step(x, y))
        sched.step()
        hist.append([g["lr"] for g in opt.param_groups])
    # OneCycleLR lrs/momentum trajectory
    opt2 = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=0.1, momentum=0.9)
    oc = lo.OneCycleLR(
        opt2, max_lr=1.0, total_steps=10, pct_start=0.3, anneal_strategy="cos", three_phase=True
    )
    tr = []
    for _ in range(9):
        opt2.step()
        oc.step()
        tr.append(
            (round(opt2.param_groups[0]["lr"], 6), round(opt2.param_groups[0]["momentum"], 6))
        )
    return [hist, tr, sched.state_dict()["_milestones"], model.state_dict()]


def ema_vec(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    from_vec = torch.nn.utils.vector_to_parameters
    to_vec = torch.nn.utils.parameters_to_vector

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleDict({"a": nn.Linear(3, 4), "b": nn.Linear(4, 2)})
            self.scales = nn.ParameterList(
                [nn.Parameter(torch.ones(4)), nn.Parameter(torch.ones(2))]
            )
            self.register_buffer("count", torch.zeros((), dtype=torch.long))

        def forward(self, x):
            self.count += 1
            h = torch.relu(self.blocks["a"](x)) * self.scales[0]
            return self.blocks["b"](h) * self.scales[1]

    net = ctx.init(Net())
    ema = torch.optim.swa_utils.AveragedModel(
        net, multi_avg_fn=torch.optim.swa_utils.get_ema_multi_avg_fn(0.9)
    )
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    rng = np.random.default_rng(4)
    x = ctx.t(rng.normal(size=(6, 3)).astype(np.float32))
    y = ctx.t(rng.normal(size=(6, 2)).astype(np.float32))

    @ctx.fn
    def step(x, y):
        loss = F.mse_loss(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    hist = []
    for _ in range(3):
        hist.append(step(x, y))
        ema.update_parameters(net)
    v = to_vec(net.parameters())
    from_vec(v * 0.5, net.parameters())
    gv = to_vec([p.grad for p in net.parameters()])
    with torch.no_grad():
        eo = ema(x)
    return [
        hist,
        v,
        gv,
        eo,
        ema.n_averaged,
        net.count,
        net.state_dict(),
        {k: v for k, v in ema.module.state_dict().items()},
    ]


def hooks_saveload(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    model = ctx.init(nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 2)))
    feats, grads = {}, {}

    def fh(name):
        def hook(m, inp, out):
            feats[name] = out.detach()

        return hook

    def bh(name):
        def hook(m, gin, gout):
            grads[name] = (gout[0].detach(), None if gin[0] is None else gin[0].detach())

        return hook

    def pre(m, args):
        return (args[0] * 2,)

    h1 = model[0].register_forward_hook(fh("l0"))
    h2 = model[2].register_full_backward_hook(bh("l2"))
    h3 = model[1].register_forward_pre_hook(pre)
    h4 = model[2].register_forward_hook(lambda m, a, kw, o: o + kw.get("bias", 0), with_kwargs=True)
    rng = np.random.default_rng(5)
    x = ctx.t(rng.normal(size=(3, 4)).astype(np.float32), requires_grad=True)
    out = model(x)
    out.pow(2).sum().backward()
    r = [feats["l0"], grads["l2"][0], grads["l2"][1], x.grad]
    for h in (h1, h2, h3, h4):
        h.remove()
    buf = io.BytesIO()
    torch.save({"model": model.state_dict(), "step": 3, "lst": [torch.arange(3)]}, buf)
    buf.seek(0)
    ck = torch.load(buf, weights_only=True)
    m2 = nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 2))
    res = m2.load_state_dict(ck["model"], strict=True)
    r.append(m2(x).detach())
    r.append(model(x).detach())
    r.append(ck["step"])
    r.append(ck["lst"][0])
    r.append(sorted(res.missing_keys))
    # no_grad / enable_grad / inference_mode nesting
    with torch.no_grad():
        a = x * 2
        with torch.enable_grad():
            b = x * 2
            with torch.inference_mode():
                c = x * 2
            d = x * 3
        e = x * 4

    @torch.no_grad()
    def f(z):
        return z * 2

    @torch.enable_grad()
    def g(z):
        return z * 2

    with torch.no_grad():
        gg = g(x)
    r.append(
        [
            a.requires_grad,
            b.requires_grad,
            c.requires_grad,
            d.requires_grad,
            e.requires_grad,
            f(x).requires_grad,
            gg.requires_grad,
            torch.is_grad_enabled(),
            c.is_inference(),
            torch.is_inference_mode_enabled(),
        ]
    )
    with torch.set_grad_enabled(False):
        r.append(torch.is_grad_enabled())
    torch.set_grad_enabled(True)
    return r


def einsum_ops(torch, ctx):
    rng = np.random.default_rng(0)
    a = ctx.t(rng.normal(size=(2, 3, 4)).astype(np.float32), requires_grad=True)
    b = ctx.t(rng.normal(size=(4, 5)).astype(np.float32), requires_grad=True)
    c = ctx.t(rng.normal(size=(2, 5, 3)).astype(np.float32))
    m = ctx.t(rng.normal(size=(3, 3)).astype(np.float32))

    @ctx.fn
    def f(a, b, c, m):
        r = [
            torch.einsum("bij,jk->bik", a, b),
            torch.einsum("bij,jk,bki->b", a, b, c),
            torch.einsum("ii->i", m),
            torch.einsum("ii", m),
            torch.einsum("...j,jk->...k", a, b),
            torch.einsum("bij->jb", a),
            torch.einsum("i,j->ij", m[0], m[1]),
            torch.einsum(a, [0, 1, 2], b, [2, 3], [0, 1, 3]),
            torch.einsum("b i j, j k -> b i k", a, b),
            torch.einsum("bij,bij->", a, a),
            torch.einsum("ij,ij->ij", [m, m]),
        ]
        s = sum(x.sum() for x in r)
        return r, s

    r, s = f(a, b, c, m)
    s.backward()
    return [r, s, a.grad, b.grad]


def index_ops(torch, ctx):
    rng = np.random.default_rng(1)
    x = ctx.t(rng.normal(size=(4, 6)).astype(np.float32))
    idx = ctx.t(rng.integers(0, 6, size=(4, 3)))
    ints = ctx.t(np.array([3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5]))
    seg = ctx.t(np.array([0, 0, 1, 2, 2, 2]))

    @ctx.fn
    def f(x, idx, ints, seg):
        r = []
        r.append(torch.where(x > 0, x, torch.zeros_like(x)))
        r.append(torch.where(x > 0, x, 0.0))
        r.append(torch.where(x > 0, 1, 0))
        r.append(x.masked_fill(x < -0.5, float("-inf")).softmax(-1))
        r.append(x.gather(1, idx))
        r.append(
            torch.zeros(3, 6).scatter_reduce(
                0, seg[:3, None].expand(3, 6), x[:3], "amax", include_self=False
            )
        )
        r.append(torch.zeros(3).scatter_reduce(0, seg, x[0], reduce="mean", include_self=False))
        r.append(torch.ones(3).scatter_reduce(0, seg, x[1], reduce="prod"))
        v, i = x.topk(2, dim=1, largest=False, sorted=True)
        r += [v, i]
        sv, si = x.sort(dim=0, descending=True, stable=True)
        r += [sv, si]
        r.append(torch.cumsum(x, 1))
        r.append(torch.cumprod(x, 0))
        cv, ci = torch.cummax(x, 1)
        r += [cv, ci]
        mv, mi = torch.cummin(x, 0)
        r += [mv, mi]
        r.append(torch.logcumsumexp(x, 1))
        r.append(x.argsort(1, descending=True))
        r.append(x.kthvalue(2, 1).values)
        r.append(x.median(1).indices)
        r.append(x.nanmedian())
        r.append(torch.take_along_dim(x, x.argmax(1, keepdim=True), 1))
        r.append(x.index_fill(1, ctx.t(np.array([0, 2])), -1.0))
        r.append(torch.searchsorted(torch.sort(x[0]).values, x[1]))
        r.append(torch.bucketize(x[1], torch.tensor([-1.0, 0.0, 1.0]), right=True))
        r.append(x.clamp(min=-0.5).clamp_max(0.7))
        r.append(x.amax((0, 1)))
        r.append(torch.diff(x, dim=1, n=2))
        r.append(x.roll(shifts=(1, -2), dims=(0, 1)))
        r.append(x.flip(0).tril(1))
        return r

    out = f(x, idx, ints, seg)
    u, inv, cnt = torch.unique(ints, return_inverse=True, return_counts=True)
    bc = [torch.bincount(ints, minlength=12), torch.bincount(ints, weights=torch.arange(11.0))]
    uc = torch.unique_consecutive(ints, return_counts=True)
    h = torch.histc(x, bins=5, min=-2, max=2)
    hh = torch.histogram(x.flatten(), bins=4)
    nz = torch.nonzero(x > 0.5, as_tuple=True)
    cnt2 = torch.count_nonzero(x > 0, dim=1)
    return [
        out,
        bc,
        u,
        inv,
        cnt,
        list(uc),
        h,
        hh.hist,
        hh.bin_edges,
        list(nz),
        cnt2,
        torch.unique(x.round(), dim=0, sorted=True),
    ]


def complex_ops(torch, ctx):
    rng = np.random.default_rng(2)
    x = ctx.t(rng.normal(size=(3, 8)).astype(np.float32), requires_grad=True)
    w = ctx.t(rng.normal(size=(3, 5, 2)).astype(np.float32), requires_grad=True)

    def f(x, w):
        X = torch.fft.rfft(x, dim=-1, norm="ortho")
        W = torch.view_as_complex(w)
        Y = X * W
        y = torch.fft.irfft(Y, n=8, dim=-1, norm="ortho")
        r = torch.view_as_real(Y)
        mag = Y.abs()
        ph = Y.angle()
        z = torch.complex(x[:, :5], x[:, 1:6])
        p = torch.polar(mag, ph)
        full = torch.fft.fft(x.to(torch.complex64))
        return (
            y,
            r,
            mag,
            ph,
            z.conj().real,
            (z * z.conj()).real,
            p.imag,
            full,
            torch.fft.fftshift(torch.fft.fftfreq(8)),
            torch.fft.ifft(full).real,
            Y.dtype,
            torch.is_complex(Y),
        )

    fn = ctx.fn(f)
    outs = fn(x, w)
    loss = outs[0].pow(2).sum() + outs[2].sum()
    loss.backward()
    c = torch.tensor([1 + 2j, 3 - 1j])
    return [
        list(outs),
        x.grad,
        w.grad,
        c * 2,
        c.abs(),
        (c @ c),
        c.dtype,
        torch.tensor([1j]).dtype,
        (torch.ones(2) * c).dtype,
    ]


def dtype_promo(torch, ctx):
    i32 = torch.tensor([1, 2, 3], dtype=torch.int32)
    i64 = torch.tensor([4, 5, 6])
    u8 = torch.tensor([250, 3, 7], dtype=torch.uint8)
    i8 = torch.tensor([-3, 3, 100], dtype=torch.int8)
    b = torch.tensor([True, False, True])
    f16 = torch.tensor([1.5, 2.5, 3.5], dtype=torch.float16)
    f32 = torch.tensor([0.5, 1.5, 2.5])
    f64 = torch.tensor([0.25, 0.5, 1.0], dtype=torch.float64)
    r = []
    cases = [
        i32 + i64,
        i32 * 2,
        i32 * 2.5,
        i32 / 2,
        i32 // 2,
        i64 % 2,
        u8 + i8,
        u8 + 10,
        u8 * 2,
        b + b,
        b * 3,
        b + 1.5,
        b & b,
        b | ~b,
        i32 & 6,
        i64 << 1,
        i64 >> 1,
        i32 ^ i64,
        f16 + f32,
        f16 * 2.0,
        f16 + i64,
        f32 + f64,
        i64 + f16,
        f32 * torch.tensor(2.0, dtype=torch.float64),
        i32 + torch.tensor(3.0),
        u8 + torch.tensor(300),
        b.sum(),
        b.float().mean(),
        i32.sum(),
        u8.sum(),
        i8.prod(),
        i32.mean(dtype=torch.float32),
        torch.true_divide(i64, 4),
        torch.floor_divide(i64, -4),
        i64.div(-4, rounding_mode="trunc"),
        torch.remainder(torch.tensor([-7, 7]), 3),
        torch.fmod(torch.tensor([-7, 7]), 3),
        torch.tensor([-7.5, 7.5]) % 2,
        i64.pow(2),
        i64**2.0,
        2**i64,
        torch.tensor(2) ** torch.tensor([-1.0, 0.5]),
        i32.float().pow(i32),
        torch.abs(i8),
        -u8,
        i64.neg(),
        torch.sign(i8),
        i64.clamp(5),
        torch.maximum(i32, f32),
        torch.eq(i32, f32),
        i32 == 2,
        i64 > 4.5,
        torch.isclose(f32, f32 + 1e-9),
        (b == 1),
        i64.bitwise_not(),
        i32.to(torch.bool),
        f32.to(torch.int64),
        torch.tensor([-1.7, 1.7]).long(),
        torch.tensor([3.9]).byte(),
        torch.arange(5) / 2,
        torch.arange(0, 1, 0.25),
        torch.arange(5, dtype=torch.float16),
        torch.full((2,), 3).dtype,
        torch.full((2,), 3.0).dtype,
        torch.full((2,), True).dtype,
        torch.zeros(2, dtype=torch.int32).new_ones(2) + 1.0,
        torch.where(b, i32, f32),
        torch.where(b, 1.0, i64),
        torch.where(b, i8, u8),
        torch.cat([i32, i64]),
        torch.cat([i32, f16]),
        i64.cumsum(0),
        b.cumsum(0),
        u8.cumsum(0),
        i32.cumprod(0),
        torch.result_type(i32, 2.0),
        torch.promote_types(torch.uint8, torch.int8),
        torch.can_cast(torch.float32, torch.int32),
        torch.tensor(3) * 1.0,
        (torch.tensor(3) + 2).dtype,
        torch.tensor(3).item() / 2,
        int(torch.tensor(7) // 2),
        float(torch.tensor(2.5)),
        bool(torch.tensor([1])),
        i64.float().softmax(0),
        torch.argmax(b.int()),
        b.any(),
        b.all(),
        i32.max(),
        torch.lerp(f32, f64.float(), 0.3),
        i32.masked_fill(b, 9),
        i64.index_put((torch.tensor([0]),), torch.tensor(7)),
        torch.tensor([1, 2]).dtype == torch.long,
        f32.type(torch.int32),
        f32.type(),
        i32.is_floating_point(),
        torch.is_floating_point(f16),
        f16.element_size(),
        b.element_size(),
    ]
    return [
        c if not hasattr(c, "dtype") or not hasattr(c, "shape") else (c, c.dtype) for c in cases
    ]


def capture_python(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    model = ctx.init(nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8), nn.Mish(), nn.Linear(8, 3)))
    opt = torch.optim.NAdam(
        model.parameters(), lr=1e-2, decoupled_weight_decay=True, weight_decay=0.01
    )
    rng = np.random.default_rng(0)
    x = ctx.t(rng.normal(size=(6, 4)).astype(np.float32))
    y = ctx.t(rng.integers(0, 3, size=6))
    w = ctx.t(np.array([1.0, 2.0, 0.5], dtype=np.float32))

    @ctx.fn
    def step(x, y, *, weight=None, scale=1.0):
        logits = model(x)
        rows = [r.sum() for r in logits]  # iterate over a tensor
        n = len(x)
        total = sum(rows) / n
        loss = F.cross_entropy(logits, y, weight=weight) * scale + 0.0 * total
        opt.zero_grad()
        loss.backward()
        opt.step()
        stats = {
            "n": x.shape[0] * 2,
            "size": list(x.size()),
            "acc": (logits.argmax(-1) == y).float().mean(),
        }
        return Out(loss.detach(), logits.detach()), stats, None

    hist = [step(x, y, weight=w, scale=0.5) for _ in range(3)]
    hist2 = step(x, y)
    conv = [[list(h[0]), h[1], h[2]] for h in hist] + [[list(hist2[0]), hist2[1]]]
    return [conv, model.state_dict()]


def wgan_gp(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    G = ctx.init(nn.Sequential(nn.Linear(2, 8), nn.LeakyReLU(0.2), nn.Linear(8, 2)), "g")
    D = ctx.init(nn.Sequential(nn.Linear(2, 8), nn.SiLU(), nn.Linear(8, 1)), "d")
    og = torch.optim.Adam(G.parameters(), lr=1e-3, betas=(0.5, 0.9))
    od = torch.optim.Adam(D.parameters(), lr=1e-3, betas=(0.5, 0.9))
    rng = np.random.default_rng(1)
    real = ctx.t(rng.normal(size=(3, 6, 2)).astype(np.float32))
    z = ctx.t(rng.normal(size=(3, 6, 2)).astype(np.float32))
    eps = ctx.t(rng.uniform(size=(3, 6, 1)).astype(np.float32))

    @ctx.fn
    def d_step(real, z, eps):
        fake = G(z).detach()
        xh = (eps * real + (1 - eps) * fake).requires_grad_(True)
        (g,) = torch.autograd.grad(D(xh).sum(), xh, create_graph=True)
        gp = ((g.norm(2, dim=1) - 1) ** 2).mean()
        loss = D(fake).mean() - D(real).mean() + 10 * gp
        od.zero_grad()
        loss.backward()
        od.step()
        return loss.item(), gp.item()

    @ctx.fn
    def g_step(z):
        for p in D.parameters():
            p.requires_grad_(False)
        loss = -D(G(z)).mean()
        og.zero_grad()
        loss.backward()
        og.step()
        for p in D.parameters():
            p.requires_grad_(True)
        return loss.item()

    hist = []
    for i in range(3):
        hist.append(d_step(real[i], z[i], eps[i]))
        hist.append(g_step(z[i]))
    return [hist, G.state_dict(), D.state_dict(), [p.requires_grad for p in D.parameters()]]


def kv_cache_decoder(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    V, Dm, H = 11, 8, 2

    class Attn(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(Dm, 3 * Dm, bias=False)
            self.o = nn.Linear(Dm, Dm, bias=False)

        def forward(self, x, cache=None):
            B, T, _ = x.shape
            q, k, v = self.qkv(x).split(Dm, dim=-1)
            q, k, v = (t.view(B, T, H, Dm // H).transpose(1, 2) for t in (q, k, v))
            if cache is not None:
                k = torch.cat([cache[0], k], dim=2)
                v = torch.cat([cache[1], v], dim=2)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=cache is None)
            return self.o(y.transpose(1, 2).contiguous().view(B, T, Dm)), (k, v)

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, Dm)
            self.pos = nn.Embedding(16, Dm)
            self.attn = Attn()
            self.ln = nn.RMSNorm(Dm)
            self.head = nn.Linear(Dm, V, bias=False)
            self.head.weight = self.emb.weight

        def forward(self, idx, start=0, cache=None):
            pos = torch.arange(start, start + idx.shape[1])
            h = self.emb(idx) + self.pos(pos)
            a, cache = self.attn(self.ln(h), cache)
            return self.head(h + a), cache

    lm = ctx.init(LM())
    lm.eval()
    prompt = ctx.t(np.array([[1, 5, 3], [2, 2, 7]]))
    with torch.no_grad():
        logits, cache = lm(prompt)
        out = [logits[:, -1].argmax(-1)]
        full = prompt
        for t in range(4):
            nxt = out[-1][:, None]
            full = torch.cat([full, nxt], 1)
            logits, cache = lm(nxt, start=full.shape[1] - 1, cache=cache)
            probs = F.softmax(logits[:, -1] / 0.8, -1)
            topv, topi = probs.topk(3)
            out.append(topi[:, 0])
        ref, _ = lm(full)
    return [
        torch.stack(out, 1),
        ref[:, -1],
        logits[:, -1],
        cache[0].shape[2],
        lm.head.weight is lm.emb.weight,
        len(lm.state_dict()),
    ]


def stft_spec(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(1)
    wav = ctx.t(rng.normal(size=(2, 256)).astype(np.float32), requires_grad=True)
    win = torch.hann_window(64)

    def feats(wav):
        spec = torch.stft(
            wav,
            n_fft=64,
            hop_length=16,
            win_length=64,
            window=win,
            center=True,
            pad_mode="reflect",
            return_complex=True,
        )
        mag = spec.abs().pow(2)
        fb = torch.linspace(0, 1, 33)[None, :].repeat(8, 1) * torch.arange(1.0, 9.0)[:, None]
        mel = torch.matmul(fb, mag)
        logmel = torch.log(mel.clamp(min=1e-5))
        rec = torch.istft(spec, n_fft=64, hop_length=16, window=win, length=256)
        return logmel, rec, spec.real, spec.imag

    fn = ctx.fn(feats)
    logmel, rec, sr, si = fn(wav)
    (logmel.mean() + rec.pow(2).sum() * 1e-3).backward()
    return [logmel, rec, sr, si, wav.grad]


def embbag_dist(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions
    bag = ctx.init(nn.EmbeddingBag(10, 4, mode="mean"))
    head = ctx.init(nn.Linear(4, 3), "h")
    opt = torch.optim.SGD(list(bag.parameters()) + list(head.parameters()), lr=0.5)
    text = ctx.t(np.array([1, 2, 4, 5, 4, 3, 2, 9]))
    offsets = ctx.t(np.array([0, 4]))
    y = ctx.t(np.array([0, 2]))

    @ctx.fn
    def step(text, offsets, y):
        logits = head(bag(text, offsets))
        cat = D.Categorical(logits=logits)
        loss = -cat.log_prob(y).mean() - 0.01 * cat.entropy().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item(), cat.probs.detach()

    hist = [step(text, offsets, y) for _ in range(3)]
    mix = D.MixtureSameFamily(
        D.Categorical(torch.tensor([0.3, 0.7])),
        D.Normal(torch.tensor([-1.0, 2.0]), torch.tensor([0.5, 1.0])),
    )
    pts = torch.linspace(-3, 3, 7)
    mvn = D.MultivariateNormal(torch.zeros(2), scale_tril=torch.tensor([[1.0, 0.0], [0.5, 2.0]]))
    ind = D.Independent(D.Normal(torch.zeros(3), torch.ones(3) * 2), 1)
    ind2 = D.Independent(D.Normal(torch.ones(3), torch.ones(3)), 1)
    return [
        hist,
        mix.log_prob(pts),
        mix.mean,
        mix.variance,
        mvn.log_prob(torch.tensor([[0.5, -1.0]])),
        mvn.entropy(),
        D.kl_divergence(ind, ind2),
        D.kl_divergence(
            D.Categorical(probs=torch.tensor([0.2, 0.8])),
            D.Categorical(probs=torch.tensor([0.5, 0.5])),
        ),
        D.Bernoulli(logits=torch.tensor([0.3])).log_prob(torch.tensor([1.0])),
        D.Poisson(torch.tensor([2.0])).log_prob(torch.tensor([3.0])),
        D.Laplace(0.0, 1.0).cdf(torch.tensor(0.5)),
        D.Beta(2.0, 3.0).entropy(),
    ]


def amp_bf16(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    model = ctx.init(nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 4)))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**4)
    rng = np.random.default_rng(0)
    x = ctx.t(rng.normal(size=(6, 8)).astype(np.float32))
    y = ctx.t(rng.integers(0, 4, size=6))

    @ctx.fn
    def step(x, y):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = model(x)
            loss = F.cross_entropy(out, y)
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        return loss.detach().float(), out.dtype, loss.dtype

    hist = [step(x, y) for _ in range(3)]
    return [hist, scaler.get_scale(), model[0].weight]


def optimizer_in_backward(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    model = ctx.init(nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 2)))
    opts = {p: torch.optim.SGD([p], lr=0.1, momentum=0.5) for p in model.parameters()}

    def hook(p):
        opts[p].step()
        opts[p].zero_grad()

    hs = [p.register_post_accumulate_grad_hook(hook) for p in model.parameters()]
    rng = np.random.default_rng(1)
    x = ctx.t(rng.normal(size=(5, 4)).astype(np.float32))
    y = ctx.t(rng.normal(size=(5, 2)).astype(np.float32))
    hist = []
    for _ in range(3):
        loss = F.mse_loss(model(x), y)
        loss.backward()
        hist.append(loss.item())
    for h in hs:
        h.remove()
    return [hist, model.state_dict(), [p.grad for p in model.parameters()]]


def misc_ops(torch, ctx):
    rng = np.random.default_rng(0)
    x = ctx.t(rng.normal(size=(4, 5)).astype(np.float32))
    y = ctx.t(rng.normal(size=(4, 5)).astype(np.float32))
    ii = ctx.t(np.array([0, 2, 2, 3]))

    @ctx.fn
    def f(x, y, ii):
        r = []
        r.append(torch.zeros(5, 5).index_put_((ii, ii), torch.ones(4), accumulate=True))
        r.append(torch.zeros(4, 5).scatter_(1, ii[:, None].expand(4, 2), 2.0, reduce="add"))
        r.append(torch.cdist(x, y, p=1))
        r.append(torch.combinations(x[0], r=2))
        r.append(torch.cartesian_prod(x[0, :2], x[1, :3]))
        r.append(torch.block_diag(x[:2, :2], y[:1]))
        r.append(torch.kron(x[:2, :2], y[:2, :2]))
        r.append(torch.trapezoid(x, dim=1))
        r.append(torch.cov(x))
        r.append(torch.corrcoef(x))
        r.append(torch.quantile(x, torch.tensor([0.25, 0.5]), dim=1, interpolation="midpoint"))
        r.append(torch.renorm(x, 2, 0, 1.0))
        r.append(torch.diag_embed(x[:2]))
        r.append(torch.tensordot(x, y, dims=([1], [1])))
        r.append(torch.linalg.cross(x[:, :3], y[:, :3]))
        r.append(torch.atan2(x, y))
        r.append(torch.heaviside(x, torch.tensor(0.5)))
        r.append(torch.logit(torch.sigmoid(x), eps=1e-3))
        r.append(torch.clamp(x, min=y - 1, max=y + 1))
        r.append(torch.isin(ii, torch.tensor([2, 3])))
        r.append(torch.movedim(x.reshape(2, 2, 5), 0, -1))
        r.append(torch.narrow(x, 1, 1, 3))
        r.append(torch.masked_scatter(x, x > 0, y))
        r.append(x.index_copy(0, torch.tensor([3, 0]), y[:2]))
        r.append(torch.rot90(x, 1, (0, 1)))
        r.append(torch.repeat_interleave(x[:, 0], torch.tensor([1, 0, 2, 1])))
        a, b = torch.meshgrid(x[0, :3], x[1, :2], indexing="xy")
        r += [a, b]
        r.append(torch.tril_indices(4, 3, offset=-1))
        r.append(x.unfold(1, 2, 2))
        r.append(torch.nn.functional.pad(x[None], (1, 2), mode="replicate"))
        r.append(torch.nn.functional.pad(x[None, None], (1, 1, 2, 0), mode="reflect"))
        r.append(torch.nan_to_num(torch.log(x), nan=0.0, neginf=-5.0))
        r.append(torch.vander(x[0], N=3, increasing=True))
        r.append(torch.logdet(x[:, :4] @ x[:, :4].T + torch.eye(4)))
        r.append(torch.linalg.eigh(x[:, :4] @ x[:, :4].T).eigenvalues)
        r.append(torch.linalg.svdvals(x))
        r.append(torch.linalg.solve(x[:, :4] @ x[:, :4].T + torch.eye(4), y[:, :2]))
        r.append(torch.linalg.matrix_norm(x, ord="nuc"))
        r.append(torch.linalg.vector_norm(x, ord=3, dim=1))
        r.append(torch.special.xlog1py(x.abs(), x.abs()))
        r.append(torch.special.entr(x.abs()))
        r.append(torch.special.log_ndtr(x))
        r.append(torch.special.i0e(x))
        r.append(x.new_full((2,), 3.0) + x.new_empty(2).fill_(1.0))
        r.append(torch.std_mean(x, dim=1, correction=0)[0])
        r.append(torch.var_mean(x, 0, unbiased=True)[1])
        r.append(torch.aminmax(x, dim=0).min)
        r.append(torch.addmm(x[:, :4], x, y.T, beta=0.5, alpha=2.0))
        r.append(torch.baddbmm(x[None, :, :4], x[None], y[None].transpose(1, 2)))
        r.append(torch.addcdiv(x, x, y.abs() + 1, value=-0.5))
        r.append(torch.frac(x * 3))
        r.append(torch.trunc(x * 3))
        r.append(torch.fix(x * 3))
        r.append(torch.copysign(x, y))
        r.append(torch.nextafter(x, y))
        r.append(torch.ldexp(x, torch.tensor([2])))
        r.append(torch.float_power(x.abs(), 2.5))
        r.append(torch.logaddexp2(x, y))
        r.append(torch.signbit(x))
        return r

    return f(x, y, ii)


PROGRAMS = [
    vae,
    seq2seq_attn,
    contrastive,
    pointnet,
    capsule,
    gumbel_vq,
    wavenet,
    set_transformer,
    distill,
    mixup_cutmix,
    schedulers,
    ema_vec,
    hooks_saveload,
    einsum_ops,
    index_ops,
    complex_ops,
    dtype_promo,
    capture_python,
    wgan_gp,
    kv_cache_decoder,
    stft_spec,
    embbag_dist,
    amp_bf16,
    optimizer_in_backward,
    misc_ops,
]


# the larger models run captured only (their eager ops run inside the capture's trace too)
CAPTURED_ONLY = {vae, seq2seq_attn, pointnet, wavenet, amp_bf16}
# and these eagerly only (their steps' capture is much like the others')
EAGER_ONLY = {contrastive, set_transformer}


@pytest.mark.parametrize(
    "program", [p for p in PROGRAMS if p not in CAPTURED_ONLY], ids=lambda p: p.__name__
)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize(
    "program", [p for p in PROGRAMS if p not in EAGER_ONLY], ids=lambda p: p.__name__
)
def test_captured(program):
    check_program(program, capture=True)
