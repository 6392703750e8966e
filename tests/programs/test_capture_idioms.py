"""Training-step idioms that lean on how a captured step treats state, as whole PyTorch
programs: adversarial training (FGSM / PGD with the input's .grad), old-style manual updates
through ``p.data``, a checkpoint from an older version of a module loaded through a
``_load_from_state_dict`` override, and a step returning None and Python values.
"""

import io

import numpy as np
import pytest

from .harness import check_program

# each program is PyTorch source written against ``torch`` (the library passed in)
# ruff: noqa: N806


def adversarial(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    m = ctx.init(nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3)))
    opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
    rng = np.random.default_rng(32)
    x = ctx.t(rng.standard_normal((8, 4)).astype(np.float32))
    y = ctx.t(rng.integers(0, 3, 8))

    def fgsm(x, y, eps):
        x = x.clone().detach().requires_grad_(True)
        loss = F.cross_entropy(m(x), y)
        m.zero_grad()
        loss.backward()
        return (x + eps * x.grad.sign()).detach()

    def pgd(x, y, eps, alpha, steps):
        delta = torch.zeros_like(x, requires_grad=True)
        for _ in range(steps):
            loss = F.cross_entropy(m(x + delta), y)
            (g,) = torch.autograd.grad(loss, delta)
            delta = (delta + alpha * g.sign()).clamp(-eps, eps).detach().requires_grad_(True)
        return (x + delta).detach()

    def step(x, y):
        x_adv = fgsm(x, y, 0.1)
        x_pgd = pgd(x, y, 0.1, 0.04, 3)
        loss = (
            F.cross_entropy(m(x), y) + F.cross_entropy(m(x_adv), y) + F.cross_entropy(m(x_pgd), y)
        ) / 3
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, None, {"clean": F.cross_entropy(m(x), y).detach()}

    step = ctx.fn(step)
    res = []
    for _ in range(3):
        loss, nothing, extra = step(x, y)
        res += [loss.item(), nothing is None, extra["clean"].item()]
    return {"res": res, "w": m[0].weight}


def manual_data_updates(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    m = ctx.init(nn.Sequential(nn.Linear(3, 6), nn.Tanh(), nn.Linear(6, 1)))
    rng = np.random.default_rng(33)
    x = ctx.t(rng.standard_normal((5, 3)).astype(np.float32))
    y = ctx.t(rng.standard_normal((5, 1)).astype(np.float32))
    velocity = [torch.zeros_like(p) for p in m.parameters()]

    def step(x, y, lr=0.05, mu=0.9):
        loss = F.mse_loss(m(x), y)
        m.zero_grad()
        loss.backward()
        for p, v in zip(m.parameters(), velocity):
            v.mul_(mu).add_(p.grad)
            p.data = p.data - lr * v
        flat = torch.nn.utils.parameters_to_vector(m.parameters())
        torch.nn.utils.vector_to_parameters(flat.clamp(-1.0, 1.0), m.parameters())
        return loss

    step = ctx.fn(step)
    res = [step(x, y).item() for _ in range(4)]
    return {"l": res, "sd": dict(m.state_dict()), "v": velocity, "leaf": m[0].weight.is_leaf}


def legacy_checkpoint(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class Gate(nn.Module):
        """Version 2 stores one fused projection where version 1 had two."""

        def __init__(s):
            super().__init__()
            s.proj = nn.Linear(4, 8)

        def _load_from_state_dict(s, state_dict, prefix, *args):
            a, b = prefix + "value.weight", prefix + "gate.weight"
            if a in state_dict:  # a version-1 checkpoint: fuse its two projections
                state_dict[prefix + "proj.weight"] = torch.cat(
                    [state_dict.pop(a), state_dict.pop(b)]
                )
                state_dict[prefix + "proj.bias"] = torch.cat(
                    [state_dict.pop(prefix + "value.bias"), state_dict.pop(prefix + "gate.bias")]
                )
            super()._load_from_state_dict(state_dict, prefix, *args)

        def forward(s, x):
            v, g = s.proj(x).chunk(2, -1)
            return v * torch.sigmoid(g)

    model = nn.Sequential(Gate(), nn.Linear(4, 2))
    rng = np.random.default_rng(34)
    old = {
        "0.value.weight": rng.standard_normal((4, 4)),
        "0.gate.weight": rng.standard_normal((4, 4)),
        "0.value.bias": rng.standard_normal(4),
        "0.gate.bias": rng.standard_normal(4),
        "1.weight": rng.standard_normal((2, 4)),
        "1.bias": rng.standard_normal(2),
    }
    buf = io.BytesIO()
    torch.save({k: ctx.t(v.astype(np.float32)) for k, v in old.items()}, buf)
    buf.seek(0)
    result = model.load_state_dict(torch.load(buf, weights_only=True))
    seen = []
    model.register_load_state_dict_post_hook(lambda mod, keys: seen.append(len(keys.missing_keys)))
    model.load_state_dict(model.state_dict())
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x = ctx.t(rng.standard_normal((6, 4)).astype(np.float32))
    y = ctx.t(rng.integers(0, 2, 6))

    def step(x, y):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = ctx.fn(step)
    res = [step(x, y).item() for _ in range(3)]
    return {
        "l": res,
        "keys": sorted(model.state_dict()),
        "missing": list(result.missing_keys),
        "seen": seen,
        "w": model[0].proj.weight,
    }


PROGRAMS = [adversarial, manual_data_updates, legacy_checkpoint]
CAPTURED = [adversarial, manual_data_updates, legacy_checkpoint]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
