"""API-level programs of hunt56, each run on PyTorch and on ember: gradients of selections
among tied values (max, median, kthvalue, mode, topk, sort, cummax, scatter_reduce and
index_reduce in every mode), linear-algebra and geometric gradients at coincident points,
nn.Module behaviours (shared parameters, keep_vars, assign=True, half/double round trips,
deleting layers), DataLoader edges (batch samplers, iterable datasets with len, Subset and
ConcatDataset), and the reprs ``print(model)`` and ``print(optimizer)`` show: an optimizer
with several parameter groups printed them without PyTorch's blank line between groups, and
distributions printed their parameters' sizes as tuples (``size: (3,)``), their batch and event
shapes were tuples, the linear-algebra factorizations returned ember's own named tuples
(``SlogdetResult(...)``, ``EighResult(...)``) where PyTorch prints
``torch.return_types.linalg_slogdet(...)``, ``iinfo`` printed its bounds unformatted, and
constraints, composed and inverse transforms and mixtures printed
without their arguments.
"""

import io

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: E501, F841, B007, C408


def reduction_grads_with_ties(torch, ctx):
    """Gradients of selections where values tie: max/min (all and along a dim), amax/amin,
    median, nanmedian, kthvalue, mode, topk, sort, cummax/cummin, scatter_reduce amax/amin/mean
    and index_reduce, logsumexp with -inf rows, norms at zero."""
    x0 = np.array([[1.0, 3.0, 3.0, 2.0], [0.0, 0.0, -1.0, 0.0], [5.0, 5.0, 5.0, 5.0]], np.float32)
    x = ctx.t(x0, requires_grad=True)
    w = ctx.t(np.arange(1, 13, dtype=np.float32).reshape(3, 4))
    outs = [
        x.max(),
        x.min(),
        x.max(dim=1).values,
        x.max(dim=1).indices,
        x.min(dim=0)[0],
        x.amax(dim=1),
        x.amin(dim=(0, 1)),
        x.median(),
        x.median(dim=1).values,
        x.median(dim=1).indices,
        x.nanmedian(dim=0).values,
        x.kthvalue(2, dim=1).values,
        x.kthvalue(2, dim=1).indices,
        x.mode(dim=1).values,
        x.mode(dim=1).indices,
        x.topk(2, dim=1).values,
        x.topk(2, dim=1, largest=False).values,
        x.sort(dim=1, stable=True).values,
        x.sort(dim=1, descending=True, stable=True).indices,
        x.cummax(dim=1).values,
        x.cummax(dim=1).indices,
        x.cummin(dim=0).values,
        x.cummin(dim=0).indices,
        torch.logsumexp(
            x.masked_fill(
                ctx.t(np.array([[0, 0, 0, 0], [1, 1, 1, 1], [0, 1, 0, 1]], bool)), float("-inf")
            ),
            dim=1,
        ),
        x.norm(dim=1),
        (x - x).norm(),
        torch.linalg.vector_norm(x - 1.0, ord=float("inf"), dim=1),
        torch.linalg.vector_norm(x, ord=1, dim=0),
        x.std(dim=1),
        torch.clamp(x, min=0.0, max=3.0),
        x.abs(),
        torch.sign(x),
        torch.relu(x),
        torch.nn.functional.hardtanh(x, 0.0, 3.0),
        torch.nn.functional.relu6(x * 2),
        torch.where(x > 2, x, x * 0.5),
        torch.maximum(x, ctx.t(np.full((3, 4), 3.0, np.float32))),
        torch.fmax(x, ctx.t(np.full((3, 4), 0.0, np.float32))),
    ]
    idx = ctx.t(np.array([0, 1, 1, 0]))
    src = x.t()
    base = ctx.t(np.zeros((2, 3), np.float32))
    for reduce in ("amax", "amin", "mean", "prod", "sum"):
        for include_self in (True, False):
            outs.append(
                base.scatter_reduce(
                    0, idx[:, None].expand(4, 3), src, reduce=reduce, include_self=include_self
                )
            )
    for reduce in ("amax", "amin", "mean", "prod"):
        outs.append(
            torch.zeros(3, 2).index_reduce(
                1, ctx.t(np.array([0, 1, 1, 0])), x, reduce, include_self=False
            )
        )
    loss = sum(
        (
            o.float() * ctx.t(np.linspace(0.5, 1.5, o.numel()).reshape(o.shape).astype(np.float32))
            if o.dtype.is_floating_point
            else o.float().sum() * 0
        ).sum()
        for o in outs
    )
    loss.backward()
    return outs + [x.grad]


