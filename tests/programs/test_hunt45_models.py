"""Model programs of hunt45: greedy decoding with a KV cache returning ``.tolist()`` tokens; a
tied-embedding language model with a ModuleDict of heads, a ParameterList and a non-persistent
buffer through a torch.save/torch.load round trip; a parametrized (symmetric) layer; a policy
with torch.distributions returning item metrics; patch extraction with nn.Unfold and F.fold
(input checks by torch._assert); kNN with cdist/topk and scatter_reduce pooling; an
embedding_bag text classifier; a GRUCell loop with cumsum/cummax features; per-sample gradients
with torch.func.vmap/grad; a bfloat16 autocast forward.
"""

import io

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007


def tied_lm_roundtrip(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    V, D = 11, 8

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, D)
            self.mix = nn.ParameterList([nn.Parameter(torch.ones(D)), nn.Parameter(torch.zeros(D))])
            self.heads = nn.ModuleDict({"lm": nn.Linear(D, V, bias=False), "cls": nn.Linear(D, 2)})
            self.heads["lm"].weight = self.emb.weight  # weight tying
            self.register_buffer("pos", torch.linspace(0, 1, 6).unsqueeze(-1), persistent=False)

        def forward(self, tok):
            h = self.emb(tok) * self.mix[0] + self.mix[1] + self.pos[: tok.shape[1]]
            h = torch.tanh(h)
            return self.heads["lm"](h), self.heads["cls"](h.mean(1))

    model = ctx.init(LM())
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    rng = np.random.default_rng(3)
    tok = ctx.t(rng.integers(0, V, (3, 6)))
    lab = ctx.t(rng.integers(0, 2, 3))

    @ctx.fn
    def step(tok, lab):
        lm_logits, cls_logits = model(tok)
        lm_loss = F.cross_entropy(lm_logits[:, :-1].reshape(-1, V), tok[:, 1:].reshape(-1))
        cls_loss = F.cross_entropy(cls_logits, lab)
        loss = lm_loss + 0.5 * cls_loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        return {"lm": lm_loss.item(), "cls": cls_loss.item(), "ppl": torch.exp(lm_loss).item()}

    hist = [step(tok, lab) for _ in range(3)]
    sd = model.state_dict()
    buf = io.BytesIO()
    torch.save({"model": sd, "opt": opt.state_dict(), "step": 3}, buf)
    buf.seek(0)
    ckpt = torch.load(buf, weights_only=True)
    fresh = LM()
    res = fresh.load_state_dict(ckpt["model"])
    tied = fresh.heads["lm"].weight is fresh.emb.weight
    opt2 = torch.optim.Adam(fresh.parameters(), lr=1e-2)
    opt2.load_state_dict(ckpt["opt"])
    fresh.eval()
    with torch.no_grad():
        a, b = fresh(tok)
    return [
        hist,
        sorted(sd.keys()),
        list(res.missing_keys),
        tied,
        ckpt["step"],
        a,
        b,
        opt2.state_dict()["state"][0]["exp_avg"],
        len(list(fresh.parameters())),
        [n for n, _ in fresh.named_buffers()],
    ]


def symmetric_parametrize(torch, ctx):
    nn = torch.nn
    P = torch.nn.utils.parametrize

    class Symmetric(nn.Module):
        def forward(self, X):
            return X.triu() + X.triu(1).transpose(-1, -2)

    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.log_scale = nn.Parameter(torch.zeros(()))

        def forward(self, X):
            return X * self.log_scale.exp()

    layer = ctx.init(nn.Linear(4, 4))
    P.register_parametrization(layer, "weight", Symmetric())
    P.register_parametrization(layer, "weight", Scaled())
    opt = torch.optim.SGD(layer.parameters(), lr=0.1)
    rng = np.random.default_rng(4)
    x = ctx.t(rng.standard_normal((6, 4)).astype(np.float32))

    @ctx.fn
    def step(x):
        with P.cached():
            out = layer(x) + layer(x.flip(0))
        loss = out.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    losses = [step(x) for _ in range(3)]
    W = layer.weight
    names = sorted(n for n, _ in layer.named_parameters())
    orig = layer.parametrizations.weight.original
    P.remove_parametrizations(layer, "weight", leave_parametrized=True)
    return [
        losses,
        W,
        (W - W.T).abs().max(),
        names,
        orig.grad,
        P.is_parametrized(layer),
        layer.weight,
    ]


