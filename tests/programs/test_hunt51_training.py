"""Programs of hunt51 (training and library APIs), each run on PyTorch and on ember (eagerly
and, where steps are marked, captured): learning-rate schedulers compared step by step
(CyclicLR with momentum cycling, OneCycleLR in three phases, warm restarts with fractional
epochs, PolynomialLR, ChainedScheduler, SequentialLR, ReduceLROnPlateau in max mode with
cooldown) and their state_dict round trip; a module that migrates old checkpoints in
``_load_from_state_dict`` by its ``_version``, with state-dict hooks and strict=False results;
an IterableDataset and map-style datasets through DataLoader, random_split, samplers and
default_collate of dicts and named tuples; new-style autograd Functions (setup_context,
vmap's generated rule, jvp); LU, QR (geqrf / householder_product), eig / eigvals of a
companion matrix and triangular solves; checkpoint_sequential with dropout's RNG preserved;
a Temporal-Fusion gated residual network with variable selection; GIN with a batch vector;
AveragedModel with an EMA multi_avg_fn and its buffers.
"""

import collections
import inspect

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007, E501, E731, F841, B023, E702, E701, C408, SIM118


def lr_schedulers(torch, ctx):
    """Every step's learning rates (and momentum for CyclicLR / OneCycleLR) of the schedulers
    people combine, and a scheduler resumed from its state_dict mid-way."""
    nn = torch.nn
    sch = torch.optim.lr_scheduler

    def params():
        return [nn.Parameter(torch.zeros(2))]

    out = {}

    def run(name, make_opt, make_sched, steps, metric=None, epoch_frac=False):
        opt = make_opt()
        s = make_sched(opt)
        lrs, moms = [], []
        for i in range(steps):
            opt.step()
            if metric is not None:
                s.step(metric[i])
            elif epoch_frac:
                s.step(i * 0.5)
            else:
                s.step()
            lrs.append([round(g["lr"], 10) for g in opt.param_groups])
            m = opt.param_groups[0].get("momentum", opt.param_groups[0].get("betas", (None,))[0])
            moms.append(m)
        out[name] = (lrs, moms)
        return opt, s

    sgd = lambda: torch.optim.SGD(params(), lr=0.1, momentum=0.9)
    run("cyclic", sgd, lambda o: sch.CyclicLR(o, 0.01, 0.1, step_size_up=3, mode="triangular2"), 14)
    run(
        "cyclic_exp",
        sgd,
        lambda o: sch.CyclicLR(
            o, 0.01, 0.1, step_size_up=2, step_size_down=3, mode="exp_range", gamma=0.9
        ),
        12,
    )
    adam = lambda: torch.optim.Adam(params(), lr=0.1)
    run(
        "onecycle3",
        adam,
        lambda o: sch.OneCycleLR(
            o, max_lr=0.5, total_steps=12, three_phase=True, anneal_strategy="linear"
        ),
        11,
    )
    run(
        "onecycle",
        sgd,
        lambda o: sch.OneCycleLR(o, max_lr=[0.3], epochs=2, steps_per_epoch=5, pct_start=0.4),
        9,
    )
    run(
        "restarts",
        sgd,
        lambda o: sch.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=2, eta_min=0.001),
        14,
        epoch_frac=True,
    )
    run("poly", sgd, lambda o: sch.PolynomialLR(o, total_iters=5, power=2.0), 7)
    run(
        "chained",
        sgd,
        lambda o: sch.ChainedScheduler(
            [sch.ConstantLR(o, factor=0.5, total_iters=3), sch.ExponentialLR(o, gamma=0.9)]
        ),
        6,
    )
    run(
        "sequential",
        sgd,
        lambda o: sch.SequentialLR(
            o,
            [sch.LinearLR(o, start_factor=0.1, total_iters=3), sch.CosineAnnealingLR(o, T_max=4)],
            milestones=[3],
        ),
        9,
    )
    run(
        "multiplicative",
        sgd,
        lambda o: sch.MultiplicativeLR(o, lambda e: 0.95 if e % 2 else 1.0),
        5,
    )
    metric = [0.1, 0.2, 0.2, 0.2, 0.2, 0.2, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25]
    run(
        "plateau",
        sgd,
        lambda o: sch.ReduceLROnPlateau(
            o,
            mode="max",
            factor=0.5,
            patience=1,
            cooldown=2,
            min_lr=0.02,
            threshold=0.01,
            threshold_mode="abs",
        ),
        12,
        metric=metric,
    )
    # resumed from a state_dict after 4 steps
    opt, s = run("resume_a", sgd, lambda o: sch.OneCycleLR(o, max_lr=0.3, total_steps=10), 4)
    state = s.state_dict()
    opt2 = torch.optim.SGD(params(), lr=0.1, momentum=0.9)
    opt2.load_state_dict(opt.state_dict())
    s2 = sch.OneCycleLR(opt2, max_lr=0.3, total_steps=10)
    s2.load_state_dict(state)
    rest = []
    for _ in range(5):
        opt2.step()
        s2.step()
        rest.append(round(s2.get_last_lr()[0], 10))
    out["resumed"] = rest
    return out


