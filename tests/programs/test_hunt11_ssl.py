"""Self-supervised programs as users write them: BYOL with an EMA target and a predictor, DINO's
teacher centering and temperatures over multi-crop views, Barlow Twins' cross-correlation and
VICReg's variance/covariance terms, MoCo's key queue updated in place.
"""

import copy

import numpy as np
import pytest

from .harness import check_program

# each program is PyTorch source written against ``torch`` (the library passed in)
# ruff: noqa: N806, E741


def byol(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    def mlp(i, h, o):
        return nn.Sequential(
            nn.Linear(i, h), nn.BatchNorm1d(h), nn.ReLU(inplace=True), nn.Linear(h, o)
        )

    online = ctx.init(nn.Sequential(nn.Linear(6, 8), nn.ReLU(), mlp(8, 10, 4)), "online")
    predictor = ctx.init(mlp(4, 10, 4), "pred")
    target = copy.deepcopy(online)
    for p in target.parameters():
        p.requires_grad = False
    opt = torch.optim.SGD([*online.parameters(), *predictor.parameters()], lr=0.05, momentum=0.9)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 6)).astype(np.float32)

    def regression(p, z):
        p = F.normalize(p, dim=-1, p=2)
        z = F.normalize(z, dim=-1, p=2)
        return 2 - 2 * (p * z).sum(dim=-1)

    def step(v1, v2, tau):
        p1, p2 = predictor(online(v1)), predictor(online(v2))
        with torch.no_grad():
            t1, t2 = target(v1), target(v2)
        loss = (regression(p1, t2.detach()) + regression(p2, t1.detach())).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            for po, pt in zip(online.parameters(), target.parameters()):
                pt.data.mul_(tau).add_(po.data, alpha=1 - tau)
            for bo, bt in zip(online.buffers(), target.buffers()):
                bt.copy_(bo)
        return loss

    step = ctx.fn(step)
    out = []
    for k in range(3):
        v1 = ctx.t(x + 0.1 * k)
        v2 = ctx.t(x[::-1].copy() * 0.9)
        out.append(step(v1, v2, 0.99 - 0.01 * k))
    return {"out": out, "target": target.state_dict(), "online": online.state_dict()}


