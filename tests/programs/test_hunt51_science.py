"""Programs of hunt51 (vision, tabular, time series and scientific code), each run on PyTorch
and on ember (eagerly and, where steps are marked, captured): a ViT fine-tuned with layer-wise
learning-rate decay groups built from parameter names; a Deep & Cross Network v2 on
EmbeddingBag features with an AUC computed by sorting; PatchTST with RevIN normalization and
patches from Tensor.unfold; a Haar wavelet transform by grouped strided convolutions and its
exact inverse by transposed ones; a finite-horizon LQR by the Riccati recursion with gradients
through the solves; a bootstrap particle filter with systematic resampling by searchsorted;
spectral clustering from the normalized Laplacian's eigh.
"""

import inspect
import math

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007, E501, E731, F841, B023, E702, E701, C408, SIM118


def vit_layer_decay(torch, ctx):
    """A small ViT (conv patch embedding, cls token and positions initialized by
    trunc_normal_, pre-norm blocks with nn.MultiheadAttention), fine-tuned with AdamW whose
    param groups get lr * decay ** (depth - layer) by parsing names, no decay for norms,
    biases and tokens, and a cosine schedule with warmup by LambdaLR."""
    nn, F = torch.nn, torch.nn.functional
    D, depth = 16, 3

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1 = nn.LayerNorm(D)
            # (no projection biases: the key bias's gradient is zero up to rounding, which
            # AdamW turns into steps of either sign, differing between summation orders)
            self.attn = nn.MultiheadAttention(D, 2, batch_first=True, bias=False)
            self.norm2 = nn.LayerNorm(D)
            self.mlp = nn.Sequential(nn.Linear(D, 32), nn.GELU(), nn.Linear(32, D))

        def forward(self, x):
            h = self.norm1(x)
            x = x + self.attn(h, h, h, need_weights=False)[0]
            return x + self.mlp(self.norm2(x))

    class ViT(nn.Module):
        def __init__(self):
            super().__init__()
            self.patch_embed = nn.Conv2d(3, D, 4, stride=4)
            self.cls_token = nn.Parameter(torch.zeros(1, 1, D))
            self.pos_embed = nn.Parameter(torch.zeros(1, 5, D))
            nn.init.trunc_normal_(self.pos_embed, std=0.02)
            nn.init.trunc_normal_(self.cls_token, std=0.02)
            self.blocks = nn.ModuleList([Block() for _ in range(depth)])
            self.norm = nn.LayerNorm(D)
            self.head = nn.Linear(D, 4)

        def forward(self, x):
            x = self.patch_embed(x).flatten(2).transpose(1, 2)
            x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
            for b in self.blocks:
                x = b(x)
            return self.head(self.norm(x)[:, 0])

    def layer_id(name):
        if name.startswith(("cls_token", "pos_embed", "patch_embed")):
            return 0
        if name.startswith("blocks."):
            return int(name.split(".")[1]) + 1
        return depth + 1

    model = ctx.init(ViT())
    groups = {}
    for name, p in model.named_parameters():
        no_decay = p.ndim == 1 or name in ("cls_token", "pos_embed")
        lid = layer_id(name)
        key = (lid, no_decay)
        if key not in groups:
            groups[key] = {
                "params": [],
                "weight_decay": 0.0 if no_decay else 0.05,
                "lr_scale": 0.75 ** (depth + 1 - lid),
            }
        groups[key]["params"].append(p)
    param_groups = [groups[k] for k in sorted(groups)]
    opt = torch.optim.AdamW(param_groups, lr=1e-2)
    for g in opt.param_groups:
        g["lr"] = g["lr"] * g["lr_scale"]
    warm, total = 2, 8
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt,
        lambda s: (
            (s + 1) / warm
            if s < warm
            else 0.5 * (1 + math.cos(math.pi * (s - warm) / (total - warm)))
        ),
    )
    rng = np.random.default_rng(30)
    x = ctx.t(rng.normal(size=(4, 3, 8, 8)).astype(np.float32))
    y = ctx.t(np.array([0, 3, 1, 2]))

    @ctx.fn
    def step():
        loss = F.cross_entropy(model(x), y, label_smoothing=0.1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    out = []
    for _ in range(4):
        out.append(step().item())
        sched.step()
    return [
        out,
        [round(g["lr"], 10) for g in opt.param_groups],
        [len(g["params"]) for g in opt.param_groups],
        model.pos_embed,
    ]


def dcn_v2_auc(torch, ctx):
    """Deep & Cross Network v2: sparse fields through EmbeddingBag (mean over variable-length
    bags given by offsets), dense features, low-rank cross layers x0 * (U (V x) + b) + x, a
    parallel deep tower, BCEWithLogits, and ROC AUC computed by sorting scores."""
    nn, F = torch.nn, torch.nn.functional

    class CrossLowRank(nn.Module):
        def __init__(self, d, r):
            super().__init__()
            self.V = nn.Linear(d, r, bias=False)
            self.U = nn.Linear(r, d)

        def forward(self, x0, x):
            return x0 * self.U(self.V(x)) + x

    class DCN(nn.Module):
        def __init__(self):
            super().__init__()
            self.bags = nn.ModuleList(
                [nn.EmbeddingBag(10, 4, mode="mean"), nn.EmbeddingBag(7, 4, mode="sum")]
            )
            d = 8 + 3
            self.cross = nn.ModuleList([CrossLowRank(d, 2) for _ in range(2)])
            self.deep = nn.Sequential(nn.Linear(d, 16), nn.ReLU(), nn.Linear(16, 8), nn.ReLU())
            self.out = nn.Linear(d + 8, 1)

        def forward(self, fields, dense):
            embs = [bag(idx, off) for bag, (idx, off) in zip(self.bags, fields)]
            x0 = torch.cat(embs + [dense], dim=1)
            x = x0
            for layer in self.cross:
                x = layer(x0, x)
            return self.out(torch.cat([x, self.deep(x0)], dim=1)).squeeze(1)

    def auc(scores, labels):
        order = torch.argsort(scores, descending=True)
        l = labels[order]
        tps = torch.cumsum(l, 0)
        fps = torch.cumsum(1 - l, 0)
        tpr = tps / tps[-1]
        fpr = fps / fps[-1]
        tpr = torch.cat([torch.zeros(1), tpr])
        fpr = torch.cat([torch.zeros(1), fpr])
        return torch.trapezoid(tpr, fpr)

    model = ctx.init(DCN())
    opt = torch.optim.Adagrad(
        model.parameters(), lr=0.1, lr_decay=0.01, initial_accumulator_value=0.1
    )
    rng = np.random.default_rng(31)
    B = 8
    f1 = ctx.t(rng.integers(0, 10, size=14))
    o1 = ctx.t(np.array([0, 2, 3, 5, 7, 8, 11, 12]))
    f2 = ctx.t(rng.integers(0, 7, size=10))
    o2 = ctx.t(np.array([0, 1, 2, 4, 5, 6, 8, 9]))
    dense = ctx.t(rng.normal(size=(B, 3)).astype(np.float32))
    y = ctx.t(np.array([1, 0, 0, 1, 1, 0, 1, 0], np.float32))
    out = []
    for _ in range(4):
        logits = model([(f1, o1), (f2, o2)], dense)
        loss = F.binary_cross_entropy_with_logits(logits, y, pos_weight=torch.tensor(1.5))
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.append((loss.item(), auc(logits.detach(), y).item()))
    return out


def patchtst_revin(torch, ctx):
    """PatchTST: RevIN (per-series mean and std removed, a learnable affine, undone at the
    output), patches by Tensor.unfold after replication padding, a Transformer encoder over
    patches with channel independence (series folded into the batch), a flatten head, MSE
    training and a forecast."""
    nn, F = torch.nn, torch.nn.functional
    L, H, P, S, D = 24, 6, 6, 3, 16

    class RevIN(nn.Module):
        def __init__(self, c, eps=1e-5):
            super().__init__()
            self.eps = eps
            self.w = nn.Parameter(torch.ones(c))
            self.b = nn.Parameter(torch.zeros(c))

        def forward(self, x, mode):
            if mode == "norm":
                self.mean = x.mean(dim=1, keepdim=True).detach()
                self.stdev = torch.sqrt(
                    torch.var(x, dim=1, keepdim=True, unbiased=False) + self.eps
                ).detach()
                return (x - self.mean) / self.stdev * self.w + self.b
            x = (x - self.b) / (self.w + self.eps * self.eps)
            return x * self.stdev + self.mean

    class PatchTST(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.revin = RevIN(c)
            self.n_patches = (L + S - P) // S + 1
            self.proj = nn.Linear(P, D)
            self.pos = nn.Parameter(torch.randn(1, self.n_patches, D) * 0.02)
            layer = nn.TransformerEncoderLayer(
                D, 2, 32, dropout=0.0, batch_first=True, norm_first=True, bias=False
            )
            self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.head = nn.Linear(self.n_patches * D, H)

        def forward(self, x):
            B, _, C = x.shape
            x = self.revin(x, "norm").permute(0, 2, 1)
            x = F.pad(x, (0, S), mode="replicate")
            patches = x.unfold(dimension=-1, size=P, step=S)
            z = self.proj(patches.reshape(B * C, self.n_patches, P)) + self.pos
            z = self.encoder(z)
            y = self.head(z.flatten(1)).reshape(B, C, H).permute(0, 2, 1)
            return self.revin(y, "denorm")

    model = ctx.init(PatchTST(2))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    t = np.arange(L + H, dtype=np.float32)
    rng = np.random.default_rng(32)
    series = np.stack([np.sin(0.4 * t + p) * a + o for p, a, o in rng.uniform(0.5, 2, size=(4, 3))])
    series = np.stack([series, np.cos(0.3 * t[None]) * series], -1).astype(np.float32)
    x, y = ctx.t(series[:, :L]), ctx.t(series[:, L:])

    @ctx.fn
    def step():
        loss = F.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    losses = [step().item() for _ in range(3)]
    model.eval()
    with torch.no_grad():
        pred = model(x)
    return [losses, pred, model.revin.w]


def haar_wavelet(torch, ctx):
    """A two-level 2-D Haar transform as a grouped stride-2 convolution with fixed filters
    (a buffer), its inverse by conv_transpose2d reconstructing the image exactly, soft
    thresholding of the detail bands, and a learned per-band gain trained to denoise."""
    nn, F = torch.nn, torch.nn.functional

    class Haar(nn.Module):
        def __init__(self, c):
            super().__init__()
            ll = torch.tensor([[0.5, 0.5], [0.5, 0.5]])
            lh = torch.tensor([[0.5, 0.5], [-0.5, -0.5]])
            hl = torch.tensor([[0.5, -0.5], [0.5, -0.5]])
            hh = torch.tensor([[0.5, -0.5], [-0.5, 0.5]])
            filt = torch.stack([ll, lh, hl, hh]).unsqueeze(1).repeat(c, 1, 1, 1)
            self.register_buffer("filt", filt)
            self.c = c

        def forward(self, x):
            return F.conv2d(x, self.filt, stride=2, groups=self.c)

        def inverse(self, y):
            return F.conv_transpose2d(y, self.filt, stride=2, groups=self.c)

    class Denoiser(nn.Module):
        def __init__(self):
            super().__init__()
            self.haar = Haar(1)
            self.haar2 = Haar(4)
            self.gain = nn.Parameter(torch.ones(16))
            self.thresh = nn.Parameter(torch.full((16,), 0.1))

        def forward(self, x):
            y = self.haar2(self.haar(x))
            g = self.gain.view(1, -1, 1, 1)
            th = self.thresh.abs().view(1, -1, 1, 1)
            band = torch.arange(16).view(1, -1, 1, 1) % 4 == 0
            shrunk = torch.where(band, y, torch.sign(y) * F.relu(y.abs() - th))
            return self.haar.inverse(self.haar2.inverse(shrunk * g))

    model = Denoiser()
    rng = np.random.default_rng(33)
    xx, yy = np.meshgrid(np.linspace(-1, 1, 8), np.linspace(-1, 1, 8))
    clean = ctx.t(np.stack([np.sign(xx * yy), xx**2 + yy])[:, None].astype(np.float32))
    noisy = clean + 0.2 * ctx.t(rng.normal(size=(2, 1, 8, 8)).astype(np.float32))
    with torch.no_grad():
        recon = model.haar.inverse(model.haar(noisy))
        recon2 = model.haar.inverse(model.haar2.inverse(model.haar2(model.haar(noisy))))
    opt = torch.optim.Adam(model.parameters(), lr=2e-2)
    losses = []
    for _ in range(4):
        loss = F.mse_loss(model(noisy), clean)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return [
        (recon - noisy).abs().max() < 1e-5,
        (recon2 - noisy).abs().max() < 1e-5,
        losses,
        model.thresh,
    ]


def lqr_riccati(torch, ctx):
    """A finite-horizon discrete LQR: the backward Riccati recursion with torch.linalg.solve
    for the gains, a rollout of the closed loop, and gradients of the total cost with respect
    to the dynamics matrices and the cost weights, in float64; checked against gradcheck on a
    smaller horizon."""
    rng = np.random.default_rng(34)
    n, m, T = 3, 2, 6
    A = ctx.t(np.eye(n) + 0.1 * rng.normal(size=(n, n)), requires_grad=True)
    B = ctx.t(0.3 * rng.normal(size=(n, m)), requires_grad=True)
    q = ctx.t(np.array([1.0, 0.5, 2.0]), requires_grad=True)
    r = ctx.t(np.array([0.1, 0.2]), requires_grad=True)
    x0 = ctx.t(np.array([1.0, -1.0, 0.5]))

    def cost(A, B, q, r, T=T):
        Q, R = torch.diag(q), torch.diag(r)
        P = Q
        gains = []
        for _ in range(T):
            K = torch.linalg.solve(R + B.t() @ P @ B, B.t() @ P @ A)
            P = Q + A.t() @ P @ (A - B @ K)
            P = 0.5 * (P + P.t())
            gains.append(K)
        gains = gains[::-1]
        x, total = x0, torch.zeros((), dtype=torch.float64)
        for K in gains:
            u = -K @ x
            total = total + x @ Q @ x + u @ R @ u
            x = A @ x + B @ u
        return total + x @ Q @ x, gains[0]

    total, K0 = cost(A, B, q, r)
    total.backward()
    ok = torch.autograd.gradcheck(
        lambda a, b: cost(a, b, q.detach(), r.detach(), T=3)[0],
        (A.detach().clone().requires_grad_(), B.detach().clone().requires_grad_()),
    )
    return [total, K0, A.grad, B.grad, q.grad, r.grad, ok]


def particle_filter(torch, ctx):
    """A bootstrap particle filter on a nonlinear state-space model: Gaussian proposals from a
    generator, log-weights normalized by logsumexp, the effective sample size, and systematic
    resampling (cumulative weights searched with searchsorted at evenly spaced offsets)."""
    g = torch.Generator().manual_seed(35)
    N, T = 64, 8
    rng = np.random.default_rng(35)
    xs, ys = [0.1], []
    for t in range(T):
        xs.append(
            0.5 * xs[-1]
            + 25 * xs[-1] / (1 + xs[-1] ** 2)
            + 8 * math.cos(1.2 * t)
            + rng.normal() * 1.0
        )
        ys.append(xs[-1] ** 2 / 20 + rng.normal() * 1.0)
    obs = ctx.t(np.array(ys, np.float32))
    particles = torch.randn(N, generator=g) * 2.0
    log_w = torch.full((N,), -math.log(N))
    means, ess_log, loglik = [], [], torch.zeros(())
    for t in range(T):
        particles = (
            0.5 * particles
            + 25 * particles / (1 + particles**2)
            + 8 * math.cos(1.2 * t)
            + torch.randn(N, generator=g)
        )
        log_w = log_w + torch.distributions.Normal(particles**2 / 20, 1.0).log_prob(obs[t])
        lse = torch.logsumexp(log_w, 0)
        loglik = loglik + lse
        log_w = log_w - lse
        w = log_w.exp()
        means.append((w * particles).sum())
        ess = 1.0 / (w**2).sum()
        ess_log.append(ess)
        if ess < N / 2:
            u = (torch.rand(1, generator=g) + torch.arange(N)) / N
            cdf = torch.cumsum(w, 0)
            cdf[-1] = 1.0
            idx = torch.searchsorted(cdf, u).clamp(max=N - 1)
            particles = particles[idx]
            log_w = torch.full((N,), -math.log(N))
    return [torch.stack(means), torch.stack(ess_log), loglik]


def spectral_clustering(torch, ctx):
    """Spectral clustering of two rings: an RBF affinity by cdist, the symmetric normalized
    Laplacian, its smallest eigenvectors by eigh (rows normalized), then k-means with a fixed
    initialization; cluster sizes, eigenvalues and the assignments' agreement with the rings."""
    rng = np.random.default_rng(36)
    n = 40
    ang = rng.uniform(0, 2 * np.pi, size=n)
    rad = np.where(np.arange(n) < n // 2, 1.0, 3.0) + 0.1 * rng.normal(size=n)
    X = ctx.t(np.stack([rad * np.cos(ang), rad * np.sin(ang)], 1))
    truth = torch.tensor((np.arange(n) >= n // 2).astype(np.int64))
    W = torch.exp(-torch.cdist(X, X).pow(2) / (2 * 0.5**2))
    W.fill_diagonal_(0)
    d = W.sum(1)
    Dinv = torch.diag(d.rsqrt())
    Lsym = torch.eye(n, dtype=X.dtype) - Dinv @ W @ Dinv
    evals, evecs = torch.linalg.eigh(Lsym)
    U = evecs[:, :2]
    U = U / U.norm(dim=1, keepdim=True)
    centers = U[[0, n - 1]].clone()
    for _ in range(10):
        assign = torch.cdist(U, centers).argmin(1)
        centers = torch.stack([U[assign == k].mean(0) for k in range(2)])
    agree = max((assign == truth).float().mean().item(), (assign != truth).float().mean().item())
    return [evals[:4], torch.bincount(assign, minlength=2).sort().values, agree]


PROGRAMS = [
    vit_layer_decay,
    dcn_v2_auc,
    patchtst_revin,
    haar_wavelet,
    lqr_riccati,
    particle_filter,
    spectral_clustering,
]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


# the programs that mark steps for ember.function (the others run as in test_eager)
CAPTURED = [p for p in PROGRAMS if "@ctx.fn" in inspect.getsource(p)]


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