def versioned_state_dict(torch, ctx):
    """A module that renames and reshapes old checkpoints' entries in _load_from_state_dict by
    the saved _version, a persistent=False buffer, state_dict pre/post hooks and load pre/post
    hooks, and strict=False loads reporting missing and unexpected keys."""
    nn = torch.nn

    class Scale(nn.Module):
        _version = 2

        def __init__(self):
            super().__init__()
            self.scale = nn.Parameter(torch.ones(3))
            self.register_buffer("count", torch.zeros((), dtype=torch.long))
            self.register_buffer("cache", torch.zeros(3), persistent=False)

        def _load_from_state_dict(
            self,
            state_dict,
            prefix,
            local_metadata,
            strict,
            missing_keys,
            unexpected_keys,
            error_msgs,
        ):
            version = local_metadata.get("version", None)
            if version is None or version < 2:
                old = prefix + "gain"
                if old in state_dict:
                    state_dict[prefix + "scale"] = state_dict.pop(old).reshape(3)
            super()._load_from_state_dict(
                state_dict,
                prefix,
                local_metadata,
                strict,
                missing_keys,
                unexpected_keys,
                error_msgs,
            )

        def forward(self, x):
            return x * self.scale

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)
            self.s = Scale()

        def forward(self, x):
            return self.s(self.lin(x))

    net = ctx.init(Net())
    log = []
    net.register_state_dict_pre_hook(lambda m, prefix, keep_vars: log.append(("pre", prefix)))
    net.s._register_state_dict_hook(
        lambda m, sd, prefix, meta: log.append(("post", prefix, sorted(sd)))
    )
    net.register_load_state_dict_post_hook(
        lambda m, keys: log.append(
            ("load_post", sorted(keys.missing_keys), sorted(keys.unexpected_keys))
        )
    )
    sd = net.state_dict()
    meta = sd._metadata
    versions = {k: v.get("version") for k, v in meta.items()}
    # an old checkpoint: version 1, the parameter under its old name and shape
    old = collections.OrderedDict((k, v.clone()) for k, v in sd.items() if k != "s.scale")
    old["s.gain"] = torch.tensor([[2.0, 3.0, 4.0]])
    old._metadata = {k: dict(v) for k, v in meta.items()}
    old._metadata["s"]["version"] = 1
    r1 = net.load_state_dict(old)
    partial = {"lin.weight": torch.eye(3), "extra.thing": torch.ones(1)}
    r2 = net.load_state_dict(partial, strict=False)
    try:
        net.load_state_dict(partial)
        strict_error = None
    except RuntimeError as e:
        strict_error = "Missing key(s)" in str(e) and "Unexpected key(s)" in str(e)
    x = ctx.t(np.arange(6, dtype=np.float32).reshape(2, 3))
    return [
        list(sd.keys()),
        versions,
        net.s.scale,
        (list(r1.missing_keys), list(r1.unexpected_keys)),
        (sorted(r2.missing_keys), list(r2.unexpected_keys), type(r2).__name__),
        r2.missing_keys == r2[0],
        strict_error,
        log,
        net(x),
    ]


