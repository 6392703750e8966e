"""Programs of hunt52 (utilities and training idioms), each run on PyTorch and on ember: tensor
printing under set_printoptions; grad modes as decorators and nested; gradient accumulation
with clip_grad_norm_/clip_grad_value_; an EMA by _foreach ops and AveragedModel; LR
schedulers; evaluation metrics (quantiles, ROC-AUC, confusion matrix); torch.linalg in
regularisers; FFT convolution; a Tensor subclass with __torch_function__ and
torch.testing.assert_close; a loss zoo; a squashed-Gaussian policy with torch.distributions;
an EmbeddingBag factorization machine with SparseAdam; MultiheadAttention variants;
interpolation and augmentation; an nn.Transformer seq2seq with greedy decoding; a torch.func
ensemble; a torch.utils.data pipeline; a hand-written optimizer saved and resumed; custom
autograd Functions with gradcheck; hooks and initialisation; seeded draws; a checkpointed
WaveNet; a ViT with resized positions; module and tensor reprs.
"""

import inspect
import io
import math

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


def custom_optimizer_resume(torch, ctx):
    """A hand-written optimizer (torch.optim.Optimizer subclass: state per parameter, lerp_,
    addcdiv_, maximum for AMSGrad, a closure), saved with torch.save into BytesIO with the
    model and an LR scheduler, reloaded into fresh objects: resumed training equals the
    uninterrupted run."""
    nn = torch.nn

    class MyAdam(torch.optim.Optimizer):
        def __init__(self, params, lr=1e-2, betas=(0.9, 0.99), eps=1e-8, amsgrad=True):
            super().__init__(params, dict(lr=lr, betas=betas, eps=eps, amsgrad=amsgrad))

        @torch.no_grad()
        def step(self, closure=None):
            loss = None
            if closure is not None:
                with torch.enable_grad():
                    loss = closure()
            for group in self.param_groups:
                b1, b2 = group["betas"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    st = self.state[p]
                    if not st:
                        st["step"] = torch.tensor(0.0)
                        st["m"] = torch.zeros_like(p)
                        st["v"] = torch.zeros_like(p)
                        st["vmax"] = torch.zeros_like(p)
                    st["step"] += 1
                    st["m"].lerp_(p.grad, 1 - b1)
                    st["v"].mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
                    torch.maximum(st["vmax"], st["v"], out=st["vmax"])
                    t = st["step"].item()
                    denom = (st["vmax"] / (1 - b2**t)).sqrt().add_(group["eps"])
                    p.addcdiv_(st["m"], denom, value=-group["lr"] / (1 - b1**t))
            return loss

    def make():
        torch.manual_seed(0)
        m = nn.Sequential(nn.Linear(3, 5), nn.ReLU(), nn.Linear(5, 1))
        ctx.init(m)
        o = MyAdam(m.parameters(), lr=0.05)
        s = torch.optim.lr_scheduler.StepLR(o, 2, 0.5)
        return m, o, s

    rng = np.random.default_rng(22)
    X = ctx.t(rng.standard_normal((8, 3)).astype(np.float32))
    Y = ctx.t(rng.standard_normal((8, 1)).astype(np.float32))

    def train(m, o, s, n):
        out = []
        for _ in range(n):

            def closure():
                o.zero_grad()
                l = nn.functional.mse_loss(m(X), Y)
                l.backward()
                return l

            out.append(o.step(closure))
            s.step()
        return out

    m, o, s = make()
    straight = train(m, o, s, 5)
    m2, o2, s2 = make()
    first = train(m2, o2, s2, 2)
    buf = io.BytesIO()
    torch.save(
        {"model": m2.state_dict(), "opt": o2.state_dict(), "sched": s2.state_dict(), "epoch": 2},
        buf,
    )
    buf.seek(0)
    ck = torch.load(buf)
    m3, o3, s3 = make()
    m3.load_state_dict(ck["model"])
    o3.load_state_dict(ck["opt"])
    s3.load_state_dict(ck["sched"])
    resumed = first + train(m3, o3, s3, 3)
    return [
        straight,
        resumed,
        list(m.state_dict().values()),
        list(m3.state_dict().values()),
        sorted(o3.state_dict()["state"][0].keys()),
        ck["epoch"],
        s3.get_last_lr(),
    ]


def autograd_function(torch, ctx):
    """Custom autograd.Functions: a straight-through rounding with save_for_backward and
    mark_non_differentiable (an argmax output), a clamp with once_differentiable, a
    double-backward-capable cube; gradcheck / gradgradcheck on float64; materialize_grads."""
    F_ = torch.autograd.Function

    class STERound(F_):
        @staticmethod
        def forward(ctx_, x):
            idx = x.argmax(-1)
            ctx_.mark_non_differentiable(idx)
            ctx_.save_for_backward(x)
            return x.round(), idx

        @staticmethod
        def backward(ctx_, g, gidx):
            (x,) = ctx_.saved_tensors
            return g * (x.abs() < 2).to(g.dtype)

    class Cube(F_):
        @staticmethod
        def forward(ctx_, x):
            ctx_.save_for_backward(x)
            return x**3

        @staticmethod
        def backward(ctx_, g):
            (x,) = ctx_.saved_tensors
            return 3 * x**2 * g

    class Clip(F_):
        @staticmethod
        def forward(ctx_, x, lo):
            ctx_.lo = lo
            ctx_.save_for_backward(x)
            return x.clamp(min=lo)

        @staticmethod
        @torch.autograd.function.once_differentiable
        def backward(ctx_, g):
            (x,) = ctx_.saved_tensors
            return g * (x >= ctx_.lo), None

    x = ctx.t(np.array([[0.4, -2.5, 1.6], [3.1, 0.2, -0.7]]), requires_grad=True)
    r, idx = STERound.apply(x)
    c = Cube.apply(x)
    k = Clip.apply(x, 0.0)
    (r.sum() + c.sum() + k.sum()).backward()
    g1 = x.grad.clone()
    x.grad = None
    y = Cube.apply(x)
    (gx,) = torch.autograd.grad(y.sum(), x, create_graph=True)
    (ggx,) = torch.autograd.grad(gx.sum(), x)
    ok1 = torch.autograd.gradcheck(Cube.apply, (x,), eps=1e-6, atol=1e-4)
    ok2 = torch.autograd.gradgradcheck(Cube.apply, (x,))
    return [r, idx, idx.requires_grad, c, k, g1, gx, ggx, ok1, ok2]


def hooks_init(torch, ctx):
    """Module hooks and initialisation: forward hooks collecting features by name, a forward
    pre-hook with kwargs rewriting the input, full backward hooks capturing grad_output, a
    tensor hook scaling a gradient; module.apply with xavier/kaiming/orthogonal and
    calculate_gain, under one seed; named_modules filtering and parameter counting."""
    nn = torch.nn
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(1, 4, 3),
        nn.BatchNorm2d(4),
        nn.LeakyReLU(0.2),
        nn.Flatten(),
        nn.Linear(4 * 4 * 4, 3),
    )

    def init(m):
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, a=0.2, mode="fan_out", nonlinearity="leaky_relu")
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Linear):
            nn.init.xavier_uniform_(m.weight, gain=nn.init.calculate_gain("tanh"))
            nn.init.constant_(m.bias, 0.1)

    model.apply(init)
    w0 = [p.detach().clone() for p in model.parameters()]
    ortho = nn.init.orthogonal_(torch.empty(4, 6), gain=1.5)
    trunc = nn.init.trunc_normal_(torch.empty(20), std=0.5, a=-0.6, b=0.6)
    feats, grads = {}, []
    handles = []
    for name, m in model.named_modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            handles.append(
                m.register_forward_hook(
                    lambda mod, inp, out, name=name: feats.__setitem__(name, out.detach())
                )
            )
    handles.append(
        model[0].register_forward_pre_hook(
            lambda mod, args, kwargs: ((args[0] * 2,), kwargs), with_kwargs=True
        )
    )
    handles.append(
        model[4].register_full_backward_hook(lambda mod, gin, gout: grads.append(gout[0].clone()))
    )
    x = ctx.t(
        np.random.default_rng(23).standard_normal((2, 1, 6, 6)).astype(np.float32),
        requires_grad=True,
    )
    x.register_hook(lambda g: g * 10)
    out = model(x)
    out.sum().backward()
    for h in handles:
        h.remove()
    out2 = model(x)
    n_params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    names = [n for n, m in model.named_modules() if len(list(m.children())) == 0]
    return [w0, ortho, ortho @ ortho.t(), trunc, feats, grads, x.grad, out, out2, n_params, names]