def dino(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class Head(nn.Module):
        def __init__(s, i, o, bottleneck=3):
            super().__init__()
            s.mlp = nn.Sequential(nn.Linear(i, 8), nn.GELU(), nn.Linear(8, bottleneck))
            s.last = nn.utils.parametrizations.weight_norm(nn.Linear(bottleneck, o, bias=False))
            s.last.parametrizations.weight.original0.data.fill_(1)

        def forward(s, x):
            x = F.normalize(s.mlp(x), dim=-1, p=2)
            return s.last(x)

    class DINOLoss(nn.Module):
        def __init__(s, out_dim, ncrops, t_temp=0.04, s_temp=0.1, m=0.9):
            super().__init__()
            s.ncrops, s.t_temp, s.s_temp, s.m = ncrops, t_temp, s_temp, m
            s.register_buffer("center", torch.zeros(1, out_dim))

        def forward(s, student_out, teacher_out):
            student_out = (student_out / s.s_temp).chunk(s.ncrops)
            teacher = F.softmax((teacher_out - s.center) / s.t_temp, dim=-1).detach().chunk(2)
            total, n = 0, 0
            for iq, q in enumerate(teacher):
                for v in range(len(student_out)):
                    if v == iq:
                        continue
                    loss = torch.sum(-q * F.log_softmax(student_out[v], dim=-1), dim=-1)
                    total += loss.mean()
                    n += 1
            s.update_center(teacher_out)
            return total / n

        @torch.no_grad()
        def update_center(s, teacher_out):
            batch_center = torch.sum(teacher_out, dim=0, keepdim=True) / len(teacher_out)
            s.center = s.center * s.m + batch_center * (1 - s.m)

    backbone = nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten()
    )
    student = ctx.init(nn.Sequential(backbone, Head(4, 5)), "student")
    teacher = copy.deepcopy(student)
    teacher.requires_grad_(False)
    crit = DINOLoss(5, ncrops=4)
    params_groups = [
        {"params": [p for n, p in student.named_parameters() if p.ndim > 1]},
        {"params": [p for n, p in student.named_parameters() if p.ndim <= 1], "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW(params_groups, lr=1e-2, weight_decay=0.04)
    rng = np.random.default_rng(1)
    globals_ = [ctx.t(rng.standard_normal((2, 1, 6, 6)).astype(np.float32)) for _ in range(2)]
    locals_ = [ctx.t(rng.standard_normal((2, 1, 4, 4)).astype(np.float32)) for _ in range(2)]

    def multi_crop_forward(model, crops):
        idx_crops = torch.cumsum(
            torch.unique_consecutive(
                torch.tensor([c.shape[-1] for c in crops]), return_counts=True
            )[1],
            0,
        )
        start, output = 0, []
        for end in idx_crops.tolist():
            output.append(model(torch.cat(crops[start:end])))
            start = end
        return torch.cat(output)

    def step(g0, g1, l0, l1):
        t_out = teacher(torch.cat([g0, g1]))
        s_out = multi_crop_forward(student, [g0, g1, l0, l1])
        loss = crit(s_out, t_out)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(student.parameters(), 3.0)
        opt.step()
        with torch.no_grad():
            m = 0.996
            for ps, pt in zip(student.parameters(), teacher.parameters()):
                pt.data.mul_(m).add_((1 - m) * ps.detach().data)
        return loss

    step = ctx.fn(step)
    out = [step(*globals_, *locals_) for _ in range(3)]
    return {"out": out, "center": crit.center, "teacher": teacher.state_dict()}


def barlow_vicreg(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    def off_diagonal(x):
        n, m = x.shape
        assert n == m
        return x.flatten()[:-1].view(n - 1, n + 1)[:, 1:].flatten()

    proj = ctx.init(
        nn.Sequential(
            nn.Linear(5, 6, bias=False), nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 6, bias=False)
        )
    )
    bn = nn.BatchNorm1d(6, affine=False)
    opt = torch.optim.Adam(proj.parameters(), lr=1e-2)
    rng = np.random.default_rng(2)
    x1 = ctx.t(rng.standard_normal((8, 5)).astype(np.float32))
    x2 = ctx.t(rng.standard_normal((8, 5)).astype(np.float32))

    def barlow(z1, z2, lambd=0.0051):
        c = bn(z1).T @ bn(z2)
        c.div_(z1.shape[0])
        on_diag = torch.diagonal(c).add_(-1).pow_(2).sum()
        off_diag = off_diagonal(c).pow_(2).sum()
        return on_diag + lambd * off_diag

    def vicreg(x, y, sim=25.0, std_c=25.0, cov_c=1.0):
        repr_loss = F.mse_loss(x, y)
        x = x - x.mean(dim=0)
        y = y - y.mean(dim=0)
        std_x = torch.sqrt(x.var(dim=0) + 0.0001)
        std_y = torch.sqrt(y.var(dim=0) + 0.0001)
        std_loss = torch.mean(F.relu(1 - std_x)) / 2 + torch.mean(F.relu(1 - std_y)) / 2
        cov_x = (x.T @ x) / (x.shape[0] - 1)
        cov_y = (y.T @ y) / (y.shape[0] - 1)
        n = x.shape[1]
        cov_loss = off_diagonal(cov_x).pow_(2).sum().div(n) + off_diagonal(cov_y).pow_(2).sum().div(
            n
        )
        return sim * repr_loss + std_c * std_loss + cov_c * cov_loss

    def step(x1, x2):
        z1, z2 = proj(x1), proj(x2)
        lb, lv = barlow(z1, z2), vicreg(z1, z2)
        loss = lb + 0.01 * lv
        opt.zero_grad()
        loss.backward()
        opt.step()
        return lb, lv

    step = ctx.fn(step)
    out = [step(x1, x2) for _ in range(3)]
    return {"out": out, "model": proj.state_dict(), "bn": bn.running_var}


def moco_queue(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class MoCo(nn.Module):
        def __init__(s, dim=4, K=8, m=0.9, T=0.2):
            super().__init__()
            s.K, s.m, s.T = K, m, T
            s.encoder_q = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, dim))
            s.encoder_k = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, dim))
            for pq, pk in zip(s.encoder_q.parameters(), s.encoder_k.parameters()):
                pk.data.copy_(pq.data)
                pk.requires_grad = False
            s.register_buffer("queue", F.normalize(torch.randn(dim, K), dim=0))
            s.register_buffer("queue_ptr", torch.zeros(1, dtype=torch.long))

        @torch.no_grad()
        def _momentum_update_key_encoder(s):
            for pq, pk in zip(s.encoder_q.parameters(), s.encoder_k.parameters()):
                pk.data = pk.data * s.m + pq.data * (1.0 - s.m)

        @torch.no_grad()
        def _dequeue_and_enqueue(s, keys):
            batch_size = keys.shape[0]
            ptr = int(s.queue_ptr)
            assert s.K % batch_size == 0
            s.queue[:, ptr : ptr + batch_size] = keys.T
            ptr = (ptr + batch_size) % s.K
            s.queue_ptr[0] = ptr

        def forward(s, im_q, im_k):
            q = F.normalize(s.encoder_q(im_q), dim=1)
            with torch.no_grad():
                s._momentum_update_key_encoder()
                idx_shuffle = torch.randperm(im_k.shape[0])
                idx_unshuffle = torch.argsort(idx_shuffle)
                k = F.normalize(s.encoder_k(im_k[idx_shuffle]), dim=1)[idx_unshuffle]
            l_pos = torch.einsum("nc,nc->n", [q, k]).unsqueeze(-1)
            l_neg = torch.einsum("nc,ck->nk", [q, s.queue.clone().detach()])
            logits = torch.cat([l_pos, l_neg], dim=1) / s.T
            labels = torch.zeros(logits.shape[0], dtype=torch.long)
            s._dequeue_and_enqueue(k)
            return logits, labels

    m = MoCo()
    ctx.init(m)
    opt = torch.optim.SGD(
        filter(lambda p: p.requires_grad, m.parameters()), lr=0.1, weight_decay=1e-4
    )
    rng = np.random.default_rng(3)
    out = []
    for _i in range(3):
        xq = ctx.t(rng.standard_normal((4, 6)).astype(np.float32))
        xk = ctx.t(rng.standard_normal((4, 6)).astype(np.float32))
        logits, labels = m(xq, xk)
        loss = F.cross_entropy(logits, labels)
        acc = (logits.argmax(1) == labels).float().mean().item()
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.append((loss, acc))
    return {"out": out, "queue": m.queue, "ptr": m.queue_ptr, "k": m.encoder_k.state_dict()}


PROGRAMS = [byol, dino, barlow_vicreg, moco_queue]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", [barlow_vicreg, dino], ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
