"""Python-level idioms of PyTorch programs: a hand-written SGD with momentum (no_grad updates,
.data), tensors in Python protocols (formatting, in, max, sorted, indexing lists, NumPy
sharing), checkpoints saved and loaded with their metadata.
"""

import io

import numpy as np
import pytest

from .harness import check_program

# each program is PyTorch source written against ``torch`` (the library passed in)
# ruff: noqa: N806


def manual_sgd(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    m = ctx.init(nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1)))
    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((5, 3)).astype(np.float32))
    y = ctx.t(rng.standard_normal((5, 1)).astype(np.float32))
    lr = 0.1
    mom = [torch.zeros_like(p) for p in m.parameters()]

    def step(x, y):
        loss = F.mse_loss(m(x), y)
        m.zero_grad()
        loss.backward()
        with torch.no_grad():
            for p, v in zip(m.parameters(), mom):
                v.mul_(0.9).add_(p.grad)
                p -= lr * v
        return loss

    step = ctx.fn(step)
    res = [step(x, y).item() for _ in range(3)]
    # old-style .data updates (eager)
    for p in m.parameters():
        p.data.add_(p.grad.data, alpha=-lr)
        p.grad.data.zero_()
    m[0].weight.data = m[0].weight.data * 0.5
    m[2].bias.data.fill_(0.25)
    return {
        "l": res,
        "p": dict(m.state_dict()),
        "g": [p.grad for p in m.parameters()],
        "rg": m[0].weight.requires_grad,
    }


def python_interop(torch, ctx):
    out = {}
    a = np.arange(6, dtype=np.float32)
    t = torch.from_numpy(a)
    a[0] = 10.0
    out["shared"] = t[0].item()
    n = t.numpy()
    n[1] = 20.0
    out["shared2"] = t[1].item()
    pi = torch.tensor(3.14159)
    out["fmt"] = f"{pi:.3f}"
    out["fmt2"] = f"{torch.tensor(2.5):.2f}"
    out["int"] = int(torch.tensor(7.9))
    out["float"] = float(torch.tensor([2.5]))
    out["bool"] = bool(torch.tensor([1]))
    out["idx"] = [10, 20, 30][torch.tensor(1)]
    out["range"] = list(range(torch.tensor(3)))
    out["stack0"] = torch.stack([torch.tensor(1.0), torch.tensor(2.0)])
    out["tensor_of_0d"] = torch.tensor([torch.tensor(1.5), torch.tensor(2.5)])
    out["max_py"] = max([torch.tensor(1.0), torch.tensor(3.0), torch.tensor(2.0)]).item()
    out["sorted"] = [v.item() for v in sorted([torch.tensor(3), torch.tensor(1), torch.tensor(2)])]
    out["sum_py"] = sum([torch.tensor(1.0), torch.tensor(2.0)])
    out["where1"] = list(torch.where(torch.tensor([[0, 1], [1, 0]]) > 0))
    x = torch.arange(24.0).reshape(2, 3, 4)
    out["mT"] = x.mT
    out["T2"] = x[0].T
    mx = torch.max(x, 1)
    out["maxnt"] = [mx.values, mx.indices, mx[0]]
    v, i = x.min(dim=-1)
    out["min"] = [v, i]
    out["maxab"] = torch.max(x[0], x[1])
    out["minab"] = torch.minimum(x[0], x[1])
    out["neg_index"] = x[-1, -2:, ::2]
    out["contains"] = 5.0 in x
    out["len"] = len(x)
    out["iter"] = [r.sum().item() for r in x[0]]
    out["eq"] = torch.equal(x, x.clone())
    out["allclose"] = torch.allclose(x, x + 1e-9)
    out["numel"] = x.numel()
    out["dim"] = x.dim()
    out["size1"] = x.size(1)
    out["shape"] = list(x.shape)
    out["dtype_str"] = str(x.dtype).split(".")[-1]
    out["item_type"] = type(torch.tensor(3).item()).__name__
    out["hash_ok"] = len({x, x}) == 1
    out["new_tensor"] = x.new_tensor([1, 2]).dtype == x.dtype
    out["as_tensor"] = torch.as_tensor([1, 2], dtype=torch.float32)
    out["repr_shape"] = repr(x.shape).replace("ember", "torch")
    out["size_ops"] = [x.shape[1:] == (3, 4), tuple(x.shape) + (1,), x.shape.numel()]
    out["clone_detach"] = x.clone().detach().requires_grad
    out["bool_arith"] = torch.tensor([True, False]) * 2.5
    out["mask_ops"] = [(~(x > 5)).sum(), (x > 5).any(), (x > -1).all(), (x > 5).float().mean()]
    out["chunk"] = [c.shape[0] for c in torch.arange(10).chunk(3)]
    out["split"] = [c.shape[0] for c in torch.arange(10).split([3, 7])]
    out["tensor_split"] = [c.tolist() for c in torch.tensor_split(torch.arange(7), 3)]
    out["unbind"] = len(x.unbind(1))
    return out


def checkpoint_io(torch, ctx):

    nn = torch.nn
    m = ctx.init(
        nn.Sequential(
            nn.Conv2d(1, 2, 3, bias=False), nn.BatchNorm2d(2), nn.Flatten(), nn.Linear(8, 3)
        )
    )
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((2, 1, 4, 4)).astype(np.float32))
    m(x).sum().backward()
    opt.step()
    buf = io.BytesIO()
    torch.save(
        {
            "m": m.state_dict(),
            "o": opt.state_dict(),
            "meta": {"ep": 3, "acc": 0.5, "names": ["a", "b"]},
            "t": torch.arange(3),
        },
        buf,
    )
    buf.seek(0)
    ck = torch.load(buf, map_location="cpu")
    m2 = nn.Sequential(
        nn.Conv2d(1, 2, 3, bias=False), nn.BatchNorm2d(2), nn.Flatten(), nn.Linear(8, 3)
    )
    res = m2.load_state_dict(ck["m"], strict=True)
    opt2 = torch.optim.Adam(m2.parameters(), lr=1e-2)
    opt2.load_state_dict(ck["o"])
    sd = ck["m"]
    sd2 = {k: v for k, v in sd.items() if not k.startswith("3.")}
    m3 = nn.Sequential(
        nn.Conv2d(1, 2, 3, bias=False), nn.BatchNorm2d(2), nn.Flatten(), nn.Linear(8, 3)
    )
    r3 = m3.load_state_dict(sd2, strict=False)
    m2(x).sum().backward()
    opt2.step()
    return {
        "meta": ck["meta"],
        "t": ck["t"],
        "missing": list(res.missing_keys),
        "r3": [list(r3.missing_keys), list(r3.unexpected_keys)],
        "p2": dict(m2.state_dict()),
        "ostate": opt2.state_dict()["state"][0]["exp_avg_sq"],
        "pg": {
            k: v
            for k, v in opt2.state_dict()["param_groups"][0].items()
            if k in ("lr", "betas", "eps", "params")
        },
    }


PROGRAMS = [manual_sgd, python_interop, checkpoint_io]
CAPTURED = [manual_sgd]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