def random_draws(torch, ctx):
    """Seeded sampling as training code uses it: multinomial with and without replacement,
    randint/randperm/rand/randn with generators, normal with tensor parameters, bernoulli,
    poisson, exponential_/uniform_ in place, Generator state save/restore and fork_rng."""
    g = torch.Generator().manual_seed(7)
    probs = torch.tensor([[0.1, 0.2, 0.7], [0.5, 0.5, 0.0]])
    out = [
        torch.multinomial(probs, 5, replacement=True, generator=g),
        torch.multinomial(probs, 2, generator=g),
    ]
    out.append(torch.randint(0, 10, (6,), generator=g))
    out.append(torch.randperm(8, generator=g))
    state = g.get_state()
    a = torch.rand(4, generator=g)
    g.set_state(state)
    b = torch.rand(4, generator=g)
    out += [a, b]
    torch.manual_seed(1)
    out.append(torch.normal(torch.zeros(3), torch.arange(1.0, 4.0)))
    out.append(torch.normal(2.0, 0.5, size=(3,)))
    out.append(torch.bernoulli(torch.full((5,), 0.3)))
    out.append(torch.poisson(torch.tensor([1.0, 4.0, 10.0])))
    out.append(torch.empty(4).exponential_(2.0))
    out.append(torch.empty(4).uniform_(-1, 1))
    out.append(torch.empty(3).normal_(5, 0.1))
    with torch.random.fork_rng():
        torch.manual_seed(99)
        inner = torch.randn(2)
    out += [inner, torch.randn(2)]
    out.append(torch.randn(2, 3, dtype=torch.float64))
    out.append(torch.rand(3).bernoulli_(0.5))
    out.append(torch.randint_like(torch.zeros(4), 3, 9))
    out.append(torch.randn_like(torch.zeros(2, 2)))
    return out


