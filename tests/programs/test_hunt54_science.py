"""Sequence and density programs of hunt54, each run on PyTorch and on ember: an Autoformer
block (series decomposition by AvgPool1d, FFT auto-correlation with topk delays and gather),
a rational-quadratic neural spline flow (softmax bin widths, searchsorted, gather), an
AWD-LSTM (weight drop on the recurrent weight, locked and embedding dropout, tied decoder,
ASGD).
"""

import math

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007, E501, E731, F841, B023, C408, B006, E702, E701, E401, C416, UP031, B905, PIE810, SIM108, RUF005


def autoformer_autocorr(torch, ctx):
    """An Autoformer-style forecaster: a circular Conv1d embedding, auto-correlation computed
    by rfft/irfft of queries and keys, the top log(L) delays by topk, values rolled by
    gather over a doubled sequence, series decomposition by a replicate-padded AvgPool1d;
    next-step MSE training (the step captured)."""
    nn, F = torch.nn, torch.nn.functional

    class SeriesDecomp(nn.Module):
        def __init__(self, k):
            super().__init__()
            self.avg = nn.AvgPool1d(k, stride=1, padding=0)
            self.k = k

        def forward(self, x):
            front = x[:, :1, :].repeat(1, (self.k - 1) // 2, 1)
            end = x[:, -1:, :].repeat(1, (self.k - 1) // 2, 1)
            xp = torch.cat([front, x, end], dim=1)
            trend = self.avg(xp.permute(0, 2, 1)).permute(0, 2, 1)
            return x - trend, trend

    class AutoCorrelation(nn.Module):
        def __init__(self, d, factor=1):
            super().__init__()
            self.q = nn.Linear(d, d)
            self.k = nn.Linear(d, d)
            self.v = nn.Linear(d, d)
            self.o = nn.Linear(d, d)
            self.factor = factor

        def forward(self, x):
            B, L, D = x.shape
            q, k, v = self.q(x), self.k(x), self.v(x)
            qf = torch.fft.rfft(q.permute(0, 2, 1).contiguous(), dim=-1)
            kf = torch.fft.rfft(k.permute(0, 2, 1).contiguous(), dim=-1)
            corr = torch.fft.irfft(qf * torch.conj(kf), n=L, dim=-1)
            top_k = int(self.factor * math.log(L))
            mean_value = corr.mean(1)
            weights, delay = torch.topk(mean_value, top_k, dim=-1)
            tmp_corr = torch.softmax(weights, dim=-1)
            init_index = torch.arange(L).unsqueeze(0).unsqueeze(0).repeat(B, D, 1)
            vv = v.permute(0, 2, 1).repeat(1, 1, 2)
            agg = torch.zeros_like(v.permute(0, 2, 1))
            for i in range(top_k):
                idx = init_index + delay[:, i].unsqueeze(1).unsqueeze(1)
                pattern = torch.gather(vv, dim=-1, index=idx)
                agg = agg + pattern * tmp_corr[:, i].unsqueeze(1).unsqueeze(1)
            return self.o(agg.permute(0, 2, 1))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Conv1d(2, 8, 3, padding=1, padding_mode="circular")
            self.ac = AutoCorrelation(8, 2)
            self.dec = SeriesDecomp(5)
            self.head = nn.Linear(8, 2)

        def forward(self, x):
            h = self.emb(x.transpose(1, 2)).transpose(1, 2)
            h = h + self.ac(h)
            s, t = self.dec(h)
            return self.head(s + t)

    model = ctx.init(Model())
    # (SGD: q's and k's biases get a gradient of rounding noise only, which Adam would scale up)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    rng = np.random.default_rng(0)
    t = np.arange(24)
    series = np.stack([np.sin(t / 3.0), np.cos(t / 5.0)], -1)[None].repeat(
        3, 0
    ) + 0.1 * rng.standard_normal((3, 24, 2))
    x = ctx.t(series.astype(np.float32))
    step = ctx.fn(lambda x: F.mse_loss(model(x[:, :-1]), x[:, 1:]))
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = step(x)
        loss.backward()
        opt.step()
        losses.append(loss)
    return [losses, model.state_dict()]


def neural_spline_flow(torch, ctx):
    """A 2-D neural spline flow: coupling layers whose MLP gives rational-quadratic spline bins
    (softmax widths and heights, softplus derivatives padded with F.pad value=1), the bin
    found by searchsorted, gathered knots, the log-determinant; maximum likelihood on a
    noisy ring with a Normal base, gradient clipping."""
    nn, F = torch.nn, torch.nn.functional
    K, B = 5, 3.0

    def rq_spline(x, W, H, D):
        W = F.softmax(W, -1)
        H = F.softmax(H, -1)
        D = F.softplus(D)
        D = F.pad(D, (1, 1), value=1.0)
        cw = F.pad(torch.cumsum(W, -1), (1, 0), value=0.0) * 2 * B - B
        ch = F.pad(torch.cumsum(H, -1), (1, 0), value=0.0) * 2 * B - B
        inside = (x > -B) & (x < B)
        xc = x.clamp(-B + 1e-6, B - 1e-6)
        idx = torch.searchsorted(cw[..., 1:-1].contiguous(), xc.unsqueeze(-1)).squeeze(-1)
        g = lambda t: t.gather(-1, idx.unsqueeze(-1)).squeeze(-1)
        x0, x1 = g(cw), cw[..., 1:].gather(-1, idx.unsqueeze(-1)).squeeze(-1)
        y0, y1 = g(ch), ch[..., 1:].gather(-1, idx.unsqueeze(-1)).squeeze(-1)
        d0, d1 = g(D), D[..., 1:].gather(-1, idx.unsqueeze(-1)).squeeze(-1)
        w = x1 - x0
        h = y1 - y0
        s = h / w
        th = (xc - x0) / w
        num = h * (s * th**2 + d0 * th * (1 - th))
        den = s + (d1 + d0 - 2 * s) * th * (1 - th)
        y = y0 + num / den
        dnum = s**2 * (d1 * th**2 + 2 * s * th * (1 - th) + d0 * (1 - th) ** 2)
        logdet = torch.log(dnum) - 2 * torch.log(den)
        return torch.where(inside, y, x), torch.where(inside, logdet, torch.zeros_like(logdet))

    class Coupling(nn.Module):
        def __init__(self, flip):
            super().__init__()
            self.flip = flip
            self.net = nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 3 * K - 1))

        def forward(self, x):
            a, b = (x[:, 1:], x[:, :1]) if self.flip else (x[:, :1], x[:, 1:])
            p = self.net(a)
            W, H, D = p[:, :K], p[:, K : 2 * K], p[:, 2 * K :]
            yb, ld = rq_spline(b.squeeze(-1), W, H, D)
            yb = yb.unsqueeze(-1)
            out = torch.cat([yb, a], 1) if self.flip else torch.cat([a, yb], 1)
            return out, ld

    flows = ctx.init(nn.ModuleList([Coupling(i % 2 == 1) for i in range(4)]))
    base = torch.distributions.Normal(torch.zeros(2), torch.ones(2))
    opt = torch.optim.Adam(flows.parameters(), lr=3e-3)
    rng = np.random.default_rng(0)
    losses = []
    for _ in range(4):
        th = rng.uniform(0, 2 * np.pi, 64)
        data = ctx.t(
            np.stack([2 * np.cos(th), 2 * np.sin(th)], 1).astype(np.float32)
            + 0.1 * rng.standard_normal((64, 2)).astype(np.float32)
        )
        z, total = data, torch.zeros(64)
        for f in flows:
            z, ld = f(z)
            total = total + ld
        loss = -(base.log_prob(z).sum(-1) + total).mean()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(flows.parameters(), 5.0)
        opt.step()
        losses.append(loss)
    return [losses, z[:4], total[:4]]


