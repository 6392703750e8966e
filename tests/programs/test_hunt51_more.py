"""More programs of hunt51, each run on PyTorch and on ember (eagerly and, where steps are
marked, captured): a spatial transformer with both align_corners conventions and border
padding; Gaussian-process regression maximizing the marginal likelihood (cholesky,
cholesky_solve, solve_triangular, slogdet) beside randomized PCA; optimizer surgery (deepcopy of
model and optimizer, add_param_group, a resumed state_dict, per-group lr changes);
mixture-of-depths token routing; sphere tracing a learned SDF with masks and an eikonal
penalty; contrastive predictive coding; a dueling double DQN with n-step targets and a
_foreach_lerp_ target update; conv-BN fusion with module hooks.
"""

import copy
import inspect
import math

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007, E501, E731, F841, B023, E702, E701, C408, SIM118


def stn_both_corners(torch, ctx):
    """A spatial transformer: a localization net whose last layer starts at the identity, the
    sampling grid by affine_grid and grid_sample (align_corners False for the classifier's
    input, True for a border-padded auxiliary view), trained a few steps."""
    nn, F = torch.nn, torch.nn.functional

    class STN(nn.Module):
        def __init__(self):
            super().__init__()
            self.loc = nn.Sequential(
                nn.Conv2d(1, 4, 3),
                nn.MaxPool2d(2),
                nn.ReLU(),
                nn.Flatten(),
                nn.Linear(4 * 3 * 3, 8),
                nn.ReLU(),
            )
            self.fc_loc = nn.Linear(8, 6)
            self.fc_loc.weight.data.zero_()
            self.fc_loc.bias.data.copy_(torch.tensor([1, 0, 0, 0, 1, 0], dtype=torch.float))
            self.cls = nn.Sequential(
                nn.Conv2d(1, 4, 3, padding=1),
                nn.ReLU(),
                nn.AdaptiveAvgPool2d(2),
                nn.Flatten(),
                nn.Linear(16, 3),
            )

        def forward(self, x):
            theta = self.fc_loc(self.loc(x)).view(-1, 2, 3)
            grid = F.affine_grid(theta, x.size(), align_corners=False)
            warped = F.grid_sample(x, grid, align_corners=False)
            grid2 = F.affine_grid(theta * 1.1, (x.size(0), 1, 5, 5), align_corners=True)
            aux = F.grid_sample(
                x, grid2, mode="bilinear", padding_mode="border", align_corners=True
            )
            return self.cls(warped), aux, theta

    model = ctx.init(STN())
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    rng = np.random.default_rng(20)
    x = ctx.t(rng.normal(size=(4, 1, 8, 8)).astype(np.float32))
    y = ctx.t(np.array([0, 1, 2, 1]))

    @ctx.fn
    def step():
        logits, aux, theta = model(x)
        loss = F.cross_entropy(logits, y) + 0.1 * aux.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, theta

    out = [step() for _ in range(3)]
    return [[o[0].item() for o in out], out[-1][1], model(x)[1]]


