"""Training programs of hunt54, each run on PyTorch and on ember: optimizer flags (maximize,
amsgrad, foreach, decoupled weight decay, Adafactor, Rprop, ASGD), add_param_group mid-run
with a scheduler and a state_dict reload, LBFGS with strong Wolfe line search, pruning
(l1/random/ln-structured, global, custom methods, remove), parameters_to_vector and the
gradient-clipping family, a tabular model with EmbeddingBag (offsets, per_sample_weights,
max/mean modes), BatchNorm1d and PReLU; a checkpoint holding a Namespace, refused by default
and loaded with weights_only=False; a whole model saved and loaded with weights_only=False.
"""

import argparse
import copy
import io
import pickle

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007, E501, E731, F841, B023, C408, B006, E702, E701, E401, C416, UP031, B905, PIE810, SIM108, RUF005


def _quad(torch, ctx, key="model"):
    """A small regression model (its weights shared under ``key``) and its data."""
    nn = torch.nn
    net = ctx.init(nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 1)), key)
    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((8, 4)).astype(np.float32))
    y = ctx.t(rng.standard_normal((8, 1)).astype(np.float32))
    return net, x, y


def optim_flags(torch, ctx):
    """Each optimizer with its less common flags (Adam maximize/amsgrad/foreach, AdamW betas,
    NAdam and RAdam with decoupled_weight_decay, Rprop etas and step sizes, ASGD, Adamax,
    Adagrad lr_decay, Adadelta maximize, centered RMSprop with momentum, Nesterov SGD
    maximize, Adafactor) over four steps: losses, weights, param groups and state."""
    nn = torch.nn
    results = []
    specs = [
        ("Adam", dict(lr=0.01, maximize=True, amsgrad=True, foreach=False)),
        (
            "Adam",
            dict(lr=0.01, capturable=False, differentiable=False, weight_decay=0.1, foreach=True),
        ),
        ("AdamW", dict(lr=0.01, amsgrad=True, betas=(0.8, 0.9))),
        (
            "NAdam",
            dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True, momentum_decay=0.005),
        ),
        ("RAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)),
        ("Rprop", dict(lr=0.01, etas=(0.4, 1.3), step_sizes=(1e-5, 1.0), maximize=False)),
        ("ASGD", dict(lr=0.01, lambd=1e-3, alpha=0.7, t0=2, weight_decay=0.01)),
        ("Adamax", dict(lr=0.01, weight_decay=0.05)),
        ("Adagrad", dict(lr=0.05, lr_decay=0.01, initial_accumulator_value=0.1)),
        ("Adadelta", dict(lr=1.0, rho=0.8, weight_decay=0.01, maximize=True)),
        ("RMSprop", dict(lr=0.01, momentum=0.5, centered=True, weight_decay=0.01)),
        (
            "SGD",
            dict(
                lr=0.01, momentum=0.9, nesterov=True, dampening=0, weight_decay=1e-3, maximize=True
            ),
        ),
        ("Adafactor", dict(lr=0.01, beta2_decay=-0.8, weight_decay=0.01)),
    ]
    for name, kw in specs:
        net, x, y = _quad(torch, ctx, name + str(kw))
        opt = getattr(torch.optim, name)(net.parameters(), **kw)
        for _ in range(4):
            opt.zero_grad()
            loss = ((net(x) - y) ** 2).mean()
            loss.backward()
            opt.step()
        results.append(
            [
                loss,
                net[0].weight,
                {k: v for k, v in opt.state_dict()["param_groups"][0].items() if k != "params"},
            ]
        )
        st = opt.state[net[0].weight]
        results.append({k: v for k, v in st.items()})
    return results


def add_param_group(torch, ctx):
    """A head added to AdamW by add_param_group at step 2 (its own lr and weight decay) under
    StepLR: losses, each group's lr, initial_lr, and a fresh optimizer loading the
    state_dict."""
    nn = torch.nn
    body = ctx.init(nn.Linear(4, 6), "body")
    head = ctx.init(nn.Linear(6, 2), "head")
    opt = torch.optim.AdamW(body.parameters(), lr=1e-2, weight_decay=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, 2, gamma=0.5)
    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((8, 4)).astype(np.float32))
    y = ctx.t(rng.integers(0, 2, 8))
    losses, lrs = [], []
    for step in range(6):
        if step == 2:
            opt.add_param_group({"params": head.parameters(), "lr": 5e-3, "weight_decay": 0.0})
        opt.zero_grad()
        h = body(x).relu()
        loss = torch.nn.functional.cross_entropy(head(h), y)
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        lrs.append([g["lr"] for g in opt.param_groups])
    sd = opt.state_dict()
    opt2 = torch.optim.AdamW([{"params": body.parameters()}, {"params": head.parameters()}], lr=1.0)
    opt2.load_state_dict(sd)
    return [
        losses,
        lrs,
        [g["lr"] for g in opt2.param_groups],
        [g.get("initial_lr") for g in opt.param_groups],
        sd["state"][2]["exp_avg"],
        len(sd["state"]),
        head.weight,
    ]