def linalg_and_misc_grads(torch, ctx):
    """Gradients through cdist (p=1, 2, inf, 0.5) at coincident points, pdist, renorm, lerp with
    a tensor weight, addcdiv, atan2/hypot, polar, diag_embed, block_diag, take_along_dim,
    masked_scatter, unique's inverse, trace/tril, and eigh/svd on well-separated spectra."""
    rng = np.random.default_rng(0)
    a = ctx.t(rng.standard_normal((4, 3)).astype(np.float32), requires_grad=True)
    b0 = rng.standard_normal((5, 3)).astype(np.float32)
    b0[0] = a.detach().numpy()[1]
    b = ctx.t(b0, requires_grad=True)
    outs = [torch.cdist(a, b, p=p) for p in (1.0, 2.0, float("inf"), 0.5)]
    outs.append(torch.cdist(a[None], b[None], compute_mode="use_mm_for_euclid_dist"))
    outs.append(torch.nn.functional.pdist(a, p=2))
    outs.append(torch.renorm(a, p=2, dim=0, maxnorm=1.0))
    wt = ctx.t(rng.random((4, 3)).astype(np.float32), requires_grad=True)
    outs.append(torch.lerp(a, b[:4], wt))
    outs.append(torch.addcdiv(a, b[:4], wt + 1.0, value=0.5))
    outs.append(torch.atan2(a, b[:4]))
    outs.append(torch.hypot(a, b[:4]))
    z = torch.polar(a.abs() + 0.1, b[:4])
    outs.append(torch.view_as_real(z))
    outs.append(torch.diag_embed(a, offset=1))
    outs.append(torch.block_diag(a, b[:2, :2], ctx.t(np.ones((1, 1), np.float32))))
    ix = ctx.t(rng.integers(0, 3, (4, 2)))
    outs.append(torch.take_along_dim(a, ix, dim=1))
    mask = ctx.t(rng.random((4, 3)) < 0.5)
    outs.append(a.masked_scatter(mask, b.flatten()))
    u, inv, cnt = torch.unique(
        ctx.t(np.array([3, 1, 3, 2, 1])), return_inverse=True, return_counts=True
    )
    outs += [u, inv, cnt, a[inv[:4] % 4]]
    sq = a @ a.t() + 4 * torch.eye(4)
    outs.append(torch.trace(sq))
    outs.append(torch.tril(sq, diagonal=-1))
    evals, evecs = torch.linalg.eigh(sq)
    outs.append(evals)
    outs.append(evecs.abs())
    U, S, Vh = torch.linalg.svd(a, full_matrices=False)
    outs.append(S)
    outs.append(U @ torch.diag(S) @ Vh)
    outs.append(torch.linalg.slogdet(sq).logabsdet)
    outs.append(torch.logdet(sq))
    outs.append(torch.linalg.matrix_norm(a, ord="nuc"))
    outs.append(torch.linalg.matrix_norm(a, ord=2))
    outs.append(torch.linalg.pinv(a))
    outs.append(torch.linalg.lstsq(a, b[:4]).solution)
    loss = sum((o.float() ** 2).sum() * 0.01 for o in outs if o.dtype.is_floating_point)
    loss.backward()
    return outs + [a.grad, b.grad, wt.grad]


