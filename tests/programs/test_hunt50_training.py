"""Programs of hunt50 (training), each run on PyTorch and on ember (eagerly, and captured where
they mark steps): MultiheadAttention with bool and float masks, kdim/vdim and a norm-first
encoder; the autograd.grad API (allow_unused, materialize_grads, create_graph, jacobian,
hessian); a ViT whose position table is resized by bicubic interpolation; label smoothing with
class weights and ignore_index, focal and dice losses; a mixture of Normals fitted by maximum
likelihood with transformed distributions; weight_norm and a custom parametrization removed
after training; custom autograd Functions with setup_context checked by gradcheck; weighted
sampling, random_split and padding collate; EmbeddingBag with SparseAdam; a neural cellular
automaton; prioritized replay; an HMM's forward algorithm and Viterbi path; AveragedModel with
EMA and update_bn; the heat equation and a PINN residual.
"""

import inspect
import math

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007, E501, E731, F841, B023, E702, E701, C408, SIM118


def mha_variants(torch, ctx):
    """nn.MultiheadAttention: seq-first and batch-first, bool and float masks, key padding,
    per-head weights, kdim/vdim; a TransformerEncoder with a final norm."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(0)
    mha = ctx.init(nn.MultiheadAttention(8, 2, dropout=0.0), "mha")
    cross = ctx.init(nn.MultiheadAttention(8, 2, kdim=5, vdim=6, batch_first=True), "cross")
    enc = ctx.init(
        nn.TransformerEncoder(
            nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation="gelu", norm_first=True),
            2,
            norm=nn.LayerNorm(8),
            enable_nested_tensor=False,
        ),
        "enc",
    )
    q = ctx.t(rng.normal(size=(4, 3, 8)).astype(np.float32))  # L, N, E
    kv_k = ctx.t(rng.normal(size=(3, 6, 5)).astype(np.float32))
    kv_v = ctx.t(rng.normal(size=(3, 6, 6)).astype(np.float32))
    causal = torch.triu(torch.ones(4, 4, dtype=torch.bool), diagonal=1)
    pad = ctx.t(np.array([[False, False, False, True], [False, False, True, True], [False] * 4]))
    out1, w1 = mha(q, q, q, attn_mask=causal, key_padding_mask=pad)
    out2, w2 = mha(
        q, q, q, attn_mask=causal.float() * -1e9, need_weights=True, average_attn_weights=False
    )
    out3, _ = cross(
        q.transpose(0, 1), kv_k, kv_v, key_padding_mask=ctx.t(np.array([[False] * 5 + [True]] * 3))
    )
    mask = nn.Transformer.generate_square_subsequent_mask(4)
    out4 = enc(q, mask=mask, src_key_padding_mask=pad, is_causal=False)
    loss = out1.pow(2).mean() + out2.abs().mean() + out3.sum() * 1e-2 + out4.std()
    loss.backward()
    return [
        out1,
        w1,
        w2.shape,
        w2,
        out3,
        out4,
        mask,
        mha.in_proj_weight.grad,
        cross.k_proj_weight.grad,
        enc.layers[0].linear1.weight.grad,
    ]


def autograd_grad_api(torch, ctx):
    """autograd.grad with allow_unused/materialize_grads, retain_grad, create_graph,
    higher-order gradients, grad of a non-scalar with grad_outputs, and jacobian/hessian."""
    x = ctx.t(np.array([0.5, -1.0, 2.0], np.float32), requires_grad=True)
    w = ctx.t(np.array([[1.0, 2.0, 0.5], [0.0, -1.0, 1.0]], np.float32), requires_grad=True)
    unused = torch.zeros(2, requires_grad=True)
    h = torch.tanh(w @ x)
    h.retain_grad()
    y = (h**2).sum() + (x**3).sum()
    gx, gw, gu = torch.autograd.grad(y, [x, w, unused], create_graph=True, allow_unused=True)
    gu2 = torch.autograd.grad(
        y, [unused], allow_unused=True, materialize_grads=True, retain_graph=True
    )[0]
    hvp = torch.autograd.grad(gx, x, grad_outputs=torch.ones(3), retain_graph=True)[0]
    (gx.norm() ** 2).backward(retain_graph=True)
    v = torch.autograd.grad(h, w, grad_outputs=torch.tensor([1.0, -2.0]), retain_graph=True)[0]
    y.backward()
    J = torch.autograd.functional.jacobian(lambda t: torch.sin(t) * t.sum(), x.detach())
    H = torch.autograd.functional.hessian(lambda t: (t**3).sum() + t.prod(), x.detach())
    _, vjp = torch.autograd.functional.vjp(lambda t: t.exp(), x.detach(), torch.ones(3))
    return [gx, gw, gu is None, gu2, hvp, x.grad, w.grad, h.grad, v, J, H, vjp]


def vit_pos_interp(torch, ctx):
    """A ViT patch embedding whose learned position table is resized by bicubic interpolation
    for a larger image; cls token, patch conv, unfold patches."""
    nn, F = torch.nn, torch.nn.functional

    class ViT(nn.Module):
        def __init__(self, img=8, p=4, dim=12):
            super().__init__()
            self.p = p
            self.patch = nn.Conv2d(3, dim, p, p)
            self.cls = nn.Parameter(torch.zeros(1, 1, dim))
            self.pos = nn.Parameter(torch.randn(1, 1 + (img // p) ** 2, dim) * 0.02)
            self.block = nn.TransformerEncoderLayer(dim, 3, 24, dropout=0.0, batch_first=True)
            self.head = nn.Linear(dim, 4)

        def interp_pos(self, n):
            cls_pos, grid = self.pos[:, :1], self.pos[:, 1:]
            g0 = int(math.sqrt(grid.shape[1]))
            g = int(math.sqrt(n))
            grid = grid.reshape(1, g0, g0, -1).permute(0, 3, 1, 2)
            grid = F.interpolate(grid, size=(g, g), mode="bicubic", align_corners=False)
            return torch.cat([cls_pos, grid.permute(0, 2, 3, 1).flatten(1, 2)], dim=1)

        def forward(self, x):
            t = self.patch(x).flatten(2).transpose(1, 2)
            t = torch.cat([self.cls.expand(t.shape[0], -1, -1), t], dim=1)
            t = t + self.interp_pos(t.shape[1] - 1)
            return self.head(self.block(t)[:, 0])

    m = ctx.init(ViT())
    rng = np.random.default_rng(1)
    x8 = ctx.t(rng.normal(size=(2, 3, 8, 8)).astype(np.float32))
    x12 = ctx.t(rng.normal(size=(2, 3, 12, 12)).astype(np.float32))
    patches = F.unfold(x8, 4, stride=4).transpose(1, 2)
    out8, out12 = m(x8), m(x12)
    (out8.sum() + out12.pow(2).sum()).backward()
    return [patches, out8, out12, m.pos.grad, m.cls.grad]


def masked_losses(torch, ctx):
    """Label smoothing with class weights and ignore_index, per-token losses masked and
    averaged, focal loss, dice loss with one_hot permuted to NCHW."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2)
    logits = ctx.t(rng.normal(size=(2, 5, 4)).astype(np.float32), requires_grad=True)  # B, T, C
    tgt = ctx.t(np.array([[0, 3, -100, 1, 2], [2, 2, 1, -100, -100]]))
    weight = ctx.t(np.array([1.0, 2.0, 0.5, 1.5], np.float32))
    ce = nn.CrossEntropyLoss(weight=weight, ignore_index=-100, label_smoothing=0.1)
    l1 = ce(logits.transpose(1, 2), tgt)
    per_tok = F.cross_entropy(logits.reshape(-1, 4), tgt.reshape(-1), reduction="none")
    mask = (tgt != -100).reshape(-1).float()
    l2 = (per_tok * mask).sum() / mask.sum()
    # focal loss on binary logits
    blog = ctx.t(rng.normal(size=(6,)).astype(np.float32), requires_grad=True)
    by = ctx.t((rng.random(6) < 0.5).astype(np.float32))
    p = torch.sigmoid(blog)
    ce_b = F.binary_cross_entropy_with_logits(blog, by, reduction="none")
    p_t = p * by + (1 - p) * (1 - by)
    focal = (0.25 * by + 0.75 * (1 - by)) * (1 - p_t) ** 2 * ce_b
    # dice on segmentation
    seg = ctx.t(rng.normal(size=(2, 3, 4, 4)).astype(np.float32), requires_grad=True)
    lab = ctx.t(rng.integers(0, 3, (2, 4, 4)))
    oh = F.one_hot(lab, 3).permute(0, 3, 1, 2).float()
    probs = seg.softmax(1)
    inter = (probs * oh).sum((2, 3))
    dice = 1 - (2 * inter + 1) / (probs.sum((2, 3)) + oh.sum((2, 3)) + 1)
    total = l1 + l2 + focal.mean() + dice.mean()
    total.backward()
    return [l1, l2, focal, dice, logits.grad, blog.grad, seg.grad]