def checkpoint_wavenet(torch, ctx):
    """A WaveNet-style stack: causal dilated Conv1d by F.pad on the left, gated tanh*sigmoid
    units, residual and skip connections, the old nn.utils.weight_norm on the 1x1 convs, and
    torch.utils.checkpoint (use_reentrant=False) around each block; two training steps."""
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self, c, d):
            super().__init__()
            self.d = d
            self.conv = nn.Conv1d(c, 2 * c, 2, dilation=d)
            self.res = nn.utils.weight_norm(nn.Conv1d(c, c, 1))
            self.skip = nn.Conv1d(c, c, 1)

        def forward(self, x):
            h = self.conv(F.pad(x, (self.d, 0)))
            a, b = h.chunk(2, 1)
            z = torch.tanh(a) * torch.sigmoid(b)
            return x + self.res(z), self.skip(z)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = nn.Conv1d(1, 6, 1)
            self.blocks = nn.ModuleList([Block(6, d) for d in (1, 2, 4)])
            self.out = nn.Conv1d(6, 4, 1)

        def forward(self, x):
            x = self.inp(x)
            skips = 0
            for b in self.blocks:
                x, s = torch.utils.checkpoint.checkpoint(b, x, use_reentrant=False)
                skips = skips + s
            return self.out(F.relu(skips))

    torch.manual_seed(0)
    model = ctx.init(Net())
    opt = torch.optim.RMSprop(model.parameters(), lr=0.01, alpha=0.9, centered=True, momentum=0.5)
    rng = np.random.default_rng(24)
    x = ctx.t(rng.standard_normal((2, 1, 16)).astype(np.float32))
    y = ctx.t(rng.integers(0, 4, (2, 16)))
    losses = []
    for _ in range(2):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss)
    return [losses, list(model.state_dict().values())]


