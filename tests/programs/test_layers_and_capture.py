"""Layers and capture features as programs use them: thirty-odd modules (norms, activations,
recurrent layers and cells, padded and grouped convolutions, pools, unpooling) forward and
backward, adaptive log-softmax, forward and pre-hooks inside a captured step, bfloat16 autocast
with GradScaler, checkpointing (reentrant and not, checkpoint_sequential), torch.compile of a
model.
"""

import numpy as np
import pytest

from .harness import check_program

# each program is PyTorch source written against ``torch`` (the library passed in)
# ruff: noqa: N806


def module_zoo(torch, ctx):
    nn = torch.nn
    rng = np.random.default_rng(0)
    x2 = ctx.t(rng.standard_normal((2, 4, 5, 5)).astype(np.float32), requires_grad=True)
    x1 = ctx.t(rng.standard_normal((2, 4, 7)).astype(np.float32), requires_grad=True)
    v = ctx.t(rng.standard_normal((3, 4)).astype(np.float32), requires_grad=True)
    mods = {
        "bil": (nn.Bilinear(4, 4, 3), lambda m: m(v, v.flip(0))),
        "glu": (nn.GLU(1), lambda m: m(x2)),
        "sm2d": (nn.Softmax2d(), lambda m: m(x2)),
        "lrn": (nn.LocalResponseNorm(3), lambda m: m(x2)),
        "in2": (nn.InstanceNorm2d(4, affine=True, track_running_stats=True), lambda m: m(x2)),
        "in1": (nn.InstanceNorm1d(4), lambda m: m(x1)),
        "gn": (nn.GroupNorm(2, 4), lambda m: m(x2)),
        "ln_nobias": (nn.LayerNorm([5, 5], elementwise_affine=True, bias=False), lambda m: m(x2)),
        "rms": (nn.RMSNorm(4, eps=1e-5), lambda m: m(v)),
        "rms2": (nn.RMSNorm([5, 5]), lambda m: m(x2)),
        "prelu": (nn.PReLU(4, init=0.1), lambda m: m(x2)),
        "rrelu": (nn.RReLU(0.1, 0.3).eval(), lambda m: m(x2)),
        "shrink": (
            nn.Sequential(
                nn.Hardshrink(0.3), nn.Softshrink(0.2), nn.Tanhshrink(), nn.Threshold(0.1, -1.0)
            ),
            lambda m: m(x2),
        ),
        "acts": (
            nn.Sequential(
                nn.CELU(0.5),
                nn.SELU(),
                nn.Mish(),
                nn.Hardsigmoid(),
                nn.LogSigmoid(),
                nn.Softplus(2.0, 10),
                nn.Hardswish(),
                nn.SiLU(),
                nn.ELU(0.7),
                nn.Hardtanh(-0.5, 0.5),
                nn.ReLU6(),
                nn.Softsign(),
            ),
            lambda m: m(x2),
        ),
        "softmin": (nn.Softmin(dim=1), lambda m: m(v)),
        "logsm": (nn.LogSoftmax(dim=0), lambda m: m(v)),
        "unflat": (nn.Unflatten(1, (2, 2)), lambda m: m(v)),
        "chshuf": (nn.ChannelShuffle(2), lambda m: m(x2)),
        "ps": (
            nn.Sequential(nn.PixelShuffle(2), nn.PixelUnshuffle(2)),
            lambda m: m(x2[:, :, :4, :4]),
        ),
        "fold": (nn.Fold((5, 5), 3, padding=1), lambda m: m(nn.Unfold(3, padding=1)(x2))),
        "rnn_relu": (
            nn.RNN(4, 5, num_layers=2, nonlinearity="relu", bidirectional=True),
            lambda m: m(x1.permute(2, 0, 1))[0],
        ),
        "gru_bf": (
            nn.GRU(4, 3, num_layers=2, batch_first=True, bidirectional=True),
            lambda m: m(x1.transpose(1, 2), torch.ones(4, 2, 3))[1],
        ),
        "lstm_proj": (
            nn.LSTM(4, 6, proj_size=2, batch_first=True, num_layers=2),
            lambda m: m(x1.transpose(1, 2))[0],
        ),
        "cells": (
            nn.ModuleList(
                [nn.RNNCell(4, 3, nonlinearity="tanh"), nn.GRUCell(4, 3), nn.LSTMCell(4, 3)]
            ),
            lambda m: m[0](v) + m[1](v) + m[2](v)[1],
        ),
        "convs": (
            nn.ModuleList(
                [
                    nn.Conv1d(4, 2, 3, padding="same", padding_mode="reflect"),
                    nn.Conv2d(4, 2, 3, padding="same", dilation=2, padding_mode="circular"),
                    nn.ConvTranspose1d(4, 2, 3, stride=2, output_padding=1, groups=2),
                    nn.Conv2d(4, 4, 3, groups=4, padding_mode="replicate", padding=1),
                ]
            ),
            lambda m: [m[0](x1), m[1](x2), m[2](x1), m[3](x2)],
        ),
        "pools": (
            nn.ModuleList(
                [
                    nn.MaxPool2d(3, 2, 1, ceil_mode=True),
                    nn.AvgPool2d(3, 2, 1, ceil_mode=True, count_include_pad=False),
                    nn.LPPool2d(2, 2),
                    nn.AdaptiveMaxPool1d(3),
                    nn.AvgPool1d(2),
                    nn.MaxPool1d(3, 1, 1, dilation=1),
                ]
            ),
            lambda m: [m[0](x2), m[1](x2), m[2](x2.abs()), m[3](x1), m[4](x1), m[5](x1)],
        ),
        "maxunpool": (
            nn.ModuleList([nn.MaxPool2d(2, return_indices=True), nn.MaxUnpool2d(2)]),
            lambda m: m[1](*m[0](x2[:, :, :4, :4])),
        ),
        "emb": (
            nn.Embedding(10, 3, max_norm=1.0, norm_type=2.0),
            lambda m: m(torch.tensor([[1, 2, 1], [9, 0, 3]])),
        ),
        "ident": (nn.Identity(54, unused="x"), lambda m: m(v)),
        "cosine": (nn.CosineSimilarity(dim=1, eps=1e-6), lambda m: m(v, v.flip(1))),
        "pdist": (nn.PairwiseDistance(p=3, keepdim=True), lambda m: m(v, v.flip(0))),
        "afn": (
            nn.Sequential(nn.Flatten(0, 1), nn.Dropout1d(0.0), nn.AlphaDropout(0.0)),
            lambda m: m(x1),
        ),
    }
    built = {}
    for k, (mod, _) in mods.items():
        torch.manual_seed(0)
        built[k] = ctx.init(mod, k)

    def run():  # (the calls read x2, x1 and v from the closure)
        out = {}
        for k, (_, call) in mods.items():
            out[k] = call(built[k])
        tot = 0
        for i, o in enumerate(out.values()):
            for t in o if isinstance(o, list) else [o]:
                tot = tot + (t.float() * (i + 1)).sin().sum()
        tot.backward()
        return out

    out = ctx.fn(run)()
    out["gx2"] = x2.grad
    out["gx1"] = x1.grad
    out["gv"] = v.grad
    out["pgrads"] = {k: [p.grad for p in m.parameters()] for k, m in built.items()}
    return out