def gp_marginal_likelihood(torch, ctx):
    """Exact GP regression: an RBF kernel with log-parameterized hyperparameters fitted by Adam
    on the negative log marginal likelihood (cholesky, cholesky_solve, slogdet), predictions by
    solve_triangular, in float64; and randomized PCA of the inputs under a seed."""
    rng = np.random.default_rng(21)
    X = ctx.t(rng.uniform(-3, 3, size=(20, 2)))
    y = torch.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.1 * ctx.t(rng.normal(size=20))
    Xs = ctx.t(rng.uniform(-3, 3, size=(5, 2)))
    log_ls = torch.zeros(2, dtype=torch.float64, requires_grad=True)
    log_sf = torch.zeros((), dtype=torch.float64, requires_grad=True)
    log_sn = torch.tensor(-1.0, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.Adam([log_ls, log_sf, log_sn], lr=0.05)

    def kernel(A, B):
        d = (A.unsqueeze(1) - B.unsqueeze(0)) / log_ls.exp()
        return (2 * log_sf).exp() * torch.exp(-0.5 * d.pow(2).sum(-1))

    def nll():
        K = kernel(X, X) + (2 * log_sn).exp() * torch.eye(X.shape[0], dtype=torch.float64)
        L = torch.linalg.cholesky(K)
        alpha = torch.cholesky_solve(y.unsqueeze(-1), L)
        sign, logdet = torch.linalg.slogdet(K)
        return 0.5 * (y.unsqueeze(0) @ alpha).squeeze() + 0.5 * logdet + 0.5 * X.shape[
            0
        ] * math.log(2 * math.pi), L

    losses = []
    for _ in range(5):
        loss, _ = nll()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        _, L = nll()
        Ks = kernel(X, Xs)
        v = torch.linalg.solve_triangular(L, Ks, upper=False)
        alpha = torch.cholesky_solve(y.unsqueeze(-1), L)
        mean = (Ks.t() @ alpha).squeeze(-1)
        var = kernel(Xs, Xs).diagonal() - v.pow(2).sum(0)
    torch.manual_seed(4)
    U, S, V = torch.pca_lowrank(X, q=2, center=True)
    proj = (X - X.mean(0)) @ V
    return [losses, log_ls, mean, var, S, proj.abs()]


def optimizer_surgery(torch, ctx):
    """deepcopy of a model and its optimizer trained on in lockstep, a param group added for a
    new head, per-group lr changed mid-training, and an optimizer rebuilt from a state_dict
    whose param ids differ continuing identically."""
    nn, F = torch.nn, torch.nn.functional
    model = ctx.init(nn.Sequential(nn.Linear(3, 6), nn.Tanh(), nn.Linear(6, 2)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2, betas=(0.8, 0.95), amsgrad=True)
    rng = np.random.default_rng(22)
    x = ctx.t(rng.normal(size=(10, 3)).astype(np.float32))
    y = ctx.t(rng.normal(size=(10, 2)).astype(np.float32))

    def train(m, o, n):
        out = []
        for _ in range(n):
            loss = F.mse_loss(m(x), y)
            o.zero_grad()
            loss.backward()
            o.step()
            out.append(loss.item())
        return out

    first = train(model, opt, 2)
    model2 = copy.deepcopy(model)
    opt2 = copy.deepcopy(opt)
    same_state = (
        opt2.state_dict()["state"][0]["exp_avg"] is not opt.state_dict()["state"][0]["exp_avg"]
    )
    opt2.param_groups[0]["params"] = list(model2.parameters())
    opt2.state = {
        p2: copy.deepcopy(opt.state[p1]) for p1, p2 in zip(model.parameters(), model2.parameters())
    }
    a = train(model, opt, 2)
    b = train(model2, opt2, 2)
    head = nn.Linear(2, 1)
    with torch.no_grad():
        head.weight.fill_(0.5)
        head.bias.fill_(-0.1)
    opt.add_param_group({"params": head.parameters(), "lr": 5e-2, "amsgrad": False})
    for g in opt.param_groups[:1]:
        g["lr"] = 3e-3
    z = []
    for _ in range(2):
        loss = F.mse_loss(head(model(x)), y[:, :1])
        opt.zero_grad()
        loss.backward()
        opt.step()
        z.append(loss.item())
    sd = copy.deepcopy(opt.state_dict())
    fresh_model = copy.deepcopy(model)
    fresh_head = copy.deepcopy(head)
    opt3 = torch.optim.Adam(
        [{"params": fresh_model.parameters()}, {"params": fresh_head.parameters()}], lr=1.0
    )
    opt3.load_state_dict(sd)
    c = []
    for m_, h_, o_ in ((model, head, opt), (fresh_model, fresh_head, opt3)):
        loss = F.mse_loss(h_(m_(x)), y[:, :1])
        o_.zero_grad()
        loss.backward()
        o_.step()
        c.append(h_.weight.detach().clone())
    return [
        first,
        a,
        b,
        same_state,
        z,
        [g["lr"] for g in opt3.param_groups],
        [g["amsgrad"] for g in opt3.param_groups],
        c,
        sd["state"][0]["step"],
    ]


def mixture_of_depths(torch, ctx):
    """Mixture-of-depths routing: a router scores tokens, the top-k per sequence go through
    the block (gathered by sorted indices, processed, scaled by their router weight and
    scattered back with scatter_add into the residual stream), the rest skip it."""
    nn, F = torch.nn, torch.nn.functional
    D, T, k = 8, 6, 3

    class MoDBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.router = nn.Linear(D, 1)
            self.block = nn.Sequential(
                nn.LayerNorm(D), nn.Linear(D, 16), nn.GELU(), nn.Linear(16, D)
            )

        def forward(self, x):
            B = x.shape[0]
            w = self.router(x).squeeze(-1)
            top_w, idx = torch.topk(w, k, dim=1, sorted=False)
            idx, order = torch.sort(idx, dim=1)
            top_w = torch.gather(top_w, 1, order)
            gather_idx = idx.unsqueeze(-1).expand(-1, -1, D)
            chosen = torch.gather(x, 1, gather_idx)
            processed = self.block(chosen) * torch.sigmoid(top_w).unsqueeze(-1)
            return torch.scatter_add(x, 1, gather_idx, processed), idx

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(12, D)
            self.blocks = nn.ModuleList([MoDBlock(), MoDBlock()])
            self.out = nn.Linear(D, 12)

        def forward(self, ids):
            h = self.emb(ids)
            routes = []
            for b in self.blocks:
                h, r = b(h)
                routes.append(r)
            return self.out(h), routes

    model = ctx.init(Net())
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    ids = ctx.t(np.random.default_rng(23).integers(0, 12, size=(3, T)))

    @ctx.fn
    def step():
        logits, routes = model(ids)
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, 12), ids[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, routes[0]

    out = [step() for _ in range(3)]
    return [[o[0].item() for o in out], out[-1][1]]


def sdf_sphere_tracing(torch, ctx):
    """A small SDF network rendered by sphere tracing (a fixed number of steps marching rays
    with masks, no gradient through the march), then a differentiable correction step at the
    hit points, a silhouette loss and an eikonal penalty with create_graph."""
    nn, F = torch.nn, torch.nn.functional

    class SDF(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(
                nn.Linear(3, 16),
                nn.Softplus(beta=10),
                nn.Linear(16, 16),
                nn.Softplus(beta=10),
                nn.Linear(16, 1),
            )

        def forward(self, p):
            return self.net(p).squeeze(-1) + (p.norm(dim=-1) - 0.8)

    sdf = ctx.init(SDF())
    opt = torch.optim.Adam(sdf.parameters(), lr=5e-3)
    n = 6
    u = torch.linspace(-1, 1, n)
    gy, gx = torch.meshgrid(u, u, indexing="ij")
    dirs = F.normalize(
        torch.stack([gx * 0.5, gy * 0.5, torch.ones_like(gx)], -1).view(-1, 3), dim=-1
    )
    origin = torch.tensor([0.0, 0.0, -2.5]).expand_as(dirs)
    target = ((gx**2 + gy**2) < 0.5).float().view(-1)
    losses = []
    for _ in range(3):
        with torch.no_grad():
            t = torch.zeros(dirs.shape[0])
            alive = torch.ones(dirs.shape[0], dtype=torch.bool)
            for _ in range(12):
                d = sdf(origin + t.unsqueeze(-1) * dirs)
                t = torch.where(alive, t + d, t)
                alive = alive & (d.abs() > 1e-3) & (t < 5.0)
            hit = (t < 5.0) & ~alive
        p = origin + t.unsqueeze(-1) * dirs
        p.requires_grad_(True)
        d = sdf(p)
        (grad,) = torch.autograd.grad(d.sum(), p, create_graph=True)
        eikonal = (grad.norm(dim=-1) - 1).pow(2).mean()
        silhouette = torch.sigmoid(-50 * d.abs() + 2.5)
        loss = F.binary_cross_entropy(silhouette.clamp(1e-4, 1 - 1e-4), target) + 0.1 * eikonal
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return [losses, hit, t]


def cpc_infonce(torch, ctx):
    """Contrastive predictive coding: a strided conv encoder, a GRU context network, one
    linear predictor per future step, and InfoNCE with the other sequences' latents (and the
    other time steps) as negatives, accuracy by argmax."""
    nn, F = torch.nn, torch.nn.functional
    K = 2

    class CPC(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Sequential(
                nn.Conv1d(1, 8, 4, stride=2, padding=1),
                nn.ReLU(),
                nn.Conv1d(8, 8, 4, stride=2, padding=1),
            )
            self.gru = nn.GRU(8, 12, batch_first=True)
            self.Wk = nn.ModuleList([nn.Linear(12, 8) for _ in range(K)])

        def forward(self, x, t):
            z = self.enc(x).transpose(1, 2)
            B, T, _ = z.shape
            c, _ = self.gru(z[:, : t + 1])
            ct = c[:, -1]
            nce, correct = 0.0, 0
            for k in range(1, K + 1):
                pred = self.Wk[k - 1](ct)
                target = z[:, t + k]
                logits = pred @ target.t()
                labels = torch.arange(B)
                nce = nce + F.cross_entropy(logits, labels)
                correct += (logits.argmax(1) == labels).sum().item()
            return nce / K, correct / (B * K)

    model = ctx.init(CPC())
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    rng = np.random.default_rng(24)
    ph = rng.uniform(0, 2 * np.pi, size=(6, 1, 1))
    fr = rng.uniform(0.2, 0.6, size=(6, 1, 1))
    x = ctx.t(
        (np.sin(fr * np.arange(32)[None, None] + ph) + 0.1 * rng.normal(size=(6, 1, 32))).astype(
            np.float32
        )
    )
    out = []
    for i in range(4):
        loss, acc = model(x, 3 + i % 2)
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.append((loss.item(), acc))
    return out


def dueling_double_dqn(torch, ctx):
    """A dueling Q-network, double-DQN n-step targets from a replay batch (gather of the
    online argmax in the target net), Huber loss, gradient clipping, and the target network's
    soft update by torch._foreach_lerp_ under no_grad."""
    nn, F = torch.nn, torch.nn.functional
    A, gamma, n = 3, 0.9, 3

    class Dueling(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(4, 16), nn.ReLU())
            self.v = nn.Linear(16, 1)
            self.a = nn.Linear(16, A)

        def forward(self, s):
            h = self.body(s)
            a = self.a(h)
            return self.v(h) + a - a.mean(dim=1, keepdim=True)

    online = ctx.init(Dueling())
    target = copy.deepcopy(online)
    target.requires_grad_(False)
    opt = torch.optim.RMSprop(online.parameters(), lr=1e-2, alpha=0.95, centered=True)
    rng = np.random.default_rng(25)
    B = 8
    s = ctx.t(rng.normal(size=(B, 4)).astype(np.float32))
    a = ctx.t(rng.integers(0, A, size=B))
    rewards = ctx.t(rng.normal(size=(B, n)).astype(np.float32))
    s_n = ctx.t(rng.normal(size=(B, 4)).astype(np.float32))
    done = ctx.t(np.array([0, 0, 1, 0, 0, 1, 0, 0], np.float32))
    discounts = gamma ** torch.arange(n, dtype=torch.float32)

    @ctx.fn
    def step():
        with torch.no_grad():
            next_a = online(s_n).argmax(1, keepdim=True)
            next_q = target(s_n).gather(1, next_a).squeeze(1)
            ret = (rewards * discounts).sum(1) + (gamma**n) * next_q * (1 - done)
        q = online(s).gather(1, a.unsqueeze(1)).squeeze(1)
        loss = F.smooth_l1_loss(q, ret)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_value_(online.parameters(), 0.5)
        opt.step()
        with torch.no_grad():
            torch._foreach_lerp_(list(target.parameters()), list(online.parameters()), 0.1)
        return loss

    losses = [step().item() for _ in range(4)]
    return [losses, target.a.weight, online(s)]


def conv_bn_fusion_hooks(torch, ctx):
    """A trained conv-BN net fused for inference by fuse_conv_bn_eval (outputs unchanged), a
    forward pre-hook rescaling the input through kwargs, a full backward hook recording grad
    norms, and a forward hook replacing the output."""
    nn, F = torch.nn, torch.nn.functional
    fuse_conv_bn_eval = torch.nn.utils.fusion.fuse_conv_bn_eval

    net = ctx.init(
        nn.Sequential(
            nn.Conv2d(2, 4, 3, padding=1),
            nn.BatchNorm2d(4),
            nn.ReLU(),
            nn.Conv2d(4, 3, 3),
            nn.BatchNorm2d(3),
        )
    )
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    rng = np.random.default_rng(26)
    x = ctx.t(rng.normal(size=(3, 2, 6, 6)).astype(np.float32))
    log = []
    h1 = net[0].register_full_backward_hook(
        lambda m, gi, go: log.append((gi[0] is None, round(go[0].norm().item(), 4)))
    )
    h2 = net[3].register_forward_hook(lambda m, inp, out: out * 0.5)
    h3 = net.register_forward_pre_hook(
        lambda m, args, kwargs: ((args[0] * 2,), kwargs), with_kwargs=True
    )
    for _ in range(3):
        loss = net(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    for h in (h1, h2, h3):
        h.remove()
    net.eval()
    ref = net(x)
    fused = nn.Sequential(
        fuse_conv_bn_eval(net[0], net[1]), nn.ReLU(), fuse_conv_bn_eval(net[3], net[4])
    )
    out = fused(x)
    return [log, ref, out, fused[0].bias, (ref - out).abs().max() < 1e-4]


PROGRAMS = [
    stn_both_corners,
    gp_marginal_likelihood,
    optimizer_surgery,
    mixture_of_depths,
    sdf_sphere_tracing,
    cpc_infonce,
    dueling_double_dqn,
    conv_bn_fusion_hooks,
]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


# the programs that mark steps for ember.function (the others run as in test_eager)
CAPTURED = [p for p in PROGRAMS if "@ctx.fn" in inspect.getsource(p)]


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