def vit_sdpa(torch, ctx):
    """A ViT: patch embedding by Conv2d, a class token, learned positions resized by bicubic
    interpolation for a larger image, pre-norm blocks calling F.scaled_dot_product_attention
    with a float mask and scale=, DropPath with a seeded mask in train mode, and eval."""
    nn, F = torch.nn, torch.nn.functional
    D = 16

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.n1 = nn.LayerNorm(D)
            self.qkv = nn.Linear(D, 3 * D)
            self.proj = nn.Linear(D, D)
            self.n2 = nn.LayerNorm(D)
            self.mlp = nn.Sequential(
                nn.Linear(D, 32), nn.GELU(approximate="tanh"), nn.Linear(32, D)
            )

        def drop_path(self, x, p=0.2):
            if not self.training:
                return x
            keep = torch.empty(x.shape[0], 1, 1).bernoulli_(1 - p)
            return x * keep / (1 - p)

        def forward(self, x, mask):
            B, N, _ = x.shape
            q, k, v = self.qkv(self.n1(x)).view(B, N, 3, 2, D // 2).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=0.3)
            x = x + self.drop_path(self.proj(a.transpose(1, 2).reshape(B, N, D)))
            return x + self.drop_path(self.mlp(self.n2(x)))

    class ViT(nn.Module):
        def __init__(self):
            super().__init__()
            self.patch = nn.Conv2d(3, D, 4, 4)
            self.cls = nn.Parameter(torch.zeros(1, 1, D))
            self.pos = nn.Parameter(torch.randn(1, 1 + 4, D) * 0.02)
            self.blocks = nn.ModuleList([Block(), Block()])
            self.head = nn.Linear(D, 5)

        def forward(self, img):
            x = self.patch(img).flatten(2).transpose(1, 2)
            n = int(math.isqrt(x.shape[1]))
            pos = self.pos[:, 1:].reshape(1, 2, 2, D).permute(0, 3, 1, 2)
            pos = (
                F.interpolate(pos, size=(n, n), mode="bicubic", align_corners=False)
                .permute(0, 2, 3, 1)
                .reshape(1, n * n, D)
            )
            x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + torch.cat(
                [self.pos[:, :1], pos], 1
            )
            mask = torch.zeros(x.shape[1], x.shape[1])
            mask[:, -1] = -1e9
            for b in self.blocks:
                x = b(x, mask)
            return self.head(x[:, 0])

    torch.manual_seed(0)
    model = ctx.init(ViT())
    rng = np.random.default_rng(25)
    img = ctx.t(rng.standard_normal((2, 3, 12, 12)).astype(np.float32))
    torch.manual_seed(5)
    out = model(img)
    out.sum().backward()
    model.eval()
    out_eval = model(img)
    return [out, out_eval, model.pos.grad, model.patch.weight.grad]


def module_reprs(torch, ctx):
    """print(model): the reprs of common layers with their extra_repr arguments, containers
    (Sequential, ModuleList, ModuleDict), a custom module with extra_repr, and optimizer and
    scheduler reprs."""
    nn = torch.nn

    class Custom(nn.Module):
        def __init__(self):
            super().__init__()
            self.k = 3
            self.body = nn.ModuleDict({"a": nn.Linear(2, 2, bias=False), "b": nn.Identity()})

        def extra_repr(self):
            return f"k={self.k}"

    layers = [
        nn.Linear(3, 4),
        nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False),
        nn.Conv1d(2, 4, 5, dilation=2, groups=2, padding_mode="reflect", padding=4),
        nn.ConvTranspose2d(4, 2, 4, 2, 1, output_padding=0),
        nn.BatchNorm2d(8, momentum=None),
        nn.LayerNorm([4, 5], elementwise_affine=False),
        nn.GroupNorm(2, 8),
        nn.Dropout(0.25),
        nn.Dropout2d(),
        nn.ReLU(inplace=True),
        nn.LeakyReLU(0.1),
        nn.GELU(approximate="tanh"),
        nn.Softmax(dim=-1),
        nn.MaxPool2d(2, 2, ceil_mode=True),
        nn.AvgPool2d(3, 1, 1, count_include_pad=False),
        nn.AdaptiveAvgPool2d((1, 1)),
        nn.Embedding(10, 3, padding_idx=0, max_norm=1.0),
        nn.EmbeddingBag(10, 3, mode="max"),
        nn.LSTM(3, 4, 2, batch_first=True, dropout=0.1, bidirectional=True),
        nn.GRU(3, 4),
        nn.RNN(3, 4, nonlinearity="relu"),
        nn.MultiheadAttention(8, 2, batch_first=True),
        nn.TransformerEncoderLayer(8, 2, 16, batch_first=True),
        nn.Flatten(1, -1),
        nn.Unflatten(1, (2, 3)),
        nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False),
        nn.PReLU(3),
        nn.Hardtanh(-2, 2),
        nn.CrossEntropyLoss(label_smoothing=0.1),
        nn.Identity(),
        nn.Bilinear(2, 3, 4),
        nn.PixelShuffle(2),
        nn.ZeroPad2d((1, 2, 0, 1)),
        nn.InstanceNorm1d(3, affine=True),
        nn.Softplus(beta=2, threshold=10),
        nn.ELU(alpha=0.5),
        nn.SiLU(),
        nn.Tanh(),
        nn.CosineSimilarity(dim=1),
        nn.Sequential(nn.Linear(2, 2), nn.ModuleList([nn.ReLU(), nn.Sigmoid()])),
        Custom(),
    ]
    out = [repr(m) for m in layers]
    p = [nn.Parameter(torch.zeros(2))]
    out.append(repr(torch.optim.Adam(p, lr=1e-3, weight_decay=0.01)))
    out.append(repr(torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True)))
    return [s.replace(torch.__name__ + ".", "torch.") for s in out]