def lbfgs_wolfe(torch, ctx):
    """LBFGS in float64 with line_search_fn='strong_wolfe' on a regularised least-squares
    problem (closure calls, func_evals, n_iter) and without a line search on Rosenbrock."""
    rng = np.random.default_rng(0)
    A = ctx.t(rng.standard_normal((10, 3)).astype(np.float64))
    w_true = ctx.t(np.array([1.5, -2.0, 0.5]))
    y = A @ w_true + 0.01 * ctx.t(rng.standard_normal(10))
    w = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS(
        [w],
        lr=1,
        max_iter=20,
        history_size=5,
        line_search_fn="strong_wolfe",
        tolerance_grad=1e-9,
        tolerance_change=1e-12,
    )
    calls = []

    def closure():
        opt.zero_grad()
        loss = ((A @ w - y) ** 2).mean() + 0.01 * w.pow(4).sum()
        loss.backward()
        calls.append(loss.item())
        return loss

    losses = [opt.step(closure) for _ in range(2)]
    st = opt.state[w]
    # rosenbrock without line search
    p = torch.tensor([-1.2, 1.0], dtype=torch.float64, requires_grad=True)
    opt2 = torch.optim.LBFGS([p], lr=0.5, max_iter=15)

    def c2():
        opt2.zero_grad()
        l = (1 - p[0]) ** 2 + 100 * (p[1] - p[0] ** 2) ** 2
        l.backward()
        return l

    for _ in range(3):
        opt2.step(c2)
    return [losses, w, len(calls), st["func_evals"], st["n_iter"], p]


def pruning(torch, ctx):
    """torch.nn.utils.prune: l1_unstructured, random_unstructured, global_unstructured over two
    layers, ln_structured; training through the masks, is_pruned, remove."""
    nn = torch.nn
    import importlib

    prune = importlib.import_module(torch.__name__ + ".nn.utils.prune")
    net = ctx.init(nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3)))
    prune.l1_unstructured(net[0], name="weight", amount=0.3)
    prune.random_unstructured(net[2], "bias", amount=1)
    prune.global_unstructured(
        [(net[0], "bias"), (net[2], "weight")], pruning_method=prune.L1Unstructured, amount=0.4
    )
    prune.ln_structured(net[2], "weight", amount=0.34, n=2, dim=0)
    keys = sorted(n for n, _ in net.named_buffers())
    x = ctx.t(np.random.default_rng(0).standard_normal((5, 6)).astype(np.float32))
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        loss = net(x).pow(2).mean()
        loss.backward()
        opt.step()
    masks = [net[0].weight_mask, net[2].weight_mask, net[0].bias_mask]
    pruned = prune.is_pruned(net)
    prune.remove(net[0], "weight")
    prune.remove(net[2], "weight")
    return [
        loss,
        masks,
        pruned,
        keys,
        sorted(net.state_dict().keys()),
        net[0].weight,
        net[2].weight,
        prune.is_pruned(net[0]),
    ]


def prune_custom(torch, ctx):
    """A custom BasePruningMethod (threshold) applied with its classmethod, custom_from_mask
    and a second pruning on the same tensor (a PruningContainer): forward pre-hooks,
    weight_orig's gradient, the state_dict."""
    nn = torch.nn
    import importlib

    prune = importlib.import_module(torch.__name__ + ".nn.utils.prune")

    class ThresholdPruning(prune.BasePruningMethod):
        PRUNING_TYPE = "unstructured"

        def __init__(self, threshold):
            self.threshold = threshold

        def compute_mask(self, tensor, default_mask):
            return default_mask * (torch.abs(tensor) > self.threshold)

    lin = ctx.init(nn.Linear(5, 4))
    ThresholdPruning.apply(lin, "weight", threshold=0.2)
    prune.custom_from_mask(lin, "bias", mask=torch.tensor([1.0, 0.0, 1.0, 0.0]))
    prune.l1_unstructured(lin, "weight", amount=2)
    hooks = len(lin._forward_pre_hooks)
    x = torch.ones(2, 5)
    y = lin(x)
    y.sum().backward()
    sd = lin.state_dict()
    return [y, lin.weight_orig.grad, lin.weight_mask, sd, hooks, prune.is_pruned(lin)]