def module_api_edges(torch, ctx):
    """nn.Module behaviours programs lean on: shared parameters deduplicated, named_parameters
    with prefix/recurse/remove_duplicate, assigning a plain tensor where a Parameter lives
    (TypeError), register_buffer(None), deleting submodules, state_dict(keep_vars=True),
    load_state_dict(assign=True), half() and double() round trips, requires_grad_, zero_grad
    without set_to_none, extra_repr in repr, apply order, and module equality in sets."""
    nn = torch.nn
    rng = np.random.default_rng(0)

    class Scale(nn.Module):
        def __init__(self, k):
            super().__init__()
            self.k = k
            self.register_buffer("running", None)
            self.register_buffer("count", torch.zeros((), dtype=torch.long))

        def forward(self, x):
            self.count += 1
            return x * self.k

        def extra_repr(self):
            return f"k={self.k}"

    shared = nn.Linear(3, 3)
    model = nn.Sequential(
        shared, Scale(2.0), nn.ReLU(), shared, nn.Sequential(nn.Linear(3, 2), nn.Dropout(0.1))
    )
    ctx.init(model)
    outs = []
    outs.append([n for n, _ in model.named_parameters()])
    outs.append([n for n, _ in model.named_parameters(prefix="net", recurse=True)])
    outs.append([n for n, _ in model.named_parameters(remove_duplicate=False)])
    outs.append([n for n, _ in model[4].named_parameters(recurse=False)])
    outs.append(len(list(model.parameters())))
    outs.append([n for n, _ in model.named_buffers()])
    outs.append([n for n, _ in model.named_modules()])
    outs.append(len(list(model.modules())))
    outs.append(list(model.state_dict().keys()))
    outs.append(repr(model).replace(torch.__name__ + ".", "torch."))
    try:
        model[0].weight = torch.zeros(3, 3)
        outs.append("no error")
    except TypeError as e:
        outs.append("TypeError")
    model[0].weight = nn.Parameter(torch.ones(3, 3))
    outs.append(model[0].weight)
    x = ctx.t(rng.standard_normal((4, 3)).astype(np.float32))
    model.eval()
    y = model(x)
    outs.append(y)
    outs.append(model[1].count)
    sd = model.state_dict(keep_vars=True)
    outs.append(type(sd["0.weight"]).__name__)
    outs.append(sd["0.weight"].requires_grad)
    fresh = nn.Sequential(
        nn.Linear(3, 3),
        Scale(2.0),
        nn.ReLU(),
        nn.Linear(3, 3),
        nn.Sequential(nn.Linear(3, 2), nn.Dropout(0.1)),
    )
    new_w = {k: v.detach().clone() * 2 for k, v in model.state_dict().items()}
    res = fresh.load_state_dict(new_w, assign=True)
    outs.append(fresh[0].weight is not None and type(fresh[0].weight).__name__)
    outs.append(fresh[0].weight.requires_grad)
    outs.append(fresh(x))
    model.half()
    outs.append(model[0].weight.dtype)
    outs.append(model[1].count.dtype)
    outs.append(model(x.half()).float())
    model.double()
    outs.append(model(x.double()))
    model.float()
    model.requires_grad_(False)
    outs.append([p.requires_grad for p in model.parameters()])
    model[4].requires_grad_()
    model.train()
    model[4][1].p = 0.0
    out = model(x).sum()
    out.backward()
    outs.append([p.grad is None for p in model.parameters()])
    model.zero_grad(set_to_none=False)
    outs.append([None if p.grad is None else float(p.grad.abs().sum()) for p in model.parameters()])
    del model[2]
    outs.append(len(model))
    del model[1]
    outs.append([type(m).__name__ for m in model])
    order = []
    model.apply(lambda m: order.append(type(m).__name__))
    outs.append(order)
    outs.append(len({model[0], model[2], model[0]}))
    m2 = nn.Linear(2, 2)
    del m2.bias
    outs.append([n for n, _ in m2.named_parameters()])
    m2.register_parameter("bias", None)
    outs.append(m2.bias is None)
    outs.append(m2(torch.ones(1, 2)).shape)
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    buf.seek(0)
    outs.append(sorted(torch.load(buf).keys()))
    return outs