def data_pipeline(torch, ctx):
    """An IterableDataset of windows, map-style datasets joined and split with a generator,
    SubsetRandomSampler and WeightedRandomSampler with generators, BatchSampler, a collate_fn
    padding variable lengths, and default_collate of dicts and named tuples."""
    from_data = torch.utils.data
    Pair = collections.namedtuple("Pair", ["x", "y"])

    class Windows(from_data.IterableDataset):
        def __init__(self, n, w):
            self.n, self.w = n, w

        def __iter__(self):
            info = from_data.get_worker_info()
            assert info is None
            for i in range(self.n - self.w + 1):
                yield torch.arange(i, i + self.w, dtype=torch.float32), i % 3

    class Dicts(from_data.Dataset):
        def __len__(self):
            return 7

        def __getitem__(self, i):
            return {"x": torch.full((2,), float(i)), "y": i, "meta": Pair(i * 2, float(i) / 2)}

    out = []
    for xb, yb in from_data.DataLoader(Windows(8, 3), batch_size=2, drop_last=True):
        out.append((xb, yb))
    dl = from_data.DataLoader(
        Dicts(), batch_size=3, shuffle=True, generator=torch.Generator().manual_seed(4)
    )
    for b in dl:
        out.append((b["x"], b["y"], b["meta"].x, b["meta"].y, type(b["meta"]).__name__))
    full = from_data.ConcatDataset([Dicts(), Dicts()])
    a, b_, c = from_data.random_split(
        full, [0.5, 0.3, 0.2], generator=torch.Generator().manual_seed(1)
    )
    out.append((len(a), len(b_), len(c), list(a.indices), list(c.indices)))
    sub = from_data.SubsetRandomSampler(
        list(range(10, 20)), generator=torch.Generator().manual_seed(2)
    )
    out.append(list(sub))
    w = from_data.WeightedRandomSampler(
        [0.1, 0.5, 2.0, 0.0, 1.0],
        num_samples=8,
        replacement=True,
        generator=torch.Generator().manual_seed(3),
    )
    out.append(list(w))
    bs = from_data.BatchSampler(
        from_data.SequentialSampler(range(7)), batch_size=3, drop_last=False
    )
    out.append(list(bs))

    def pad_collate(batch):
        seqs, labels = zip(*batch)
        lengths = torch.tensor([len(s) for s in seqs])
        padded = torch.nn.utils.rnn.pad_sequence(seqs, batch_first=True, padding_value=-1.0)
        return padded, lengths, torch.tensor(labels)

    seqs = [(torch.arange(n, dtype=torch.float32), n % 2) for n in (3, 1, 4, 2, 5)]
    dl = from_data.DataLoader(
        seqs,
        batch_size=2,
        collate_fn=pad_collate,
        sampler=from_data.RandomSampler(seqs, generator=torch.Generator().manual_seed(0)),
    )
    for padded, lengths, labels in dl:
        out.append((padded, lengths, labels))
    out.append(from_data.default_collate([np.array([1.0, 2.0]), np.array([3.0, 4.0])]))
    out.append(from_data.default_collate([(1, "a"), (2, "b")]))
    return out


def new_style_functions(torch, ctx):
    """autograd Functions written the new way: forward without ctx plus setup_context, vmap
    through generate_vmap_rule, a jvp for forward mode, mark_non_differentiable on an index
    output, and once_differentiable."""
    once_differentiable = torch.autograd.function.once_differentiable

    class Cube(torch.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(x):
            return x**3, 3 * x**2

        @staticmethod
        def setup_context(ctx_, inputs, output):
            (x,) = inputs
            ctx_.save_for_backward(x, output[1])
            ctx_.save_for_forward(output[1])

        @staticmethod
        def backward(ctx_, grad_out, grad_dx):
            x, dx = ctx_.saved_tensors
            return grad_out * dx + grad_dx * 6 * x

        @staticmethod
        def jvp(ctx_, x_t):
            (dx,) = ctx_.saved_tensors
            return dx * x_t, torch.zeros_like(x_t)

    class ArgmaxPick(torch.autograd.Function):
        @staticmethod
        def forward(x):
            idx = x.argmax(-1, keepdim=True)
            return x.gather(-1, idx), idx

        @staticmethod
        def setup_context(ctx_, inputs, output):
            (x,) = inputs
            _, idx = output
            ctx_.mark_non_differentiable(idx)
            ctx_.save_for_backward(idx)
            ctx_.shape = x.shape

        @staticmethod
        @once_differentiable
        def backward(ctx_, g, g_idx):
            (idx,) = ctx_.saved_tensors
            return torch.zeros(ctx_.shape, dtype=g.dtype).scatter(-1, idx, g)

    x = ctx.t(np.array([0.5, -1.0, 2.0]), requires_grad=True)
    y, dy = Cube.apply(x)
    (y.sum() + dy.sum()).backward()
    g1 = x.grad.clone()
    batched = torch.func.vmap(lambda t: Cube.apply(t)[0])(x.detach().reshape(3, 1))
    gx = torch.func.grad(lambda t: Cube.apply(t)[0].sum())(x.detach())
    fwAD = torch.autograd.forward_ad

    with fwAD.dual_level():
        dual = fwAD.make_dual(x.detach(), torch.ones(3))
        out, _ = Cube.apply(dual)
        tangent = fwAD.unpack_dual(out).tangent
    m = ctx.t(np.array([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]]), requires_grad=True)
    v, idx = ArgmaxPick.apply(m)
    (v * torch.tensor([[2.0], [3.0]])).sum().backward()
    return [y, dy, g1, batched, gx, tangent, v, idx, idx.requires_grad, m.grad]


