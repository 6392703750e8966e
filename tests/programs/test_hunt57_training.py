"""Training programs of hunt57, each run on PyTorch and on ember (eagerly, and the marked ones
with their steps under ``ember.function``): the less common optimizers with parameter groups
and their state, LBFGS with a strong-Wolfe line search, chained and sequential schedulers,
CyclicLR cycling momentum, ReduceLROnPlateau with cooldown, a GAN with two optimizers and a
gradient penalty, and truncated backpropagation through time over packed sequences.
"""

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007, E501, E731, F841, B023, C408, B006, E702, E701, E401, C416, UP031, B905, PIE810, SIM108, RUF005


def _mlp(torch, sizes=(4, 8, 3)):
    nn = torch.nn
    layers = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(a, b), nn.Tanh()]
    return nn.Sequential(*layers[:-1])


def _data(ctx, n=16, d=4, k=3, seed=0):
    rng = np.random.default_rng(seed)
    x = ctx.t(rng.standard_normal((n, d)).astype(np.float32))
    y = ctx.t(rng.integers(0, k, n))
    return x, y


_OPTIMIZERS = {
    "adamax": lambda torch, ps: torch.optim.Adamax(
        ps, lr=0.05, betas=(0.8, 0.99), weight_decay=0.01
    ),
    "nadam": lambda torch, ps: torch.optim.NAdam(ps, lr=0.02, momentum_decay=0.01),
    "nadam_decoupled": lambda torch, ps: torch.optim.NAdam(
        ps, lr=0.02, weight_decay=0.1, decoupled_weight_decay=True
    ),
    "radam_decoupled": lambda torch, ps: torch.optim.RAdam(
        ps, lr=0.05, weight_decay=0.1, decoupled_weight_decay=True
    ),
    "asgd": lambda torch, ps: torch.optim.ASGD(
        ps, lr=0.05, lambd=1e-3, alpha=0.75, t0=3, weight_decay=1e-3
    ),
    "rprop": lambda torch, ps: torch.optim.Rprop(
        ps, lr=0.01, etas=(0.4, 1.3), step_sizes=(1e-4, 0.3)
    ),
    "adagrad": lambda torch, ps: torch.optim.Adagrad(
        ps, lr=0.1, lr_decay=0.05, initial_accumulator_value=0.1
    ),
    "sgd_nesterov": lambda torch, ps: torch.optim.SGD(
        ps, lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3
    ),
    "adam_amsgrad": lambda torch, ps: torch.optim.Adam(ps, lr=0.03, amsgrad=True),
    "rmsprop_centered": lambda torch, ps: torch.optim.RMSprop(
        ps, lr=0.01, centered=True, momentum=0.5
    ),
}


def optimizer_zoo(torch, ctx, names=tuple(_OPTIMIZERS)):
    """Adamax, NAdam (momentum decay, decoupled decay), RAdam (decoupled), ASGD, Rprop, Adagrad
    with lr_decay, SGD with nesterov, AMSGrad, centered RMSprop: each on its own copy of a
    model, with two parameter groups (the second at its own lr); the state's keys and step."""
    F = torch.nn.functional
    x, y = _data(ctx)
    opt_makers = [lambda ps, name=name: _OPTIMIZERS[name](torch, ps) for name in names]
    outs = []
    for i, make in enumerate(opt_makers):
        model = ctx.init(_mlp(torch), f"m{i}")
        groups = [
            {"params": model[0].parameters()},
            {"params": model[2].parameters(), "lr": 0.01},
        ]
        opt = make(groups)

        def step():
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss.detach()

        step = ctx.fn(step)
        losses = [step() for _ in range(5)]
        st = opt.state_dict()
        keys = sorted(st["state"][0].keys())
        outs.append([losses, model[0].weight, model[2].bias, keys])
        outs.append(float(st["state"][0].get("step", -1)))
    return outs


