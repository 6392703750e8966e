"""Training recipes of hunt57, each run on PyTorch and on ember (eagerly, and the marked ones
with their steps under ``ember.function``): skip-gram with sparse embedding gradients and
SparseAdam, an EMA of the weights by swa_utils, second-order MAML through functional_call,
per-sample convolutions by the groups trick, cross-attention with other key/value widths,
a VQ-VAE's straight-through codebook with EMA updates, a linear-chain CRF,
checkpoint_sequential, and epochs over persistent DataLoader workers.
"""

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007, E501, E731, F841, B023, C408, B006, E702, E701, E401, C416, UP031, B905, PIE810, SIM108, RUF005


def skipgram_sparse(torch, ctx):
    """Word2vec's skip-gram with negative sampling: two nn.Embedding(sparse=True) tables,
    their sparse gradients (coalesced, to_dense) stepped by SparseAdam, and a dense
    embedding_bag head stepped by Adagrad."""
    nn, F = torch.nn, torch.nn.functional
    V, D = 12, 4
    inp = ctx.init(nn.Embedding(V, D, sparse=True), "inp")
    out = ctx.init(nn.Embedding(V, D, sparse=True), "out")
    opt = torch.optim.SparseAdam(list(inp.parameters()) + list(out.parameters()), lr=0.05)
    rng = np.random.default_rng(0)
    losses = []
    grads = []
    for step in range(3):
        center = ctx.t(rng.integers(0, V, 6))
        ctxw = ctx.t(rng.integers(0, V, 6))
        neg = ctx.t(rng.integers(0, V, (6, 3)))
        c = inp(center)
        pos = (c * out(ctxw)).sum(-1)
        negs = torch.bmm(out(neg), c.unsqueeze(-1)).squeeze(-1)
        loss = -(F.logsigmoid(pos) + F.logsigmoid(-negs).sum(-1)).mean()
        opt.zero_grad()
        loss.backward()
        g = inp.weight.grad
        grads.append([g.is_sparse, g.coalesce().to_dense()])
        opt.step()
        losses.append(loss.detach())
    state = opt.state[inp.weight]
    return [losses, grads, inp.weight, out.weight, state["exp_avg"], int(state["step"])]


def ema_swa(torch, ctx):
    """torch.optim.swa_utils: AveragedModel with get_ema_multi_avg_fn over a model with
    BatchNorm (use_buffers=True), SWALR annealing, and update_bn over a DataLoader."""
    nn = torch.nn
    swa = torch.optim.swa_utils
    model = ctx.init(
        nn.Sequential(nn.Linear(3, 5), nn.BatchNorm1d(5), nn.ReLU(), nn.Linear(5, 1)), "m"
    )
    ema = swa.AveragedModel(model, multi_avg_fn=swa.get_ema_multi_avg_fn(0.8), use_buffers=True)
    avg = swa.AveragedModel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = swa.SWALR(opt, swa_lr=0.02, anneal_epochs=3, anneal_strategy="cos")
    rng = np.random.default_rng(1)
    X = ctx.t(rng.standard_normal((16, 3)).astype(np.float32))
    Y = ctx.t(rng.standard_normal((16, 1)).astype(np.float32))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, Y), batch_size=4)
    lrs = []
    for epoch in range(3):
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            ema.update_parameters(model)
        avg.update_parameters(model)
        sched.step()
        lrs.append(opt.param_groups[0]["lr"])
    swa.update_bn(((x,) for x, _ in loader), avg)
    return [
        lrs,
        list(ema.module.parameters()),
        ema.module[1].running_mean,
        list(avg.module.parameters()),
        avg.module[1].running_mean,
        avg.module[1].running_var,
        avg.n_averaged,
        ema(X[:2]),
        sorted(avg.state_dict().keys()),
    ]


