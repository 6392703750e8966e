"""Programs of hunt60 on torch.nn.utils and the learning-rate schedulers, as training scripts
use them: gradient clipping by every norm (inf, 1, 2 with foreach, get_total_norm and
clip_grads_with_norm_, clip_grad_value_), CyclicLR cycling SGD's momentum and OneCycleLR
cycling Adam's betas with state_dict round trips into fresh schedulers, SequentialLR around
CosineAnnealingWarmRestarts and ChainedScheduler, ReduceLROnPlateau in max mode with an
absolute threshold, cooldown and per-group floors, PolynomialLR/LambdaLR/MultiplicativeLR,
global and structured pruning with prune.remove, the new weight_norm parametrization and
remove_parametrizations, orthogonal parametrizations by each map, and spectral_norm's power
iteration in training and eval.
"""

import numpy as np
import pytest

import ember.nn.utils.prune  # noqa: F401  (a submodule scripts import, as torch.nn.utils.prune)

from .harness import check_program

pytest.importorskip("torch.nn.utils.prune", reason="PyTorch (the reference peer) is not installed")

# ruff: noqa: N806, E741, B007, E501, E731, F841, B023, C408, B006, E702, E701, E401, C416, UP031, B905, PIE810, SIM108, RUF005


def _mlp(nn):
    return nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 3))


def _data(ctx, seed, n=8):
    rng = np.random.default_rng(seed)
    return ctx.t(rng.standard_normal((n, 5)).astype(np.float32)), ctx.t(rng.integers(0, 3, n))


def clipping_norms(torch, ctx):
    """Each clipping flavour on the same gradients: clip_grad_norm_ with norm_type inf, 1 and
    2 (foreach=True), its returned total norm; get_total_norm + clip_grads_with_norm_ (PyTorch
    2.6's split form); clip_grad_value_; error_if_nonfinite on a NaN gradient."""
    nn = torch.nn
    U = nn.utils
    model = ctx.init(_mlp(nn))
    x, y = _data(ctx, 0)
    out = []
    for norm_type, max_norm in [(float("inf"), 0.05), (1.0, 0.3), (2.0, 0.1)]:
        model.zero_grad()
        (nn.functional.cross_entropy(model(x), y) * 5).backward()
        total = U.clip_grad_norm_(model.parameters(), max_norm, norm_type=norm_type, foreach=norm_type == 2.0)
        out += [total, model[0].weight.grad.clone(), model[2].bias.grad.clone()]
    model.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    grads = [p.grad for p in model.parameters()]
    total = U.get_total_norm(grads, norm_type=2.0)
    U.clip_grads_with_norm_(model.parameters(), 0.2, total)
    out += [total, model[0].weight.grad.clone()]
    U.clip_grad_value_(model.parameters(), clip_value=0.01)
    out.append(model[2].weight.grad.clone())
    model[0].bias.grad[0] = float("nan")
    try:
        U.clip_grad_norm_(model.parameters(), 1.0, error_if_nonfinite=True)
        raised = False
    except RuntimeError:
        raised = True
    nan_total = U.clip_grad_norm_(model.parameters(), 1.0)
    out += [raised, nan_total]
    return out


