"""Programs of hunt52 (utilities and training idioms), each run on PyTorch and on ember: tensor
printing under set_printoptions; grad modes as decorators and nested; gradient accumulation
with clip_grad_norm_/clip_grad_value_; an EMA by _foreach ops and AveragedModel; LR
schedulers; evaluation metrics (quantiles, ROC-AUC, confusion matrix); torch.linalg in
regularisers; FFT convolution; a Tensor subclass with __torch_function__ and
torch.testing.assert_close; a loss zoo; a squashed-Gaussian policy with torch.distributions;
an EmbeddingBag factorization machine with SparseAdam; MultiheadAttention variants;
interpolation and augmentation; an nn.Transformer seq2seq with greedy decoding; a torch.func
ensemble; a torch.utils.data pipeline.
"""

import inspect

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007, E501, E731, F841, B023, E702, E701, C408, SIM118


def printing(torch, ctx):
    """Tensor reprs users print and log: set_printoptions precision/sci_mode/threshold/linewidth,
    bool, int, complex, large (summarised), requires_grad / grad_fn, 0-d, empty, float64."""
    out = []
    g = torch.Generator().manual_seed(3)
    x = torch.randn(3, 4, generator=g)
    out.append(repr(x))
    out.append(str(x * 1e5))
    out.append(repr(x > 0))
    out.append(repr((x * 10).long()))
    out.append(repr(torch.arange(2000)))
    out.append(repr(torch.randn(50, 50, generator=g)))
    out.append(repr(torch.tensor(3.25)))
    out.append(repr(torch.empty(0, 3)))
    out.append(repr(x.double()[:2]))
    w = torch.randn(2, 2, generator=g, requires_grad=True)
    out.append(repr(w))
    out.append(repr(w * 2))
    out.append(repr(torch.complex(x[0], x[1])))
    out.append(repr(torch.tensor([1e-8, 1.0, 1e8])))
    out.append(repr(torch.tensor([float("nan"), float("inf"), -float("inf"), 1.5])))
    torch.set_printoptions(precision=2)
    out.append(repr(x))
    torch.set_printoptions(sci_mode=True)
    out.append(repr(x[0]))
    torch.set_printoptions(sci_mode=False, precision=6)
    out.append(repr(x[0] * 1e-6))
    torch.set_printoptions(threshold=5, edgeitems=2)
    out.append(repr(torch.arange(20.0)))
    torch.set_printoptions(linewidth=40)
    out.append(repr(torch.randn(3, 10, generator=g)))
    torch.set_printoptions(profile="default")
    out.append(repr(x.half()))
    out.append(repr(x.bfloat16()))
    out.append(f"{x[0, 0]:.3f} {x.sum().item():.4f}")
    out.append(str(x.shape) + str(x.dtype) + str(x.device))
    return [s.replace(torch.__name__ + ".", "torch.") for s in out]


def grad_modes(torch, ctx):
    """no_grad / enable_grad / inference_mode / set_grad_enabled as decorators, context
    managers and nested; is_grad_enabled and is_inference_mode_enabled along the way."""
    lin = ctx.init(torch.nn.Linear(3, 2))
    x = ctx.t(np.arange(6.0, dtype=np.float32).reshape(2, 3))
    log = []

    @torch.no_grad()
    def evaluate(inp):
        log.append(torch.is_grad_enabled())
        with torch.enable_grad():
            y = lin(inp)
            log.append(y.requires_grad)
        return lin(inp)

    @torch.inference_mode()
    def infer(inp):
        log.append(torch.is_inference_mode_enabled())
        return lin(inp) * 2

    @torch.enable_grad()
    def train_step(inp):
        return lin(inp).sum()

    a = evaluate(x)
    log.append(a.requires_grad)
    b = infer(x)
    log.append(b.requires_grad)
    log.append(b.is_inference())
    with torch.set_grad_enabled(False):
        c = lin(x)
        log.append(c.requires_grad)
        with torch.set_grad_enabled(True):
            d = train_step(x)
            log.append(d.requires_grad)
    torch.set_grad_enabled(False)
    log.append(torch.is_grad_enabled())
    torch.set_grad_enabled(True)
    d.backward()
    with torch.inference_mode(mode=False):
        e = lin(x)
        log.append(e.requires_grad)
    with torch.no_grad():
        with torch.inference_mode():
            f = lin(x)
        log.append(f.is_inference())
    return [a, b, c, d, lin.weight.grad, log]


