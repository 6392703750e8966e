"""More hunt15 programs: a VQ-VAE with an EMA codebook updated under no_grad in a captured
step, sharpness-aware minimization (two backward passes per step), a capsule network's
routing-by-agreement loop, beam search decoding, MAE-style random masking with gather and
unshuffle, and knowledge distillation with a temperature.
"""

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007


def vq_ema(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class VQ(nn.Module):
        def __init__(self, n=4, d=3, decay=0.9):
            super().__init__()
            self.decay = decay
            self.register_buffer("embed", torch.linspace(-1, 1, n * d).view(n, d))
            self.register_buffer("cluster_size", torch.ones(n))
            self.register_buffer("embed_avg", torch.linspace(-1, 1, n * d).view(n, d).clone())

        def forward(self, z):
            d = z.pow(2).sum(1, keepdim=True) - 2 * z @ self.embed.t() + self.embed.pow(2).sum(1)
            idx = d.argmin(1)
            q = F.embedding(idx, self.embed)
            if self.training:
                with torch.no_grad():
                    oh = F.one_hot(idx, self.embed.shape[0]).type(z.dtype)
                    self.cluster_size.mul_(self.decay).add_(oh.sum(0), alpha=1 - self.decay)
                    self.embed_avg.mul_(self.decay).add_(oh.t() @ z, alpha=1 - self.decay)
                    n = self.cluster_size.sum()
                    cs = (self.cluster_size + 1e-5) / (n + 4e-5) * n
                    self.embed.copy_(self.embed_avg / cs.unsqueeze(1))
            commit = F.mse_loss(z, q.detach())
            perplexity = torch.exp(-(oh.mean(0) * torch.log(oh.mean(0) + 1e-10)).sum())
            return z + (q - z).detach(), commit, idx, perplexity

    enc = ctx.init(nn.Linear(5, 3), "enc")
    dec = ctx.init(nn.Linear(3, 5), "dec")
    vq = VQ()
    opt = torch.optim.Adam(list(enc.parameters()) + list(dec.parameters()), lr=1e-2)

    @ctx.fn
    def step(x):
        q, commit, idx, ppl = vq(enc(x))
        loss = F.mse_loss(dec(q), x) + 0.25 * commit
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, idx, ppl

    x = ctx.t(np.random.default_rng(0).standard_normal((6, 5)).astype(np.float32))
    out = [step(x) for _ in range(3)]
    return [out, vq.embed, vq.cluster_size, enc.weight]


def sam_step(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    m = ctx.init(nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)))
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    rho = 0.05

    @ctx.fn
    def step(x, y):
        loss = F.cross_entropy(m(x), y)
        opt.zero_grad()
        loss.backward()
        with torch.no_grad():
            gn = torch.norm(torch.stack([p.grad.norm(2) for p in m.parameters()]), 2)
            eps = []
            for p in m.parameters():
                e = p.grad * (rho / (gn + 1e-12))
                p.add_(e)
                eps.append(e)
        opt.zero_grad()
        F.cross_entropy(m(x), y).backward()
        with torch.no_grad():
            for p, e in zip(m.parameters(), eps):
                p.sub_(e)
        opt.step()
        return loss

    rng = np.random.default_rng(1)
    x = ctx.t(rng.standard_normal((5, 3)).astype(np.float32))
    y = ctx.t(np.array([0, 1, 1, 0, 1]))
    return [[step(x, y) for _ in range(3)], m[0].weight]