def maml_second_order(torch, ctx):
    """MAML: an inner loop of two SGD steps on a task's support set through
    torch.func.functional_call with create_graph=True, the query loss's gradient flowing
    through the inner updates (second order) into the meta-parameters, stepped by Adam."""
    nn = torch.nn
    net = ctx.init(nn.Sequential(nn.Linear(1, 8), nn.Tanh(), nn.Linear(8, 1)), "net")
    meta_opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    rng = np.random.default_rng(2)
    losses = []
    for it in range(2):
        meta_opt.zero_grad()
        total = 0
        for task in range(2):
            amp, phase = rng.uniform(0.5, 2), rng.uniform(0, 3)
            xs = ctx.t(rng.uniform(-3, 3, (5, 1)).astype(np.float32))
            xq = ctx.t(rng.uniform(-3, 3, (5, 1)).astype(np.float32))
            ys, yq = amp * torch.sin(xs + phase), amp * torch.sin(xq + phase)
            params = dict(net.named_parameters())
            for _ in range(2):
                pred = torch.func.functional_call(net, params, (xs,))
                l = nn.functional.mse_loss(pred, ys)
                grads = torch.autograd.grad(l, list(params.values()), create_graph=True)
                params = {k: v - 0.1 * g for (k, v), g in zip(params.items(), grads)}
            q = nn.functional.mse_loss(torch.func.functional_call(net, params, (xq,)), yq)
            q.backward()
            total += q.item()
        meta_opt.step()
        losses.append(total)
    return [losses, list(net.parameters())]


def per_sample_conv(torch, ctx):
    """A hypernetwork making a conv kernel per sample, applied to the whole batch at once by
    folding the batch into channels with groups=batch, against a loop of F.conv2d; F.linear
    with per-sample weights through bmm; gradients into the hypernetwork."""
    nn, F = torch.nn, torch.nn.functional
    hyper = ctx.init(nn.Linear(2, 3 * 2 * 3 * 3), "hyper")
    rng = np.random.default_rng(3)
    B = 3
    z = ctx.t(rng.standard_normal((B, 2)).astype(np.float32))
    x = ctx.t(rng.standard_normal((B, 2, 6, 5)).astype(np.float32), requires_grad=True)
    w = hyper(z).view(B, 3, 2, 3, 3)
    grouped = F.conv2d(x.reshape(1, B * 2, 6, 5), w.reshape(B * 3, 2, 3, 3), padding=1, groups=B)
    grouped = grouped.view(B, 3, 6, 5)
    looped = torch.cat([F.conv2d(x[i : i + 1], w[i], padding=1) for i in range(B)])
    wl = hyper(z)[:, :8].view(B, 4, 2)
    lin = torch.bmm(x.flatten(2)[:, :, :3].transpose(1, 2), wl.transpose(1, 2))
    (grouped.pow(2).mean() + lin.abs().mean()).backward()
    return [grouped, looped, lin, hyper.weight.grad, x.grad]


def cross_attention_kdim(torch, ctx):
    """Perceiver-style cross-attention: nn.MultiheadAttention with kdim/vdim other than
    embed_dim (separate projection weights), per-head weights (average_attn_weights=False),
    a key padding mask, batch_first; latents trained a step by SGD."""
    nn = torch.nn
    mha = ctx.init(nn.MultiheadAttention(8, 2, kdim=5, vdim=3, batch_first=True), "mha")
    latents = nn.Parameter(torch.linspace(-1, 1, 4 * 8).reshape(4, 8))
    opt = torch.optim.SGD(list(mha.parameters()) + [latents], lr=0.1)
    rng = np.random.default_rng(4)
    k = ctx.t(rng.standard_normal((2, 6, 5)).astype(np.float32))
    v = ctx.t(rng.standard_normal((2, 6, 3)).astype(np.float32))
    pad = ctx.t(np.array([[False] * 6, [False] * 4 + [True] * 2]))
    q = latents.expand(2, -1, -1)
    out, w = mha(q, k, v, key_padding_mask=pad, average_attn_weights=False)
    out2, w2 = mha(q, k, v, key_padding_mask=pad, need_weights=True)
    loss = out.pow(2).mean() + out2.mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    names = sorted(n for n, _ in mha.named_parameters())
    return [out, w, w2, mha.k_proj_weight.grad, latents, names]