def adaptive_softmax(torch, ctx):
    nn = torch.nn
    m = ctx.init(nn.AdaptiveLogSoftmaxWithLoss(8, 20, cutoffs=[5, 12], div_value=2.0))
    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((6, 8)).astype(np.float32))
    y = ctx.t(np.array([0, 4, 7, 13, 19, 11]))
    o = m(x, y)
    o.loss.backward()
    return {
        "out": o.output,
        "loss": o.loss,
        "lp": m.log_prob(x),
        "pred": m.predict(x),
        "g": m.head.weight.grad,
    }


def captured_hooks(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    m = ctx.init(nn.Sequential(nn.Linear(3, 6), nn.GELU(approximate="tanh"), nn.Linear(6, 2)))
    feats = []
    m[1].register_forward_hook(lambda mod, i, o: feats.append(o.detach()))
    m[0].register_forward_pre_hook(lambda mod, args: (args[0] * 0.5,))
    m[2].register_forward_hook(lambda mod, i, o: o + 1.0)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((4, 3)).astype(np.float32))
    y = ctx.t(rng.integers(0, 2, 4))

    def step(x, y):
        opt.zero_grad()
        out = m(x)
        loss = F.cross_entropy(out, y)
        loss.backward()
        torch.nn.utils.clip_grad_value_(m.parameters(), 0.05)
        opt.step()
        acc = (out.argmax(1) == y).float().mean()
        return loss, acc, feats[-1]

    step = ctx.fn(step)
    r = [step(x, y) for _ in range(3)]
    return {"r": r, "p": dict(m.state_dict())}