def dataloader_edges(torch, ctx):
    """DataLoader behaviours: batch_sampler, a BatchSampler over a SequentialSampler with
    drop_last, len() of loaders and samplers, re-iteration, a collate_fn returning a tuple of
    a dict and a list, an IterableDataset with len, Subset and ConcatDataset indices, and
    TensorDataset slices."""
    data = torch.utils.data
    X = torch.arange(20, dtype=torch.float32).reshape(10, 2)
    Y = torch.arange(10)
    ds = data.TensorDataset(X, Y)
    outs = [len(ds), ds[3], ds[2:4] if hasattr(ds, "__getitem__") else None]
    bs = data.BatchSampler(data.SequentialSampler(ds), batch_size=3, drop_last=True)
    outs.append(list(bs))
    outs.append(len(bs))
    dl = data.DataLoader(ds, batch_sampler=bs)
    outs.append(len(dl))
    outs.append([b[1] for b in dl])
    outs.append([b[1] for b in dl])
    dl2 = data.DataLoader(
        ds,
        batch_size=4,
        shuffle=False,
        drop_last=False,
        collate_fn=lambda b: ({"x": torch.stack([s[0] for s in b])}, [int(s[1]) for s in b]),
    )
    outs.append(len(dl2))
    outs.append([(d["x"], labels) for d, labels in dl2])
    sub = data.Subset(ds, [9, 0, 5])
    outs.append([sub[i][1] for i in range(len(sub))])
    cat = data.ConcatDataset([sub, ds])
    outs.append([len(cat), cat[3][1], cat[12][1], cat.cumulative_sizes])

    class Stream(data.IterableDataset):
        def __init__(self, n):
            self.n = n

        def __iter__(self):
            return iter(range(self.n))

        def __len__(self):
            return self.n

    sdl = data.DataLoader(Stream(7), batch_size=3)
    outs.append(len(sdl))
    outs.append([b for b in sdl])
    sdl2 = data.DataLoader(Stream(7), batch_size=3, drop_last=True)
    outs.append([len(sdl2), [b for b in sdl2]])
    dl3 = data.DataLoader(ds, batch_size=None)
    outs.append([b[1] for b in dl3][:3])
    outs.append(data.default_collate([(1, 2.0, "a"), (3, 4.0, "b")]))
    seq = data.SequentialSampler(range(4))
    outs.append(list(seq))
    outs.append(list(data.SubsetRandomSampler([3], generator=torch.Generator().manual_seed(0))))
    return outs


def reprs_zoo(torch, ctx):
    """print(model) and print(optimizer) as programs show them: every common layer's repr with
    non-default arguments, containers, and each optimizer's repr with its defaults."""
    nn = torch.nn
    mods = [
        nn.Conv2d(
            3,
            8,
            (3, 5),
            stride=(2, 1),
            padding=(1, 2),
            dilation=2,
            groups=1,
            bias=False,
            padding_mode="reflect",
        ),
        nn.Conv1d(4, 4, 3, padding="same", groups=4),
        nn.ConvTranspose2d(8, 4, 4, stride=2, padding=1, output_padding=1),
        nn.BatchNorm2d(8, eps=1e-3, momentum=0.01, affine=False, track_running_stats=True),
        nn.BatchNorm1d(5, track_running_stats=False),
        nn.LayerNorm((4, 5), elementwise_affine=False, eps=1e-6),
        nn.LayerNorm(8, bias=False),
        nn.GroupNorm(2, 8, affine=False),
        nn.InstanceNorm2d(3, affine=True),
        nn.LSTM(4, 8, num_layers=2, batch_first=True, bidirectional=True, dropout=0.1),
        nn.GRU(4, 8),
        nn.RNN(3, 5, nonlinearity="relu", bias=False),
        nn.LSTMCell(3, 4),
        nn.Embedding(10, 4, padding_idx=0, max_norm=1.0),
        nn.Embedding(10, 4, sparse=True, scale_grad_by_freq=True),
        nn.EmbeddingBag(10, 4, mode="max"),
        nn.Linear(3, 4, bias=False),
        nn.Bilinear(2, 3, 4),
        nn.Identity(),
        nn.Dropout(0.3, inplace=True),
        nn.Dropout2d(),
        nn.ReLU(inplace=True),
        nn.LeakyReLU(0.2),
        nn.ELU(alpha=0.5),
        nn.GELU(approximate="tanh"),
        nn.Softmax(dim=-1),
        nn.LogSoftmax(dim=1),
        nn.Hardtanh(-2.0, 2.0),
        nn.PReLU(num_parameters=3, init=0.1),
        nn.Softplus(beta=2, threshold=10),
        nn.Threshold(0.1, 20),
        nn.MaxPool2d(3, stride=2, padding=1, ceil_mode=True),
        nn.AvgPool2d(2, count_include_pad=False),
        nn.AdaptiveAvgPool2d((1, 1)),
        nn.AdaptiveMaxPool1d(4),
        nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False),
        nn.Flatten(1),
        nn.Unflatten(1, (2, 3)),
        nn.PixelShuffle(2),
        nn.ZeroPad2d((1, 2, 0, 1)),
        nn.ReflectionPad1d(2),
        nn.ConstantPad2d(1, 3.5),
        nn.MultiheadAttention(8, 2, batch_first=True),
        nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True),
        nn.CrossEntropyLoss(label_smoothing=0.1, ignore_index=-1),
        nn.CTCLoss(blank=0, zero_infinity=True),
        nn.MSELoss(reduction="sum"),
        nn.BCEWithLogitsLoss(),
        nn.CosineSimilarity(dim=1),
        nn.Sequential(nn.Linear(2, 2), nn.Tanh()),
        nn.ModuleList([nn.Linear(1, 1), nn.Linear(1, 1)]),
        nn.ModuleDict({"a": nn.ReLU(), "b": nn.Sigmoid()}),
        nn.ParameterList([nn.Parameter(torch.zeros(2)), nn.Parameter(torch.zeros(2, 3))]),
        nn.SiLU(),
        nn.Mish(),
        nn.Hardswish(),
        nn.ChannelShuffle(2),
        nn.Fold((4, 4), 2),
        nn.Unfold(2, stride=2),
        nn.LPPool2d(2, 3),
        nn.RMSNorm(8),
        nn.TransformerDecoderLayer(8, 2, 16, norm_first=True),
    ]
    outs = [repr(m).replace(torch.__name__ + ".", "torch.") for m in mods]
    p = [nn.Parameter(torch.zeros(2))]
    opts = [
        torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-4),
        torch.optim.Adam(p, lr=1e-3, betas=(0.9, 0.99), amsgrad=True),
        torch.optim.AdamW(p, lr=1e-3),
        torch.optim.RMSprop(p, lr=0.01, alpha=0.9, centered=True),
        torch.optim.Adagrad(p, lr=0.1),
        torch.optim.Adadelta(p),
        torch.optim.Adamax(p),
        torch.optim.NAdam(p),
        torch.optim.RAdam(p),
        torch.optim.LBFGS(p),
    ]
    outs += [repr(o) for o in opts]
    g = torch.optim.SGD(
        [{"params": p, "lr": 0.5}, {"params": [nn.Parameter(torch.zeros(1))]}], lr=0.1
    )
    outs.append(repr(g))
    return outs