def grad_accum_clip(torch, ctx):
    """Gradient accumulation over micro-batches with clip_grad_norm_ (foreach, inf norm,
    error_if_nonfinite) and clip_grad_value_, returning the norms, then an SGD-nesterov step,
    and a non-finite gradient raising."""
    nn = torch.nn
    model = ctx.init(nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 3)))
    opt = torch.optim.SGD(
        model.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3
    )
    rng = np.random.default_rng(0)
    X = ctx.t(rng.standard_normal((12, 5)).astype(np.float32))
    Y = ctx.t(rng.integers(0, 3, 12))
    norms = []
    for step in range(3):
        opt.zero_grad(set_to_none=True)
        for i in range(3):
            xb, yb = X[i * 4 : (i + 1) * 4], Y[i * 4 : (i + 1) * 4]
            loss = nn.functional.cross_entropy(model(xb), yb) / 3
            loss.backward()
        norms.append(nn.utils.clip_grad_norm_(model.parameters(), 0.5, foreach=True))
        norms.append(nn.utils.clip_grad_norm_(model.parameters(), float("inf")))
        nn.utils.clip_grad_value_(model.parameters(), 0.05)
        norms.append(
            nn.utils.get_total_norm([p.grad for p in model.parameters()], 1.0)
            if hasattr(nn.utils, "get_total_norm")
            else torch.tensor(0.0)
        )
        opt.step()
    model[0].weight.grad = torch.full_like(model[0].weight, float("nan"))
    try:
        nn.utils.clip_grad_norm_(model.parameters(), 1.0, error_if_nonfinite=True)
        raised = False
    except RuntimeError:
        raised = True
    return [norms, list(model.state_dict().values()), raised]


def ema_foreach(torch, ctx):
    """An EMA of weights with torch._foreach_mul_/_foreach_add_/_foreach_lerp_, the
    swa_utils.AveragedModel with a custom avg_fn, and _foreach_norm / _foreach_addcmul_."""
    nn = torch.nn
    model = ctx.init(nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 2)))
    ema = [p.detach().clone() for p in model.parameters()]
    ema2 = [p.detach().clone() for p in model.parameters()]
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    rng = np.random.default_rng(1)
    avg = torch.optim.swa_utils.AveragedModel(
        model, multi_avg_fn=torch.optim.swa_utils.get_ema_multi_avg_fn(0.9)
    )
    norms = []

    @ctx.fn
    def train_step(x):
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    for step in range(4):
        x = ctx.t(rng.standard_normal((8, 4)).astype(np.float32))
        train_step(x)
        params = [p.detach() for p in model.parameters()]
        with torch.no_grad():
            torch._foreach_mul_(ema, 0.9)
            torch._foreach_add_(ema, params, alpha=0.1)
            torch._foreach_lerp_(ema2, params, 0.1)
            norms.append(torch.stack(torch._foreach_norm(ema)))
            sq = [torch.zeros_like(p) for p in params]
            torch._foreach_addcmul_(sq, params, params, value=0.5)
        avg.update_parameters(model)
    return [ema, ema2, norms, sq, list(avg.module.state_dict().values()), avg.n_averaged]


def schedulers(torch, ctx):
    """LR schedules users chain: OneCycleLR (cos, three_phase), CosineAnnealingWarmRestarts
    with fractional epochs, SequentialLR of LinearLR then ExponentialLR, ReduceLROnPlateau,
    CyclicLR triangular2, PolynomialLR, ChainedScheduler; get_last_lr each step and state_dict."""
    p = torch.nn.Parameter(torch.zeros(2))

    def opt(**kw):
        return torch.optim.SGD([p], lr=0.1, momentum=0.9, **kw)

    out = {}
    o = opt()
    s = torch.optim.lr_scheduler.OneCycleLR(o, max_lr=1.0, total_steps=12, three_phase=True)
    out["onecycle"] = [
        (o.step(), s.step(), s.get_last_lr()[0], o.param_groups[0]["momentum"])[2:]
        for _ in range(11)
    ]
    o = opt()
    s = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2, eta_min=0.01)
    lrs = []
    for epoch in range(4):
        for i in range(3):
            o.step()
            s.step(epoch + i / 3)
            lrs.append(s.get_last_lr()[0])
    out["warm"] = lrs
    o = opt()
    s = torch.optim.lr_scheduler.SequentialLR(
        o,
        [
            torch.optim.lr_scheduler.LinearLR(o, 0.1, 1.0, total_iters=3),
            torch.optim.lr_scheduler.ExponentialLR(o, 0.8),
        ],
        milestones=[3],
    )
    out["seq"] = [(o.step(), s.step(), s.get_last_lr()[0])[2] for _ in range(7)]
    o = opt()
    s = torch.optim.lr_scheduler.ReduceLROnPlateau(
        o, mode="min", factor=0.5, patience=1, threshold=0.01, cooldown=1, min_lr=0.01
    )
    out["plateau"] = [
        (o.step(), s.step(m), o.param_groups[0]["lr"])[2]
        for m in [1.0, 0.99, 0.995, 0.98, 0.99, 0.99, 0.99, 0.5, 0.6]
    ]
    o = torch.optim.SGD([p], lr=0.1, momentum=0.9)
    s = torch.optim.lr_scheduler.CyclicLR(o, 0.01, 0.1, step_size_up=2, mode="triangular2")
    out["cyclic"] = [
        (o.step(), s.step(), s.get_last_lr()[0], o.param_groups[0]["momentum"])[2:]
        for _ in range(9)
    ]
    o = opt()
    s = torch.optim.lr_scheduler.PolynomialLR(o, total_iters=5, power=2.0)
    out["poly"] = [(o.step(), s.step(), s.get_last_lr()[0])[2] for _ in range(7)]
    o = opt()
    s = torch.optim.lr_scheduler.ChainedScheduler(
        [
            torch.optim.lr_scheduler.ConstantLR(o, factor=0.5, total_iters=2),
            torch.optim.lr_scheduler.ExponentialLR(o, gamma=0.9),
        ]
    )
    out["chained"] = [(o.step(), s.step(), s.get_last_lr()[0])[2] for _ in range(5)]
    sd = s.state_dict()
    out["keys"] = sorted(k for k in sd if k != "_schedulers")
    o = opt()
    s = torch.optim.lr_scheduler.MultiStepLR(o, [2, 4], 0.5)
    out["multistep"] = [(o.step(), s.step(), s.get_last_lr()[0])[2] for _ in range(6)]
    return out


