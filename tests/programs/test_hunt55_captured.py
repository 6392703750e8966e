"""Steps of hunt55 captured by ember.function, each run on PyTorch, on ember eagerly and on ember
captured: an HF-style training step with clipping and OneCycleLR, KV-cache decoding whose
cache grows every call, top-k/top-p sampling (sort, cumsum, scatter, multinomial) and the vision
ops' gradients (affine_grid, grid_sample, pixel (un)shuffle, rot90/flip/roll, fold/unfold).
"""

import numpy as np
import pytest

from .harness import check_program
from .test_hunt55_models import TinyConfig, _hf_model, _sample_top_k_top_p

# ruff: noqa: N806, E741, B007, E501, E731, F841, B023, C408, B006, E702, E701, E401, C416, UP031, B905, PIE810, SIM108, RUF005


def captured_hf_step(torch, ctx):
    cfg = TinyConfig()
    model = ctx.init(_hf_model(torch, cfg))
    F = torch.nn.functional
    rng = np.random.default_rng(0)
    ids = ctx.t(rng.integers(1, cfg.vocab_size, (3, 10)))
    am = ctx.t(np.array([[1] * 10, [1] * 7 + [0] * 3, [1] * 5 + [0] * 5]))
    labels = torch.where(am.bool(), ids, -100)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-2, total_steps=10)

    def step(ids, am, labels):
        out = model(ids, attention_mask=am)
        logits = out["logits"][:, :-1]
        loss = F.cross_entropy(logits.reshape(-1, cfg.vocab_size), labels[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        opt.step()
        return loss.detach(), gn

    step = ctx.fn(step)
    losses = []
    for _ in range(4):
        l, gn = step(ids, am, labels)
        sched.step()
        losses.append([l, gn])
    return [losses, model.embed.weight, opt.param_groups[0]["lr"]]


def captured_decode(torch, ctx):
    cfg = TinyConfig()
    model = ctx.init(_hf_model(torch, cfg)).eval()
    rng = np.random.default_rng(1)
    prompt = ctx.t(rng.integers(1, cfg.vocab_size, (2, 4)))

    @torch.no_grad()
    def decode_step(tok, past):
        out = model(tok, past_key_values=past)
        return out["logits"][:, -1], out["past_key_values"]

    decode_step = ctx.fn(decode_step)
    with torch.no_grad():
        out = model(prompt)
    past = out["past_key_values"]
    nxt = out["logits"][:, -1].argmax(-1, keepdim=True)
    ids = [nxt]
    for _ in range(4):
        logits, past = decode_step(nxt, past)
        nxt = logits.argmax(-1, keepdim=True)
        ids.append(nxt)
    return [torch.cat(ids, 1), logits]


def captured_sampling(torch, ctx):
    rng = np.random.default_rng(2)
    logits = ctx.t(rng.standard_normal((3, 20)).astype(np.float32) * 2)

    def sample(logits, temperature: float):
        return _sample_top_k_top_p(torch, logits, 5, 0.8, temperature, None)

    sample = ctx.fn(sample)
    torch.manual_seed(11)
    outs = [sample(logits, 0.7) for _ in range(3)]

    def mask_fill(logits):
        sorted_logits, sorted_idx = torch.sort(logits, descending=True)
        cum = sorted_logits.softmax(-1).cumsum(-1)
        remove = cum > 0.9
        remove[..., 1:] = remove[..., :-1].clone()
        remove[..., 0] = False
        mask = remove.scatter(1, sorted_idx, remove)
        return logits.masked_fill(mask, -float("inf")).softmax(-1)

    outs.append(ctx.fn(mask_fill)(logits))
    return outs


def captured_vision(torch, ctx):
    F = torch.nn.functional
    rng = np.random.default_rng(4)
    img = ctx.t(rng.standard_normal((2, 3, 6, 7)).astype(np.float32), requires_grad=True)
    theta = ctx.t(
        (np.eye(2, 3)[None] + 0.1 * rng.standard_normal((2, 2, 3))).astype(np.float32),
        requires_grad=True,
    )

    def f(img, theta):
        grid = F.affine_grid(theta, (2, 3, 5, 5), align_corners=False)
        a = F.grid_sample(
            img, grid, mode="bilinear", padding_mode="reflection", align_corners=False
        )
        b = F.grid_sample(img, grid, mode="bicubic", padding_mode="border", align_corners=True)
        c = F.pixel_unshuffle(F.pixel_shuffle(img.repeat(1, 4, 1, 1), 2), 2)
        d = torch.rot90(img, 1, (2, 3)).flip(1).roll(2, dims=3)
        e = F.fold(F.unfold(img, 3, padding=1), (6, 7), 3, padding=1)
        loss = a.square().mean() + b.square().mean() + c.mean() + d.pow(3).mean() + e.mean()
        loss.backward()
        return loss.detach()

    f = ctx.fn(f)
    l = f(img, theta)
    return [l, img.grad, theta.grad]


PROGRAMS = [captured_hf_step, captured_decode, captured_sampling, captured_vision]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