def distribution_reprs(torch, ctx):
    """print() of distributions, transforms and constraints, and their batch and event
    shapes, as PyTorch prints them."""
    D = torch.distributions
    t = torch.tensor([0.5, 1.0, 2.0])
    items = [
        D.Normal(t, t),
        D.Normal(0.0, 1.0),
        D.Categorical(logits=torch.zeros(2, 3)),
        D.Categorical(probs=torch.ones(3) / 3),
        D.Bernoulli(probs=t / 3),
        D.Independent(D.Normal(t, t), 1),
        D.MultivariateNormal(torch.zeros(2), torch.eye(2)),
        D.Uniform(0.0, t),
        D.TransformedDistribution(D.Normal(t, t), [D.transforms.TanhTransform()]),
        D.Dirichlet(t),
        D.Gamma(t, 1.0),
        D.Poisson(t),
        D.OneHotCategorical(probs=t / t.sum()),
        D.MixtureSameFamily(D.Categorical(logits=t), D.Normal(t, t)),
        D.transforms.AffineTransform(0.0, 2.0),
        D.transforms.TanhTransform(),
        D.transforms.ComposeTransform(
            [D.transforms.ExpTransform(), D.transforms.SigmoidTransform()]
        ),
        D.transforms.ExpTransform().inv,
        D.constraints.positive,
        D.constraints.interval(0.0, 1.0),
        D.constraints.real_vector,
        torch.Size([2, 3]),
        torch.device("cpu"),
        torch.float32,
        torch.finfo(torch.float32),
        torch.iinfo(torch.int8),
        torch.tensor([1.0]).shape,
        torch.nn.Parameter(torch.zeros(2)).shape,
    ]
    out = []
    for it in items:
        r = repr(it).replace(torch.__name__ + ".", "torch.")
        if "object at 0x" in r:
            r = r.split(" object at")[0]
        out.append(r)
    out.append(str(D.Normal(t, t).batch_shape).replace(torch.__name__ + ".", "torch."))
    out.append(
        str(D.MultivariateNormal(torch.zeros(2), torch.eye(2)).event_shape).replace(
            torch.__name__ + ".", "torch."
        )
    )
    out.append(D.Normal(t, t).batch_shape == (3,))
    return out