def policy_distributions(torch, ctx):
    nn = torch.nn
    D = torch.distributions

    class Policy(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(4, 16), nn.Tanh())
            self.logits = nn.Linear(16, 3)
            self.mu = nn.Linear(16, 2)
            self.log_std = nn.Parameter(torch.full((2,), -0.5))

        def forward(self, obs):
            h = self.body(obs)
            cat = D.Categorical(logits=self.logits(h))
            normal = D.Independent(D.Normal(self.mu(h), self.log_std.exp()), 1)
            return cat, normal

    pi = ctx.init(Policy())
    opt = torch.optim.Adam(pi.parameters(), lr=3e-3)
    rng = np.random.default_rng(5)
    obs = ctx.t(rng.standard_normal((8, 4)).astype(np.float32))
    disc = ctx.t(rng.integers(0, 3, 8))
    cont = ctx.t(rng.standard_normal((8, 2)).astype(np.float32))
    adv = ctx.t(rng.standard_normal(8).astype(np.float32))
    old_logp = ctx.t((rng.standard_normal(8) * 0.1 - 3.0).astype(np.float32))

    @ctx.fn
    def ppo_step(obs, disc, cont, adv, old_logp):
        cat, normal = pi(obs)
        logp = cat.log_prob(disc) + normal.log_prob(cont)
        ratio = torch.exp(logp - old_logp)
        adv_n = (adv - adv.mean()) / (adv.std() + 1e-8)
        surr = torch.min(ratio * adv_n, ratio.clamp(0.8, 1.2) * adv_n)
        entropy = cat.entropy().mean() + normal.entropy().mean()
        loss = -surr.mean() - 0.01 * entropy
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(pi.parameters(), 0.5)
        opt.step()
        clipped = ((ratio - 1).abs() > 0.2).float().mean()
        return {
            "loss": loss.item(),
            "entropy": entropy.item(),
            "clipfrac": clipped.item(),
            "kl": (old_logp - logp).mean().item(),
        }

    hist = [ppo_step(obs, disc, cont, adv, old_logp) for _ in range(3)]
    with torch.no_grad():
        cat, normal = pi(obs)
        ref = D.Categorical(probs=torch.full((8, 3), 1 / 3))
        kl = D.kl_divergence(cat, ref)
        greedy = cat.probs.argmax(-1).tolist()
        mode = normal.mean
    return [hist, kl, greedy, mode, normal.variance, pi.log_std]


def patches_fold(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    P, C, E = 2, 3, 8

    class PatchAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.unfold = nn.Unfold(kernel_size=P, stride=P)
            self.enc = nn.Linear(C * P * P, E)
            self.dec = nn.Linear(E, C * P * P)

        def forward(self, img):
            torch._assert(img.dim() == 4, f"expected (B, C, H, W), got {tuple(img.shape)}")
            torch._assert(img.shape[-1] % P == 0, "width must be a multiple of the patch size")
            patches = self.unfold(img).transpose(1, 2)  # (B, L, C*P*P)
            z = F.gelu(self.enc(patches))
            rec = self.dec(z).transpose(1, 2)
            return F.fold(rec, output_size=img.shape[-2:], kernel_size=P, stride=P), z

    model = ctx.init(PatchAE())
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    rng = np.random.default_rng(6)
    img = ctx.t(rng.random((2, C, 6, 8)).astype(np.float32))

    @ctx.fn
    def step(img):
        rec, z = model(img)
        loss = F.mse_loss(rec, img)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item(), z.shape[1]

    hist = [step(img) for _ in range(3)]
    # overlapping windows: fold(unfold(x)) counts each pixel once per window covering it
    cols = F.unfold(img, kernel_size=3, padding=1, stride=1, dilation=1)
    counts = F.fold(torch.ones_like(cols), (6, 8), kernel_size=3, padding=1)
    smooth = F.fold(cols, (6, 8), kernel_size=3, padding=1) / counts
    strided = F.unfold(img, kernel_size=(2, 3), dilation=(2, 1), stride=(1, 2))
    return [hist, smooth, counts[0, 0], strided, model.enc.weight.grad]


def knn_scatter_pool(torch, ctx):
    nn = torch.nn
    rng = np.random.default_rng(7)
    N, K = 10, 3
    pts = ctx.t(rng.standard_normal((N, 2)).astype(np.float32))
    feats = ctx.t(rng.standard_normal((N, 4)).astype(np.float32))
    cluster = ctx.t(np.array([0, 2, 1, 0, 2, 2, 1, 0, 3, 3]))
    n_c = int(cluster.max()) + 1
    mlp = ctx.init(nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 4)))
    opt = torch.optim.SGD(mlp.parameters(), lr=0.05)

    @ctx.fn
    def step(pts, feats, cluster):
        d = torch.cdist(pts, pts)
        d = d + torch.eye(N) * 1e6  # no self-edges
        dist, idx = d.topk(K, dim=1, largest=False)
        nbr = feats[idx]  # (N, K, 4)
        edge = torch.cat([feats.unsqueeze(1).expand(-1, K, -1), nbr - feats.unsqueeze(1)], -1)
        msg = mlp(edge) * torch.softmax(-dist, dim=1).unsqueeze(-1)
        node = msg.sum(1)
        pooled_max = torch.full((n_c, 4), -1e9).scatter_reduce(
            0, cluster.unsqueeze(1).expand(-1, 4), node, reduce="amax", include_self=False
        )
        pooled_mean = torch.zeros(n_c, 4).index_add(0, cluster, node)
        counts = torch.zeros(n_c).index_add_(0, cluster, torch.ones(N))
        pooled_mean = pooled_mean / counts.unsqueeze(1)
        loss = pooled_max.pow(2).mean() + pooled_mean.abs().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item(), idx, pooled_max, pooled_mean

    r1 = step(pts, feats, cluster)
    r2 = step(pts, feats, cluster)
    q = pts[:3]
    dq = torch.cdist(q, pts, p=1.0)
    nn_idx = dq.argsort(dim=1)[:, 1:4]
    mean_red = torch.zeros(4, 4).scatter_reduce(
        0, cluster.unsqueeze(1).expand(-1, 4), feats, reduce="mean", include_self=False
    )
    return [r1, r2, dq, nn_idx.tolist(), mean_red, mlp[0].weight]