def lbfgs_wolfe(torch, ctx):
    """LBFGS with a strong-Wolfe line search fitting a logistic regression, closure counting
    its evaluations; then a plain LBFGS without line search on a least-squares problem."""
    rng = np.random.default_rng(1)
    X = ctx.t(rng.standard_normal((40, 5)))
    w_true = ctx.t(rng.standard_normal(5))
    y = (X @ w_true > 0).double()
    w = torch.zeros(5, dtype=torch.float64, requires_grad=True)
    b = torch.zeros((), dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS(
        [w, b], lr=1, max_iter=20, history_size=5, line_search_fn="strong_wolfe"
    )
    evals = []

    def closure():
        opt.zero_grad()
        loss = torch.nn.functional.binary_cross_entropy_with_logits(X @ w + b, y)
        loss = loss + 1e-2 * w.pow(2).sum()
        loss.backward()
        evals.append(loss.item())
        return loss

    losses = [opt.step(closure).item() for _ in range(2)]
    state = opt.state[opt._params[0]]
    A = ctx.t(rng.standard_normal((10, 3)))
    t = ctx.t(rng.standard_normal(10))
    v = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    opt2 = torch.optim.LBFGS([v], lr=0.5, max_iter=7, tolerance_change=1e-12)

    def closure2():
        opt2.zero_grad()
        loss = (A @ v - t).pow(2).mean()
        loss.backward()
        return loss

    for _ in range(3):
        opt2.step(closure2)
    return [losses, w, b, len(evals), state["n_iter"], state["func_evals"], v]


def scheduler_mix(torch, ctx):
    """SequentialLR of LinearLR and CosineAnnealingLR, ChainedScheduler of ExponentialLR and
    MultiplicativeLR, CyclicLR in exp_range cycling SGD's momentum, CosineAnnealingWarmRestarts
    stepped by fractional epochs, ReduceLROnPlateau in max mode with cooldown and per-group
    min_lr, PolynomialLR, ConstantLR, OneCycleLR with three phases."""
    sched = torch.optim.lr_scheduler
    p = [torch.nn.Parameter(torch.zeros(2)), torch.nn.Parameter(torch.zeros(2))]

    def opt(**kw):
        return torch.optim.SGD([{"params": [p[0]]}, {"params": [p[1]], "lr": 0.5}], lr=1.0, **kw)

    out = {}
    o = opt()
    s = sched.SequentialLR(
        o,
        [
            sched.LinearLR(o, start_factor=0.1, total_iters=3),
            sched.CosineAnnealingLR(o, T_max=4, eta_min=0.01),
        ],
        milestones=[3],
    )
    lrs = []
    for _ in range(9):
        o.step()
        s.step()
        lrs.append(s.get_last_lr())
    out["sequential"] = lrs
    o = opt()
    s = sched.ChainedScheduler(
        [sched.ExponentialLR(o, 0.9), sched.MultiplicativeLR(o, lambda e: 0.95 if e % 2 else 1.0)]
    )
    lrs = []
    for _ in range(6):
        o.step()
        s.step()
        lrs.append([g["lr"] for g in o.param_groups])
    out["chained"] = lrs
    o = opt(momentum=0.9)
    s = sched.CyclicLR(
        o,
        base_lr=[0.01, 0.02],
        max_lr=[0.1, 0.2],
        step_size_up=3,
        step_size_down=2,
        mode="exp_range",
        gamma=0.9,
    )
    lrs = []
    for _ in range(12):
        o.step()
        s.step()
        lrs.append([(g["lr"], g["momentum"]) for g in o.param_groups])
    out["cyclic"] = lrs
    o = opt()
    s = sched.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2, eta_min=0.001)
    lrs = []
    for epoch in range(4):
        for i in range(4):
            o.step()
            s.step(epoch + i / 4)
            lrs.append(s.get_last_lr())
    out["warm_restarts"] = lrs
    o = opt()
    s = sched.ReduceLROnPlateau(
        o,
        mode="max",
        factor=0.5,
        patience=1,
        cooldown=2,
        threshold=0.05,
        threshold_mode="abs",
        min_lr=[0.1, 0.2],
    )
    metrics = [0.5, 0.52, 0.53, 0.51, 0.5, 0.6, 0.6, 0.59, 0.58, 0.57, 0.56, 0.55, 0.54]
    lrs = []
    for m in metrics:
        o.step()
        s.step(m)
        lrs.append([g["lr"] for g in o.param_groups])
    out["plateau"] = lrs
    out["plateau_state"] = [s.num_bad_epochs, s.cooldown_counter, float(s.best)]
    o = opt()
    s = sched.PolynomialLR(o, total_iters=5, power=2.0)
    lrs = []
    for _ in range(7):
        o.step()
        s.step()
        lrs.append(s.get_last_lr())
    out["poly"] = lrs
    o = opt()
    s = sched.ConstantLR(o, factor=0.25, total_iters=2)
    lrs = []
    for _ in range(4):
        o.step()
        s.step()
        lrs.append(s.get_last_lr())
    out["constant"] = lrs
    o = torch.optim.Adam([p[0]], lr=1.0)
    s = sched.OneCycleLR(
        o,
        max_lr=0.3,
        total_steps=10,
        pct_start=0.3,
        anneal_strategy="linear",
        three_phase=True,
        div_factor=10,
        final_div_factor=100,
    )
    lrs = []
    for _ in range(10):
        o.step()
        s.step()
        lrs.append([o.param_groups[0]["lr"], o.param_groups[0]["betas"][0]])
    out["onecycle"] = lrs
    return out


