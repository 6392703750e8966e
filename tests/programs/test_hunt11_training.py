"""Training machinery as users write it: pad_sequence / pack_sequence / pad_packed_sequence round
trips into a GRU, Lion and Adafactor written as torch.optim.Optimizer subclasses over param
groups, SequentialLR / ChainedScheduler / LambdaLR warmups with their state dicts, a bfloat16
autocast training loop on the CPU.
"""

import math

import numpy as np
import pytest

from .harness import check_program

# each program is PyTorch source written against ``torch`` (the library passed in)
# ruff: noqa: N806, E741


def rnn_utils_roundtrip(torch, ctx):
    nn = torch.nn
    R = nn.utils.rnn
    rng = np.random.default_rng(0)
    seqs = [ctx.t(rng.standard_normal((n, 3)).astype(np.float32)) for n in (2, 4, 3)]
    padded = R.pad_sequence(seqs, batch_first=True, padding_value=-1.0)
    padded_left = R.pad_sequence(seqs, batch_first=True, padding_side="left")
    lengths = torch.tensor([len(s) for s in seqs])
    packed = R.pack_padded_sequence(padded, lengths, batch_first=True, enforce_sorted=False)
    packed2 = R.pack_sequence(seqs, enforce_sorted=False)
    same = torch.equal(packed.data, packed2.data) and torch.equal(
        packed.batch_sizes, packed2.batch_sizes
    )
    gru = ctx.init(nn.GRU(3, 4, batch_first=True, bidirectional=True))
    opt = torch.optim.Adam(gru.parameters(), lr=1e-2)
    out = []
    for _ in range(2):
        o, h = gru(packed)
        unpacked, lens = R.pad_packed_sequence(o, batch_first=True, total_length=5)
        back = R.unpad_sequence(unpacked, lens, batch_first=True)
        pooled = torch.stack([b.mean(0) for b in back])
        loss = pooled.pow(2).sum() + h.abs().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.append((loss, unpacked, lens))
    unpacked_seqs = R.unpack_sequence(packed2)
    return {
        "padded": padded,
        "left": padded_left,
        "packed": [packed.data, packed.batch_sizes, packed.sorted_indices, packed.unsorted_indices],
        "same": same,
        "out": out,
        "unpacked": unpacked_seqs,
        "gru": gru.state_dict(),
    }


def custom_optimizers(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class Lion(torch.optim.Optimizer):
        def __init__(s, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0):
            if not 0.0 <= lr:
                raise ValueError(f"Invalid learning rate: {lr}")
            super().__init__(params, dict(lr=lr, betas=betas, weight_decay=weight_decay))

        @torch.no_grad()
        def step(s, closure=None):
            loss = None
            if closure is not None:
                with torch.enable_grad():
                    loss = closure()
            for group in s.param_groups:
                for p in filter(lambda p: p.grad is not None, group["params"]):
                    grad, lr, wd = p.grad, group["lr"], group["weight_decay"]
                    beta1, beta2 = group["betas"]
                    state = s.state[p]
                    if len(state) == 0:
                        state["exp_avg"] = torch.zeros_like(p)
                    exp_avg = state["exp_avg"]
                    p.data.mul_(1 - lr * wd)
                    update = exp_avg.clone().mul_(beta1).add(grad, alpha=1 - beta1).sign_()
                    p.add_(update, alpha=-lr)
                    exp_avg.mul_(beta2).add_(grad, alpha=1 - beta2)
            return loss

    class Adafactor(torch.optim.Optimizer):
        def __init__(
            s, params, lr=None, eps=(1e-30, 1e-3), clip=1.0, decay_rate=-0.8, relative_step=True
        ):
            super().__init__(
                params,
                dict(lr=lr, eps=eps, clip=clip, decay_rate=decay_rate, relative_step=relative_step),
            )

        @staticmethod
        def _rms(t):
            return t.norm(2) / (t.numel() ** 0.5)

        @torch.no_grad()
        def step(s, closure=None):
            for group in s.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    grad = p.grad
                    state = s.state[p]
                    factored = grad.dim() >= 2
                    if len(state) == 0:
                        state["step"] = 0
                        if factored:
                            state["exp_avg_sq_row"] = torch.zeros(grad.shape[:-1])
                            state["exp_avg_sq_col"] = torch.zeros(grad.shape[:-2] + grad.shape[-1:])
                        else:
                            state["exp_avg_sq"] = torch.zeros_like(grad)
                        state["RMS"] = 0
                    state["step"] += 1
                    state["RMS"] = s._rms(p).item()
                    rel = min(1e-2, 1.0 / math.sqrt(state["step"]))
                    lr = (
                        rel * max(group["eps"][1], state["RMS"])
                        if group["relative_step"]
                        else group["lr"]
                    )
                    beta2t = 1.0 - math.pow(state["step"], group["decay_rate"])
                    update = grad**2 + group["eps"][0]
                    if factored:
                        r, c = state["exp_avg_sq_row"], state["exp_avg_sq_col"]
                        r.mul_(beta2t).add_(update.mean(dim=-1), alpha=1.0 - beta2t)
                        c.mul_(beta2t).add_(update.mean(dim=-2), alpha=1.0 - beta2t)
                        r_factor = (r / r.mean(dim=-1, keepdim=True)).rsqrt_().unsqueeze(-1)
                        c_factor = c.unsqueeze(-2).rsqrt()
                        update = torch.mul(r_factor, c_factor).mul_(grad)
                    else:
                        v = state["exp_avg_sq"]
                        v.mul_(beta2t).add_(update, alpha=1.0 - beta2t)
                        update = v.rsqrt().mul_(grad)
                    update.div_((s._rms(update) / group["clip"]).clamp_(min=1.0))
                    p.add_(-update * lr)

    rng = np.random.default_rng(1)
    x = ctx.t(rng.standard_normal((6, 4)).astype(np.float32))
    y = ctx.t(rng.standard_normal((6, 2)).astype(np.float32))
    out = {}
    for name in ("lion", "adafactor"):
        m = ctx.init(
            nn.Sequential(nn.Linear(4, 5), nn.GELU(approximate="tanh"), nn.Linear(5, 2)), name
        )
        decay = [p for n, p in m.named_parameters() if n.endswith("weight")]
        no_decay = [p for n, p in m.named_parameters() if n.endswith("bias")]
        if name == "lion":
            opt = Lion(
                [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "lr": 3e-3}], lr=1e-2
            )
        else:
            opt = Adafactor(
                [{"params": decay}, {"params": no_decay, "relative_step": False, "lr": 1e-2}]
            )
        losses = []
        for _ in range(3):

            def closure():
                opt.zero_grad()
                loss = F.mse_loss(m(x), y)
                loss.backward()
                return loss

            loss = closure()
            opt.step()
            losses.append(loss)
        sd = opt.state_dict()
        out[name] = {
            "losses": losses,
            "m": m.state_dict(),
            "groups": [{k: v for k, v in g.items() if k != "params"} for g in sd["param_groups"]],
            "nstate": len(sd["state"]),
        }
    return out