def param_vector(torch, ctx):
    """parameters_to_vector / vector_to_parameters, clip_grad_norm_ (foreach,
    error_if_nonfinite, inf norm), clip_grad_value_, get_total_norm and
    clip_grads_with_norm_, and the error for a NaN gradient."""
    nn = torch.nn
    net = ctx.init(nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)))
    vec = nn.utils.parameters_to_vector(net.parameters())
    nn.utils.vector_to_parameters(vec * 0.5 + 0.1, net.parameters())
    x = torch.linspace(-1, 1, 6).view(2, 3)
    loss = net(x).pow(2).sum()
    loss.backward()
    total = nn.utils.clip_grad_norm_(
        net.parameters(), max_norm=0.5, norm_type=2.0, error_if_nonfinite=True, foreach=True
    )
    gv = nn.utils.parameters_to_vector([p.grad for p in net.parameters()])
    nn.utils.clip_grad_value_(net.parameters(), 0.05, foreach=False)
    t2 = nn.utils.clip_grad_norm_(net.parameters(), 1.0, norm_type="inf")
    t3 = nn.utils.get_total_norm([p.grad for p in net.parameters()], norm_type=1.0)
    nn.utils.clip_grads_with_norm_(net.parameters(), 0.1, t3)
    net[0].weight.grad[0, 0] = float("nan")
    err = None
    try:
        nn.utils.clip_grad_norm_(net.parameters(), 1.0, error_if_nonfinite=True)
    except RuntimeError as e:
        err = "non-finite" in str(e)
    return [vec, total, gv, t2, t3, [p.grad for p in net.parameters()][1:], err]


def tabular_embbag(torch, ctx):
    """A tabular model: EmbeddingBag sum with offsets and per_sample_weights, mean with
    padding_idx, max; BatchNorm1d, PReLU with a channel count and a single weight; Adam; 2-D
    bag input, functional embedding_bag with include_last_offset."""
    nn, F = torch.nn, torch.nn.functional

    class Tab(nn.Module):
        def __init__(self):
            super().__init__()
            self.bag = nn.EmbeddingBag(30, 6, mode="sum")
            self.bag_mean = nn.EmbeddingBag(30, 6, mode="mean", padding_idx=0)
            self.bag_max = nn.EmbeddingBag(30, 6, mode="max")
            self.bn = nn.BatchNorm1d(4 + 18)
            self.fc = nn.Linear(22, 8)
            self.act = nn.PReLU(8, init=0.1)
            self.fc2 = nn.Linear(8, 1)
            self.act2 = nn.PReLU()

        def forward(self, num, idx, offsets, w):
            a = self.bag(idx, offsets, per_sample_weights=w)
            b = self.bag_mean(idx, offsets)
            c = self.bag_max(idx, offsets)
            h = self.bn(torch.cat([num, a, b, c], 1))
            return self.fc2(self.act(self.fc(h))).squeeze(-1)

    m = ctx.init(Tab())
    opt = torch.optim.Adam(m.parameters(), lr=0.01)
    rng = np.random.default_rng(1)
    losses = []
    for step in range(3):
        num = ctx.t(rng.standard_normal((5, 4)).astype(np.float32))
        lens = rng.integers(1, 4, 5)
        idx = ctx.t(rng.integers(0, 30, lens.sum()))
        offsets = ctx.t(np.concatenate([[0], np.cumsum(lens)[:-1]]))
        w = ctx.t(rng.uniform(0, 1, lens.sum()).astype(np.float32))
        y = ctx.t(rng.standard_normal(5).astype(np.float32))
        opt.zero_grad()
        loss = F.mse_loss(m(num, idx, offsets, w), y)
        loss.backward()
        opt.step()
        losses.append(loss)
    m.eval()
    inp2d = ctx.t(rng.integers(0, 30, (3, 4)))
    e2d = m.bag(inp2d, per_sample_weights=ctx.t(np.ones((3, 4), np.float32)))
    eb = F.embedding_bag(
        ctx.t(np.array([1, 2, 4, 5, 4, 3, 2, 9])),
        m.bag.weight,
        ctx.t(np.array([0, 4, 8])),
        mode="sum",
        include_last_offset=True,
    )
    return [losses, m.state_dict(), e2d, eb, m(num, idx, offsets, w)]