def capsules(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    def squash(s, dim=-1):
        n2 = (s**2).sum(dim=dim, keepdim=True)
        return n2 / (1 + n2) * s / torch.sqrt(n2 + 1e-8)

    class CapsNet(nn.Module):
        def __init__(self, n_in=6, d_in=4, n_out=3, d_out=5, iters=3):
            super().__init__()
            self.iters = iters
            self.prim = nn.Conv1d(2, n_in * d_in, 3)
            self.n_in, self.d_in = n_in, d_in
            self.W = nn.Parameter(0.1 * torch.ones(1, n_in, n_out, d_out, d_in))

        def forward(self, x):
            u = self.prim(x).mean(-1).view(x.size(0), self.n_in, self.d_in)
            u = squash(u)
            u_hat = (self.W @ u[:, :, None, :, None]).squeeze(-1)  # B, in, out, d_out
            b = torch.zeros(u_hat.shape[:3])
            for i in range(self.iters):
                c = F.softmax(b, dim=2)
                v = squash((c.unsqueeze(-1) * u_hat).sum(dim=1))  # B, out, d_out
                if i < self.iters - 1:
                    b = b + torch.einsum("biod,bod->bio", u_hat, v)
            return v

    model = ctx.init(CapsNet())
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    rng = np.random.default_rng(2)
    x = ctx.t(rng.standard_normal((4, 2, 7)).astype(np.float32))
    y = ctx.t(np.array([0, 2, 1, 2]))
    out = []
    for _ in range(2):
        v = model(x)
        lengths = v.norm(dim=-1)
        T = F.one_hot(y, 3).float()
        loss = T * F.relu(0.9 - lengths) ** 2 + 0.5 * (1 - T) * F.relu(lengths - 0.1) ** 2
        loss = loss.sum(1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.append([loss, lengths])
    return [out, model.W.grad, model.prim.weight]


def beam_search(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    V, H, beam, max_len, EOS, BOS = 6, 8, 3, 5, 5, 0
    emb = ctx.init(nn.Embedding(V, H), "emb")
    cell = ctx.init(nn.GRUCell(H, H), "cell")
    out_proj = ctx.init(nn.Linear(H, V), "out")
    B = 2
    h = ctx.t(np.random.default_rng(3).standard_normal((B, H)).astype(np.float32))
    with torch.no_grad():
        h = h.repeat_interleave(beam, dim=0)
        tokens = torch.full((B * beam, 1), BOS, dtype=torch.long)
        scores = torch.zeros(B, beam)
        scores[:, 1:] = float("-inf")
        scores = scores.view(-1)
        finished = torch.zeros(B * beam, dtype=torch.bool)
        for t in range(max_len):
            h = cell(emb(tokens[:, -1]), h)
            logp = F.log_softmax(out_proj(h), dim=-1)
            logp = logp.masked_fill(finished.unsqueeze(1), float("-inf"))
            logp[:, EOS] = torch.where(finished, torch.zeros(()), logp[:, EOS])
            cand = (scores.unsqueeze(1) + logp).view(B, beam * V)
            top, idx = cand.topk(beam, dim=1)
            origin = torch.div(idx, V, rounding_mode="floor")
            word = idx % V
            base = (torch.arange(B) * beam).unsqueeze(1)
            sel = (base + origin).view(-1)
            tokens = torch.cat([tokens[sel], word.view(-1, 1)], dim=1)
            h = h.index_select(0, sel)
            finished = finished[sel] | (word.view(-1) == EOS)
            scores = top.view(-1)
            if bool(finished.all()):
                break
        lengths = (tokens != EOS).sum(1).float()
        norm_scores = scores / lengths**0.6
        best = norm_scores.view(B, beam).argmax(1)
    return [tokens, scores, best, finished, t]


def mae_masking(torch, ctx):
    nn = torch.nn
    B, L, D, keep = 2, 8, 6, 3
    enc = ctx.init(nn.Sequential(nn.Linear(D, 6), nn.GELU(), nn.LayerNorm(6)), "enc")
    dec = ctx.init(nn.Linear(6, D), "dec")
    mask_token = torch.zeros(1, 1, 6)
    rng = np.random.default_rng(4)
    x = ctx.t(rng.standard_normal((B, L, D)).astype(np.float32))
    noise = ctx.t(rng.random((B, L)).astype(np.float32))
    ids_shuffle = torch.argsort(noise, dim=1)
    ids_restore = torch.argsort(ids_shuffle, dim=1)
    ids_keep = ids_shuffle[:, :keep]
    x_keep = torch.gather(x, 1, ids_keep.unsqueeze(-1).repeat(1, 1, D))
    mask = torch.ones(B, L)
    mask[:, :keep] = 0
    mask = torch.gather(mask, 1, ids_restore)
    latent = enc(x_keep)
    toks = torch.cat([latent, mask_token.repeat(B, L - keep, 1)], dim=1)
    toks = torch.gather(toks, 1, ids_restore.unsqueeze(-1).expand(-1, -1, 6))
    pred = dec(toks)
    target = x
    mean, var = target.mean(-1, keepdim=True), target.var(-1, keepdim=True)
    target = (target - mean) / (var + 1e-6) ** 0.5
    loss = ((pred - target) ** 2).mean(-1)
    loss = (loss * mask).sum() / mask.sum()
    loss.backward()
    return [loss, mask, ids_restore, enc[0].weight.grad, dec.bias.grad]


def distill(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    teacher = ctx.init(nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3)), "t")
    student = ctx.init(nn.Sequential(nn.Linear(4, 3)), "s")
    teacher.eval()
    teacher.requires_grad_(False)
    opt = torch.optim.SGD(student.parameters(), lr=0.5)
    rng = np.random.default_rng(5)
    x = ctx.t(rng.standard_normal((8, 4)).astype(np.float32))
    y = ctx.t(rng.integers(0, 3, 8))
    T, alpha = 3.0, 0.7
    out = []
    for _ in range(3):
        with torch.no_grad():
            t_logits = teacher(x)
        s_logits = student(x)
        soft = F.kl_div(
            F.log_softmax(s_logits / T, dim=1),
            F.softmax(t_logits / T, dim=1),
            reduction="batchmean",
        ) * (T * T)
        soft2 = nn.KLDivLoss(reduction="batchmean", log_target=True)(
            F.log_softmax(s_logits / T, 1), F.log_softmax(t_logits / T, 1)
        )
        hard = F.cross_entropy(s_logits, y)
        loss = alpha * soft + (1 - alpha) * hard
        opt.zero_grad()
        loss.backward()
        opt.step()
        agree = (s_logits.argmax(1) == t_logits.argmax(1)).float().mean()
        out.append([loss, soft2, agree])
    return [out, student[0].weight]


PROGRAMS = [vq_ema, sam_step, capsules, beam_search, mae_masking, distill]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", [vq_ema, sam_step], ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