def linalg_solvers(torch, ctx):
    """Many right-hand sides through one LU factorization (lu_factor / lu_solve, lu_unpack
    rebuilding A), a QR by geqrf + householder_product, polynomial roots as the eigenvalues of
    a companion matrix (complex), eig's eigenvectors checked by A V = V diag(w), triangular
    solves both ways, tensorsolve, and gradients through lu_solve and solve_triangular."""
    rng = np.random.default_rng(9)
    A = ctx.t(rng.normal(size=(4, 4)) + 4 * np.eye(4), requires_grad=True)
    B = ctx.t(rng.normal(size=(4, 3)))
    LU, piv = torch.linalg.lu_factor(A)
    X = torch.linalg.lu_solve(LU, piv, B)
    P, L, U = torch.lu_unpack(LU, piv)
    rebuilt = P @ L @ U
    X.sum().backward()
    grad_A = A.grad.clone()
    M = ctx.t(rng.normal(size=(5, 3)))
    a, tau = torch.geqrf(M)
    Q = torch.linalg.householder_product(a, tau)
    R = torch.triu(a[:3])
    coeffs = ctx.t(np.array([1.0, -6.0, 11.0, -6.0]))  # (x-1)(x-2)(x-3)
    n = coeffs.numel() - 1
    comp = torch.zeros(n, n, dtype=torch.float64)
    comp[0] = -coeffs[1:] / coeffs[0]
    comp[1:, :-1] = torch.eye(n - 1, dtype=torch.float64)
    roots = torch.linalg.eigvals(comp)
    roots_sorted = torch.sort(roots.real).values
    G = ctx.t(rng.normal(size=(3, 3)))
    w, V = torch.linalg.eig(G)
    resid = torch.linalg.matrix_norm(G.to(V.dtype) @ V - V @ torch.diag(w))
    T = torch.triu(ctx.t(rng.normal(size=(3, 3)) + 3 * np.eye(3)))
    T.requires_grad_(True)
    rhs = ctx.t(rng.normal(size=(3, 2)))
    sol_up = torch.linalg.solve_triangular(T, rhs, upper=True)
    sol_left = torch.linalg.solve_triangular(T, rhs.t(), upper=True, left=False)
    (sol_up.sum() + sol_left.pow(2).sum()).backward()
    old = torch.triangular_solve(rhs, T.detach(), upper=True).solution
    Ten = ctx.t(rng.normal(size=(2, 3, 6)) + np.eye(6).reshape(6, 6)[:, :].reshape(2, 3, 6))
    bt = ctx.t(rng.normal(size=(2, 3)))
    ts = torch.linalg.tensorsolve(Ten, bt)
    return [
        X,
        rebuilt,
        A.detach(),
        grad_A,
        Q @ R,
        Q.t() @ Q,
        roots_sorted,
        resid < 1e-8,
        sol_up,
        sol_left,
        T.grad,
        old,
        ts,
    ]