def cyclic_lr_momentum(torch, ctx):
    """CyclicLR (triangular2, then exp_range) cycling SGD's momentum inversely to the lr; the
    scheduler's state_dict saved half way and loaded into a fresh scheduler on a fresh
    optimizer that continues the cycle."""
    nn = torch.nn
    model = ctx.init(_mlp(nn))
    x, y = _data(ctx, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    sched = torch.optim.lr_scheduler.CyclicLR(opt, base_lr=0.01, max_lr=0.1, step_size_up=3, mode="triangular2", base_momentum=0.8, max_momentum=0.95)
    lrs, moms = [], []
    for i in range(7):
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        sched.step()
        lrs.append(sched.get_last_lr()[0])
        moms.append(opt.param_groups[0]["momentum"])
    sd_sched, sd_opt = sched.state_dict(), opt.state_dict()
    opt2 = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.1)
    opt2.load_state_dict(sd_opt)
    sched2 = torch.optim.lr_scheduler.CyclicLR(opt2, base_lr=0.01, max_lr=0.1, step_size_up=3, mode="triangular2", base_momentum=0.8, max_momentum=0.95)
    sched2.load_state_dict(sd_sched)
    for i in range(5):
        opt2.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt2.step()
        sched2.step()
        lrs.append(sched2.get_last_lr()[0])
        moms.append(opt2.param_groups[0]["momentum"])
    opt3 = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    s3 = torch.optim.lr_scheduler.CyclicLR(opt3, 0.001, 0.01, step_size_up=2, step_size_down=4, mode="exp_range", gamma=0.9)
    for _ in range(9):
        opt3.step()
        s3.step()
        lrs.append(s3.get_last_lr()[0])
    return [lrs, moms, model[2].weight]


def onecycle_adam(torch, ctx):
    """OneCycleLR on AdamW (three_phase, linear annealing), cycling beta1 between 0.85 and
    0.95; lrs and betas recorded each step; the state_dict round trip mid-run."""
    nn = torch.nn
    model = ctx.init(_mlp(nn))
    x, y = _data(ctx, 2)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.05, total_steps=12, pct_start=0.25, anneal_strategy="linear", three_phase=True, div_factor=10, final_div_factor=100)
    lrs, betas, losses = [], [], []
    for i in range(12):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        sched.step()
        lrs.append(opt.param_groups[0]["lr"])
        betas.append(list(opt.param_groups[0]["betas"]))
        losses.append(loss.item())
        if i == 5:
            sd = sched.state_dict()
            sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.05, total_steps=12, pct_start=0.25, anneal_strategy="linear", three_phase=True, div_factor=10, final_div_factor=100)
            sched.load_state_dict(sd)
    return [lrs, betas, losses, model[0].weight]


def sequential_restarts(torch, ctx):
    """SequentialLR: LinearLR warm-up then CosineAnnealingWarmRestarts (T_0=3, T_mult=2); a
    ChainedScheduler of ExponentialLR and MultiStepLR on a second optimizer; both recorded
    and the chained one's state_dict round-tripped."""
    nn = torch.nn
    model = ctx.init(_mlp(nn))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    warm = torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.1, end_factor=1.0, total_iters=3)
    cos = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=3, T_mult=2, eta_min=0.001)
    seq = torch.optim.lr_scheduler.SequentialLR(opt, schedulers=[warm, cos], milestones=[3])
    lrs = []
    for _ in range(14):
        opt.step()
        seq.step()
        lrs.append(seq.get_last_lr()[0])
    opt2 = torch.optim.SGD([{"params": model[0].parameters()}, {"params": model[2].parameters(), "lr": 0.01}], lr=0.1)
    chained = torch.optim.lr_scheduler.ChainedScheduler([torch.optim.lr_scheduler.ExponentialLR(opt2, gamma=0.9), torch.optim.lr_scheduler.MultiStepLR(opt2, milestones=[2, 5], gamma=0.5)])
    lrs2 = []
    for i in range(8):
        opt2.step()
        chained.step()
        lrs2.append(chained.get_last_lr())
    sd = chained.state_dict()
    return [lrs, lrs2, sorted(sd.keys()), [g["lr"] for g in opt2.param_groups]]


def plateau_max_mode(torch, ctx):
    """ReduceLROnPlateau tracking a validation accuracy (mode="max"), threshold_mode="abs",
    patience 1, cooldown 2, per-group min_lr; the reductions it makes over a scripted metric
    sequence, num_bad_epochs, and a state_dict round trip."""
    nn = torch.nn
    model = ctx.init(_mlp(nn))
    opt = torch.optim.SGD([{"params": model[0].parameters(), "lr": 0.1}, {"params": model[2].parameters(), "lr": 0.02}], lr=0.1)
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="max", factor=0.3, patience=1, threshold=0.01, threshold_mode="abs", cooldown=2, min_lr=[0.005, 0.004])
    metrics = [0.5, 0.6, 0.605, 0.6, 0.59, 0.62, 0.62, 0.61, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6]
    out = []
    for i, m in enumerate(metrics):
        sched.step(m)
        out.append([g["lr"] for g in opt.param_groups] + [sched.num_bad_epochs, sched.cooldown_counter])
        if i == 6:
            sd = sched.state_dict()
            sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="max")
            sched.load_state_dict(sd)
    return [out, sched.get_last_lr(), float(sched.best)]


