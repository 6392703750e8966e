"""More small-model scripts: a float64 model via .double() with LBFGS-free manual SGD, feature
extraction with forward hooks and a frozen backbone, an LSTMCell seq2seq with teacher forcing,
a TransformerEncoder classifier with padding masks, a VAE with the KL term, and a siamese
triplet-margin embedding, each with a captured step where the program marks one.
"""

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007


def double_model(torch, ctx):
    nn = torch.nn
    model = ctx.init(nn.Sequential(nn.Linear(3, 6), nn.Softplus(), nn.Linear(6, 1)))
    model = model.double()
    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((10, 3)))
    y = ctx.t(rng.standard_normal((10, 1)))
    losses = []
    for _ in range(5):
        model.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        nn.utils.clip_grad_value_(model.parameters(), 0.5)
        with torch.no_grad():
            for p in model.parameters():
                p -= 0.1 * p.grad
        losses.append(loss)
    half = model.to(torch.float32)
    return [
        losses,
        [p.dtype for p in model.parameters()],
        half(x.float()),
        list(dict(model.named_parameters(prefix="net")).keys()),
        [n for n, _ in model.named_parameters(recurse=False)],
        sum(p.numel() for p in model.parameters()),
    ]


def feature_hooks(torch, ctx):
    nn = torch.nn
    backbone = ctx.init(
        nn.Sequential(
            nn.Conv2d(1, 4, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(4, 6, 3), nn.ReLU()
        ),
        "b",
    )
    features = {}

    def save(name):
        def hook(module, inp, out):
            features[name] = out.detach()

        return hook

    handles = [backbone[i].register_forward_hook(save(f"l{i}")) for i in (1, 4)]
    backbone.requires_grad_(False)
    backbone.eval()
    head = ctx.init(nn.Linear(6, 2), "h")
    opt = torch.optim.SGD(head.parameters(), lr=0.5)
    rng = np.random.default_rng(1)
    x = ctx.t(rng.standard_normal((3, 1, 10, 10)).astype(np.float32))
    y = ctx.t(np.array([0, 1, 1]))
    step = ctx.fn(lambda x, y: _step(x, y))

    def _step(x, y):
        with torch.no_grad():
            f = backbone(x).mean(dim=(2, 3))
        loss = nn.functional.cross_entropy(head(f), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    losses = [step(x, y) for _ in range(3)]
    shapes = {k: tuple(v.shape) for k, v in features.items()}
    for h in handles:
        h.remove()
    features.clear()
    backbone(x)
    return [losses, shapes, len(features), head.weight, backbone[0].weight.grad is None]


def seq2seq_cell(torch, ctx):
    nn = torch.nn

    class Seq2Seq(nn.Module):
        def __init__(self, V=7, H=12):
            super().__init__()
            self.emb = nn.Embedding(V, 6, padding_idx=0)
            self.enc = nn.LSTM(6, H, batch_first=True)
            self.cell = nn.LSTMCell(6, H)
            self.out = nn.Linear(H, V)

        def forward(self, src, tgt, teacher_forcing):
            _, (h, c) = self.enc(self.emb(src))
            h, c = h[0], c[0]
            inp = tgt[:, 0]
            logits = []
            for t in range(1, tgt.size(1)):
                h, c = self.cell(self.emb(inp), (h, c))
                step = self.out(h)
                logits.append(step)
                inp = tgt[:, t] if teacher_forcing[t] else step.argmax(-1)
            return torch.stack(logits, dim=1)

    model = ctx.init(Seq2Seq())
    rng = np.random.default_rng(2)
    src = ctx.t(rng.integers(1, 7, (4, 5)))
    tgt = ctx.t(rng.integers(1, 7, (4, 6)))
    tgt[:, 0] = 1
    tf = [True, True, False, True, False, True]
    opt = torch.optim.RMSprop(model.parameters(), lr=1e-2)
    crit = nn.CrossEntropyLoss(ignore_index=0, label_smoothing=0.1)
    out = []
    for _ in range(3):
        logits = model(src, tgt, tf)
        loss = crit(logits.reshape(-1, 7), tgt[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.append(loss)
    return [out, model.emb.weight[0], model.cell.weight_hh.grad.shape]


def transformer_cls(torch, ctx):
    nn = torch.nn

    class Cls(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(10, 16)
            self.pos = nn.Parameter(torch.zeros(1, 8, 16))
            layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
            self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.fc = nn.Linear(16, 3)

        def forward(self, ids, pad):
            h = self.enc(self.emb(ids) + self.pos[:, : ids.size(1)], src_key_padding_mask=pad)
            keep = (~pad).unsqueeze(-1).float()
            return self.fc((h * keep).sum(1) / keep.sum(1))

    model = ctx.init(Cls())
    rng = np.random.default_rng(3)
    ids = ctx.t(rng.integers(1, 10, (4, 8)))
    lengths = torch.tensor([8, 5, 3, 6])
    pad = torch.arange(8)[None, :] >= lengths[:, None]
    ids = ids.masked_fill(pad, 0)
    y = ctx.t(np.array([0, 2, 1, 2]))
    # SGD, not Adam: the attention's key bias has a gradient that is 0 up to rounding, which
    # Adam's first step turns into a whole lr
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-2, total_steps=4)
    step = ctx.fn(lambda: _step())

    def _step():
        logits = model(ids, pad)
        loss = nn.functional.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, logits

    out = []
    for _ in range(3):
        loss, logits = step()
        sched.step()
        acc = (logits.argmax(1) == y).float().mean().item()
        out.append([loss, acc, sched.get_last_lr()[0], opt.param_groups[0]["momentum"]])
    model.eval()
    with torch.no_grad():
        pred = model(ids, pad).softmax(-1)
    return [out, pred]


def vae(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class VAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(12, 8)
            self.mu = nn.Linear(8, 2)
            self.logvar = nn.Linear(8, 2)
            self.fc3 = nn.Linear(2, 8)
            self.fc4 = nn.Linear(8, 12)

        def forward(self, x, eps):
            h = F.relu(self.fc1(x))
            mu, logvar = self.mu(h), self.logvar(h)
            z = mu + eps * torch.exp(0.5 * logvar)
            return torch.sigmoid(self.fc4(F.relu(self.fc3(z)))), mu, logvar

    model = ctx.init(VAE())
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(4)
    x = ctx.t((rng.random((6, 12)) > 0.5).astype(np.float32))
    out = []
    for _ in range(3):
        eps = ctx.t(rng.standard_normal((6, 2)).astype(np.float32))
        recon, mu, logvar = model(x, eps)
        bce = F.binary_cross_entropy(recon, x, reduction="sum")
        kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
        loss = (bce + kld) / x.size(0)
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.append([bce, kld])
    # sampling shape/range checks (stream-independent)
    with torch.no_grad():
        z = torch.randn(5, 2)
        samples = torch.sigmoid(model.fc4(F.relu(model.fc3(z))))
    return [out, samples.shape, bool(((samples >= 0) & (samples <= 1)).all())]


def siamese_triplet(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    net = ctx.init(nn.Sequential(nn.Linear(5, 8), nn.PReLU(), nn.Linear(8, 4)))
    rng = np.random.default_rng(5)
    a, p, n = (ctx.t(rng.standard_normal((6, 5)).astype(np.float32)) for _ in range(3))
    opt = torch.optim.Adagrad(net.parameters(), lr=0.05)
    crit = nn.TripletMarginLoss(margin=1.0, p=2)
    crit2 = nn.TripletMarginWithDistanceLoss(
        distance_function=lambda u, v: 1 - F.cosine_similarity(u, v), margin=0.5
    )
    out = []
    for _ in range(3):
        ea, ep, en = (F.normalize(net(t), dim=1) for t in (a, p, n))
        loss = crit(ea, ep, en) + crit2(ea, ep, en)
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.append(loss)
    ea, ep = net(a), net(p)
    cos = nn.CosineEmbeddingLoss(margin=0.2)(ea, ep, torch.tensor([1, -1, 1, -1, 1, 1]))
    pdist = F.pairwise_distance(ea, ep)
    sim = F.cosine_similarity(ea.unsqueeze(1), ep.unsqueeze(0), dim=-1)
    margin = nn.MarginRankingLoss(0.1)(pdist, pdist.flip(0), torch.ones(6))
    return [out, cos, pdist, sim, margin, torch.pdist(ea)]


PROGRAMS = [double_model, feature_hooks, seq2seq_cell, transformer_cls, vae, siamese_triplet]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", [feature_hooks, transformer_cls], ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