def distributions_mixture(torch, ctx):
    """MixtureSameFamily of Independent Normals fitted by maximum likelihood, a
    TransformedDistribution (logistic via Sigmoid+Affine), KL between Normals, entropy."""
    nn = torch.nn
    D = torch.distributions
    T = torch.distributions.transforms
    rng = np.random.default_rng(3)
    data = ctx.t(
        np.concatenate([rng.normal(-2, 0.5, (20, 2)), rng.normal(1.5, 0.8, (20, 2))]).astype(
            np.float32
        )
    )
    logits = nn.Parameter(torch.zeros(2))
    means = nn.Parameter(ctx.t(np.array([[-1.0, -1.0], [1.0, 1.0]], np.float32)))
    log_std = nn.Parameter(torch.zeros(2, 2))
    opt = torch.optim.Adam([logits, means, log_std], lr=0.05)
    nll = []
    for _ in range(5):
        mix = D.MixtureSameFamily(
            D.Categorical(logits=logits), D.Independent(D.Normal(means, log_std.exp()), 1)
        )
        loss = -mix.log_prob(data).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        nll.append(loss.item())
    base = D.Uniform(torch.tensor(0.0), torch.tensor(1.0))
    logistic = D.TransformedDistribution(
        base, [T.SigmoidTransform().inv, T.AffineTransform(loc=1.0, scale=2.0)]
    )
    pts = ctx.t(np.array([-1.0, 0.5, 3.0], np.float32))
    p, q = D.Normal(means, log_std.exp()), D.Normal(torch.zeros(2, 2), torch.ones(2, 2))
    kl = D.kl_divergence(p, q).sum()
    return [
        nll,
        logistic.log_prob(pts),
        kl,
        mix.mean,
        mix.variance,
        p.entropy(),
        mix.component_distribution.batch_shape,
        mix.event_shape,
    ]


