"""Model programs of hunt16: a seq2seq GRU over packed, unsorted sequences with teacher forcing
chosen per step, a convolutional VAE with an annealed KL weight and inference_mode sampling, a
GAN step with two optimizers and requires_grad_ toggles, a supervised-contrastive loss with a
learnable temperature, nn.MultiheadAttention pooling with key_padding_mask and per-head weights,
and einsum-heavy layers (bilinear, tensor-train, trace/diagonal forms).
"""

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007


def seq2seq_packed(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    rnn = nn.utils.rnn
    V, E, H, PAD, BOS = 9, 5, 6, 0, 1

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, E, padding_idx=PAD)
            self.gru = nn.GRU(E, H, batch_first=True, bidirectional=True)
            self.bridge = nn.Linear(2 * H, H)

        def forward(self, src, lengths):
            packed = rnn.pack_padded_sequence(
                self.emb(src), lengths, batch_first=True, enforce_sorted=False
            )
            out, h = self.gru(packed)
            out, out_lens = rnn.pad_packed_sequence(out, batch_first=True, padding_value=0.0)
            h_last = torch.cat([h[-2], h[-1]], dim=-1)
            return out, out_lens, torch.tanh(self.bridge(h_last)).unsqueeze(0)

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, E, padding_idx=PAD)
            self.gru = nn.GRU(E + 2 * H, H, batch_first=True)
            self.out = nn.Linear(H, V)

        def forward(self, tok, h, ctx_vec):
            x = torch.cat([self.emb(tok), ctx_vec], dim=-1).unsqueeze(1)
            o, h = self.gru(x, h)
            return self.out(o.squeeze(1)), h

    enc, dec = ctx.init(Encoder(), "enc"), ctx.init(Decoder(), "dec")
    params = list(enc.parameters()) + list(dec.parameters())
    opt = torch.optim.Adam(params, lr=5e-3)
    lengths_np = np.array([3, 2, 4])
    rng = np.random.default_rng(0)
    src_np = rng.integers(2, V, (3, 4))
    for i, n in enumerate(lengths_np):
        src_np[i, n:] = PAD
    tgt_np = rng.integers(2, V, (3, 3))
    tgt_np[1, 2:] = PAD
    src, tgt = ctx.t(src_np), ctx.t(tgt_np)
    lengths = torch.tensor(lengths_np.tolist())
    teacher = [True, False, True]  # drawn once, fixed (a scheduled-sampling run)

    @ctx.fn
    def step(src, tgt):
        out, out_lens, h = enc(src, lengths)
        mask = torch.arange(out.shape[1]).unsqueeze(0) < out_lens.unsqueeze(1)
        ctx_vec = (out * mask.unsqueeze(-1)).sum(1) / out_lens.unsqueeze(1).to(out.dtype)
        tok = torch.full((src.shape[0],), BOS, dtype=torch.long)
        logits = []
        for t in range(tgt.shape[1]):
            lg, h = dec(tok, h, ctx_vec)
            logits.append(lg)
            tok = tgt[:, t] if teacher[t] else lg.argmax(-1).detach()
        logits = torch.stack(logits, 1)
        loss = F.cross_entropy(logits.reshape(-1, V), tgt.reshape(-1), ignore_index=PAD)
        opt.zero_grad()
        loss.backward()
        gn = nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        return loss, gn, out.shape[1], out_lens

    results = [step(src, tgt) for _ in range(2)]
    with torch.no_grad():
        out, out_lens, h = enc(src, lengths)
    return [results, out, h, enc.gru.weight_hh_l0_reverse, dec.out.bias]


