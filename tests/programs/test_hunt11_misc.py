"""More programs as users write them: Tacotron's location-sensitive attention decoder, top-k /
top-p sampling and speculative decoding with torch.multinomial and a torch.Generator, soft ranks
(differentiable sorting), a matrix-product-state classifier contracted with einsum, a Bayesian
network trained by ELBO with torch.distributions' KL, a modern Hopfield layer.
"""

import math

import numpy as np
import pytest

from .harness import check_program

# each program is PyTorch source written against ``torch`` (the library passed in)
# ruff: noqa: N806, E741


def tacotron_attention(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class LocationLayer(nn.Module):
        def __init__(s, n_filters=3, k=3, att_dim=4):
            super().__init__()
            s.conv = nn.Conv1d(2, n_filters, k, padding=(k - 1) // 2, bias=False)
            s.dense = nn.Linear(n_filters, att_dim, bias=False)

        def forward(s, cat):
            return s.dense(s.conv(cat).transpose(1, 2))

    class Attention(nn.Module):
        def __init__(s, rnn_dim=6, emb=5, att=4):
            super().__init__()
            s.query_layer = nn.Linear(rnn_dim, att, bias=False)
            s.memory_layer = nn.Linear(emb, att, bias=False)
            s.v = nn.Linear(att, 1, bias=False)
            s.location = LocationLayer(att_dim=att)
            s.score_mask_value = -float("inf")

        def forward(s, query, memory, processed_memory, att_cat, mask):
            pq = s.query_layer(query.unsqueeze(1))
            energies = s.v(torch.tanh(pq + s.location(att_cat) + processed_memory)).squeeze(-1)
            energies = (
                energies.data.masked_fill_(mask, s.score_mask_value)
                if False
                else energies.masked_fill(mask, s.score_mask_value)
            )
            w = F.softmax(energies, dim=1)
            return torch.bmm(w.unsqueeze(1), memory).squeeze(1), w

    class Decoder(nn.Module):
        def __init__(s):
            super().__init__()
            s.rnn = nn.LSTMCell(5 + 3, 6)
            s.att = Attention()
            s.proj = nn.Linear(6 + 5, 3)
            s.gate = nn.Linear(6 + 5, 1)

        def forward(s, memory, lengths, frames):
            B, T, _ = memory.shape
            mask = torch.arange(T)[None] >= lengths[:, None]
            h = memory.new_zeros(B, 6)
            c = memory.new_zeros(B, 6)
            w = memory.new_zeros(B, T)
            wc = memory.new_zeros(B, T)
            ctxv = memory.new_zeros(B, 5)
            pm = s.att.memory_layer(memory)
            prev = memory.new_zeros(B, 3)
            outs, gates, aligns = [], [], []
            for t in range(frames.shape[1]):
                h, c = s.rnn(torch.cat((prev, ctxv), -1), (h, c))
                h = F.dropout(h, 0.0, s.training)
                cat = torch.cat((w.unsqueeze(1), wc.unsqueeze(1)), dim=1)
                ctxv, w = s.att(h, memory, pm, cat, mask)
                wc = wc + w
                hc = torch.cat((h, ctxv), dim=1)
                outs.append(s.proj(hc))
                gates.append(s.gate(hc))
                aligns.append(w)
                prev = frames[:, t]
            return torch.stack(outs, 1), torch.cat(gates, 1), torch.stack(aligns, 1)

    dec = ctx.init(Decoder())
    opt = torch.optim.Adam(dec.parameters(), lr=1e-3, weight_decay=1e-6)
    rng = np.random.default_rng(0)
    memory = ctx.t(rng.standard_normal((2, 4, 5)).astype(np.float32))
    lengths = ctx.t(np.array([4, 2]))
    frames = ctx.t(rng.standard_normal((2, 3, 3)).astype(np.float32))
    stop = ctx.t(np.array([[0, 0, 1], [0, 1, 1]], np.float32))

    def step(memory, lengths, frames, stop):
        mel, gate, align = dec(memory, lengths, frames)
        loss = F.mse_loss(mel, frames) + F.binary_cross_entropy_with_logits(gate, stop)
        opt.zero_grad()
        loss.backward()
        gn = nn.utils.clip_grad_norm_(dec.parameters(), 1.0)
        opt.step()
        return loss, align, gn

    step = ctx.fn(step)
    out = [step(memory, lengths, frames, stop) for _ in range(2)]
    return {"out": out, "m": dec.state_dict()}


def sampling(torch, ctx):
    F = torch.nn.functional

    def top_k_top_p_filtering(logits, top_k=0, top_p=1.0, filter_value=-float("inf"), min_keep=1):
        if top_k > 0:
            top_k = min(max(top_k, min_keep), logits.size(-1))
            indices_to_remove = logits < torch.topk(logits, top_k)[0][..., -1, None]
            logits = logits.masked_fill(indices_to_remove, filter_value)
        if top_p < 1.0:
            sorted_logits, sorted_indices = torch.sort(logits, descending=True)
            cumulative_probs = torch.cumsum(F.softmax(sorted_logits, dim=-1), dim=-1)
            sorted_indices_to_remove = cumulative_probs > top_p
            sorted_indices_to_remove[..., 1:] = sorted_indices_to_remove[..., :-1].clone()
            sorted_indices_to_remove[..., 0] = 0
            indices_to_remove = sorted_indices_to_remove.scatter(
                1, sorted_indices, sorted_indices_to_remove
            )
            logits = logits.masked_fill(indices_to_remove, filter_value)
        return logits

    rng = np.random.default_rng(1)
    logits = ctx.t(rng.standard_normal((3, 10)).astype(np.float32) * 2)
    filt = top_k_top_p_filtering(logits, top_k=6, top_p=0.8)
    probs = F.softmax(filt / 0.7, dim=-1)
    g = torch.Generator().manual_seed(1234)
    draws = torch.multinomial(probs, num_samples=20, replacement=True, generator=g)
    g.manual_seed(1234)
    again = torch.multinomial(probs, num_samples=20, replacement=True, generator=g)
    allowed = torch.gather(torch.isfinite(filt), 1, draws).all().item()
    no_repl = torch.multinomial(probs, 2, generator=g)
    distinct = (no_repl[:, 0] != no_repl[:, 1]).all().item()

    # speculative decoding: a draft proposes, the target accepts with min(1, p/q)
    vocab = 6
    tgt_w = ctx.t(rng.standard_normal((vocab, vocab)).astype(np.float32))
    drf_w = tgt_w + ctx.t(rng.standard_normal((vocab, vocab)).astype(np.float32) * 0.3)

    def dist(w, tok):
        return torch.softmax(w[tok], dim=-1)

    g = torch.Generator().manual_seed(7)
    seq = [0]
    accepted = 0
    while len(seq) < 8:
        draft, qs = [], []
        tok = seq[-1]
        for _ in range(3):
            q = dist(drf_w, tok)
            tok = int(torch.multinomial(q, 1, generator=g))
            draft.append(tok)
            qs.append(q)
        prev = seq[-1]
        for tok, q in zip(draft, qs):
            p = dist(tgt_w, prev)
            r = torch.rand(1, generator=g).item()
            if r < min(1.0, (p[tok] / q[tok]).item()):
                seq.append(tok)
                accepted += 1
                prev = tok
            else:
                resid = torch.clamp(p - q, min=0)
                resid = resid / resid.sum()
                seq.append(int(torch.multinomial(resid, 1, generator=g)))
                break
    valid = all(0 <= t < vocab for t in seq) and 0 <= accepted <= len(seq)
    greedy = torch.argmax(dist(tgt_w, torch.tensor([0, 1, 2])), dim=-1)
    return {
        "filt": filt,
        "probs": probs,
        "same": torch.equal(draws, again),
        "allowed": allowed,
        "distinct": distinct,
        "shape": list(draws.shape),
        "dtype": draws.dtype,
        "valid": valid,
        "greedy": greedy,
    }


def soft_rank(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    def soft_rank_sigmoid(x, tau=0.5):
        diff = x.unsqueeze(-1) - x.unsqueeze(-2)
        return 1 + torch.sigmoid(diff / tau).sum(-1) - 0.5

    def neural_sort(s, tau=1.0):
        n = s.size(1)
        one = torch.ones((n, 1))
        A_s = torch.abs(s - s.permute(0, 2, 1))
        B = torch.matmul(A_s, torch.matmul(one, one.T))
        scaling = (n + 1 - 2 * (torch.arange(n) + 1)).type(torch.float)
        C = torch.matmul(s, scaling.unsqueeze(0))
        P_max = (C - B).permute(0, 2, 1)
        return F.softmax(P_max / tau, dim=-1)

    def spearman(pred, target):
        pr = soft_rank_sigmoid(pred)
        tr = target.argsort(-1).argsort(-1).float() + 1
        pr = pr - pr.mean(-1, keepdim=True)
        tr = tr - tr.mean(-1, keepdim=True)
        return (pr * tr).sum(-1) / (pr.norm(dim=-1) * tr.norm(dim=-1))

    net = ctx.init(nn.Sequential(nn.Linear(3, 6), nn.Softplus(), nn.Linear(6, 1, bias=False)))
    opt = torch.optim.RMSprop(net.parameters(), lr=1e-2, momentum=0.5)
    rng = np.random.default_rng(2)
    x = ctx.t(rng.standard_normal((2, 5, 3)).astype(np.float32))
    y = ctx.t(rng.standard_normal((2, 5)).astype(np.float32))

    def step(x, y):
        s = net(x)
        P = neural_sort(s, tau=0.5)
        sorted_y = (P @ y.unsqueeze(-1)).squeeze(-1)
        loss = (
            -spearman(s.squeeze(-1), y).mean()
            + 0.1 * (sorted_y - y.sort(-1, descending=True)[0]).pow(2).mean()
        )
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, P

    step = ctx.fn(step)
    out = [step(x, y) for _ in range(2)]
    return {"out": out, "m": net.state_dict()}


def mps_einsum(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class MPS(nn.Module):
        def __init__(s, n_sites=5, bond=3, phys=2, n_cls=3):
            super().__init__()
            eye = torch.eye(bond).unsqueeze(1).expand(bond, phys, bond)
            s.cores = nn.ParameterList(
                [nn.Parameter(eye + 0.05 * torch.randn(bond, phys, bond)) for _ in range(n_sites)]
            )
            s.label = nn.Parameter(
                torch.randn(bond, n_cls, bond) * 0.1 + torch.eye(bond).unsqueeze(1)
            )

        def embed(s, x):
            return torch.stack((torch.cos(math.pi / 2 * x), torch.sin(math.pi / 2 * x)), dim=-1)

        def forward(s, x):
            phi = s.embed(x)  # B N 2
            B = x.shape[0]
            env = torch.ones(B, s.cores[0].shape[0]) / s.cores[0].shape[0] ** 0.5
            half = len(s.cores) // 2
            for i in range(half):
                env = torch.einsum("bl,lpr,bp->br", env, s.cores[i], phi[:, i])
            right = torch.ones(B, s.cores[0].shape[0]) / s.cores[0].shape[0] ** 0.5
            for i in reversed(range(half, len(s.cores))):
                right = torch.einsum("lpr,bp,br->bl", s.cores[i], phi[:, i], right)
            return torch.einsum("bl,lcr,br->bc", env, s.label, right)

    m = ctx.init(MPS())
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    rng = np.random.default_rng(3)
    x = ctx.t(rng.random((4, 5)).astype(np.float32))
    y = ctx.t(np.array([0, 1, 2, 1]))

    def step(x, y):
        logits = m(x)
        loss = F.cross_entropy(logits, y, label_smoothing=0.1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, logits

    out = [step(x, y) for _ in range(2)]
    out.append(ctx.fn(step)(x, y))
    return {"out": out, "m": m.state_dict()}


def bayes_nn(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions

    class BayesLinear(nn.Module):
        def __init__(s, i, o, prior_sigma=1.0):
            super().__init__()
            s.w_mu = nn.Parameter(torch.randn(o, i) * 0.1)
            s.w_rho = nn.Parameter(torch.full((o, i), -3.0))
            s.b_mu = nn.Parameter(torch.zeros(o))
            s.b_rho = nn.Parameter(torch.full((o,), -3.0))
            s.prior = D.Normal(0.0, prior_sigma)

        def posterior(s):
            return D.Normal(s.w_mu, F.softplus(s.w_rho)), D.Normal(s.b_mu, F.softplus(s.b_rho))

        def forward(s, x, eps_w, eps_b):
            qw, qb = s.posterior()
            w = qw.loc + qw.scale * eps_w
            b = qb.loc + qb.scale * eps_b
            s.kl = D.kl_divergence(qw, s.prior).sum() + D.kl_divergence(qb, s.prior).sum()
            s.log_q = D.Independent(qw, 2).log_prob(w) + qb.log_prob(b).sum()
            return F.linear(x, w, b)

    l1, l2 = ctx.init(BayesLinear(2, 6), "l1"), ctx.init(BayesLinear(6, 1), "l2")
    noise_rho = ctx.init(nn.ParameterDict({"rho": nn.Parameter(torch.tensor(-1.0))}), "noise")
    params = [*l1.parameters(), *l2.parameters(), *noise_rho.parameters()]
    opt = torch.optim.Adam(params, lr=1e-2)
    rng = np.random.default_rng(4)
    x = ctx.t(rng.uniform(-1, 1, (8, 2)).astype(np.float32))
    y = ctx.t((np.sin(3 * x.numpy()[:, :1]) + 0.1).astype(np.float32))
    out = []
    for _it in range(3):
        eps = [
            ctx.t(rng.standard_normal(s).astype(np.float32)) for s in [(6, 2), (6,), (1, 6), (1,)]
        ]
        pred = l2(torch.tanh(l1(x, eps[0], eps[1])), eps[2], eps[3])
        lik = D.Normal(pred, F.softplus(noise_rho["rho"]))
        nll = -lik.log_prob(y).sum()
        kl = l1.kl + l2.kl
        loss = nll + kl / 8
        opt.zero_grad()
        loss.backward()
        opt.step()
        mvn = D.MultivariateNormal(
            torch.zeros(2), scale_tril=torch.tensor([[1.0, 0.0], [0.5, 0.8]])
        )
        ent = mvn.entropy() + D.kl_divergence(
            mvn, D.MultivariateNormal(torch.zeros(2), torch.eye(2))
        )
        out.append((loss, kl, l1.log_q, ent))
    return {"out": out, "l1": l1.state_dict()}


def hopfield(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class Hopfield(nn.Module):
        def __init__(s, d=4, hid=6, beta=2.0, steps=3):
            super().__init__()
            s.beta, s.steps = beta, steps
            s.W_q = nn.Linear(d, hid, bias=False)
            s.W_k = nn.Linear(d, hid, bias=False)
            s.W_v = nn.Linear(d, d, bias=False)

        def forward(s, R, Y):
            Q, K = s.W_q(R), s.W_k(Y)
            xi = Q
            for _ in range(s.steps):
                xi = F.softmax(s.beta * xi @ K.transpose(-1, -2), dim=-1) @ K
            att = F.softmax(s.beta * xi @ K.transpose(-1, -2), dim=-1)
            energy = -torch.logsumexp(s.beta * xi @ K.transpose(-1, -2), -1) / s.beta + 0.5 * (
                xi * xi
            ).sum(-1)
            return att @ s.W_v(Y), energy

    m = ctx.init(Hopfield())
    cls = ctx.init(nn.Linear(4, 2), "cls")
    opt = torch.optim.NAdam([*m.parameters(), *cls.parameters()], lr=1e-2)
    rng = np.random.default_rng(5)
    R = ctx.t(rng.standard_normal((3, 2, 4)).astype(np.float32))
    Y = ctx.t(rng.standard_normal((3, 5, 4)).astype(np.float32))
    lab = ctx.t(np.array([0, 1, 1]))

    def step(R, Y, lab):
        z, energy = m(R, Y)
        loss = F.cross_entropy(cls(z.max(dim=1).values), lab) + 0.01 * energy.mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, energy

    step = ctx.fn(step)
    out = [step(R, Y, lab) for _ in range(2)]
    return {"out": out, "m": m.state_dict()}


PROGRAMS = [tacotron_attention, sampling, soft_rank, mps_einsum, bayes_nn, hopfield]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", [soft_rank, hopfield], ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