def vqvae_codebook(torch, ctx):
    """A VQ-VAE's quantizer: nearest codes by cdist/argmin, the straight-through estimator
    (z + (q - z).detach()), commitment loss, and the codebook's EMA update by one_hot
    counts, index_add_ of the encodings, Laplace smoothing of the cluster sizes; buffers
    updated in place under no_grad; perplexity from the code usage."""
    nn, F = torch.nn, torch.nn.functional

    class VQ(nn.Module):
        def __init__(self, K=5, D=3, decay=0.9, eps=1e-5):
            super().__init__()
            self.decay, self.eps = decay, eps
            emb = torch.linspace(-1, 1, K * D).reshape(K, D)
            self.register_buffer("embedding", emb)
            self.register_buffer("cluster_size", torch.zeros(K))
            self.register_buffer("embed_avg", emb.clone())

        def forward(self, z):
            flat = z.reshape(-1, z.shape[-1])
            d = torch.cdist(flat, self.embedding)
            idx = d.argmin(1)
            q = F.embedding(idx, self.embedding).view_as(z)
            if self.training:
                with torch.no_grad():
                    onehot = F.one_hot(idx, self.embedding.shape[0]).type(flat.dtype)
                    self.cluster_size.mul_(self.decay).add_(onehot.sum(0), alpha=1 - self.decay)
                    summed = torch.zeros_like(self.embed_avg).index_add_(0, idx, flat)
                    self.embed_avg.mul_(self.decay).add_(summed, alpha=1 - self.decay)
                    n = self.cluster_size.sum()
                    size = (
                        (self.cluster_size + self.eps)
                        / (n + self.embedding.shape[0] * self.eps)
                        * n
                    )
                    self.embedding.copy_(self.embed_avg / size.unsqueeze(1))
            commit = F.mse_loss(z, q.detach())
            q = z + (q - z).detach()
            probs = F.one_hot(idx, self.embedding.shape[0]).float().mean(0)
            perplexity = torch.exp(-(probs * torch.log(probs + 1e-10)).sum())
            return q, commit, perplexity, idx

    enc = ctx.init(nn.Conv1d(2, 3, 3, padding=1), "enc")
    dec = ctx.init(nn.Conv1d(3, 2, 3, padding=1), "dec")
    vq = VQ()
    opt = torch.optim.Adam(list(enc.parameters()) + list(dec.parameters()), lr=1e-2)
    rng = np.random.default_rng(5)
    x = ctx.t(rng.standard_normal((2, 2, 7)).astype(np.float32))

    def step(x):
        z = enc(x).transpose(1, 2)
        q, commit, ppl, idx = vq(z)
        rec = dec(q.transpose(1, 2))
        loss = F.mse_loss(rec, x) + 0.25 * commit
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), ppl, idx

    step = ctx.fn(step)
    outs = [step(x) for _ in range(3)]
    return [outs, vq.embedding, vq.cluster_size, enc.weight]


def crf_viterbi(torch, ctx):
    """A linear-chain CRF over emissions from a BiLSTM: the forward algorithm with logsumexp
    over a mask, the gold path's score by gather, the negative log-likelihood's gradient,
    and Viterbi decoding with max and backpointers followed in Python."""
    nn = torch.nn
    K = 4
    lstm = ctx.init(nn.LSTM(3, 4, batch_first=True, bidirectional=True), "lstm")
    proj = ctx.init(nn.Linear(8, K), "proj")
    trans = nn.Parameter(torch.linspace(-0.5, 0.5, K * K).reshape(K, K))
    start = nn.Parameter(torch.linspace(0.1, -0.2, K))
    rng = np.random.default_rng(6)
    x = ctx.t(rng.standard_normal((2, 5, 3)).astype(np.float32))
    tags = ctx.t(rng.integers(0, K, (2, 5)))
    mask = ctx.t(np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], dtype=bool))
    em = proj(lstm(x)[0])
    B, T, _ = em.shape
    alpha = start + em[:, 0]
    for t in range(1, T):
        nxt = torch.logsumexp(alpha.unsqueeze(2) + trans + em[:, t].unsqueeze(1), dim=1)
        alpha = torch.where(mask[:, t, None], nxt, alpha)
    logZ = torch.logsumexp(alpha, 1)
    score = start[tags[:, 0]] + em[:, 0].gather(1, tags[:, :1]).squeeze(1)
    for t in range(1, T):
        s = trans[tags[:, t - 1], tags[:, t]] + em[:, t].gather(1, tags[:, t : t + 1]).squeeze(1)
        score = score + s * mask[:, t]
    nll = (logZ - score).mean()
    nll.backward()
    with torch.no_grad():
        v = start + em[:, 0]
        back = []
        for t in range(1, T):
            best, arg = (v.unsqueeze(2) + trans).max(1)
            back.append(arg)
            v = torch.where(mask[:, t, None], best + em[:, t], v)
        paths = []
        lengths = mask.sum(1).tolist()
        for b in range(B):
            last = int(v[b].argmax())
            path = [last]
            for t in range(lengths[b] - 1, 0, -1):
                last = int(back[t - 1][b, last])
                path.append(last)
            paths.append(path[::-1])
    return [nll, logZ, trans.grad, start.grad, proj.weight.grad, paths]