def checkpoint_sequential_dropout(torch, ctx):
    """checkpoint_sequential over a stack with dropout (the forward's RNG replayed in the
    recomputation), non-reentrant checkpoint with keyword arguments, and gradients equal to the
    unchecked model's under the same seed."""
    nn, F = torch.nn, torch.nn.functional
    checkpoint, checkpoint_sequential = (
        torch.utils.checkpoint.checkpoint,
        torch.utils.checkpoint.checkpoint_sequential,
    )

    def build():
        return nn.Sequential(
            nn.Linear(6, 12),
            nn.GELU(),
            nn.Dropout(0.3),
            nn.Linear(12, 12),
            nn.Tanh(),
            nn.Dropout(0.2),
            nn.Linear(12, 6),
        )

    model = ctx.init(build())
    x = ctx.t(np.random.default_rng(10).normal(size=(5, 6)).astype(np.float32), requires_grad=True)
    torch.manual_seed(7)
    ref = model(x).pow(2).sum()
    ref.backward()
    ref_grads = [p.grad.clone() for p in model.parameters()] + [x.grad.clone()]
    model.zero_grad()
    x.grad = None
    torch.manual_seed(7)
    out = checkpoint_sequential(model, 3, x, use_reentrant=False)
    loss = out.pow(2).sum()
    loss.backward()
    grads = [p.grad.clone() for p in model.parameters()] + [x.grad.clone()]

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(6, 6)

        def forward(self, h, scale=1.0, shift=None):
            h = F.dropout(torch.relu(self.lin(h)) * scale, 0.25, self.training)
            return h if shift is None else h + shift

    blk = ctx.init(Block(), "blk")
    torch.manual_seed(3)
    y = checkpoint(blk, x.detach(), use_reentrant=False, scale=2.0, shift=torch.ones(6))
    y.sum().backward()
    return [ref, loss, ref_grads, grads, y, blk.lin.weight.grad]