def polynomial_lambda(torch, ctx):
    """PolynomialLR (power 2), LambdaLR with one lambda per parameter group (a warm-up and an
    inverse square root), MultiplicativeLR; the lrs over ten epochs and LambdaLR's state_dict
    (lambdas that are functions are not saved)."""
    nn = torch.nn
    model = ctx.init(_mlp(nn))
    opt = torch.optim.SGD(model.parameters(), lr=0.2)
    poly = torch.optim.lr_scheduler.PolynomialLR(opt, total_iters=6, power=2.0)
    opt2 = torch.optim.Adam([{"params": model[0].parameters()}, {"params": model[2].parameters()}], lr=1e-2)
    lam = torch.optim.lr_scheduler.LambdaLR(opt2, lr_lambda=[lambda e: min(1.0, (e + 1) / 4), lambda e: 1 / max(1, e) ** 0.5])
    opt3 = torch.optim.SGD(model.parameters(), lr=0.1)
    mult = torch.optim.lr_scheduler.MultiplicativeLR(opt3, lr_lambda=lambda e: 0.95 if e % 2 else 1.0)
    rec = []
    for _ in range(10):
        for o in (opt, opt2, opt3):
            o.step()
        poly.step(); lam.step(); mult.step()
        rec.append(poly.get_last_lr() + lam.get_last_lr() + mult.get_last_lr())
    sd = lam.state_dict()
    return [rec, sd["base_lrs"], sd["_last_lr"], sd["lr_lambdas"], sd["last_epoch"]]


def global_pruning(torch, ctx):
    """prune.global_unstructured (L1, 40% over two layers' weights), ln_structured (n=2, a
    quarter of the output rows), l1_unstructured on a bias; the masks' sparsity, a training step
    that keeps pruned weights at zero (the mask multiplies the gradient), prune.remove making
    the pruning permanent, and the state_dict keys before and after."""
    nn = torch.nn
    P = nn.utils.prune
    model = ctx.init(nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 3)))
    x, y = _data(ctx, 3)
    x = torch.cat([x, x[:, :1]], 1)
    P.global_unstructured([(model[0], "weight"), (model[2], "weight")], pruning_method=P.L1Unstructured, amount=0.4)
    P.ln_structured(model[4], "weight", amount=0.25, n=2, dim=0)
    P.l1_unstructured(model[2], "bias", amount=2)
    keys_pruned = sorted(model.state_dict().keys())
    sparsity = [float((m.weight == 0).sum()) / m.weight.nelement() for m in (model[0], model[2], model[4])]
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(2):
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    orig_grad = model[0].weight_orig.grad
    for m, name in [(model[0], "weight"), (model[2], "weight"), (model[2], "bias"), (model[4], "weight")]:
        P.remove(m, name)
    keys_after = sorted(model.state_dict().keys())
    return [keys_pruned, sparsity, orig_grad, model[0].weight, model[4].weight, keys_after, P.is_pruned(model)]