def checkpointed_sequential(torch, ctx):
    """checkpoint_sequential over a deep Sequential in segments (use_reentrant=False), and
    checkpoint of a function with keyword arguments and a dropout whose RNG state is
    preserved for the recomputation; gradients against the plain model's."""
    nn = torch.nn
    cp = torch.utils.checkpoint
    seq = ctx.init(
        nn.Sequential(*[nn.Sequential(nn.Linear(4, 4), nn.GELU()) for _ in range(4)]), "seq"
    )
    rng = np.random.default_rng(7)
    x = ctx.t(rng.standard_normal((3, 4)).astype(np.float32), requires_grad=True)
    y = cp.checkpoint_sequential(seq, 2, x, use_reentrant=False)
    y.pow(2).sum().backward()
    g_ckpt = [x.grad.clone(), seq[0][0].weight.grad.clone()]
    x.grad = None
    seq.zero_grad()
    seq(x).pow(2).sum().backward()
    g_plain = [x.grad.clone(), seq[0][0].weight.grad.clone()]
    drop = nn.Dropout(0.3)

    def block(h, scale=1.0):
        return drop(seq[1](h)) * scale

    torch.manual_seed(3)
    x2 = x.detach().clone().requires_grad_(True)
    z = cp.checkpoint(block, x2, scale=2.0, use_reentrant=False, preserve_rng_state=True)
    z.sum().backward()
    return [y, g_ckpt, g_plain, z, x2.grad]


def persistent_worker_epochs(torch, ctx):
    """A training loop over a shuffled DataLoader with two persistent workers, a seeded
    generator and drop_last, for three epochs: PyTorch draws the iterator's base
    seed only on the first epoch (later ones reset the iterator it keeps), so the later
    epochs' orders differ from a non-persistent loader's; ember drew one every epoch."""
    U = torch.utils.data
    rng = np.random.default_rng(9)
    X = ctx.t(rng.standard_normal((10, 3)).astype(np.float32))
    Y = ctx.t(rng.standard_normal((10, 1)).astype(np.float32))
    ds = U.TensorDataset(X, Y)
    model = ctx.init(torch.nn.Linear(3, 1), "lin")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = U.DataLoader(
        ds,
        batch_size=3,
        shuffle=True,
        num_workers=2,
        persistent_workers=True,
        drop_last=True,
        generator=torch.Generator().manual_seed(4),
    )
    plain = U.DataLoader(
        U.TensorDataset(torch.arange(10)),
        batch_size=4,
        shuffle=True,
        generator=torch.Generator().manual_seed(4),
    )
    seen, losses = [], []
    for epoch in range(3):
        for x, y in loader:
            seen.append(x[:, 0])
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.detach())
    orders = [[b[0] for b in plain] for _ in range(2)]
    return [seen, losses, model.weight, len(loader), orders]


PROGRAMS = [
    skipgram_sparse,
    ema_swa,
    maml_second_order,
    per_sample_conv,
    cross_attention_kdim,
    vqvae_codebook,
    crf_viterbi,
    checkpointed_sequential,
    persistent_worker_epochs,
]
CAPTURED = [vqvae_codebook]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