def embedding_bag_classifier(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    V, D, C = 20, 6, 3

    class BagModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.bag = nn.EmbeddingBag(V, D, mode="mean", padding_idx=0)
            self.fc = nn.Linear(D, C)

        def forward(self, text, offsets, weights=None):
            return self.fc(self.bag(text, offsets))

    model = ctx.init(BagModel())
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    rng = np.random.default_rng(8)
    text = ctx.t(np.array([3, 5, 0, 7, 7, 1, 9, 12, 4, 0, 0, 15]))
    offsets = ctx.t(np.array([0, 3, 5, 9]))
    labels = ctx.t(np.array([0, 2, 1, 1]))

    @ctx.fn
    def step(text, offsets, labels):
        logits = model(text, offsets)
        loss = F.cross_entropy(logits, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        acc = (logits.argmax(1) == labels).sum().item() / labels.numel()
        return loss.item(), acc

    hist = [step(text, offsets, labels) for _ in range(3)]
    W = model.bag.weight.detach()
    psw = ctx.t(rng.random(12).astype(np.float32))
    fn_sum = F.embedding_bag(text, W, offsets, mode="sum", per_sample_weights=psw)
    fn_max = F.embedding_bag(text, W, offsets, mode="max")
    two_d = F.embedding_bag(text.reshape(3, 4), W, mode="mean")
    csr = torch.cat([offsets, torch.tensor([text.numel()])])  # CSR offsets: the end included
    last = F.embedding_bag(text, W, csr, mode="sum", include_last_offset=True)
    return [hist, fn_sum, fn_max, two_d, last, model.bag.weight.grad]


def gru_cell_features(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    cell = ctx.init(nn.GRUCell(3, 5), "cell")
    head = ctx.init(nn.Linear(5 + 2, 1), "head")
    params = list(cell.parameters()) + list(head.parameters())
    opt = torch.optim.RMSprop(params, lr=1e-2, alpha=0.9)
    rng = np.random.default_rng(9)
    x = ctx.t(rng.standard_normal((7, 4, 3)).astype(np.float32))  # (T, B, F)
    y = ctx.t(rng.standard_normal((4,)).astype(np.float32))

    @ctx.fn
    def step(x, y):
        h = torch.zeros(x.shape[1], 5)
        outs = []
        for t in range(x.shape[0]):
            h = cell(x[t], h)
            outs.append(h)
        H = torch.stack(outs)  # (T, B, 5)
        run_max, arg = H[..., 0].cummax(dim=0)
        csum = torch.cumsum(x[..., 0], dim=0) / torch.arange(1, x.shape[0] + 1).unsqueeze(1)
        feats = torch.cat([h, run_max[-1:].T, csum[-1:].T], dim=1)
        pred = head(feats).squeeze(1)
        loss = F.huber_loss(pred, y, delta=0.5)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item(), arg[-1].tolist(), torch.cumprod(torch.sigmoid(H[:, 0, 1]), 0)

    hist = [step(x, y) for _ in range(3)]
    cm, ci = torch.cummin(x[:, 0, :], dim=0)
    lcse = torch.logcumsumexp(x[:, :, 1], dim=0)
    return [hist, cm, ci, lcse, cell.weight_hh.grad, head.bias]


def per_sample_grads(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    functional_call, grad, vmap = torch.func.functional_call, torch.func.grad, torch.func.vmap

    model = ctx.init(nn.Sequential(nn.Linear(3, 6), nn.Tanh(), nn.Linear(6, 2)))
    params = {k: v.detach() for k, v in model.named_parameters()}
    rng = np.random.default_rng(10)
    x = ctx.t(rng.standard_normal((5, 3)).astype(np.float32))
    y = ctx.t(rng.integers(0, 2, 5))

    def loss_fn(p, xi, yi):
        out = functional_call(model, p, (xi.unsqueeze(0),))
        return F.cross_entropy(out, yi.unsqueeze(0))

    per = vmap(grad(loss_fn), in_dims=(None, 0, 0))(params, x, y)
    # DP-SGD style: clip each sample's gradient to norm 1, then average
    norms = torch.stack([g.flatten(1).norm(dim=1) for g in per.values()]).norm(dim=0)
    factor = (1.0 / (norms + 1e-6)).clamp(max=1.0)
    clipped = {k: (g * factor.view(-1, *[1] * (g.dim() - 1))).mean(0) for k, g in per.items()}
    full = torch.autograd.grad(
        F.cross_entropy(model(x), y, reduction="sum") / 5, list(model.parameters())
    )
    batched_loss = vmap(loss_fn, in_dims=(None, 0, 0))(params, x, y)
    return [per, norms, clipped, list(full), batched_loss]


def autocast_bf16(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    model = ctx.init(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)))
    rng = np.random.default_rng(11)
    x = ctx.t((rng.integers(-4, 5, (6, 4)) / 4).astype(np.float32))
    y = ctx.t(rng.integers(0, 3, 6))

    def forward(x, y):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(x)
            soft = torch.softmax(logits, -1)
        loss = F.cross_entropy(logits.float(), y)
        return logits, soft, loss

    logits, soft, loss = forward(x, y)
    loss.backward()
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=False):
        plain = model(x)
    return [
        logits.float(),
        loss,
        model[0].weight.grad,
        logits.dtype,
        soft.dtype,
        loss.dtype,
        plain.dtype,
        model[0].weight.grad.dtype,
        torch.is_autocast_enabled("cpu"),
    ]


def greedy_decode_kv_cache(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    V, D, H = 13, 8, 2

    class TinyDecoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, D)
            self.pos = nn.Embedding(16, D)
            self.qkv = nn.Linear(D, 3 * D)
            self.proj = nn.Linear(D, D)
            self.ln = nn.LayerNorm(D)
            self.head = nn.Linear(D, V, bias=False)

        def forward(self, tok, start, cache=None):
            B, T = tok.shape
            pos = torch.arange(start, start + T).unsqueeze(0)
            h = self.emb(tok) + self.pos(pos)
            q, k, v = self.qkv(self.ln(h)).view(B, T, 3, H, D // H).permute(2, 0, 3, 1, 4)
            if cache is not None:
                k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
            att = F.scaled_dot_product_attention(q, k, v, is_causal=cache is None)
            h = h + self.proj(att.transpose(1, 2).reshape(B, T, D))
            return self.head(h), (k, v)

    model = ctx.init(TinyDecoder()).eval()
    rng = np.random.default_rng(15)
    prompt = ctx.t(rng.integers(0, V, (2, 4)))

    @ctx.fn
    def generate(prompt):
        with torch.no_grad():
            logits, cache = model(prompt, 0)
            tok = logits[:, -1].argmax(-1, keepdim=True)
            out, scores = [tok], [logits[:, -1].log_softmax(-1).max(-1).values]
            for i in range(3):
                logits, cache = model(tok, prompt.shape[1] + i, cache)
                tok = logits[:, -1].argmax(-1, keepdim=True)
                out.append(tok)
                scores.append(logits[:, -1].log_softmax(-1).max(-1).values)
            seq = torch.cat([prompt] + out, 1)
        return seq.tolist(), torch.stack(scores, 1).sum(1).tolist(), cache[0].shape[2]

    first = generate(prompt)
    second = generate(prompt.flip(0))
    with torch.no_grad():  # the cached decode agrees with a full causal pass over the sequence
        full, _ = model(torch.tensor(first[0]), 0)
    return [first, second, full[:, 3:-1].argmax(-1)]


PROGRAMS = [
    greedy_decode_kv_cache,
    tied_lm_roundtrip,
    symmetric_parametrize,
    policy_distributions,
    patches_fold,
    knn_scatter_pool,
    embedding_bag_classifier,
    gru_cell_features,
    per_sample_grads,
    autocast_bf16,
]
CAPTURED = [
    greedy_decode_kv_cache,
    tied_lm_roundtrip,
    symmetric_parametrize,
    policy_distributions,
    patches_fold,
    knn_scatter_pool,
    embedding_bag_classifier,
    gru_cell_features,
]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