def parametrizations(torch, ctx):
    """weight_norm and spectral_norm parametrizations, orthogonal, a custom parametrization
    (symmetric), cached, removed keeping the value."""
    nn, F = torch.nn, torch.nn.functional
    P = torch.nn.utils.parametrize

    class Symmetric(nn.Module):
        def forward(self, X):
            return X.triu() + X.triu(1).transpose(-1, -2)

    lin = ctx.init(nn.Linear(4, 4), "lin")
    wn = ctx.init(nn.Linear(4, 3), "wn")
    nn.utils.parametrizations.weight_norm(wn)
    P.register_parametrization(lin, "weight", Symmetric())
    x = ctx.t(np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4))
    opt = torch.optim.SGD(list(lin.parameters()) + list(wn.parameters()), lr=0.1)
    out = []

    @ctx.fn
    def step():
        y = wn(lin(x))
        loss = y.pow(2).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    for _ in range(3):
        out.append(step())
    sym = lin.weight
    with P.cached():
        a = lin(x)
        b = lin(x)
    names = sorted(n for n, _ in lin.named_parameters())
    P.remove_parametrizations(lin, "weight", leave_parametrized=True)
    return [
        out,
        (sym - sym.t()).abs().max(),
        a,
        b,
        names,
        sorted(n for n, _ in lin.named_parameters()),
        lin.weight,
        wn.parametrizations.weight.original0,
        P.is_parametrized(wn),
    ]