def conv_vae(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class VAE(nn.Module):
        def __init__(self, z=3):
            super().__init__()
            self.enc = nn.Sequential(
                nn.Conv2d(1, 4, 3, stride=2, padding=1),
                nn.LeakyReLU(0.2),
                nn.Conv2d(4, 8, 3, stride=2, padding=1),
                nn.LeakyReLU(0.2),
                nn.Flatten(),
            )
            self.mu = nn.Linear(8 * 2 * 2, z)
            self.logvar = nn.Linear(8 * 2 * 2, z)
            self.dec_in = nn.Linear(z, 8 * 2 * 2)
            self.dec = nn.Sequential(
                nn.Unflatten(1, (8, 2, 2)),
                nn.ConvTranspose2d(8, 4, 4, stride=2, padding=1),
                nn.ReLU(),
                nn.ConvTranspose2d(4, 1, 4, stride=2, padding=1),
            )

        def forward(self, x, eps):
            h = self.enc(x)
            mu, logvar = self.mu(h), self.logvar(h).clamp(-6, 6)
            z = mu + eps * torch.exp(0.5 * logvar)
            return self.dec(self.dec_in(z)), mu, logvar

    model = ctx.init(VAE())
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    rng = np.random.default_rng(2)
    x = ctx.t((rng.random((4, 1, 8, 8)) > 0.5).astype(np.float32))
    eps_all = ctx.t(rng.standard_normal((4, 4, 3)).astype(np.float32))

    @ctx.fn
    def step(x, eps, beta):
        logits, mu, logvar = model(x, eps)
        rec = F.binary_cross_entropy_with_logits(logits, x, reduction="sum") / x.shape[0]
        kl = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp(), dim=1).mean()
        loss = rec + beta * kl
        opt.zero_grad(set_to_none=False)
        loss.backward()
        opt.step()
        return loss.detach(), rec.detach(), kl

    hist = []
    for i in range(4):
        beta = min(1.0, (i + 1) / 3)  # KL annealing
        loss, rec, kl = step(x, eps_all[i], torch.tensor(beta))
        hist.append([loss, rec.item(), kl])
    model.eval()
    with torch.inference_mode():
        z = ctx.t(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3))
        samples = torch.sigmoid(model.dec(model.dec_in(z)))
        inf = samples.is_inference()
    recon = samples.clone()  # an inference tensor cloned outside is a normal tensor
    return [hist, samples, inf, recon.is_inference(), model.mu.weight.grad]


def gan_step(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    G = ctx.init(nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 3)), "G")
    D = ctx.init(nn.Sequential(nn.Linear(3, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1)), "D")
    optG = torch.optim.Adam(G.parameters(), lr=2e-3, betas=(0.5, 0.999))
    optD = torch.optim.Adam(D.parameters(), lr=1e-3, betas=(0.5, 0.999))
    rng = np.random.default_rng(3)
    real = ctx.t(rng.standard_normal((6, 3)).astype(np.float32) + 1.0)
    noise = ctx.t(rng.standard_normal((3, 6, 2)).astype(np.float32))

    def set_requires_grad(m, flag):
        for p in m.parameters():
            p.requires_grad_(flag)

    @ctx.fn
    def d_step(real, z):
        set_requires_grad(D, True)
        fake = G(z).detach()
        lr_, lf = D(real), D(fake)
        loss = F.binary_cross_entropy_with_logits(
            lr_, torch.full_like(lr_, 0.9)
        ) + F.binary_cross_entropy_with_logits(lf, torch.zeros_like(lf))
        optD.zero_grad()
        loss.backward()
        optD.step()
        return loss, G[0].weight.grad is None

    @ctx.fn
    def g_step(z):
        set_requires_grad(D, False)
        out = D(G(z))
        loss = F.binary_cross_entropy_with_logits(out, torch.ones_like(out))
        optG.zero_grad()
        loss.backward()
        optG.step()
        return loss, D[0].weight.grad

    hist = []
    for i in range(3):
        hist.append(d_step(real, noise[i]))
        hist.append(g_step(noise[i]))
    return [hist, G[2].weight, D[2].bias, [p.requires_grad for p in D.parameters()]]


def supcon(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(5, 8), nn.GELU(), nn.Linear(8, 4))
            self.log_t = nn.Parameter(torch.tensor(np.log(0.2), dtype=torch.float32))

        def forward(self, x):
            return F.normalize(self.body(x), dim=-1)

    net = ctx.init(Net())
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, nesterov=True)
    rng = np.random.default_rng(4)
    x1 = ctx.t(rng.standard_normal((6, 5)).astype(np.float32))
    x2 = x1 + ctx.t(0.1 * rng.standard_normal((6, 5)).astype(np.float32))
    labels = ctx.t(np.array([0, 1, 0, 2, 1, 2]))

    def supcon_loss(z, labels, temp):
        n = z.shape[0]
        sim = z @ z.T / temp
        self_mask = torch.eye(n, dtype=torch.bool)
        sim = sim.masked_fill(self_mask, float("-inf"))
        pos = (labels.unsqueeze(0) == labels.unsqueeze(1)) & ~self_mask
        log_prob = sim - torch.logsumexp(sim, dim=1, keepdim=True)
        log_prob = torch.where(pos, log_prob, torch.zeros_like(log_prob))
        return -(log_prob.sum(1) / pos.sum(1).clamp(min=1)).mean()

    @ctx.fn
    def step(x1, x2, labels):
        z = torch.cat([net(x1), net(x2)])
        lab = torch.cat([labels, labels])
        temp = net.log_t.exp().clamp(0.05, 1.0)
        loss = supcon_loss(z, lab, temp)
        cos = F.cosine_similarity(z[:6].unsqueeze(1), z[6:].unsqueeze(0), dim=-1)
        acc = (cos.argmax(1) == torch.arange(6)).float().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, acc, cos.diagonal()

    hist = [step(x1, x2, labels) for _ in range(3)]
    return [hist, net.log_t, net.log_t.grad, net.body[2].weight]