def printed_values(torch, ctx):
    """What programs print besides tensors: state_dicts, optimizer state, the named results
    of max/sort/topk/unique and of the linear-algebra factorizations (torch.return_types'
    reprs), dtype limits, a packed sequence, shapes and strides."""
    nn = torch.nn
    m = ctx.init(nn.Linear(2, 1))
    out = [repr(m.state_dict())]
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    m(torch.ones(1, 2)).sum().backward()
    opt.step()
    out.append(repr(opt.state_dict()))
    x = ctx.t(np.array([[1.0, 5.0], [3.0, 2.0]], np.float32))
    A = ctx.t(np.array([[4.0, 1.0], [1.0, 3.0]], np.float32))
    out += [repr(x.max(1)), repr(torch.sort(x, 1)), repr(x.topk(1)), repr(torch.aminmax(x))]
    out.append(repr(torch.unique(torch.tensor([1, 2, 1]), return_counts=True)))
    out.append(repr(torch.histogram(torch.tensor([1.0, 2.0, 1.0]), bins=2)))
    for r in (
        torch.linalg.slogdet(x),
        torch.slogdet(x),
        x.slogdet(),
        torch.linalg.eigh(A),
        torch.linalg.qr(A),
        torch.qr(A),
        torch.linalg.svd(A),
        torch.svd(A),
        torch.linalg.eig(A),
        torch.linalg.lstsq(A, x),
        torch.linalg.lu_factor(A),
        torch.linalg.inv_ex(A),
    ):
        out.append(type(r).__name__)
        out.append(len(r))
    out.append(repr(torch.linalg.slogdet(x)))
    out.append(repr(torch.linalg.eigh(torch.eye(2))))
    out += [repr(torch.finfo(torch.float32)), repr(torch.finfo(torch.bfloat16))]
    out += [
        repr(torch.iinfo(d))
        for d in (torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64)
    ]
    out.append(
        repr(torch.nn.utils.rnn.pack_sequence([torch.tensor([1.0, 2.0]), torch.tensor([3.0])]))
    )
    out.append(f"{x.dtype} {x.device} {x.shape} {x.requires_grad} {x.T.stride()}")
    out.append(format(torch.tensor(2.5), ".2f"))
    return [o.replace(torch.__name__ + ".", "torch.") if isinstance(o, str) else o for o in out]


