"""Programs with gradients of gradients, closures and recurrent state: a WGAN-GP critic step, MAML
with functional_call and a Hessian-vector product, L-BFGS with a closure, truncated
backpropagation through time with clipping, wide-and-deep with EmbeddingBag, the loss zoo,
parameters_to_vector.
"""

import numpy as np
import pytest

from .harness import check_program

# each program is PyTorch source written against ``torch`` (the library passed in)
# ruff: noqa: N806


def wgan_gp(torch, ctx):
    nn = torch.nn
    D = ctx.init(nn.Sequential(nn.Linear(4, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1)))
    # (SGD: a first-layer bias whose gradient is zero up to rounding would take Adam steps)
    opt = torch.optim.SGD(D.parameters(), lr=1e-2, momentum=0.5)
    rng = np.random.default_rng(0)
    real = ctx.t(rng.standard_normal((6, 4)).astype(np.float32))
    fake = ctx.t(rng.standard_normal((6, 4)).astype(np.float32))
    alpha = ctx.t(rng.random((6, 1)).astype(np.float32))

    def step(real, fake, alpha):
        opt.zero_grad()
        interp = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
        d_int = D(interp)
        grads = torch.autograd.grad(
            outputs=d_int,
            inputs=interp,
            grad_outputs=torch.ones_like(d_int),
            create_graph=True,
            retain_graph=True,
        )[0]
        gp = ((grads.norm(2, dim=1) - 1) ** 2).mean()
        loss = D(fake).mean() - D(real).mean() + 10 * gp
        loss.backward()
        opt.step()
        return loss, gp

    step = ctx.fn(step)
    res = [step(real, fake, alpha) for _ in range(3)]
    return {"r": res, "w": dict(D.state_dict())}