def custom_function_ctx(torch, ctx):
    """autograd.Function with setup_context, mark_non_differentiable, needs_input_grad,
    once_differentiable, set_materialize_grads, checked by gradcheck in float64."""

    class SortWithIdx(torch.autograd.Function):
        @staticmethod
        def forward(x):
            vals, idx = x.sort(dim=-1)
            return vals, idx

        @staticmethod
        def setup_context(ctx_, inputs, output):
            vals, idx = output
            ctx_.mark_non_differentiable(idx)
            ctx_.save_for_backward(idx)

        @staticmethod
        def backward(ctx_, g_vals, g_idx):
            (idx,) = ctx_.saved_tensors
            return torch.zeros_like(g_vals).scatter(-1, idx, g_vals)

    class ScaledSoftplus(torch.autograd.Function):
        @staticmethod
        def forward(ctx_, x, beta):
            ctx_.save_for_backward(x, beta)
            return torch.nn.functional.softplus(x * beta) / beta

        @staticmethod
        def backward(ctx_, g):
            x, beta = ctx_.saved_tensors
            s = torch.sigmoid(x * beta)
            gx = g * s if ctx_.needs_input_grad[0] else None
            gb = None
            if ctx_.needs_input_grad[1]:
                sp = torch.nn.functional.softplus(x * beta)
                gb = (g * (x * s / beta - sp / beta**2)).sum().reshape(beta.shape)
            return gx, gb

    rng = np.random.default_rng(4)
    x = ctx.t(rng.normal(size=(3, 4)), requires_grad=True)  # float64
    beta = ctx.t(np.array([1.5]), requires_grad=True)
    vals, idx = SortWithIdx.apply(x)
    y = ScaledSoftplus.apply(vals, beta)
    (y * torch.arange(4.0, dtype=torch.float64)).sum().backward()
    ok1 = torch.autograd.gradcheck(
        lambda t: SortWithIdx.apply(t)[0], (x.detach().requires_grad_(),)
    )
    ok2 = torch.autograd.gradcheck(
        ScaledSoftplus.apply, (x.detach().requires_grad_(), beta.detach().requires_grad_())
    )
    return [vals, idx, idx.requires_grad, y, x.grad, beta.grad, ok1, ok2, type(y.grad_fn).__name__]


def weighted_sampling_data(torch, ctx):
    """TensorDataset, random_split with a generator, WeightedRandomSampler, BatchSampler,
    a collate_fn padding sequences, drop_last, and a Subset."""
    U = torch.utils.data
    BatchSampler, DataLoader, RandomSampler, Subset = (
        U.BatchSampler,
        U.DataLoader,
        U.RandomSampler,
        U.Subset,
    )
    TensorDataset, WeightedRandomSampler, random_split = (
        U.TensorDataset,
        U.WeightedRandomSampler,
        U.random_split,
    )
    rng = np.random.default_rng(5)
    X = ctx.t(rng.normal(size=(20, 3)).astype(np.float32))
    y = ctx.t(rng.integers(0, 2, 20))
    ds = TensorDataset(X, y)
    g = torch.Generator().manual_seed(0)
    train, val = random_split(ds, [0.75, 0.25], generator=g)
    counts = torch.bincount(y)
    weights = (1.0 / counts.float())[y]
    sampler = WeightedRandomSampler(
        weights, num_samples=12, replacement=True, generator=torch.Generator().manual_seed(1)
    )
    dl = DataLoader(ds, batch_size=4, sampler=sampler)
    batches = [(bx.sum().item(), by.tolist()) for bx, by in dl]
    bs = list(
        BatchSampler(
            RandomSampler(range(10), generator=torch.Generator().manual_seed(2)), 3, drop_last=True
        )
    )
    seqs = [torch.arange(n, dtype=torch.float32) for n in (3, 1, 4, 2)]

    def collate(batch):
        lens = torch.tensor([len(s) for s in batch])
        return torch.nn.utils.rnn.pad_sequence(batch, batch_first=True, padding_value=-1.0), lens

    dl2 = DataLoader(seqs, batch_size=3, collate_fn=collate, drop_last=False)
    padded = [(p, l) for p, l in dl2]
    sub = Subset(ds, [1, 3, 5])
    return [sorted(train.indices), sorted(val.indices), batches, bs, padded, len(sub), sub[1][1]]