def quantile_metrics(torch, ctx):
    """Evaluation metrics: quantile with each interpolation, nanquantile, nanmean, nansum,
    nanmedian, histc, bincount with weights, a ROC-AUC by sorting and cumsum, top-k accuracy
    and a confusion matrix by index_put_ accumulate."""
    rng = np.random.default_rng(2)
    scores = ctx.t(rng.standard_normal((40,)).astype(np.float32))
    labels = ctx.t(rng.integers(0, 2, 40))
    vals = scores.clone()
    vals[::7] = float("nan")
    q = ctx.t(np.array([0.1, 0.5, 0.9], np.float32))
    out = [
        torch.quantile(scores, q, interpolation=m)
        for m in ["linear", "lower", "higher", "midpoint", "nearest"]
    ]
    out.append(torch.nanquantile(vals, q))
    out.append(torch.quantile(scores.view(4, 10), 0.25, dim=1, keepdim=True))
    out += [torch.nanmean(vals), torch.nansum(vals), torch.nanmedian(vals), vals.nanmean(dim=0)]
    out.append(torch.histc(scores, bins=5, min=-2, max=2))
    out.append(torch.bincount(labels, weights=scores.abs(), minlength=3))
    order = torch.argsort(scores, descending=True)
    tp = torch.cumsum(labels[order], 0).float()
    fp = torch.cumsum(1 - labels[order], 0).float()
    tpr, fpr = tp / tp[-1], fp / fp[-1]
    out.append(torch.trapz(tpr, fpr))
    logits = ctx.t(rng.standard_normal((20, 5)).astype(np.float32))
    target = ctx.t(rng.integers(0, 5, 20))
    top3 = logits.topk(3, dim=1).indices
    out.append((top3 == target[:, None]).any(1).float().mean())
    conf = torch.zeros(5, 5, dtype=torch.long)
    conf.index_put_((target, logits.argmax(1)), torch.ones(20, dtype=torch.long), accumulate=True)
    out.append(conf)
    return out


def linalg_misc(torch, ctx):
    """torch.linalg in a model's regularisers and a physics step: matrix_exp of a skew
    matrix (an orthogonal map), matrix_power, vector_norm/matrix_norm orders, cond, slogdet,
    lstsq, pinv, eigh of a Gram matrix, cholesky_ex, solve_triangular; gradients through them."""
    rng = np.random.default_rng(3)
    A = ctx.t(rng.standard_normal((3, 4, 4)), requires_grad=True)
    S = A - A.transpose(-1, -2)
    Q = torch.linalg.matrix_exp(S)
    out = [Q, Q @ Q.mT]
    out.append(torch.linalg.matrix_power(A[0], 3))
    out.append(torch.linalg.matrix_power(A[1] + 4 * torch.eye(4, dtype=A.dtype), -2))
    out += [
        torch.linalg.vector_norm(A, ord=o, dim=(-2, -1))
        for o in [2, 1, float("inf"), -float("inf"), 0.5]
    ]
    out += [torch.linalg.matrix_norm(A, ord=o) for o in ["fro", "nuc", 1, -1, 2, float("inf")]]
    out.append(torch.linalg.cond(A[0]))
    sign, logabs = torch.linalg.slogdet(A)
    out += [sign, logabs]
    G = A @ A.mT + torch.eye(4, dtype=A.dtype)
    L, info = torch.linalg.cholesky_ex(G)
    out += [L, info]
    b = ctx.t(rng.standard_normal((3, 4, 2)))
    out.append(torch.linalg.solve_triangular(L, b, upper=False))
    out.append(torch.linalg.lstsq(A, b).solution)
    out.append(torch.linalg.pinv(A[:, :, :3]))
    w, V = torch.linalg.eigh(G)
    out.append(w)
    loss = Q.sum() + logabs.sum() + w.sum() + L.diagonal(dim1=-2, dim2=-1).log().sum()
    loss.backward()
    out.append(A.grad)
    return out