def checkpoint_objects(torch, ctx):
    """A checkpoint of state_dicts, scheduler state, an argparse.Namespace, a NumPy array and
    an int: the default weights_only load refused as pickle.UnpicklingError, then loaded with
    weights_only=False; deepcopy of an optimizer and a model, pickle of a model, a
    weights_only=True state_dict round trip, and safe_globals around a Namespace."""
    nn = torch.nn
    model = ctx.init(
        nn.Sequential(nn.Linear(3, 4, bias=False), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2))
    )
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)
    x = torch.linspace(-1, 1, 15).view(5, 3)
    for _ in range(2):
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()
        sched.step()
    buf = io.BytesIO()
    torch.save(
        {
            "model": model.state_dict(),
            "opt": opt.state_dict(),
            "sched": sched.state_dict(),
            "args": argparse.Namespace(lr=0.01, name="run"),
            "np": np.arange(3),
            "epoch": 2,
        },
        buf,
    )
    buf.seek(0)
    err = None
    try:
        torch.load(buf)
    except pickle.UnpicklingError as e:
        err = "refused"
    buf.seek(0)
    ck = torch.load(buf, weights_only=False, map_location="cpu")
    m2 = copy.deepcopy(model)
    m2.load_state_dict(ck["model"])
    m2.eval()
    model.eval()
    same = m2(x)
    opt2 = copy.deepcopy(opt)
    model_copy = copy.deepcopy(model)
    pk = pickle.loads(pickle.dumps(model))
    buf2 = io.BytesIO()
    torch.save(model.state_dict(), buf2)
    buf2.seek(0)
    sd = torch.load(buf2, weights_only=True, mmap=False)
    with torch.serialization.safe_globals([argparse.Namespace]):
        buf3 = io.BytesIO()
        torch.save({"a": argparse.Namespace(k=1), "t": torch.ones(2)}, buf3)
        buf3.seek(0)
        ld = torch.load(buf3)
    return [
        err,
        same,
        model(x),
        ck["args"].lr,
        ck["np"],
        ck["epoch"],
        ck["sched"]["last_epoch"],
        opt2.state_dict()["state"][0]["exp_avg"],
        model_copy(x),
        pk(x),
        sorted(sd.keys()),
        ld["a"].k,
        ld["t"],
    ]


def whole_model_checkpoint(torch, ctx):
    """torch.save of a whole model (a Sequential with BatchNorm, Dropout and an LSTM-free
    head) with its optimizer's state_dict; the default load refused, weights_only=False gives
    a model of Parameters that continues training as the original does."""
    nn, F = torch.nn, torch.nn.functional
    model = ctx.init(
        nn.Sequential(
            nn.Linear(4, 8, bias=False),
            nn.BatchNorm1d(8),
            nn.GELU(),
            nn.Dropout(0.0),
            nn.Linear(8, 3),
        )
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((6, 4)).astype(np.float32))
    y = ctx.t(rng.integers(0, 3, 6))
    for _ in range(2):
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    buf = io.BytesIO()
    torch.save({"model": model, "opt": opt.state_dict(), "step": 2}, buf)
    buf.seek(0)
    try:
        torch.load(buf)
        refused = False
    except pickle.UnpicklingError:
        refused = True
    buf.seek(0)
    ck = torch.load(buf, weights_only=False)
    m2 = ck["model"]
    opt2 = torch.optim.SGD(m2.parameters(), lr=0.1, momentum=0.9)
    opt2.load_state_dict(ck["opt"])
    losses = []
    for net, o in ((model, opt), (m2, opt2)):
        o.zero_grad()
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        o.step()
        losses.append(loss)
    kinds = [type(p).__name__ for p in m2.parameters()]
    return [
        refused,
        losses,
        m2.state_dict(),
        model.state_dict(),
        kinds,
        ck["step"],
        type(m2).__name__,
    ]


PROGRAMS = [
    checkpoint_objects,
    optim_flags,
    add_param_group,
    lbfgs_wolfe,
    pruning,
    prune_custom,
    param_vector,
    tabular_embbag,
]
TOLERANCES = {}


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program, **TOLERANCES.get(program.__name__, {}))