def warmup_schedulers(torch, ctx):
    nn = torch.nn
    S = torch.optim.lr_scheduler
    m = ctx.init(nn.Linear(3, 1))
    rng = np.random.default_rng(2)
    x = ctx.t(rng.standard_normal((4, 3)).astype(np.float32))

    def run(make, steps=7):
        opt = torch.optim.SGD(
            [{"params": [m.weight]}, {"params": [m.bias], "lr": 0.05}], lr=0.1, momentum=0.9
        )
        sch = make(opt)
        lrs = []
        for _ in range(steps):
            opt.zero_grad()
            m(x).pow(2).mean().backward()
            opt.step()
            sch.step()
            lrs.append([round(g["lr"], 10) for g in opt.param_groups])
        return lrs, sch

    warm = 3
    seq, s1 = run(
        lambda o: S.SequentialLR(
            o,
            [
                S.LinearLR(o, start_factor=0.1, total_iters=warm),
                S.CosineAnnealingLR(o, T_max=5, eta_min=1e-3),
            ],
            milestones=[warm],
        )
    )
    chain, s2 = run(
        lambda o: S.ChainedScheduler(
            [S.ConstantLR(o, factor=0.5, total_iters=2), S.ExponentialLR(o, gamma=0.9)]
        )
    )

    def lr_lambda(step):
        if step < warm:
            return float(step + 1) / warm
        return max(0.0, 0.5 * (1.0 + math.cos(math.pi * (step - warm) / 4)))

    lam, s3 = run(lambda o: S.LambdaLR(o, [lr_lambda, lambda e: 0.95**e]))
    poly, s4 = run(lambda o: S.PolynomialLR(o, total_iters=5, power=2.0))
    sd = s1.state_dict()
    return {
        "seq": seq,
        "chain": chain,
        "lam": lam,
        "poly": poly,
        "last": [s.get_last_lr() for s in (s1, s2, s3, s4)],
        "seq_epoch": sd["last_epoch"],
        "seq_idx": sd["_milestones"],
        "w": m.weight,
    }


def autocast_bf16(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):
        def __init__(s):
            super().__init__()
            s.conv = nn.Conv2d(2, 4, 3, padding=1)
            s.norm = nn.LayerNorm(4 * 4 * 4)
            s.fc = nn.Linear(64, 3)

        def forward(s, x):
            h = F.relu(s.conv(x)).flatten(1)
            return s.fc(s.norm(h))

    m = ctx.init(Net())
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
    rng = np.random.default_rng(3)
    x = ctx.t(rng.standard_normal((4, 2, 4, 4)).astype(np.float32))
    y = ctx.t(np.array([0, 2, 1, 2]))
    out = []
    for _ in range(3):
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            logits = m(x)
            loss = F.cross_entropy(logits, y)
            dtypes = (logits.dtype, loss.dtype, m.conv(x).dtype)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        out.append((loss.float(), dtypes, m.fc.weight.grad.dtype))
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=False):
        full = m(x)
    return {"out": out, "full": full, "m": m.state_dict()}


PROGRAMS = [rnn_utils_roundtrip, custom_optimizers, warmup_schedulers, autocast_bf16]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    # bfloat16: 8 significand bits; a few roundings deep through three steps
    tol = dict(rtol=2e-2, atol=2e-2) if program is autocast_bf16 else {}
    check_program(program, **tol)