def awd_lstm(torch, ctx):
    """An AWD-LSTM language model: WeightDrop replacing the LSTM's weight_hh_l0 by a dropped
    copy of a raw parameter each forward, locked (variational) dropout from bernoulli_,
    embedding dropout by a row mask through F.embedding, tied encoder/decoder weights,
    truncated BPTT with detached states, ASGD and clipping."""
    nn, F = torch.nn, torch.nn.functional

    class LockedDropout(nn.Module):
        def forward(self, x, p=0.3):
            if not self.training or not p:
                return x
            m = x.new_empty(1, x.size(1), x.size(2)).bernoulli_(1 - p)
            return x * (m / (1 - p))

    def embedded_dropout(embed, words, dropout=0.1):
        mask = embed.weight.new_empty((embed.weight.size(0), 1)).bernoulli_(1 - dropout).expand_as(
            embed.weight
        ) / (1 - dropout)
        w = mask * embed.weight
        return F.embedding(
            words,
            w,
            embed.padding_idx,
            embed.max_norm,
            embed.norm_type,
            embed.scale_grad_by_freq,
            embed.sparse,
        )

    class WeightDrop(nn.Module):
        def __init__(self, module, weights, dropout):
            super().__init__()
            self.module, self.weights, self.dropout = module, weights, dropout
            for name in weights:
                w = getattr(module, name)
                del module._parameters[name]
                module.register_parameter(name + "_raw", nn.Parameter(w.data))

        def forward(self, *args):
            for name in self.weights:
                raw = getattr(self.module, name + "_raw")
                setattr(self.module, name, F.dropout(raw, p=self.dropout, training=self.training))
            return self.module(*args)

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Embedding(20, 8)
            self.rnn = WeightDrop(nn.LSTM(8, 8), ["weight_hh_l0"], 0.3)
            self.drop = LockedDropout()
            self.dec = nn.Linear(8, 20)
            self.dec.weight = self.enc.weight

        def forward(self, x, h):
            e = embedded_dropout(self.enc, x, 0.1 if self.training else 0)
            e = self.drop(e, 0.2)
            out, h = self.rnn(e, h)
            out = self.drop(out, 0.3)
            return self.dec(out), h

    torch.manual_seed(0)
    lm = LM()
    ctx.init(lm)
    opt = torch.optim.ASGD(lm.parameters(), lr=0.5, t0=0, lambd=0.0, weight_decay=1.2e-6)
    rng = np.random.default_rng(0)
    data = ctx.t(rng.integers(0, 20, (13, 2)))
    h = (torch.zeros(1, 2, 8), torch.zeros(1, 2, 8))
    torch.manual_seed(1)
    losses = []
    for i in range(0, 12, 4):
        x, y = data[i : i + 4], data[i + 1 : i + 5]
        h = tuple(t.detach() for t in h)
        opt.zero_grad()
        out, h = lm(x, h)
        raw_loss = F.cross_entropy(out.view(-1, 20), y.reshape(-1))
        loss = raw_loss + 2e-6 * out.pow(2).mean()
        loss.backward()
        nn.utils.clip_grad_norm_(lm.parameters(), 0.25)
        opt.step()
        losses.append(loss)
    lm.eval()
    with torch.no_grad():
        ev, _ = lm(data[:4], None)
    return [losses, ev, sorted(lm.state_dict().keys()), opt.state_dict()["state"][0]["ax"]]


PROGRAMS = [autoformer_autocorr, neural_spline_flow, awd_lstm]
CAPTURED = [autoformer_autocorr]
TOLERANCES = {}


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program, **TOLERANCES.get(program.__name__, {}))


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True, **TOLERANCES.get(program.__name__, {}))