def tft_grn(torch, ctx):
    """The Temporal Fusion Transformer's gated residual network (ELU, GLU gate, skip with a
    projection, LayerNorm, an optional context) and variable selection over several inputs
    (softmax weights over variables by einsum), trained with a quantile loss."""
    nn, F = torch.nn, torch.nn.functional

    class GRN(nn.Module):
        def __init__(self, i, h, o, context=None, dropout=0.0):
            super().__init__()
            self.skip = nn.Linear(i, o) if i != o else None
            self.fc1 = nn.Linear(i, h)
            self.ctx = nn.Linear(context, h, bias=False) if context else None
            self.fc2 = nn.Linear(h, h)
            self.gate = nn.Linear(h, 2 * o)
            self.drop = nn.Dropout(dropout)
            self.norm = nn.LayerNorm(o)

        def forward(self, x, c=None):
            residual = x if self.skip is None else self.skip(x)
            h = self.fc1(x)
            if c is not None:
                h = h + self.ctx(c).unsqueeze(-2)
            h = self.fc2(F.elu(h))
            return self.norm(residual + F.glu(self.drop(self.gate(h)), dim=-1))

    class VSN(nn.Module):
        def __init__(self, n_vars, d, h, context):
            super().__init__()
            self.flat = GRN(n_vars * d, h, n_vars, context=context)
            self.vars = nn.ModuleList([GRN(d, h, h) for _ in range(n_vars)])

        def forward(self, x, c):
            B, T, V, D = x.shape
            weights = torch.softmax(self.flat(x.reshape(B, T, V * D), c), dim=-1)
            processed = torch.stack([g(x[..., i, :]) for i, g in enumerate(self.vars)], dim=-2)
            return torch.einsum("btv,btvh->bth", weights, processed), weights

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.static = GRN(3, 8, 8)
            self.vsn = VSN(4, 2, 8, context=8)
            self.lstm = nn.LSTM(8, 8, batch_first=True)
            self.out = nn.Linear(8, 3)

        def forward(self, x, s):
            c = self.static(s)
            h, w = self.vsn(x, c)
            h, _ = self.lstm(h)
            return self.out(h), w

    def quantile_loss(pred, y, qs=(0.1, 0.5, 0.9)):
        q = torch.tensor(qs)
        e = y.unsqueeze(-1) - pred
        return torch.max(q * e, (q - 1) * e).mean()

    model = ctx.init(Model())
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    rng = np.random.default_rng(11)
    x = ctx.t(rng.normal(size=(3, 5, 4, 2)).astype(np.float32))
    s = ctx.t(rng.normal(size=(3, 3)).astype(np.float32))
    y = ctx.t(rng.normal(size=(3, 5)).astype(np.float32))

    @ctx.fn
    def step():
        pred, w = model(x, s)
        loss = quantile_loss(pred, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, w

    out = [step() for _ in range(3)]
    return [[o[0].item() for o in out], out[-1][1]]


def gin_batch(torch, ctx):
    """Graph Isomorphism Network on a batch of small graphs: edges as an index tensor, sum
    aggregation by index_add_, a learnable epsilon, global add pooling by a batch vector, and
    per-graph node counts by unique_consecutive."""
    nn, F = torch.nn, torch.nn.functional

    class GINConv(nn.Module):
        def __init__(self, i, o):
            super().__init__()
            self.eps = nn.Parameter(torch.zeros(1))
            # (no bias before BatchNorm: its gradient is rounding noise, which Adam would amplify)
            self.mlp = nn.Sequential(
                nn.Linear(i, o, bias=False), nn.BatchNorm1d(o), nn.ReLU(), nn.Linear(o, o)
            )

        def forward(self, x, edge_index):
            src, dst = edge_index
            agg = torch.zeros_like(x).index_add_(0, dst, x[src])
            return self.mlp((1 + self.eps) * x + agg)

    class GIN(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1, self.c2 = GINConv(3, 8), GINConv(8, 8)
            self.head = nn.Linear(16, 2)

        def forward(self, x, edge_index, batch, n_graphs):
            h1 = F.relu(self.c1(x, edge_index))
            h2 = F.relu(self.c2(h1, edge_index))
            pooled = [torch.zeros(n_graphs, h.shape[1]).index_add_(0, batch, h) for h in (h1, h2)]
            return self.head(torch.cat(pooled, dim=1))

    edges = np.array([[0, 1], [1, 2], [2, 0], [3, 4], [4, 5], [5, 6], [6, 3], [7, 8]])
    edges = np.concatenate([edges, edges[:, ::-1]]).T.copy()
    edge_index = ctx.t(edges)
    batch = ctx.t(np.array([0, 0, 0, 1, 1, 1, 1, 2, 2]))
    x = ctx.t(np.random.default_rng(12).normal(size=(9, 3)).astype(np.float32))
    y = ctx.t(np.array([0, 1, 0]))
    model = ctx.init(GIN())
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    _, counts = torch.unique_consecutive(batch, return_counts=True)

    @ctx.fn
    def step():
        loss = F.cross_entropy(model(x, edge_index, batch, 3), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    losses = [step().item() for _ in range(4)]
    model.eval()
    return [losses, counts, model(x, edge_index, batch, 3), model.c1.eps, dict(model.state_dict())]


def ema_averaged_model(torch, ctx):
    """AveragedModel with get_ema_multi_avg_fn and use_buffers=True (BatchNorm's statistics
    averaged too), updated after each optimizer step, compared with a hand-written EMA."""
    nn, F = torch.nn, torch.nn.functional
    swa = torch.optim.swa_utils
    model = ctx.init(nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 1)))
    ema = swa.AveragedModel(model, multi_avg_fn=swa.get_ema_multi_avg_fn(0.9), use_buffers=True)
    manual = {k: v.detach().clone().float() for k, v in model.state_dict().items()}
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    rng = np.random.default_rng(13)
    x = ctx.t(rng.normal(size=(16, 4)).astype(np.float32))
    y = ctx.t(rng.normal(size=(16, 1)).astype(np.float32))
    losses = []
    for i in range(4):
        loss = F.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        ema.update_parameters(model)
        with torch.no_grad():
            for k, v in model.state_dict().items():
                if i == 0:
                    manual[k] = v.detach().clone().float()
                else:
                    manual[k] = 0.9 * manual[k] + 0.1 * v.float()
        losses.append(loss.item())
    ema.eval()
    return [
        losses,
        ema.n_averaged,
        ema(x)[:4],
        {k: v for k, v in ema.module.state_dict().items()},
        manual,
    ]


PROGRAMS = [
    lr_schedulers,
    versioned_state_dict,
    data_pipeline,
    new_style_functions,
    linalg_solvers,
    checkpoint_sequential_dropout,
    tft_grn,
    gin_batch,
    ema_averaged_model,
]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


# the programs that mark steps for ember.function (the others run as in test_eager)
CAPTURED = [p for p in PROGRAMS if "@ctx.fn" in inspect.getsource(p)]


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