def positional_forms(torch, ctx):
    """Calls written with positional arguments in PyTorch's signature order (including the
    rarely-named ones: softmax's _stacklevel, cross_entropy's size_average slots), and the
    tuple/Size/varargs spellings of shape arguments."""
    F = torch.nn.functional
    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((2, 3, 4, 4)).astype(np.float32), requires_grad=True)
    w = ctx.t(rng.standard_normal((5, 3, 3, 3)).astype(np.float32), requires_grad=True)
    y = ctx.t(np.array([1, 0]))
    idx = ctx.t(np.array([[0, 2], [1, 1]]))
    outs = [
        F.interpolate(x, None, 2, "bilinear", False),
        F.pad(x, [1, 1, 0, 2], "constant", 0.5),
        F.pad(x, (1, 1, 2, 0), "reflect"),
        F.conv2d(x, w, None, 1, "same"),
        F.conv2d(x, w, None, (2, 1), 1, 1, 1),
        F.layer_norm(x, x.shape[-2:]),
        F.layer_norm(x, [4], None, None, 1e-3),
        F.dropout(x, 0.5, False),
        F.softmax(x, -1, 3, torch.float64),
        F.log_softmax(x, 1),
        F.cross_entropy(x.mean((2, 3)), y, None, None, -100, None, "sum", 0.1),
        F.nll_loss(F.log_softmax(x.mean((2, 3)), 1), y, None, None, 1, None, "mean"),
        F.embedding(idx, x.flatten(1)[:2, :4].repeat(2, 1), 0),
        F.max_pool2d(x, 2, 2, 0, 1, False, True)[1],
        F.max_pool2d(x, 2, 2, 0, 1, True, False),
        F.avg_pool2d(x, 2, 1, 1, True, False, None),
        F.batch_norm(x, torch.zeros(3), torch.ones(3), None, None, True, 0.1, 1e-5),
        F.group_norm(x, 3, None, None, 1e-5),
        F.gelu(x, approximate="tanh"),
        F.leaky_relu(x, 0.2, False),
        F.normalize(x, 2.0, 1, 1e-12),
        F.cosine_similarity(x, x * 2 + 1, 1, 1e-8),
        F.mse_loss(x, x * 0.5, None, None, "sum"),
        F.smooth_l1_loss(x, x * 0.5, None, None, "mean", 0.5),
        F.adaptive_avg_pool2d(x, 2),
        F.unfold(x, 2, 1, 0, 2),
        torch.sum(x, 1, True),
        torch.max(x, 1, True)[0],
        x.max(1, True).indices,
        torch.mean(x, (1, 2), True),
        torch.std(x, 1, True, True),
        torch.var(x, (2, 3), False),
        torch.norm(x, 2, 1, True),
        torch.topk(x.flatten(1), 2, 1, True, True).values,
        torch.sort(x.flatten(1), 1, True)[1],
        torch.cumsum(x, 1, dtype=torch.float64),
        torch.split(x, 2, 1)[1],
        torch.chunk(x, 2, 3)[0],
        torch.gather(x.flatten(1), 1, idx),
        torch.clamp(x, -0.5, 0.5),
        torch.where(x > 0, x, 0.0),
        torch.full((2,), 1.5),
        torch.arange(0, 10, 3),
        torch.linspace(0, 1, 5),
        x.new_zeros(3),
        x.new_full((2, 2), 7),
        x.repeat(1, 2, 1, 1),
        x.sum((2, 3)).expand(-1, 3),
        x.permute((0, 2, 3, 1)),
        x.permute(0, 3, 1, 2),
        x.view(2, -1),
        x.view((2, -1)),
        x.view(torch.Size([6, 16])),
        x.reshape(-1).shape,
        x.flatten(1),
        x[:, :1].squeeze(1),
        x[:, :1, :1].squeeze((1, 2)),
        x.unsqueeze(-1).shape,
        x.var(1, unbiased=False),
        x.var(1, correction=0),
        x.std(unbiased=False),
        x.to("cpu", torch.float64),
        x.to(torch.zeros(1, dtype=torch.float64)),
        x.type_as(torch.zeros(1, dtype=torch.float64)),
        x.masked_fill(x > 1, 1.0),
        torch.einsum("bchw,ochw->bo", x, w[:, :, :2, :2].repeat(1, 1, 2, 2)),
        torch.einsum("bchw,ochw->bo", [x, w[:, :, :2, :2].repeat(1, 1, 2, 2)]),
        torch.stack((x, x), 1).shape,
        torch.cat((x, x), -1).shape,
        torch.transpose(x, 1, 2),
        torch.flatten(x, 1, 2),
        torch.narrow(x, 2, 1, 2),
        torch.index_select(x, 1, torch.tensor([2, 0])),
        torch.tensordot(x, w, dims=([1], [1])).shape,
        torch.matmul(x, x.transpose(-1, -2)),
        torch.bmm(x.flatten(0, 1), x.flatten(0, 1)),
        torch.addmm(torch.zeros(2, 2), x.flatten(1)[:, :3], x.flatten(1)[:2, :3].T),
        torch.diagonal(x, 0, 2, 3),
        torch.roll(x, 1, 2),
        torch.tril(x[0, 0], -1),
        torch.lerp(x, x * 2, 0.3),
        torch.pow(x, 2),
        torch.atan2(x, x + 1),
        torch.logsumexp(x, (2, 3)),
        torch.amax(x, (2, 3), True),
        torch.prod(x[:, :, :2, :2], 3),
        torch.argmax(x, 1, True),
        torch.count_nonzero(x > 0, (2, 3)),
        torch.any(x > 2, 1),
        torch.all(x > -5, 1, True),
    ]
    loss = sum(
        (o.double() ** 2).mean()
        for o in outs
        if hasattr(o, "dtype") and o.dtype.is_floating_point and o.requires_grad
    )
    loss.backward()
    return outs + [x.grad, w.grad]


PROGRAMS = [
    reduction_grads_with_ties,
    linalg_and_misc_grads,
    module_api_edges,
    dataloader_edges,
    reprs_zoo,
    distribution_reprs,
    printed_values,
    positional_forms,
]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)
