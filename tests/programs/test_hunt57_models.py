"""Model programs of hunt57, each run on PyTorch and on ember (eagerly, and the marked ones
with their steps under ``ember.function``): a VAE with a mixture prior, a Fourier neural
operator training complex weights, a graph network's scatter reductions, contrastive
InfoNCE with a learned temperature, attention with ALiBi, rotary embeddings and sliding
windows through scaled_dot_product_attention, and classification metrics.
"""

import math

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007, E501, E731, F841, B023, C408, B006, E702, E701, E401, C416, UP031, B905, PIE810, SIM108, RUF005


def vae_mixture(torch, ctx):
    """A VAE: encoder to Normal(mu, softplus(s)), rsample, a Bernoulli decoder by logits,
    KL to the standard normal both analytically (kl_divergence of Independent Normals) and
    by Monte Carlo against a MixtureSameFamily prior; Adam steps on the ELBO."""
    nn = torch.nn
    D = torch.distributions

    class VAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 4))
            self.dec = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 6))
            self.mix_logits = nn.Parameter(torch.zeros(3))
            self.mix_loc = nn.Parameter(torch.tensor([[-1.0, 0.0], [0.0, 1.0], [1.0, -1.0]]))

        def prior(self):
            comp = D.Independent(D.Normal(self.mix_loc, torch.ones_like(self.mix_loc)), 1)
            return D.MixtureSameFamily(D.Categorical(logits=self.mix_logits), comp)

        def forward(self, x):
            mu, s = self.enc(x).chunk(2, dim=-1)
            q = D.Independent(D.Normal(mu, nn.functional.softplus(s) + 1e-3), 1)
            z = q.rsample()
            px = D.Independent(D.Bernoulli(logits=self.dec(z)), 1)
            rec = px.log_prob(x)
            kl_std = D.kl_divergence(
                q, D.Independent(D.Normal(torch.zeros_like(mu), torch.ones_like(mu)), 1)
            )
            kl_mc = q.log_prob(z) - self.prior().log_prob(z)
            return -(rec - kl_mc).mean(), kl_std.mean(), z

    vae = ctx.init(VAE(), "vae")
    rng = np.random.default_rng(0)
    x = ctx.t((rng.random((5, 6)) > 0.5).astype(np.float32))
    opt = torch.optim.Adam(vae.parameters(), lr=1e-2)
    out = []
    for _ in range(3):
        loss, kl, z = vae(x)
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.append([loss.detach(), kl.detach(), z.detach()])
    pr = vae.prior()
    out += [pr.mean, pr.variance, vae.mix_logits, pr.log_prob(torch.zeros(2))]
    return out