def gan_gradient_penalty(torch, ctx):
    """WGAN-GP: a generator and a critic with their own Adam optimizers (betas (0.5, 0.9)), the
    critic trained twice per generator step, its penalty from autograd.grad with create_graph
    on interpolates; the critic's parameters frozen with requires_grad_ during G's step."""
    nn = torch.nn
    G = ctx.init(nn.Sequential(nn.Linear(3, 16), nn.LeakyReLU(0.2), nn.Linear(16, 2)), "G")
    D = ctx.init(nn.Sequential(nn.Linear(2, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1)), "D")
    og = torch.optim.Adam(G.parameters(), lr=1e-3, betas=(0.5, 0.9))
    od = torch.optim.Adam(D.parameters(), lr=1e-3, betas=(0.5, 0.9))
    rng = np.random.default_rng(3)
    zs = [ctx.t(rng.standard_normal((8, 3)).astype(np.float32)) for _ in range(6)]
    reals = [ctx.t((rng.standard_normal((8, 2)) * 0.5 + 1).astype(np.float32)) for _ in range(6)]
    alphas = [ctx.t(rng.random((8, 1)).astype(np.float32)) for _ in range(6)]

    def d_step(real, z, alpha):
        fake = G(z).detach()
        inter = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
        score = D(inter)
        (g,) = torch.autograd.grad(score.sum(), inter, create_graph=True)
        gp = ((g.norm(2, dim=1) - 1) ** 2).mean()
        loss = D(fake).mean() - D(real).mean() + 10 * gp
        od.zero_grad()
        loss.backward()
        od.step()
        return loss.detach(), gp.detach()

    def g_step(z):
        for p in D.parameters():
            p.requires_grad_(False)
        loss = -D(G(z)).mean()
        og.zero_grad()
        loss.backward()
        og.step()
        for p in D.parameters():
            p.requires_grad_(True)
        return loss.detach()

    d_step, g_step = ctx.fn(d_step), ctx.fn(g_step)
    out = []
    for i in range(3):
        out.append(d_step(reals[2 * i], zs[2 * i], alphas[2 * i]))
        out.append(d_step(reals[2 * i + 1], zs[2 * i + 1], alphas[2 * i + 1]))
        out.append(g_step(zs[i]))
    return [
        out,
        list(G.parameters()),
        list(D.parameters()),
        [p.grad is None for p in D.parameters()],
    ]


def tbptt_packed(torch, ctx):
    """Truncated BPTT: an LSTM language model over chunks, its hidden state carried and
    detached between chunks; then a GRU classifier over variable-length sequences packed
    unsorted, with pad_packed_sequence to a total length and the final states gathered."""
    nn = torch.nn
    rnn_utils = torch.nn.utils.rnn

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(11, 6)
            self.lstm = nn.LSTM(6, 8, num_layers=2, batch_first=True)
            self.out = nn.Linear(8, 11)

        def forward(self, x, state=None):
            h, state = self.lstm(self.emb(x), state)
            return self.out(h), state

    lm = ctx.init(LM(), "lm")
    opt = torch.optim.SGD(lm.parameters(), lr=0.5)
    rng = np.random.default_rng(4)
    seq = ctx.t(rng.integers(0, 11, (3, 13)))
    state = None
    losses = []
    for start in range(0, 12, 4):
        inp, tgt = seq[:, start : start + 4], seq[:, start + 1 : start + 5]
        if state is not None:
            state = tuple(s.detach() for s in state)
        logits, state = lm(inp, state)
        loss = nn.functional.cross_entropy(logits.reshape(-1, 11), tgt.reshape(-1))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(lm.parameters(), 1.0)
        opt.step()
        losses.append(loss.detach())

    gru = ctx.init(nn.GRU(3, 5, batch_first=True, bidirectional=True), "gru")
    head = ctx.init(nn.Linear(10, 2), "head")
    lengths = ctx.t(np.array([3, 6, 2, 5]))
    x = ctx.t(rng.standard_normal((4, 6, 3)).astype(np.float32), requires_grad=True)
    packed = rnn_utils.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    out, h = gru(packed)
    padded, lens = rnn_utils.pad_packed_sequence(out, batch_first=True, total_length=7)
    final = torch.cat([h[-2], h[-1]], dim=1)
    logits = head(final)
    mask = torch.arange(7)[None, :] < lens[:, None]
    pooled = (padded * mask[..., None]).sum(1) / lens[:, None]
    loss = logits.logsumexp(1).mean() + pooled.pow(2).mean()
    loss.backward()
    seqs = [ctx.t(rng.standard_normal((n, 3)).astype(np.float32)) for n in (2, 4, 1)]
    ps = rnn_utils.pack_sequence(seqs, enforce_sorted=False)
    out2, h2 = gru(ps)
    unpacked = rnn_utils.unpack_sequence(out2)
    return [
        losses,
        padded,
        lens,
        packed.batch_sizes,
        packed.sorted_indices,
        x.grad,
        gru.weight_hh_l0_reverse.grad,
        h2,
        unpacked,
        ps.unsorted_indices,
    ]


def optimizer_zoo_captured(torch, ctx):
    """The less common of `optimizer_zoo`'s optimizers, their steps captured."""
    return optimizer_zoo(torch, ctx, ("adamax", "nadam_decoupled", "asgd", "rprop"))


PROGRAMS = [
    optimizer_zoo,
    lbfgs_wolfe,
    scheduler_mix,
    gan_gradient_penalty,
    tbptt_packed,
]
CAPTURED = [optimizer_zoo_captured, gan_gradient_penalty]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