def mha_pooling(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class Pool(nn.Module):
        def __init__(self, d=8, heads=2):
            super().__init__()
            self.query = nn.Parameter(torch.randn(1, 1, d))
            self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
            self.norm = nn.LayerNorm(d)
            self.head = nn.Linear(d, 3)

        def forward(self, x, pad):
            q = self.query.expand(x.shape[0], -1, -1)
            out, w = self.attn(
                q, x, x, key_padding_mask=pad, need_weights=True, average_attn_weights=False
            )
            return self.head(self.norm(out.squeeze(1))), w

    model = ctx.init(Pool())
    # (SGD: the key projection's bias has an exactly zero gradient, softmax being shift
    # invariant, and an adaptive optimizer would turn its rounding noise into full steps)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.5)
    rng = np.random.default_rng(5)
    x = ctx.t(rng.standard_normal((3, 5, 8)).astype(np.float32))
    lens = np.array([5, 3, 1])
    pad = ctx.t(np.arange(5)[None, :] >= lens[:, None])
    y = ctx.t(np.array([0, 2, 1]))

    @ctx.fn
    def step(x, pad, y):
        logits, w = model(x, pad)
        loss = F.cross_entropy(logits, y, label_smoothing=0.1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, w

    hist = [step(x, pad, y) for _ in range(3)]
    model.eval()
    with torch.no_grad():
        # padded keys never get weight; an all-visible row sums to one per head
        _, w = model(x, pad)
        out_nw, none_w = model.attn(x, x, x, key_padding_mask=pad, need_weights=False)
    return [hist, w, none_w is None, out_nw, model.attn.in_proj_weight.grad]


def einsum_layers(torch, ctx):
    nn = torch.nn

    class TT(nn.Module):
        """A tensor-train linear map 4*3 -> 2*5 with rank 2."""

        def __init__(self):
            super().__init__()
            self.c1 = nn.Parameter(torch.randn(4, 2, 2) * 0.5)
            self.c2 = nn.Parameter(torch.randn(2, 3, 5) * 0.5)

        def forward(self, x):
            x = x.reshape(x.shape[0], 4, 3)
            return torch.einsum("bij,iar,rjc->bac", x, self.c1, self.c2).flatten(1)

    class Bil(nn.Module):
        def __init__(self):
            super().__init__()
            self.W = nn.Parameter(torch.randn(3, 6, 4) * 0.3)

        def forward(self, a, b):
            return torch.einsum("bi,oij,bj->bo", a, self.W, b)

    tt, bil = ctx.init(TT(), "tt"), ctx.init(Bil(), "bil")
    params = list(tt.parameters()) + list(bil.parameters())
    opt = torch.optim.Adagrad(params, lr=0.1, lr_decay=0.01)
    rng = np.random.default_rng(6)
    x = ctx.t(rng.standard_normal((5, 12)))
    x = x.float()
    b = ctx.t(rng.standard_normal((5, 4)).astype(np.float32))
    M = ctx.t(rng.standard_normal((2, 3, 3)).astype(np.float32))
    H = ctx.t(rng.standard_normal((2, 2, 4, 3)).astype(np.float32))

    @ctx.fn
    def step(x, b):
        h = tt(x).reshape(5, 2, 5).sum(1).tanh()  # (5, 5)
        h = torch.cat([h, torch.ones(5, 1)], 1)  # (5, 6)
        out = bil(h, b)
        loss = torch.einsum("bo,bo->", out, out) / out.numel()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    hist = [step(x, b) for _ in range(3)]
    misc = [
        torch.einsum("bii->b", M),
        torch.einsum("bii->bi", M),
        torch.einsum("...ij,...jk->...ik", M, M),
        torch.einsum("bhqd,bhkd->bhqk", H, H),
        torch.einsum("i,j->ij", M[0, 0], M[1, 1]),
        torch.einsum(M, [0, 1, 2], M, [0, 2, 1], [0]),
        torch.einsum("bij->jbi", M).contiguous(),
    ]
    return [hist, misc, tt.c1, bil.W.grad]


PROGRAMS = [seq2seq_packed, conv_vae, gan_step, supcon, mha_pooling, einsum_layers]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