def fno_spectral(torch, ctx):
    """A 1-d Fourier neural operator: rfft, a complex weight (cfloat Parameter) applied to the
    low modes by einsum, irfft back to n points; trained with Adam, which steps complex
    parameters as their real views; also a 2-d spectral product with rfft2/irfft2."""
    nn = torch.nn

    class SpectralConv1d(nn.Module):
        def __init__(self, cin, cout, modes):
            super().__init__()
            self.modes = modes
            scale = 1 / (cin * cout)
            w = torch.linspace(-1, 1, cin * cout * modes * 2).reshape(cin, cout, modes, 2)
            self.weights = nn.Parameter(scale * torch.view_as_complex(w.contiguous()))

        def forward(self, x):
            n = x.shape[-1]
            x_ft = torch.fft.rfft(x)
            out_ft = torch.zeros(x.shape[0], self.weights.shape[1], n // 2 + 1, dtype=torch.cfloat)
            out_ft[:, :, : self.modes] = torch.einsum(
                "bix,iox->box", x_ft[:, :, : self.modes], self.weights
            )
            return torch.fft.irfft(out_ft, n=n)

    class FNO(nn.Module):
        def __init__(self):
            super().__init__()
            self.lift = nn.Linear(2, 4)
            self.spec = SpectralConv1d(4, 4, 3)
            self.w = nn.Conv1d(4, 4, 1)
            self.proj = nn.Linear(4, 1)

        def forward(self, x):
            h = self.lift(x).permute(0, 2, 1)
            h = nn.functional.gelu(self.spec(h) + self.w(h))
            return self.proj(h.permute(0, 2, 1)).squeeze(-1)

    model = ctx.init(FNO(), "fno")
    grid = torch.linspace(0, 1, 16)
    rng = np.random.default_rng(1)
    a = ctx.t(rng.standard_normal((3, 16)).astype(np.float32))
    x = torch.stack([a, grid.expand(3, 16)], dim=-1)
    target = torch.cumsum(a, dim=1) / 16
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(3):
        loss = nn.functional.mse_loss(model(x), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    x2 = ctx.t(rng.standard_normal((2, 2, 8, 8)).astype(np.float32), requires_grad=True)
    w2 = ctx.t(
        (rng.standard_normal((2, 3, 4, 3)) + 1j * rng.standard_normal((2, 3, 4, 3))).astype(
            np.complex64
        ),
        requires_grad=True,
    )
    ft = torch.fft.rfft2(x2)
    out = torch.zeros(2, 3, 8, 5, dtype=torch.cfloat)
    out[:, :, :4, :3] = torch.einsum("bixy,ioxy->boxy", ft[:, :, :4, :3], w2)
    y2 = torch.fft.irfft2(out, s=(8, 8))
    y2.pow(2).sum().backward()
    return [losses, model.spec.weights, model.spec.weights.grad, y2, x2.grad, w2.grad]


def gnn_scatter(torch, ctx):
    """Message passing: index_add of messages, scatter_reduce mean/amax/amin/prod with and
    without include_self (and their gradients), degree by bincount, segment sums through
    index_add with alpha, and a global pooling per graph by scatter_add."""
    nn = torch.nn
    rng = np.random.default_rng(2)
    n, e = 7, 15
    src = ctx.t(rng.integers(0, n, e))
    dst = ctx.t(rng.integers(0, n - 1, e))
    batch = ctx.t(np.array([0, 0, 0, 1, 1, 2, 2]))
    x = ctx.t(rng.standard_normal((n, 4)).astype(np.float32), requires_grad=True)
    lin = ctx.init(nn.Linear(8, 4), "lin")
    msg = lin(torch.cat([x[src], x[dst]], dim=1))
    deg = torch.bincount(dst, minlength=n).clamp(min=1).float()
    agg_sum = torch.zeros(n, 4).index_add(0, dst, msg, alpha=0.5)
    idx = dst[:, None].expand(-1, 4)
    outs = [agg_sum, deg]
    total = agg_sum.sum()
    for reduce in ("mean", "amax", "amin", "prod", "sum"):
        for include_self in (True, False):
            base = torch.full((n, 4), 0.5)
            r = base.scatter_reduce(0, idx, msg, reduce=reduce, include_self=include_self)
            outs.append(r)
            total = total + (r * torch.linspace(0.1, 1, 4)).sum()
    graph_sum = torch.zeros(3, 4).scatter_add(0, batch[:, None].expand(-1, 4), x)
    counts = torch.bincount(batch, weights=torch.ones(n) * 2)
    total = total + graph_sum.pow(2).sum()
    total.backward()
    return outs + [graph_sum, counts, x.grad, lin.weight.grad]


def infonce(torch, ctx):
    """SimCLR's NT-Xent: two views, F.normalize, a similarity matrix with its diagonal
    masked by masked_fill, logsumexp-based loss and cross_entropy agreeing, a learnable
    log-temperature clamped as CLIP does, and the top-1 retrieval accuracy."""
    nn = torch.nn
    F = nn.functional
    enc = ctx.init(nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 4)), "enc")
    logit_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07)))
    opt = torch.optim.SGD(list(enc.parameters()) + [logit_scale], lr=0.1)
    rng = np.random.default_rng(3)
    x = ctx.t(rng.standard_normal((6, 5)).astype(np.float32))
    noise = ctx.t(rng.standard_normal((2, 6, 5)).astype(np.float32) * 0.1)

    def step(x, noise):
        z = F.normalize(enc(torch.cat([x + noise[0], x + noise[1]])), dim=1)
        n = x.shape[0]
        scale = logit_scale.clamp(max=math.log(100)).exp()
        sim = z @ z.T * scale
        sim = sim.masked_fill(torch.eye(2 * n, dtype=torch.bool), float("-inf"))
        targets = torch.cat([torch.arange(n, 2 * n), torch.arange(0, n)])
        manual = (torch.logsumexp(sim, dim=1) - sim[torch.arange(2 * n), targets]).mean()
        ce = F.cross_entropy(sim, targets)
        acc = (sim.argmax(1) == targets).float().mean()
        opt.zero_grad()
        ce.backward()
        opt.step()
        return manual.detach(), ce.detach(), acc

    step = ctx.fn(step)
    out = [step(x, noise) for _ in range(3)]
    return [out, logit_scale, enc[0].weight]