def weight_norm_parametrization(torch, ctx):
    """nn.utils.parametrizations.weight_norm (dim=0 on a Conv1d, dim=None on a Linear):
    original0/original1 in the state_dict, training with Adam, then
    parametrize.remove_parametrizations(leave_parametrized=True) leaving a plain weight equal
    to g * v / ||v||."""
    nn = torch.nn
    P = nn.utils.parametrize

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.utils.parametrizations.weight_norm(nn.Conv1d(3, 4, 3, padding=1), dim=0)
            self.fc = nn.utils.parametrizations.weight_norm(nn.Linear(4 * 6, 2), dim=None)

        def forward(self, x):
            return self.fc(torch.relu(self.conv(x)).flatten(1))

    net = ctx.init(Net())
    rng = np.random.default_rng(4)
    x = ctx.t(rng.standard_normal((5, 3, 6)).astype(np.float32))
    y = ctx.t(rng.standard_normal((5, 2)).astype(np.float32))
    keys = sorted(net.state_dict().keys())
    opt = torch.optim.Adam(net.parameters(), lr=0.01)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = nn.functional.mse_loss(net(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    g_grad = net.conv.parametrizations.weight.original0.grad
    w_before = net.conv.weight.detach().clone()
    P.remove_parametrizations(net.conv, "weight", leave_parametrized=True)
    P.remove_parametrizations(net.fc, "weight")
    return [keys, losses, g_grad, w_before, net.conv.weight, sorted(net.state_dict().keys()), P.is_parametrized(net.conv), net(x)]


def orthogonal_maps(torch, ctx):
    """parametrizations.orthogonal with each orthogonal_map (matrix_exp, cayley, householder)
    on square and wide Linear weights: W W^T = I, a training step, and the parametrized
    weight after it (use_trivialization=False for householder)."""
    nn = torch.nn
    O = nn.utils.parametrizations.orthogonal
    rng = np.random.default_rng(5)
    x = ctx.t(rng.standard_normal((4, 6)).astype(np.float32))
    out = []
    for i, (kind, shape, triv) in enumerate([("matrix_exp", (6, 6), True), ("cayley", (6, 6), True), ("householder", (4, 6), False), ("matrix_exp", (4, 6), True)]):
        lin = ctx.init(nn.Linear(shape[1], shape[0]), f"lin{i}")
        O(lin, orthogonal_map=kind, use_trivialization=triv)
        with torch.no_grad():
            if not triv:
                lin.weight = lin.weight  # assigning runs right_inverse
        W = lin.weight
        ortho_err = (W @ W.T - torch.eye(shape[0])).abs().max()
        opt = torch.optim.SGD(lin.parameters(), lr=0.1)
        loss = lin(x).pow(2).sum()
        loss.backward()
        opt.step()
        out += [ortho_err < 1e-5, lin.weight, loss.item()]
    return out


def spectral_norm_gan(torch, ctx):
    """A discriminator with parametrizations.spectral_norm (n_power_iterations=2, on a Conv2d
    and a Linear): training-mode calls advance the power iteration's u and v buffers, eval
    calls reuse them; the largest singular value of the normalised weight is about 1."""
    nn = torch.nn
    SN = nn.utils.parametrizations.spectral_norm
    D = nn.Sequential(SN(nn.Conv2d(3, 6, 4, 2, 1), n_power_iterations=2), nn.LeakyReLU(0.2), nn.Flatten(), SN(nn.Linear(6 * 16, 1)))
    D = ctx.init(D)
    rng = np.random.default_rng(6)
    x = ctx.t(rng.standard_normal((3, 3, 8, 8)).astype(np.float32))
    opt = torch.optim.Adam(D.parameters(), lr=2e-4, betas=(0.0, 0.9))
    outs = []
    for _ in range(3):
        opt.zero_grad()
        loss = nn.functional.softplus(-D(x)).mean()
        loss.backward()
        opt.step()
        outs.append(loss.item())
    D.eval()
    e1 = D(x)
    e2 = D(x)
    u = D[0].parametrizations.weight[0]._u
    sigma = torch.linalg.matrix_norm(D[3].weight.detach(), ord=2)
    return [outs, e1, e2, u, sigma, D[0].parametrizations.weight.original.grad]


PROGRAMS = [clipping_norms, cyclic_lr_momentum, onecycle_adam, sequential_restarts, plateau_max_mode, polynomial_lambda, global_pruning, weight_norm_parametrization, orthogonal_maps, spectral_norm_gan]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program, rtol=1e-4, atol=1e-5)