def sparse_embbag(torch, ctx):
    """EmbeddingBag with offsets and per_sample_weights, Embedding(sparse=True) trained with
    SparseAdam alongside Adam for the dense part."""
    nn, F = torch.nn, torch.nn.functional

    class Rec(nn.Module):
        def __init__(self):
            super().__init__()
            self.items = nn.Embedding(20, 4, sparse=True)
            self.bag = nn.EmbeddingBag(15, 4, mode="sum")
            self.out = nn.Linear(8, 1)

        def forward(self, item, tokens, offsets, psw):
            return self.out(
                torch.cat([self.items(item), self.bag(tokens, offsets, per_sample_weights=psw)], 1)
            ).squeeze(1)

    m = ctx.init(Rec())
    sparse_params = list(m.items.parameters())
    dense_params = [p for n, p in m.named_parameters() if not n.startswith("items")]
    opt_s = torch.optim.SparseAdam(sparse_params, lr=0.05)
    opt_d = torch.optim.Adam(dense_params, lr=0.05)
    item = ctx.t(np.array([1, 5, 5, 19]))
    tokens = ctx.t(np.array([0, 3, 3, 7, 14, 2, 9, 1]))
    offsets = ctx.t(np.array([0, 2, 3, 6]))
    psw = ctx.t(np.linspace(0.5, 1.5, 8, dtype=np.float32))
    target = ctx.t(np.array([1.0, 0.0, 1.0, 0.0], np.float32))
    losses = []

    @ctx.fn
    def step():
        loss = F.binary_cross_entropy_with_logits(m(item, tokens, offsets, psw), target)
        opt_s.zero_grad()
        opt_d.zero_grad()
        loss.backward()
        opt_s.step()
        opt_d.step()
        return loss.item()

    for _ in range(3):
        losses.append(step())
    # (eagerly: a captured step's gradients are dense)
    opt_s.zero_grad()
    F.binary_cross_entropy_with_logits(m(item, tokens, offsets, psw), target).backward()
    grad_sparse = m.items.weight.grad.is_sparse
    return [losses, grad_sparse, m.items.weight, m.bag.weight]