def maml(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    from_func = torch.func
    net = ctx.init(nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 1)))
    meta = torch.optim.Adam(net.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    xs = ctx.t(rng.uniform(-3, 3, (4, 5, 1)).astype(np.float32))
    ys = torch.sin(xs)
    xq = ctx.t(rng.uniform(-3, 3, (4, 5, 1)).astype(np.float32))
    yq = torch.sin(xq)
    res = []
    for _ in range(2):
        meta.zero_grad()
        total = 0
        for t in range(4):
            params = dict(net.named_parameters())
            loss = F.mse_loss(from_func.functional_call(net, params, (xs[t],)), ys[t])
            grads = torch.autograd.grad(loss, list(params.values()), create_graph=True)
            fast = {k: v - 0.01 * g for (k, v), g in zip(params.items(), grads)}
            ql = F.mse_loss(from_func.functional_call(net, fast, (xq[t],)), yq[t])
            total = total + ql
        (total / 4).backward()
        meta.step()
        res.append(total.item())
    # hvp
    x = ctx.t(rng.standard_normal(5).astype(np.float32), requires_grad=True)
    f = (x**3).sum() + (x[:-1] * x[1:]).sum()
    (g,) = torch.autograd.grad(f, x, create_graph=True)
    v = torch.ones(5)
    (hv,) = torch.autograd.grad(g, x, grad_outputs=v)
    return {"l": res, "hv": hv, "p": dict(net.state_dict())}


def lbfgs(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    m = ctx.init(nn.Linear(3, 1))
    opt = torch.optim.LBFGS(
        m.parameters(), lr=0.5, max_iter=5, history_size=4, line_search_fn="strong_wolfe"
    )
    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((10, 3)).astype(np.float32))
    y = x @ torch.tensor([[1.0], [-2.0], [0.5]]) + 0.3
    res = []

    def closure():
        opt.zero_grad()
        loss = F.mse_loss(m(x), y)
        loss.backward()
        return loss

    for _ in range(3):
        res.append(opt.step(closure).item())
    return {"l": res, "w": m.weight, "b": m.bias}


def tbptt(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class LM(nn.Module):
        def __init__(s):
            super().__init__()
            s.emb = nn.Embedding(15, 8)
            s.rnn = nn.LSTM(8, 12, num_layers=2, dropout=0.0)
            s.out = nn.Linear(12, 15)

        def forward(s, x, h):
            o, h = s.rnn(s.emb(x), h)
            return s.out(o), h

        def init_hidden(s, b):
            w = next(s.parameters())
            return (w.new_zeros(2, b, 12), w.new_zeros(2, b, 12))

    m = ctx.init(LM())
    opt = torch.optim.SGD(m.parameters(), lr=0.5)
    rng = np.random.default_rng(0)
    data = ctx.t(rng.integers(0, 15, (21, 3)))
    h = m.init_hidden(3)

    def repackage(h):
        return tuple(v.detach() for v in h) if isinstance(h, tuple) else h.detach()

    res = []

    def step(x, y, h0, h1):
        opt.zero_grad()
        out, (a, b) = m(x, (h0, h1))
        loss = F.cross_entropy(out.view(-1, 15), y.reshape(-1))
        loss.backward()
        nn.utils.clip_grad_norm_(m.parameters(), 0.25)
        opt.step()
        return loss, a, b

    step = ctx.fn(step)
    for i in range(0, 20, 5):
        x, y = data[i : i + 5], data[i + 1 : i + 6]
        h = repackage(h)
        loss, a, b = step(x, y, *h)
        h = (a, b)
        res.append(loss.item())
    return {"l": res, "h": list(h)}


def embbag(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class WD(nn.Module):
        def __init__(s):
            super().__init__()
            s.bag = nn.EmbeddingBag(20, 6, mode="sum")
            s.bag2 = nn.EmbeddingBag(20, 6, mode="mean", padding_idx=0)
            s.bagm = nn.EmbeddingBag(20, 6, mode="max")
            s.wide = nn.Linear(5, 1)
            s.deep = nn.Sequential(nn.Linear(18, 8), nn.ReLU(), nn.Linear(8, 1))

        def forward(s, dense, ids, offsets, psw, ids2):
            e = s.bag(ids, offsets, per_sample_weights=psw)
            e2 = s.bag2(ids2)
            e3 = s.bagm(ids, offsets)
            return (s.wide(dense) + s.deep(torch.cat([e, e2, e3], 1))).squeeze(1)

    m = ctx.init(WD())
    opt = torch.optim.Adagrad(m.parameters(), lr=0.1)
    rng = np.random.default_rng(0)
    dense = ctx.t(rng.standard_normal((3, 5)).astype(np.float32))
    ids = ctx.t(rng.integers(1, 20, 9))
    offsets = ctx.t(np.array([0, 2, 5]))
    psw = ctx.t(rng.random(9).astype(np.float32))
    ids2 = ctx.t(np.array([[0, 3, 4], [5, 0, 0], [7, 8, 9]]))
    y = ctx.t(np.array([1.0, 0.0, 1.0], np.float32))

    def step(dense, ids, offsets, psw, ids2, y):
        opt.zero_grad()
        loss = F.binary_cross_entropy_with_logits(
            m(dense, ids, offsets, psw, ids2), y, pos_weight=torch.tensor(2.0)
        )
        loss.backward()
        opt.step()
        return loss

    step = ctx.fn(step)
    res = [step(dense, ids, offsets, psw, ids2, y).item() for _ in range(3)]
    fe = F.embedding_bag(ids, m.bag.weight, offsets, mode="mean", include_last_offset=False)
    return {"l": res, "s": dict(m.state_dict()), "fe": fe}


def losses_zoo(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(0)
    a = ctx.t(rng.standard_normal((6, 4)).astype(np.float32), requires_grad=True)
    b = ctx.t(rng.standard_normal((6, 4)).astype(np.float32))
    var = ctx.t(rng.uniform(0.5, 2, (6, 4)).astype(np.float32), requires_grad=True)
    y = ctx.t(rng.integers(0, 4, 6))
    ypm = ctx.t(np.sign(rng.standard_normal(6)).astype(np.float32))
    ml = ctx.t((rng.random((6, 4)) > 0.5).astype(np.float32))
    cnt = ctx.t(rng.poisson(2, (6, 4)).astype(np.float32))
    out = {}
    out["gauss"] = nn.GaussianNLLLoss()(a, b, var)
    out["gauss_full"] = nn.GaussianNLLLoss(full=True, reduction="sum")(a, b, var[:, :1])
    out["pois"] = nn.PoissonNLLLoss()(a, cnt)
    out["pois2"] = nn.PoissonNLLLoss(log_input=False, full=True)(var, cnt)
    out["mlsm"] = nn.MultiLabelSoftMarginLoss()(a, ml)
    out["mm"] = nn.MultiMarginLoss(p=1, margin=0.5)(a, y)
    out["mm2"] = nn.MultiMarginLoss(p=2, weight=torch.tensor([1.0, 2.0, 0.5, 1.0]))(a, y)
    out["mlm"] = nn.MultiLabelMarginLoss()(a, torch.tensor([[3, 0, -1, 1]] * 6))
    out["hinge"] = nn.HingeEmbeddingLoss(margin=0.5)(a[:, 0], ypm)
    out["rank"] = nn.MarginRankingLoss(margin=0.1)(a[:, 0], a[:, 1], ypm)
    out["huber"] = nn.HuberLoss(delta=0.5)(a, b)
    out["sl1"] = nn.SmoothL1Loss(beta=0.3)(a, b)
    out["soft"] = nn.SoftMarginLoss()(a[:, 0], ypm)
    out["l1"] = nn.L1Loss(reduction="none")(a, b)
    out["bce"] = nn.BCELoss(weight=torch.tensor([1.0, 2.0, 1.0, 0.5]))(torch.sigmoid(a), ml)
    out["kl"] = F.kl_div(F.log_softmax(a, 1), F.softmax(b, 1), reduction="sum")
    out["cos"] = nn.CosineEmbeddingLoss()(a, b, ypm)
    out["trip"] = nn.TripletMarginWithDistanceLoss(
        distance_function=lambda x, y: 1 - F.cosine_similarity(x, y), margin=0.3
    )(a, b, b.flip(0))
    out["nll2d"] = F.nll_loss(
        F.log_softmax(a.view(1, 4, 6, 1).expand(2, 4, 6, 1), 1), y.view(1, 6, 1).expand(2, 6, 1)
    )
    out["ce_prob"] = F.cross_entropy(a, F.softmax(b, 1), label_smoothing=0.2)
    out["ce_red"] = F.cross_entropy(
        a, y, reduction="sum", weight=torch.tensor([1.0, 2.0, 0.5, 1.0]), label_smoothing=0.1
    )
    tot = sum(v.sum() for v in out.values())
    tot.backward()
    out["ga"] = a.grad
    out["gv"] = var.grad
    return out


def param_vec(torch, ctx):
    nn = torch.nn
    m = ctx.init(nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)))
    v = nn.utils.parameters_to_vector(m.parameters())
    nn.utils.vector_to_parameters(v * 2, m.parameters())
    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((2, 3)).astype(np.float32))
    m(x).sum().backward()
    gn = (
        nn.utils.get_total_norm([p.grad for p in m.parameters()])
        if hasattr(nn.utils, "get_total_norm")
        else torch.tensor(0.0)
    )
    nn.utils.clip_grad_norm_(m.parameters(), 0.1, norm_type=float("inf"))
    return {
        "v": v,
        "p": dict(m.state_dict()),
        "gn": gn,
        "g": [p.grad for p in m.parameters()],
        "n": sum(p.numel() for p in m.parameters()),
    }


PROGRAMS = [wgan_gp, maml, lbfgs, tbptt, embbag, losses_zoo, param_vec]
CAPTURED = [wgan_gp, tbptt, embbag]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