def fft_conv(torch, ctx):
    """FFT convolution via rfft/irfft with n=, fftshift/fftfreq, a spectral-norm of a
    circular conv, stft-free spectrogram by framing with unfold, rfft2/irfft2 image filter,
    and gradients through the FFTs."""
    rng = np.random.default_rng(4)
    x = ctx.t(rng.standard_normal((2, 30)).astype(np.float32), requires_grad=True)
    k = ctx.t(rng.standard_normal((7,)).astype(np.float32), requires_grad=True)
    n = 30 + 7 - 1
    y = torch.fft.irfft(torch.fft.rfft(x, n=n) * torch.fft.rfft(k, n=n), n=n)
    direct = torch.nn.functional.conv1d(x[:, None], k.flip(0)[None, None], padding=6)[:, 0]
    frames = x.unfold(-1, 8, 4) * torch.hann_window(8)
    spec = torch.fft.rfft(frames, dim=-1).abs() ** 2
    freqs = torch.fft.fftshift(torch.fft.fftfreq(8, d=0.5))
    img = ctx.t(rng.standard_normal((1, 8, 8)).astype(np.float32))
    H = torch.exp(-(torch.fft.fftfreq(8)[:, None] ** 2 + torch.fft.rfftfreq(8)[None] ** 2) * 20)
    filt = torch.fft.irfft2(torch.fft.rfft2(img) * H, s=(8, 8))
    c = torch.fft.fft(x.to(torch.complex64), norm="ortho")
    (y.sum() + spec.mean() + c.abs().sum()).backward()
    return [y, direct, spec, freqs, filt, c.real, c.imag, x.grad, k.grad]