def tensor_reprs(torch, ctx):
    """More tensor strings: complex, integers near int64's limits, negative zero, mixed
    magnitudes in scientific notation, a 3-D tensor, summarised long rows with edgeitems,
    values of 1e-5..1e5 in float64, a strided view, a tensor requiring grad after ops,
    a sparse tensor, an int8 and a bool matrix, a one-element and a named Size."""
    out = []
    out.append(repr(torch.tensor([1 + 2j, -0.5j, 3.25 + 0j])))
    out.append(repr(torch.tensor([2**62, -(2**62), 7])))
    out.append(repr(torch.tensor([-0.0, 0.0, 1.0])))
    out.append(repr(torch.tensor([1e-10, 1.0, 1e10])))
    out.append(repr(torch.tensor([0.001, 1000.0])))
    out.append(repr(torch.arange(24.0).view(2, 3, 4)))
    out.append(repr(torch.arange(3000.0).view(3, 1000)))
    out.append(repr(torch.tensor([1e-5, 1.0, 1e5], dtype=torch.float64)))
    out.append(repr(torch.arange(12.0).view(3, 4).t()[1:]))
    x = torch.ones(2, requires_grad=True)
    out.append(repr(x.sum()))
    out.append(repr((x * 3).mean()))
    out.append(repr(torch.tensor([[1, 0], [0, 2]]).to_sparse()))
    out.append(repr(torch.tensor([-128, 0, 127], dtype=torch.int8)))
    out.append(repr(torch.eye(2, dtype=torch.bool)))
    out.append(repr(torch.tensor([5.0])))
    out.append(repr(torch.Size([2, 3])))
    out.append(repr(torch.tensor(float("nan"))))
    out.append(repr(torch.tensor([123456789.0])))
    out.append(repr(torch.tensor([0.1, 0.25], dtype=torch.float16)))
    out.append(str(torch.tensor([[1.5, 2.25], [3.0, 4.0]])))
    out.append(repr(torch.zeros(2, 0, 3)))
    out.append(repr(torch.tensor([1, 2, 3], dtype=torch.uint8)))
    out.append(repr(torch.linspace(0, 1, 7)))
    out.append(repr(torch.tensor([1.0, 2.0]) * 1e-20))
    return [s.replace(torch.__name__ + ".", "torch.") for s in out]


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
    custom_optimizer_resume,
    autograd_function,
    hooks_init,
    random_draws,
    checkpoint_wavenet,
    vit_sdpa,
    module_reprs,
    tensor_reprs,
]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


# the programs that mark steps for ember.function (the others run as in test_eager)
CAPTURED = [p for p in PROGRAMS if "@ctx.fn" in inspect.getsource(p)]


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