def amp_scaler(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    m = ctx.init(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)))
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**4, growth_interval=2)
    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((6, 4)).astype(np.float32))
    y = ctx.t(rng.integers(0, 3, 6))
    res = []
    for _ in range(4):
        opt.zero_grad()
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            out = m(x)
            loss = F.cross_entropy(out, y)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        res.append(
            [
                loss.item(),
                scaler.get_scale(),
                str(out.dtype).split(".")[-1],
                str(loss.dtype).split(".")[-1],
            ]
        )
    return {"r": res, "p": dict(m.state_dict())}


def reentrant_ckpt(torch, ctx):
    nn = torch.nn
    cp = torch.utils.checkpoint
    blocks = ctx.init(nn.ModuleList([nn.Sequential(nn.Linear(6, 6), nn.Tanh()) for _ in range(4)]))
    opt = torch.optim.SGD(blocks.parameters(), lr=0.1)
    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((3, 6)).astype(np.float32), requires_grad=True)

    def step(x):
        opt.zero_grad()
        h = cp.checkpoint_sequential(nn.Sequential(*blocks[:2]), 2, x, use_reentrant=False)
        h = cp.checkpoint(blocks[2], h, use_reentrant=True)
        h = blocks[3](h)
        loss = h.pow(2).sum()
        loss.backward()
        opt.step()
        return loss

    step = ctx.fn(step)
    r = [step(x).item() for _ in range(2)]
    return {"r": r, "gx": x.grad, "p": dict(blocks.state_dict())}


def compile_model(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    m = ctx.init(nn.Sequential(nn.Conv2d(1, 3, 3), nn.ReLU(), nn.Flatten(), nn.Linear(12, 2)))
    cm = torch.compile(m) if ctx.is_torch is False else m
    rng = np.random.default_rng(0)
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    res = []
    for i in range(3):
        x = ctx.t(rng.standard_normal((2 + i, 1, 4, 4)).astype(np.float32))
        y = ctx.t(rng.integers(0, 2, 2 + i))
        opt.zero_grad()
        loss = F.cross_entropy(cm(x), y)
        loss.backward()
        opt.step()
        res.append(loss.item())
    with torch.no_grad():
        ev = cm(x)
    return {"l": res, "ev": ev}


PROGRAMS = [module_zoo, adaptive_softmax, captured_hooks, amp_scaler, reentrant_ckpt, compile_model]
CAPTURED = [module_zoo, adaptive_softmax, captured_hooks, reentrant_ckpt]


# the zoo sums sines of thirty outputs (gradients near 300, float32 sums of them); autocast
# computes in bfloat16
TOLERANCES = {module_zoo: dict(rtol=1e-4, atol=2e-3), amp_scaler: dict(rtol=1e-2, atol=1e-2)}


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program, **TOLERANCES.get(program, {}))


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True, **TOLERANCES.get(program, {}))