def attention_variants(torch, ctx):
    """ALiBi slopes added as a float attn_mask, rotary embeddings by complex multiplication
    (view_as_complex/polar), a sliding-window boolean mask, is_causal, a custom scale,
    grouped-query heads by repeat_interleave, through scaled_dot_product_attention with
    gradients; compared with the explicit softmax."""
    F = torch.nn.functional
    rng = np.random.default_rng(4)
    B, H, KV, T, Dh = 2, 4, 2, 6, 8
    q = ctx.t(rng.standard_normal((B, H, T, Dh)).astype(np.float32), requires_grad=True)
    k = ctx.t(rng.standard_normal((B, KV, T, Dh)).astype(np.float32), requires_grad=True)
    v = ctx.t(rng.standard_normal((B, KV, T, Dh)).astype(np.float32), requires_grad=True)

    def rope(x):
        freqs = 1.0 / (10000 ** (torch.arange(0, Dh, 2).float() / Dh))
        ang = torch.outer(torch.arange(T).float(), freqs)
        cis = torch.polar(torch.ones_like(ang), ang)
        xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
        return torch.view_as_real(xc * cis).flatten(-2).type_as(x)

    def attend(q, k, v):
        qr, kr = rope(q), rope(k)
        kr = kr.repeat_interleave(H // KV, dim=1)
        vr = v.repeat_interleave(H // KV, dim=1)
        slopes = torch.tensor([2 ** (-8 * (i + 1) / H) for i in range(H)])
        pos = torch.arange(T)
        rel = (pos[None, :] - pos[:, None]).float()
        alibi = slopes[:, None, None] * rel[None]
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        window = causal & ~torch.ones(T, T, dtype=torch.bool).tril(-3)
        bias = alibi.masked_fill(~window, float("-inf"))
        a = F.scaled_dot_product_attention(qr, kr, vr, attn_mask=bias[None])
        b = F.scaled_dot_product_attention(qr, kr, vr, attn_mask=window, scale=0.3)
        c = F.scaled_dot_product_attention(qr, kr, vr, is_causal=True)
        d = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        ref = ((qr @ kr.transpose(-1, -2)) / math.sqrt(Dh) + bias).softmax(-1) @ vr
        return a, b, c, d, ref

    attend = ctx.fn(attend)
    a, b, c, d, ref = attend(q, k, v)
    (a.sum() + b.pow(2).sum() + c.mean() + d.abs().sum()).backward()
    return [a, b, c, d, ref, q.grad, k.grad, v.grad]


def classification_metrics(torch, ctx):
    """Top-k accuracy, a confusion matrix through bincount, per-class precision/recall/F1
    with nan_to_num, ROC AUC by sorting and cumsum, the expected calibration error by
    bucketize, and unique with counts."""
    rng = np.random.default_rng(5)
    K, N = 4, 40
    logits = ctx.t(rng.standard_normal((N, K)).astype(np.float32))
    target = ctx.t(rng.integers(0, K, N))
    _, top = logits.topk(3, dim=1)
    correct = top.eq(target.view(-1, 1).expand_as(top))
    topk_acc = [
        correct[:, :k].reshape(-1).float().sum(0, keepdim=True).mul_(100.0 / N) for k in (1, 3)
    ]
    pred = logits.argmax(1)
    cm = torch.bincount(target * K + pred, minlength=K * K).reshape(K, K)
    tp = cm.diag().float()
    precision = torch.nan_to_num(tp / cm.sum(0).float(), nan=0.0)
    recall = tp / cm.sum(1).float().clamp(min=1)
    f1 = torch.where(
        precision + recall > 0, 2 * precision * recall / (precision + recall), torch.zeros_like(tp)
    )
    score = logits.softmax(1)[:, 0]
    pos = (target == 0).float()
    order = score.argsort(descending=True)
    tps = pos[order].cumsum(0)
    fps = (1 - pos[order]).cumsum(0)
    tpr = torch.cat([torch.zeros(1), tps / tps[-1]])
    fpr = torch.cat([torch.zeros(1), fps / fps[-1]])
    auc = torch.trapezoid(tpr, fpr)
    conf, p = logits.softmax(1).max(1)
    bins = torch.linspace(0, 1, 6)
    which = torch.bucketize(conf, bins[1:-1])
    acc_b = torch.zeros(5).scatter_add(0, which, (p == target).float())
    conf_b = torch.zeros(5).scatter_add(0, which, conf)
    cnt = torch.bincount(which, minlength=5).float()
    ece = ((acc_b - conf_b).abs() / N).sum()
    vals, inv, counts = torch.unique(pred, return_inverse=True, return_counts=True)
    hist = torch.histc(conf, bins=5, min=0, max=1)
    return [topk_acc, cm, precision, recall, f1, auc, ece, cnt, vals, inv, counts, hist]


PROGRAMS = [
    vae_mixture,
    fno_spectral,
    gnn_scatter,
    infonce,
    attention_variants,
    classification_metrics,
]
CAPTURED = [infonce, attention_variants]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