def neural_ca(torch, ctx):
    """A neural cellular automaton: fixed Sobel perception by grouped conv2d, a 1x1 update
    net, a stochastic update mask, alive masking by max_pool2d."""
    nn, F = torch.nn, torch.nn.functional
    C = 4
    sobel = ctx.t(np.array([[-1, 0, 1], [-2, 0, 2], [-1, 0, 1]], np.float32) / 8)
    ident = ctx.t(np.array([[0, 0, 0], [0, 1, 0], [0, 0, 0]], np.float32))
    kernels = torch.stack([ident, sobel, sobel.T])  # 3, 3, 3
    kernels = kernels.repeat(C, 1, 1)[:, None]  # 3C, 1, 3, 3
    update = ctx.init(
        nn.Sequential(nn.Conv2d(3 * C, 16, 1), nn.ReLU(), nn.Conv2d(16, C, 1, bias=False))
    )
    with torch.no_grad():
        update[2].weight.mul_(0.1)
    opt = torch.optim.Adam(update.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(3)
    seed = torch.zeros(1, C, 8, 8)
    seed[:, 3:, 4, 4] = 1.0
    target = ctx.t(np.random.default_rng(6).random((1, 3, 8, 8)).astype(np.float32))

    def alive(x):
        return F.max_pool2d(x[:, 3:4], 3, stride=1, padding=1) > 0.1

    losses = []
    for _ in range(2):
        x = seed.clone()
        for _ in range(4):
            pre = alive(x)
            y = F.conv2d(F.pad(x, (1, 1, 1, 1), mode="circular"), kernels, groups=C)
            dx = update(y)
            mask = (torch.rand(1, 1, 8, 8, generator=g) < 0.5).float()
            x = x + dx * mask
            x = x * (pre & alive(x)).float()
        loss = F.mse_loss(x[:, :3], target)
        opt.zero_grad()
        loss.backward()
        for p in update.parameters():
            p.grad /= p.grad.norm() + 1e-8
        opt.step()
        losses.append(loss.item())
    return [losses, x.detach()]


def prioritized_replay(torch, ctx):
    """Prioritized replay: multinomial draws on priorities^alpha, importance weights,
    priorities updated by index_put_ with TD errors."""
    nn, F = torch.nn, torch.nn.functional
    q = ctx.init(nn.Linear(3, 2))
    opt = torch.optim.SGD(q.parameters(), lr=0.1)
    rng = np.random.default_rng(7)
    N = 12
    S = ctx.t(rng.normal(size=(N, 3)).astype(np.float32))
    A = ctx.t(rng.integers(0, 2, N))
    R = ctx.t(rng.normal(size=N).astype(np.float32))
    prio = torch.ones(N)
    g = torch.Generator().manual_seed(4)
    log = []

    @ctx.fn
    def step():
        p = prio**0.6
        p = p / p.sum()
        idx = torch.multinomial(p, 4, replacement=False, generator=g)
        w = (N * p[idx]) ** -0.4
        w = w / w.max()
        qa = q(S[idx]).gather(1, A[idx, None]).squeeze(1)
        td = R[idx] - qa
        loss = (w * F.huber_loss(qa, R[idx], reduction="none", delta=1.0)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        prio.index_put_((idx,), td.detach().abs() + 1e-3)
        return [idx.tolist(), loss.item()]

    for _ in range(3):
        log.append(step())
    return [log, prio, q.weight]


def hmm_forward_viterbi(torch, ctx):
    """An HMM's forward algorithm in log space with logsumexp and learnable parameters, and
    Viterbi decoding with max/argmax and a gather backtrack."""
    nn = torch.nn
    K, T = 3, 6
    rng = np.random.default_rng(8)
    obs_logits = ctx.t(rng.normal(size=(T, K)).astype(np.float32))
    trans = nn.Parameter(ctx.t(rng.normal(size=(K, K)).astype(np.float32)))
    init = nn.Parameter(torch.zeros(K))
    log_A = trans.log_softmax(dim=1)
    log_pi = init.log_softmax(0)
    emis = obs_logits.log_softmax(1)
    alpha = log_pi + emis[0]
    for t in range(1, T):
        alpha = torch.logsumexp(alpha.unsqueeze(1) + log_A, dim=0) + emis[t]
    loglik = torch.logsumexp(alpha, 0)
    (-loglik).backward()
    with torch.no_grad():
        delta = log_pi + emis[0]
        back = []
        for t in range(1, T):
            scores = delta.unsqueeze(1) + log_A
            best, arg = scores.max(dim=0)
            back.append(arg)
            delta = best + emis[t]
        path = [int(delta.argmax())]
        for arg in reversed(back):
            path.append(int(arg[path[-1]]))
        path.reverse()
        bp = torch.stack(back)
    return [loglik, trans.grad, init.grad, path, bp]


def averaged_model(torch, ctx):
    """swa_utils.AveragedModel with an EMA avg_fn (get_ema_multi_avg_fn), SWALR, update_bn on
    a BatchNorm net."""
    nn, F = torch.nn, torch.nn.functional
    swa = torch.optim.swa_utils
    net = ctx.init(nn.Sequential(nn.Linear(3, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 1)))
    ema = swa.AveragedModel(net, multi_avg_fn=swa.get_ema_multi_avg_fn(0.9))
    avg = swa.AveragedModel(net)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    sched = swa.SWALR(opt, swa_lr=0.05, anneal_epochs=2, anneal_strategy="cos")
    rng = np.random.default_rng(9)
    X = ctx.t(rng.normal(size=(16, 3)).astype(np.float32))
    Y = ctx.t(rng.normal(size=(16, 1)).astype(np.float32))
    lrs = []
    for _ in range(4):
        loss = F.mse_loss(net(X), Y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        ema.update_parameters(net)
        avg.update_parameters(net)
        sched.step()
        lrs.append(opt.param_groups[0]["lr"])
    loader = [(X[:8],), (X[8:],)]
    swa.update_bn(loader, avg)
    avg.eval()
    return [
        lrs,
        ema.module[0].weight,
        avg.module[0].weight,
        avg.module[1].running_mean,
        avg.module[1].running_var,
        avg.n_averaged,
        avg(X),
    ]


def heat_pde(torch, ctx):
    """The heat equation stepped by finite differences with roll and conv1d, and a PINN
    residual by autograd.grad with create_graph."""
    nn, F = torch.nn, torch.nn.functional
    u = torch.exp(-(torch.linspace(-2, 2, 16) ** 2))
    lap = torch.tensor([[[1.0, -2.0, 1.0]]])
    u1, u2 = u.clone(), u.clone()
    for _ in range(5):
        u1 = u1 + 0.1 * (torch.roll(u1, 1) - 2 * u1 + torch.roll(u1, -1))
        u2 = u2 + 0.1 * F.conv1d(F.pad(u2[None, None], (1, 1), mode="circular"), lap)[0, 0]
    net = ctx.init(nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 1)))
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    rng = np.random.default_rng(10)
    pts = ctx.t(rng.random((20, 2)).astype(np.float32))
    losses = []

    @ctx.fn
    def step():
        xt = pts.clone().requires_grad_(True)
        out = net(xt)
        g = torch.autograd.grad(out.sum(), xt, create_graph=True)[0]
        u_x, u_t = g[:, 0], g[:, 1]
        u_xx = torch.autograd.grad(u_x.sum(), xt, create_graph=True)[0][:, 0]
        res = u_t - 0.1 * u_xx
        loss = res.pow(2).mean() + (net(torch.zeros(1, 2)) - 1).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    for _ in range(3):
        losses.append(step())
    return [u1, u2, losses]


def ntk_tutorial(torch, ctx):
    """torch.func's neural tangent kernel tutorial: the Jacobian contraction by vmap(jacrev)
    over a dict of parameters, and NTK-vector products by vjp and jvp of pytree primals under
    nested vmaps; per-sample gradients and a Hessian over parameter dicts."""
    nn, F = torch.nn, torch.nn.functional
    fn = torch.func

    class CNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 4, 3)
            self.fc = nn.Linear(4 * 4 * 4, 3)

        def forward(self, x):
            return self.fc(self.conv1(x).relu().flatten(1))

    net = ctx.init(CNN())
    rng = np.random.default_rng(11)
    x_train = ctx.t(rng.normal(size=(3, 3, 6, 6)).astype(np.float32))
    x_test = ctx.t(rng.normal(size=(2, 3, 6, 6)).astype(np.float32))
    params = {k: v.detach() for k, v in net.named_parameters()}

    def fnet_single(params, x):
        return fn.functional_call(net, params, (x.unsqueeze(0),)).squeeze(0)

    def ntk_jacobian(x1, x2):
        jac1 = fn.vmap(fn.jacrev(fnet_single), (None, 0))(params, x1)
        jac2 = fn.vmap(fn.jacrev(fnet_single), (None, 0))(params, x2)
        jac1 = [j.flatten(2) for j in jac1.values()]
        jac2 = [j.flatten(2) for j in jac2.values()]
        return torch.stack([torch.einsum("Naf,Mbf->NMab", a, b) for a, b in zip(jac1, jac2)]).sum(0)

    def ntk_vps(x1, x2):
        def get_ntk(x1, x2):
            output, vjp_fn = fn.vjp(lambda p: fnet_single(p, x1), params)

            def get_ntk_slice(vec):
                (vjps,) = vjp_fn(vec)
                _, jvps = fn.jvp(lambda p: fnet_single(p, x2), (params,), (vjps,))
                return jvps

            basis = torch.eye(output.numel(), dtype=output.dtype).view(output.numel(), -1)
            return fn.vmap(get_ntk_slice)(basis)

        return fn.vmap(fn.vmap(get_ntk, (None, 0)), (0, None))(x1, x2)

    def compute_loss(p, sample, target):
        out = fn.functional_call(net, p, (sample.unsqueeze(0),))
        return F.cross_entropy(out, target.unsqueeze(0))

    per_sample = fn.vmap(fn.grad(compute_loss), in_dims=(None, 0, 0))(
        params, x_train, torch.tensor([0, 1, 2])
    )
    hess = fn.hessian(lambda p: compute_loss(p, x_train[0], torch.tensor(1)))(params)
    return [
        ntk_jacobian(x_train, x_test),
        ntk_vps(x_train, x_test),
        per_sample,
        hess["fc.bias"]["fc.bias"],
        hess["fc.weight"]["fc.bias"].shape,
    ]


PROGRAMS = [
    mha_variants,
    autograd_grad_api,
    vit_pos_interp,
    masked_losses,
    distributions_mixture,
    parametrizations,
    custom_function_ctx,
    weighted_sampling_data,
    sparse_embbag,
    neural_ca,
    prioritized_replay,
    hmm_forward_viterbi,
    averaged_model,
    heat_pde,
    ntk_tutorial,
]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


# the programs that mark steps for ember.function (the others run as in test_eager)
CAPTURED = [p for p in PROGRAMS if "@ctx.fn" in inspect.getsource(p)]


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
