"""Programs that lean on capture as users write them: a recommender whose embeddings renormalize
(max_norm, padding_idx, scale_grad_by_freq, EmbeddingBag's per-sample weights), an R1 gradient
penalty with saliency maps, optimizer steps run from post-accumulate-grad hooks, an RNN with an
orthogonal recurrent matrix (nn.utils.parametrizations.orthogonal), a point-cloud EdgeConv
(cdist, topk neighbours, scatter_reduce's amax), a pre-norm Transformer decoder with causal and
padding masks, a Hamiltonian network through torch.func.jacrev, mixture densities with
torch.distributions.
"""

import numpy as np
import pytest

from .harness import check_program

# each program is PyTorch source written against ``torch`` (the library passed in)
# ruff: noqa: N806, E741


def recsys_maxnorm(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class Rec(nn.Module):
        def __init__(s):
            super().__init__()
            s.user = nn.Embedding(6, 4, max_norm=1.0, padding_idx=0)
            s.item = nn.Embedding(8, 4, scale_grad_by_freq=True)
            s.tags = nn.EmbeddingBag(5, 4, mode="sum")
            s.out = nn.Linear(4, 1)

        def forward(s, u, i, tags, offsets, weights):
            e = s.user(u) * s.item(i) + s.tags(tags, offsets, per_sample_weights=weights)
            return s.out(e).squeeze(-1)

    m = ctx.init(Rec())
    opt = torch.optim.SGD(m.parameters(), lr=0.5)
    rng = np.random.default_rng(0)
    u = ctx.t(np.array([1, 0, 3, 1]))
    i = ctx.t(np.array([2, 2, 5, 7]))
    tags = ctx.t(np.array([0, 1, 4, 2, 3, 1]))
    offsets = ctx.t(np.array([0, 2, 3, 5]))
    weights = ctx.t(rng.random(6).astype(np.float32))
    y = ctx.t(np.array([1.0, 0.0, 1.0, 0.0], np.float32))

    def step(u, i, tags, offsets, weights, y):
        loss = F.binary_cross_entropy_with_logits(m(u, i, tags, offsets, weights), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = ctx.fn(step)
    out = [step(u, i, tags, offsets, weights, y) for _ in range(3)]
    return {"out": out, "m": m.state_dict()}


def r1_saliency(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    D = ctx.init(nn.Sequential(nn.Linear(3, 8), nn.Softplus(), nn.Linear(8, 1)))
    opt = torch.optim.Adam(D.parameters(), lr=1e-2, betas=(0.0, 0.99))
    rng = np.random.default_rng(1)
    real = ctx.t(rng.standard_normal((5, 3)).astype(np.float32))
    fake = ctx.t(rng.standard_normal((5, 3)).astype(np.float32))

    def d_step(real, fake):
        real = real.detach().requires_grad_(True)
        logits_real = D(real)
        (g,) = torch.autograd.grad(logits_real.sum(), real, create_graph=True)
        r1 = g.pow(2).sum(1).mean()
        loss = F.softplus(-logits_real).mean() + F.softplus(D(fake)).mean() + 5.0 * r1
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, r1

    def saliency(x):
        x = x.clone().requires_grad_(True)
        score = D(x).sum()
        (g,) = torch.autograd.grad(score, x)
        return g.abs(), score

    d_step = ctx.fn(d_step)
    saliency = ctx.fn(saliency)
    out = [d_step(real, fake) for _ in range(2)]
    return {"out": out, "sal": saliency(real), "m": D.state_dict()}


def optim_in_backward(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    m = ctx.init(nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 2)))
    opts = {p: torch.optim.AdamW([p], lr=1e-2, weight_decay=0.1) for p in m.parameters()}
    seen = []

    def hook(p):
        opts[p].step()
        opts[p].zero_grad()
        seen.append(tuple(p.shape))

    for p in m.parameters():
        p.register_post_accumulate_grad_hook(hook)
    rng = np.random.default_rng(2)
    x = ctx.t(rng.standard_normal((3, 4)).astype(np.float32))
    y = ctx.t(rng.standard_normal((3, 2)).astype(np.float32))
    losses = []
    for _ in range(3):
        loss = F.mse_loss(m(x), y)
        loss.backward()
        losses.append(loss)
    grads_none = [p.grad is None for p in m.parameters()]
    return {"losses": losses, "m": m.state_dict(), "seen": sorted(seen), "none": grads_none}


def orthogonal_rnn(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    P = nn.utils.parametrizations

    class ORNN(nn.Module):
        def __init__(s, i=3, h=4):
            super().__init__()
            s.inp = nn.Linear(i, h)
            s.rec = P.orthogonal(nn.Linear(h, h, bias=False))
            s.head = nn.Linear(h, 2)

        def forward(s, x):
            h = x.new_zeros(x.shape[0], s.rec.weight.shape[0])
            W = s.rec.weight
            for t in range(x.shape[1]):
                h = torch.tanh(s.inp(x[:, t]) + h @ W.T)
            return s.head(h)

    m = ORNN()
    ctx.init(m)
    opt = torch.optim.RMSprop(m.parameters(), lr=1e-2)
    rng = np.random.default_rng(3)
    x = ctx.t(rng.standard_normal((2, 4, 3)).astype(np.float32))
    y = ctx.t(np.array([0, 1]))

    def step(x, y):
        with nn.utils.parametrize.cached():
            loss = F.cross_entropy(m(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = ctx.fn(step)
    out = [step(x, y) for _ in range(2)]
    W = m.rec.weight.detach()
    return {
        "out": out,
        "W": W,
        "orth": torch.allclose(W @ W.T, torch.eye(4), atol=1e-5),
        "m": m.state_dict(),
    }


def edgeconv(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class EdgeConv(nn.Module):
        def __init__(s, i, o, k=3):
            super().__init__()
            s.k = k
            s.mlp = nn.Sequential(nn.Linear(2 * i, o), nn.LeakyReLU(0.2))

        def forward(s, x, batch):
            d = torch.cdist(x, x)
            d = d.masked_fill(batch[:, None] != batch[None, :], float("inf"))
            d.fill_diagonal_(float("inf"))
            idx = d.topk(s.k, largest=False).indices  # N k
            src = idx.reshape(-1)
            dst = torch.arange(x.shape[0]).repeat_interleave(s.k)
            msg = s.mlp(torch.cat([x[dst], x[src] - x[dst]], dim=-1))
            out = torch.zeros(x.shape[0], msg.shape[1])
            return out.scatter_reduce(
                0, dst[:, None].expand_as(msg), msg, "amax", include_self=False
            )

    class Net(nn.Module):
        def __init__(s):
            super().__init__()
            s.c1, s.c2 = EdgeConv(3, 6), EdgeConv(6, 6)
            s.head = nn.Linear(12, 2)

        def forward(s, x, batch, n_graphs):
            h1 = s.c1(x, batch)
            h2 = s.c2(h1, batch)
            h = torch.cat([h1, h2], -1)
            pooled = torch.full((n_graphs, h.shape[1]), -1e9).index_reduce(0, batch, h, "amax")
            return s.head(pooled)

    m = ctx.init(Net())
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    rng = np.random.default_rng(4)
    x = ctx.t(rng.standard_normal((9, 3)).astype(np.float32))
    batch = ctx.t(np.array([0, 0, 0, 0, 0, 1, 1, 1, 1]))
    y = ctx.t(np.array([1, 0]))

    def step(x, batch, y):
        loss = F.cross_entropy(m(x, batch, 2), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    out = [step(x, batch, y) for _ in range(2)]
    out.append(ctx.fn(step)(x, batch, y))
    return {"out": out, "m": m.state_dict()}


def prenorm_decoder(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class LM(nn.Module):
        def __init__(s, V=7, d=8):
            super().__init__()
            s.emb = nn.Embedding(V, d, padding_idx=0)
            layer = nn.TransformerDecoderLayer(
                d, 2, 16, dropout=0.0, activation="gelu", batch_first=True, norm_first=True
            )
            s.dec = nn.TransformerDecoder(layer, 2, norm=nn.LayerNorm(d))
            s.out = nn.Linear(d, V)

        def forward(s, tgt, memory, tgt_pad, mem_pad):
            T = tgt.shape[1]
            mask = nn.Transformer.generate_square_subsequent_mask(T)
            h = s.dec(
                s.emb(tgt),
                memory,
                tgt_mask=mask,
                tgt_is_causal=True,
                tgt_key_padding_mask=tgt_pad,
                memory_key_padding_mask=mem_pad,
            )
            return s.out(h)

    m = ctx.init(LM())
    # (SGD: the keys' bias has no gradient, which Adam would turn into rounding noise's sign)
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    rng = np.random.default_rng(5)
    tgt = ctx.t(np.array([[1, 3, 4, 2, 0], [5, 6, 2, 0, 0]]))
    memory = ctx.t(rng.standard_normal((2, 3, 8)).astype(np.float32))
    tgt_pad = tgt == 0
    mem_pad = ctx.t(np.array([[False, False, False], [False, False, True]]))

    def step(tgt, memory, tgt_pad, mem_pad):
        logits = m(tgt[:, :-1], memory, tgt_pad[:, :-1], mem_pad)
        loss = F.cross_entropy(logits.reshape(-1, 7), tgt[:, 1:].reshape(-1), ignore_index=0)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, logits

    step = ctx.fn(step)
    out = [step(tgt, memory, tgt_pad, mem_pad) for _ in range(2)]
    return {"out": out, "m": m.state_dict()}


def hamiltonian_nn(torch, ctx):
    nn = torch.nn
    H = ctx.init(nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 1)))
    opt = torch.optim.Adam(H.parameters(), lr=1e-2)
    params = dict(H.named_parameters())

    def energy(p, z):
        return torch.func.functional_call(H, p, (z,)).squeeze(-1)

    def field(p, z):
        dH = torch.vmap(torch.func.jacrev(energy, argnums=1), in_dims=(None, 0))(p, z)
        return torch.stack((dH[:, 1], -dH[:, 0]), -1)

    q = np.linspace(-1, 1, 6, dtype=np.float32)
    z = ctx.t(np.stack((q, 0.5 * q[::-1]), -1))
    dz = ctx.t(np.stack((0.5 * q[::-1], -q), -1))
    out = []
    for _ in range(2):
        loss = (field(params, z) - dz).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.append(loss)
    hess = torch.func.hessian(lambda zz: energy(params, zz[None])[0])(z[0])
    _, jvp = torch.func.jvp(lambda zz: energy(params, zz), (z,), (torch.ones_like(z),))
    return {"out": out, "hess": hess, "jvp": jvp, "m": H.state_dict()}


def mixture_density(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions

    net = ctx.init(nn.Sequential(nn.Linear(1, 8), nn.Tanh(), nn.Linear(8, 3 * 3)))
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    x = ctx.t(np.linspace(-1, 1, 7, dtype=np.float32)[:, None])
    y = ctx.t(np.sin(3 * np.linspace(-1, 1, 7, dtype=np.float32))[:, None] * 0.5)
    out = []
    for _ in range(2):
        logits, mu, log_s = net(x).chunk(3, -1)
        mix = D.MixtureSameFamily(D.Categorical(logits=logits), D.Normal(mu, log_s.exp()))
        nll = -mix.log_prob(y.squeeze(-1)).mean()
        flow = D.TransformedDistribution(
            D.Normal(mu[:, 0], F.softplus(log_s[:, 0]) + 0.1),
            [D.transforms.AffineTransform(0.0, 0.5), D.transforms.SigmoidTransform()],
        )
        flow_lp = flow.log_prob(torch.sigmoid(y.squeeze(-1)) * 0.5 + 0.25).mean()
        cat = D.Categorical(logits=logits)
        kl = D.kl_divergence(cat, D.Categorical(probs=torch.full_like(logits, 1 / 3))).mean()
        loss = nll - 0.1 * flow_lp + 0.01 * kl
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.append((loss, mix.mean, mix.variance, mix.cdf(y.squeeze(-1)), cat.entropy()))
    relaxed = D.RelaxedOneHotCategorical(torch.tensor(0.5), logits=logits.detach())
    lp = relaxed.log_prob(F.softmax(logits.detach() * 2, -1))
    beta = D.Beta(torch.tensor([2.0, 0.5]), torch.tensor([3.0, 0.7]))
    return {
        "out": out,
        "lp": lp,
        "beta": [beta.log_prob(torch.tensor([0.3, 0.9])), beta.entropy(), beta.mean],
    }


PROGRAMS = [
    recsys_maxnorm,
    r1_saliency,
    optim_in_backward,
    orthogonal_rnn,
    edgeconv,
    prenorm_decoder,
    hamiltonian_nn,
    mixture_density,
]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize(
    "program",
    [recsys_maxnorm, r1_saliency, orthogonal_rnn],
    ids=lambda p: p.__name__,
)
def test_captured(program):
    check_program(program, capture=True)