def tagged_tensor(torch, ctx):
    """A torch.Tensor subclass with __torch_function__ that carries a tag through ops, and
    torch.testing.assert_close in user code (passing and failing with its message type)."""

    class Tagged(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = super().__torch_function__(func, types, args, kwargs)
            tags = [a.tag for a in args if isinstance(a, Tagged) and hasattr(a, "tag")]
            if isinstance(out, Tagged) and tags:
                out.tag = tags[0]
            return out

    base = ctx.t(np.arange(6.0, dtype=np.float32).reshape(2, 3))
    t = base.as_subclass(Tagged)
    t.tag = "meters"
    u = (t * 2 + 1).sum(0)
    info = [
        type(u).__name__,
        getattr(u, "tag", None),
        isinstance(u, torch.Tensor),
        type(t[0]).__name__,
    ]
    torch.testing.assert_close(base * 2, base + base)
    try:
        torch.testing.assert_close(base, base + 1e-3, rtol=0, atol=1e-5)
        failed = None
    except AssertionError as e:
        failed = "Tensor-likes are not close" in str(e)
    try:
        torch.testing.assert_close(base, base.double())
        dtype_failed = None
    except AssertionError as e:
        dtype_failed = "dtype" in str(e)
    torch.testing.assert_close(base, base.double(), check_dtype=False)
    return [u.as_subclass(torch.Tensor), info, failed, dtype_failed]


def loss_zoo(torch, ctx):
    """The losses a metric-learning / ranking / regression project mixes: CosineEmbedding,
    MarginRanking, TripletMarginWithDistance (custom distance, swap), MultiLabelSoftMargin with
    weights, PoissonNLL (log_input False, full), GaussianNLL (full, eps), Huber/SmoothL1 betas,
    MultiMargin p=2 with weights, HingeEmbedding, KLDiv log_target, BCEWithLogits pos_weight,
    CTC-free NLL with ignore_index and label smoothing CE with class weights."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(5)
    a = ctx.t(rng.standard_normal((6, 4)), requires_grad=True)
    b = ctx.t(rng.standard_normal((6, 4)))
    c = ctx.t(rng.standard_normal((6, 4)))
    y = ctx.t(np.array([1, -1, 1, 1, -1, -1.0]))
    out = []
    out.append(nn.CosineEmbeddingLoss(margin=0.2)(a, b, y))
    out.append(nn.MarginRankingLoss(margin=0.1, reduction="sum")(a[:, 0], b[:, 0], y))
    dist = lambda u, v: 1 - F.cosine_similarity(u, v)
    out.append(
        nn.TripletMarginWithDistanceLoss(distance_function=dist, margin=0.5, swap=True)(a, b, c)
    )
    out.append(nn.TripletMarginLoss(p=1.5, eps=1e-4)(a, b, c))
    ml = ctx.t(rng.integers(0, 2, (6, 4)).astype(np.float64))
    out.append(nn.MultiLabelSoftMarginLoss(weight=ctx.t(np.array([1.0, 2, 0.5, 1])))(a, ml))
    rate = a.abs() + 0.1
    counts = ctx.t(rng.poisson(2.0, (6, 4)).astype(np.float64))
    out.append(nn.PoissonNLLLoss(log_input=False, full=True)(rate, counts))
    out.append(F.poisson_nll_loss(a, counts, reduction="none"))
    var = a**2 + 0.01
    out.append(nn.GaussianNLLLoss(full=True, eps=1e-3)(a, b, var))
    out.append(F.gaussian_nll_loss(a, b, var[:, :1]))
    out.append(nn.HuberLoss(delta=0.3)(a, b))
    out.append(nn.SmoothL1Loss(beta=0.0)(a, b))
    cls = ctx.t(rng.integers(0, 4, 6))
    out.append(
        nn.MultiMarginLoss(p=2, margin=0.7, weight=ctx.t(np.array([1.0, 0.5, 2, 1])))(a, cls)
    )
    out.append(nn.HingeEmbeddingLoss(margin=0.5)(a[:, 0], y))
    out.append(
        nn.KLDivLoss(reduction="batchmean", log_target=True)(
            F.log_softmax(a, 1), F.log_softmax(b, 1)
        )
    )
    out.append(nn.BCEWithLogitsLoss(pos_weight=ctx.t(np.array([1.0, 3, 0.5, 2])))(a, ml))
    cls2 = cls.clone()
    cls2[2] = -100
    out.append(
        nn.CrossEntropyLoss(weight=ctx.t(np.array([1.0, 2, 1, 0.5])), label_smoothing=0.1)(a, cls)
    )
    out.append(nn.NLLLoss(ignore_index=-100, reduction="mean")(F.log_softmax(a, 1), cls2))
    out.append(F.cross_entropy(a, F.softmax(b, 1), label_smoothing=0.2))
    out.append(nn.SoftMarginLoss()(a, torch.sign(b)))
    out.append(nn.L1Loss(reduction="none")(a, b))
    out.append(nn.MultiLabelMarginLoss()(a, ctx.t(np.array([[3, 0, -1, 1]] * 6))))
    total = sum(o.sum() for o in out)
    total.backward()
    return [out, a.grad]


def distributions_policy(torch, ctx):
    """A SAC-style squashed Gaussian policy: TransformedDistribution(Normal, [TanhTransform,
    AffineTransform]) rsample + log_prob, Independent for the action dims, a
    MixtureSameFamily prior, kl_divergence between Independent Normals, entropy, Categorical
    and OneHotCategorical, Beta and Dirichlet samples and log_prob gradients, all under one seed."""
    D = torch.distributions
    rng = np.random.default_rng(6)
    mu = ctx.t(rng.standard_normal((5, 2)).astype(np.float32), requires_grad=True)
    log_std = ctx.t(rng.standard_normal((5, 2)).astype(np.float32) * 0.3, requires_grad=True)
    base = D.Normal(mu, log_std.exp())
    squashed = D.TransformedDistribution(
        base, [D.transforms.TanhTransform(cache_size=1), D.transforms.AffineTransform(0.5, 2.0)]
    )
    a = squashed.rsample()
    lp = squashed.log_prob(a).sum(-1)
    ind = D.Independent(D.Normal(mu, log_std.exp()), 1)
    ind2 = D.Independent(D.Normal(torch.zeros_like(mu), torch.ones_like(mu)), 1)
    kl = D.kl_divergence(ind, ind2)
    mix = D.MixtureSameFamily(
        D.Categorical(logits=ctx.t(np.array([0.2, -0.1, 0.5], np.float32))),
        D.Independent(
            D.Normal(
                ctx.t(rng.standard_normal((3, 2)).astype(np.float32)),
                ctx.t(np.full((3, 2), 0.7, np.float32)),
            ),
            1,
        ),
    )
    prior_lp = mix.log_prob(a)
    cat = D.Categorical(logits=mu)
    s = cat.sample((4,))
    oh = D.OneHotCategorical(probs=torch.softmax(mu, -1))
    beta = D.Beta(log_std.exp() + 1, mu.exp() + 1)
    bs = beta.sample()
    dirich = D.Dirichlet(mu.exp() + 0.5)
    ds = dirich.sample()
    loss = (
        -lp.mean()
        + kl.mean()
        - prior_lp.mean()
        + cat.entropy().mean()
        + beta.log_prob(bs.clamp(1e-4, 1 - 1e-4)).mean()
        + dirich.log_prob(ds).sum()
        + ind.entropy().sum()
    )
    loss.backward()
    return [
        a,
        lp,
        kl,
        prior_lp,
        s,
        cat.log_prob(s),
        oh.sample(),
        bs,
        ds,
        mix.mean,
        mix.variance,
        ind.event_shape,
        ind.batch_shape,
        loss,
        mu.grad,
        log_std.grad,
    ]


def embbag_fm(torch, ctx):
    """A recommender: EmbeddingBag (sum with per_sample_weights, mean, max) over offsets and
    padding_idx, and a factorization machine's pairwise term 0.5 * ((sum v)^2 - sum v^2),
    trained with SparseAdam on sparse embeddings and Adagrad on the dense part."""
    nn = torch.nn

    class FM(nn.Module):
        def __init__(self):
            super().__init__()
            self.bag_sum = nn.EmbeddingBag(20, 4, mode="sum")
            self.bag_mean = nn.EmbeddingBag(20, 4, mode="mean", padding_idx=0)
            self.bag_max = nn.EmbeddingBag(20, 4, mode="max")
            self.v = nn.Embedding(20, 3, sparse=True)
            self.w = nn.Embedding(20, 1, sparse=True)
            self.bias = nn.Parameter(torch.zeros(1))
            self.head = nn.Linear(12, 1)

        def forward(self, items, offsets, weights, fields):
            s = self.bag_sum(items, offsets, per_sample_weights=weights)
            m = self.bag_mean(items, offsets)
            x = self.bag_max(items, offsets)
            v = self.v(fields)
            pair = 0.5 * (v.sum(1) ** 2 - (v**2).sum(1)).sum(1, keepdim=True)
            lin = self.w(fields).sum(1) + self.bias
            return (self.head(torch.cat([s, m, x], 1)) + pair + lin).squeeze(1)

    model = ctx.init(FM())
    rng = np.random.default_rng(7)
    sparse_params = [model.v.weight, model.w.weight]
    dense = [p for n, p in model.named_parameters() if not n.startswith(("v.", "w."))]
    opt1 = torch.optim.SparseAdam(sparse_params, lr=0.05)
    opt2 = torch.optim.Adagrad(dense, lr=0.1, lr_decay=0.01, initial_accumulator_value=0.1)
    losses = []
    for step in range(3):
        items = ctx.t(rng.integers(0, 20, 11))
        items[3] = 0
        offsets = ctx.t(np.array([0, 3, 3, 7]))
        weights = ctx.t(rng.random(11).astype(np.float32))
        fields = ctx.t(rng.integers(0, 20, (4, 5)))
        y = ctx.t(rng.random(4).astype(np.float32))
        pred = model(items, offsets, weights, fields)
        loss = nn.functional.binary_cross_entropy_with_logits(pred, y)
        opt1.zero_grad()
        opt2.zero_grad()
        loss.backward()
        opt1.step()
        opt2.step()
        losses.append(loss)
    return [
        losses,
        list(model.state_dict().values()),
        model.v.weight.grad.to_dense() if model.v.weight.grad is not None else None,
    ]


def mha_variants(torch, ctx):
    """nn.MultiheadAttention with need_weights and average_attn_weights=False, kdim/vdim,
    batch_first False, a float attn_mask, a bool key_padding_mask, add_bias_kv and
    add_zero_attn; and F.multi_head_attention_forward-equivalent checks through the module."""
    nn = torch.nn
    rng = np.random.default_rng(8)
    m1 = ctx.init(nn.MultiheadAttention(8, 2, kdim=5, vdim=3, dropout=0.0), "m1")
    m2 = ctx.init(
        nn.MultiheadAttention(8, 4, batch_first=True, add_bias_kv=True, add_zero_attn=True), "m2"
    )
    q = ctx.t(rng.standard_normal((4, 2, 8)).astype(np.float32), requires_grad=True)
    k = ctx.t(rng.standard_normal((6, 2, 5)).astype(np.float32))
    v = ctx.t(rng.standard_normal((6, 2, 3)).astype(np.float32))
    mask = ctx.t(np.triu(np.full((4, 6), -1e4, np.float32), 1))
    kpm = ctx.t(np.array([[False] * 5 + [True], [False] * 6]))
    o1, w1 = m1(
        q, k, v, attn_mask=mask, key_padding_mask=kpm, need_weights=True, average_attn_weights=False
    )
    o1b, w1b = m1(q, k, v, key_padding_mask=kpm)
    x = q.transpose(0, 1)
    bmask = ctx.t(np.triu(np.ones((4, 4), bool), 1))
    o2, w2 = m2(x, x, x, attn_mask=bmask, need_weights=True)
    o3, w3 = m2(x, x, x, is_causal=False, need_weights=False)
    (o1.sum() + o2.pow(2).sum() + o1b.sum()).backward()
    return [o1, w1, o1b, w1b, o2, w2, o3, w3 is None, q.grad, m1.q_proj_weight.grad, m2.bias_k.grad]


def interpolate_aug(torch, ctx):
    """Augmentations and resizing: F.interpolate bicubic (align_corners both), area,
    nearest-exact, bilinear with antialias=True (down), trilinear, scale_factor with
    recompute_scale_factor; roll/flip/rot90 augmentation, pixel_shuffle/unshuffle and a
    ShuffleNet channel shuffle; gradients through all."""
    F = torch.nn.functional
    rng = np.random.default_rng(9)
    x = ctx.t(rng.standard_normal((2, 4, 9, 7)).astype(np.float32), requires_grad=True)
    outs = [
        F.interpolate(x, size=(13, 5), mode="bicubic", align_corners=False),
        F.interpolate(x, scale_factor=1.7, mode="bicubic", align_corners=True),
        F.interpolate(x, size=(4, 3), mode="area"),
        F.interpolate(x, size=(12, 10), mode="nearest-exact"),
        F.interpolate(x, size=(5, 4), mode="bilinear", antialias=True),
        F.interpolate(x, size=(4, 3), mode="bicubic", antialias=True),
        F.interpolate(x, scale_factor=(0.6, 1.3), mode="bilinear", recompute_scale_factor=True),
        F.interpolate(x[:, :, None], size=(3, 5, 4), mode="trilinear"),
        F.interpolate(x, scale_factor=2, mode="nearest"),
    ]
    aug = torch.roll(x, shifts=(2, -1), dims=(2, 3)).flip(-1)
    outs.append(torch.rot90(x, 1, (2, 3)))
    ps = F.pixel_shuffle(x[:, :4], 2)
    outs += [aug, ps, F.pixel_unshuffle(ps, 2)]
    b, c, h, w = x.shape
    outs.append(x.view(b, 2, c // 2, h, w).transpose(1, 2).contiguous().view(b, c, h, w))
    sum(o.pow(2).mean() for o in outs).backward()
    return [outs, x.grad]


def transformer_seq2seq(torch, ctx):
    """nn.Transformer encoder-decoder, batch_first, generate_square_subsequent_mask, src/tgt
    key_padding_masks and a memory mask, norm_first layers with gelu; then greedy decoding
    under no_grad with the model in eval mode."""
    nn = torch.nn
    V, D = 11, 16

    class S2S(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, D, padding_idx=0)
            self.tr = nn.Transformer(
                D, 2, 2, 1, 32, dropout=0.1, activation="gelu", batch_first=True, norm_first=True
            )
            self.out = nn.Linear(D, V)

        def forward(self, src, tgt, src_pad, tgt_pad):
            T = tgt.shape[1]
            tgt_mask = nn.Transformer.generate_square_subsequent_mask(T)
            mem_mask = torch.zeros(T, src.shape[1])
            h = self.tr(
                self.emb(src),
                self.emb(tgt),
                tgt_mask=tgt_mask,
                memory_mask=mem_mask,
                src_key_padding_mask=src_pad,
                tgt_key_padding_mask=tgt_pad,
                memory_key_padding_mask=src_pad,
                tgt_is_causal=True,
            )
            return self.out(h)

    model = ctx.init(S2S())
    model.eval()
    rng = np.random.default_rng(10)
    src = ctx.t(rng.integers(1, V, (2, 7)))
    src[1, 5:] = 0
    tgt = ctx.t(rng.integers(1, V, (2, 5)))
    tgt[0, 4] = 0
    logits = model(src, tgt, src == 0, tgt == 0)
    loss = nn.functional.cross_entropy(
        logits.reshape(-1, V), tgt.roll(-1, 1).reshape(-1), ignore_index=0
    )
    loss.backward()
    with torch.no_grad():
        ys = torch.ones(2, 1, dtype=torch.long)
        for _ in range(4):
            nxt = model(src, ys, src == 0, ys == -1)[:, -1].argmax(-1, keepdim=True)
            ys = torch.cat([ys, nxt], 1)
    return [logits, loss, ys, model.emb.weight.grad]


def func_ensemble(torch, ctx):
    """torch.func model ensembling: stack_module_state, functional_call under vmap over the
    stacked parameters, per-sample gradients with vmap(grad), jacrev/hessian of a small
    function, and jvp/vjp."""
    tf = torch.func
    stack_module_state, functional_call, vmap, grad, jacrev, hessian, jvp, vjp = (
        tf.stack_module_state,
        tf.functional_call,
        tf.vmap,
        tf.grad,
        tf.jacrev,
        tf.hessian,
        tf.jvp,
        tf.vjp,
    )
    nn = torch.nn
    torch.manual_seed(0)
    models = [nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1)) for _ in range(3)]
    for i, m in enumerate(models):
        ctx.init(m, f"m{i}")
    params, buffers = stack_module_state(models)
    import copy

    base = copy.deepcopy(models[0]).to("meta")
    x = ctx.t(np.linspace(-1, 1, 15, dtype=np.float32).reshape(5, 3))

    def fmodel(p, b, xx):
        return functional_call(base, (p, b), (xx,))

    ens = vmap(fmodel, in_dims=(0, 0, None))(params, buffers, x)
    m0 = models[0]
    p0 = {k: v.detach() for k, v in m0.named_parameters()}

    def loss_fn(p, xi, yi):
        return (functional_call(m0, p, (xi[None],)) - yi).pow(2).sum()

    y = ctx.t(np.arange(5, dtype=np.float32))
    per = vmap(grad(loss_fn), in_dims=(None, 0, 0))(p0, x, y)
    f = lambda z: (z.sin() * z.cumsum(0)).sum()
    z = ctx.t(np.array([0.3, -0.2, 0.9], np.float32))
    J = jacrev(lambda z: z.sin() * z.cumsum(0))(z)
    Hs = hessian(f)(z)
    out, tang = jvp(lambda z: z.exp() * z, (z,), (torch.ones_like(z),))
    val, fn = vjp(lambda z: z.tanh().cumprod(0), z)
    return [ens, per, J, Hs, out, tang, val, fn(torch.ones_like(z))]


def data_pipeline(torch, ctx):
    """torch.utils.data: TensorDataset + random_split with a generator, ConcatDataset,
    Subset, WeightedRandomSampler, a BatchSampler with drop_last, a collate_fn padding with
    pad_sequence, default_collate of dicts, and a DataLoader with a seeded generator."""
    U = torch.utils.data
    (
        TensorDataset,
        random_split,
        ConcatDataset,
        Subset,
        WeightedRandomSampler,
        BatchSampler,
        SequentialSampler,
        DataLoader,
        default_collate,
    ) = (
        U.TensorDataset,
        U.random_split,
        U.ConcatDataset,
        U.Subset,
        U.WeightedRandomSampler,
        U.BatchSampler,
        U.SequentialSampler,
        U.DataLoader,
        U.default_collate,
    )
    pad_sequence = torch.nn.utils.rnn.pad_sequence
    X = torch.arange(40.0).view(20, 2)
    Y = torch.arange(20) % 3
    ds = TensorDataset(X, Y)
    a, b = random_split(ds, [0.7, 0.3], generator=torch.Generator().manual_seed(1))
    cat = ConcatDataset([a, Subset(ds, [0, 5, 7])])
    out = [len(a), len(b), [int(i) for i in a.indices], len(cat), cat[15][0]]
    w = torch.tensor([0.1, 0.5, 2.0])[Y]
    sampler = WeightedRandomSampler(
        w, num_samples=10, replacement=True, generator=torch.Generator().manual_seed(2)
    )
    out.append(list(sampler))
    out.append(list(BatchSampler(SequentialSampler(range(7)), batch_size=3, drop_last=True)))
    seqs = [torch.arange(n) for n in [3, 1, 4]]

    def collate(batch):
        return pad_sequence(batch, batch_first=True, padding_value=-1), torch.tensor(
            [len(s) for s in batch]
        )

    dl = DataLoader(
        seqs,
        batch_size=2,
        collate_fn=collate,
        shuffle=True,
        generator=torch.Generator().manual_seed(3),
    )
    out.append([list(x) for x in dl])
    out.append(default_collate([{"a": torch.ones(2), "b": 3}, {"a": torch.zeros(2), "b": 4}]))
    dl2 = DataLoader(
        ds, batch_size=6, shuffle=True, drop_last=False, generator=torch.Generator().manual_seed(4)
    )
    out.append([yb for _, yb in dl2])
    return out


PROGRAMS = [
    printing,
    grad_modes,
    grad_accum_clip,
    ema_foreach,
    schedulers,
    quantile_metrics,
    linalg_misc,
    fft_conv,
    tagged_tensor,
    loss_zoo,
    distributions_policy,
    embbag_fm,
    mha_variants,
    interpolate_aug,
    transformer_seq2seq,
    func_ensemble,
    data_pipeline,
]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


# the programs that mark steps for ember.function (the others run as in test_eager)
CAPTURED = [p for p in PROGRAMS if "@ctx.fn" in inspect.getsource(p)]


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
