"""The wide profile's layer and library vocabulary for tests/torch_diff_fuzzing.py: the
torch.nn.functional layers and losses with their options, torch.linalg on well-conditioned
matrices, scans with ``dtype=``, sorts and uniques, index updates and einsum. Each call reads
a floating pool entry laid into the shape it needs (its values repeated, plus fixed distinct
offsets so there are no ties), so the gradients reach the program's inputs."""

from __future__ import annotations

import math

import numpy as np

from tests.torch_diff_ops import Call, Ctx, op


def _fill(T, x, shape, seed: int):
    """x's values repeated into ``shape`` (x must be non-empty), plus distinct offsets."""
    n = math.prod(shape)
    flat = x.reshape(-1)
    reps = -(-n // max(flat.numel(), 1))
    offsets = np.random.default_rng(seed).permutation(n).reshape(shape) * 0.0137
    base = flat.repeat(reps)[:n].reshape(shape)
    return base + T.tensor(offsets).to(x.dtype)


def _const(T, x, shape, seed: int, scale: float = 0.5):
    w = np.random.default_rng(seed).standard_normal(shape) * scale
    return T.tensor(w).to(x.dtype)


def _src(c: Ctx):
    p = c.pick("f", nonempty=True)
    return p, c.rng.randrange(2**31)


@op(weight=3, wide=True)
def conv(c: Ctx):
    p, s = _src(c)
    r = c.rng
    dims = r.choice([1, 2])
    groups = r.choice([1, 2])
    cin, cout = groups * r.randint(1, 2), groups * r.randint(1, 2)
    k = r.randint(1, 3)
    stride, pad, dil = r.randint(1, 2), r.choice([0, 1, "same", "valid"]), r.randint(1, 2)
    if pad == "same" and stride != 1:
        pad = 1
    size = [r.randint(3, 6) for _ in range(dims)]
    shape = (r.randint(1, 2), cin, *size)
    bias = r.random() < 0.5
    text = f"conv{dims}d({p[2]}->{shape}, g={groups}, k={k}, s={stride}, p={pad}, d={dil})"

    def fn(T, x):
        inp = _fill(T, x, shape, s)
        w = _const(T, x, (cout, cin // groups) + (k,) * dims, s + 1)
        b = _const(T, x, (cout,), s + 2) if bias else None
        f = T.nn.functional.conv1d if dims == 1 else T.nn.functional.conv2d
        return f(inp, w, b, stride=stride, padding=pad, dilation=dil, groups=groups)

    return Call(text, [p], fn)


@op(weight=3, wide=True)
def pool(c: Ctx):
    p, s = _src(c)
    r = c.rng
    kind = r.choice(["max1", "max2", "avg1", "avg2", "adaptive_avg", "adaptive_max", "lp"])
    k, stride = r.randint(1, 3), r.choice([None, 1, 2])
    pad = r.randint(0, k // 2)
    ceil, cip = r.random() < 0.5, r.random() < 0.5
    two = kind.endswith("2") or kind.startswith("adaptive")
    shape = (r.randint(1, 2), r.randint(1, 3), r.randint(3, 6)) + (
        (r.randint(3, 6),) if two else ()
    )
    out = r.randint(1, 3)
    text = f"{kind}({p[2]}->{shape}, k={k}, s={stride}, p={pad}, ceil={ceil}, cip={cip})"

    def fn(T, x):
        v = _fill(T, x, shape, s)
        F = T.nn.functional
        if kind == "max1":
            return F.max_pool1d(v, k, stride, pad, ceil_mode=ceil)
        if kind == "max2":
            return F.max_pool2d(v, k, stride, pad, ceil_mode=ceil)
        if kind == "avg1":
            return F.avg_pool1d(v, k, stride, pad, ceil_mode=ceil, count_include_pad=cip)
        if kind == "avg2":
            return F.avg_pool2d(v, k, stride, pad, ceil_mode=ceil, count_include_pad=cip)
        if kind == "adaptive_avg":
            return F.adaptive_avg_pool2d(v, (out, out + 1))
        if kind == "adaptive_max":
            return F.adaptive_max_pool2d(v, out)
        return F.lp_pool1d(v.abs() + 0.1, 2.0, k, stride)

    return Call(text, [p], fn)


@op(weight=2, wide=True)
def resample(c: Ctx):
    p, s = _src(c)
    r = c.rng
    kind = r.choice(["nearest", "linear", "bilinear", "bicubic", "nearest-exact", "area"])
    align = r.random() < 0.5 if kind in ("linear", "bilinear", "bicubic") else None
    one = kind == "linear"
    shape = (1, 2, r.randint(2, 4)) + (() if one else (r.randint(2, 4),))
    by_scale = r.random() < 0.5
    scale = r.choice([0.5, 1.5, 2.0, 3.0])
    size = r.randint(1, 6)
    padmode = r.choice(["constant", "reflect", "replicate", "circular"])
    pads = [r.randint(0, 1) for _ in range(2 if one else 4)]

    def fn(T, x):
        v = _fill(T, x, shape, s)
        F = T.nn.functional
        if by_scale:
            out = F.interpolate(v, scale_factor=scale, mode=kind, align_corners=align)
        else:
            out = F.interpolate(
                v, size=size if one else (size, size + 1), mode=kind, align_corners=align
            )
        return [out, F.pad(v, pads, mode=padmode)]

    amount = scale if by_scale else size
    text = f"interpolate({p[2]}->{shape}, {kind}, {align}, {amount}); pad({pads}, {padmode})"
    return Call(text, [p], fn)


@op(weight=3, wide=True)
def norm_layer(c: Ctx):
    p, s = _src(c)
    r = c.rng
    kind = r.choice(
        [
            "batch_train",
            "batch_eval",
            "group",
            "layer",
            "instance",
            "log_softmax",
            "softmin",
            "dropout",
        ]
    )
    ch = r.choice([2, 4])
    shape = (r.randint(2, 3), ch, r.randint(1, 3))
    affine = r.random() < 0.5
    pdrop = r.choice([0.0, 1.0])

    def fn(T, x):
        if x.dtype in (T.float16, T.bfloat16) and kind in ("batch_train", "group", "instance"):
            # (PyTorch's 16-bit statistics are E[x^2] - E[x]^2 in float32, which cancels
            # to noise for nearly constant groups; ember's are centred)
            x = x.float()
        v = _fill(T, x, shape, s)
        F = T.nn.functional
        w = _const(T, x, (ch,), s + 1) if affine else None
        b = _const(T, x, (ch,), s + 2) if affine else None
        if kind.startswith("batch"):
            mean = T.zeros(ch, dtype=x.dtype) + 0.1
            var = T.ones(ch, dtype=x.dtype) * 1.5
            out = F.batch_norm(v, mean, var, w, b, training=kind == "batch_train", momentum=0.3)
            return [out, mean, var]  # (training updates the running statistics)
        if kind == "group":
            return F.group_norm(v, 2, w, b)
        if kind == "layer":
            return F.layer_norm(v, shape[-2:])
        if kind == "instance":
            return F.instance_norm(v, weight=w, bias=b)
        if kind == "log_softmax":
            return F.log_softmax(v, dim=1, dtype=T.float64)
        if kind == "softmin":
            return F.softmin(v, dim=-1)
        return F.dropout(v, pdrop, training=True)

    return Call(f"{kind}({p[2]}->{shape}, affine={affine}, p={pdrop})", [p], fn)


@op(weight=4, wide=True)
def loss(c: Ctx):
    p, s = _src(c)
    r = c.rng
    kind = r.choice(
        [
            "ce",
            "ce_probs",
            "nll",
            "mse",
            "l1",
            "huber",
            "smooth_l1",
            "bce",
            "bce_logits",
            "kl",
            "embedding",
            "one_hot",
        ]
    )
    reduction = r.choice(["mean", "sum", "none"])
    n, k = r.randint(1, 4), r.randint(2, 4)
    g = np.random.default_rng(s)
    y = g.integers(0, k, size=(n,))
    ignore = int(y[0]) if r.random() < 0.3 else -100
    weighted = r.random() < 0.5
    smooth = r.choice([0.0, 0.2])

    def fn(T, x):
        F = T.nn.functional
        v = _fill(T, x, (n, k), s)
        w = (_const(T, x, (k,), s + 1).abs() + 0.5) if weighted else None
        t = _const(T, x, (n, k), s + 3)
        if kind == "ce":
            return F.cross_entropy(
                v,
                T.tensor(y),
                weight=w,
                ignore_index=ignore,
                reduction=reduction,
                label_smoothing=smooth,
            )
        if kind == "ce_probs":
            return F.cross_entropy(
                v, t.softmax(1), weight=w, reduction=reduction, label_smoothing=smooth
            )
        if kind == "nll":
            return F.nll_loss(
                F.log_softmax(v, 1), T.tensor(y), weight=w, ignore_index=ignore, reduction=reduction
            )
        if kind == "mse":
            return F.mse_loss(v, t, reduction=reduction)
        if kind == "l1":
            return F.l1_loss(v, t, reduction=reduction)
        if kind == "huber":
            return F.huber_loss(v, t, reduction=reduction, delta=0.7)
        if kind == "smooth_l1":
            return F.smooth_l1_loss(v, t, reduction=reduction, beta=0.5)
        if kind == "bce":
            return F.binary_cross_entropy(v.sigmoid(), t.sigmoid(), weight=w, reduction=reduction)
        if kind == "bce_logits":
            pw = w if weighted else None
            return F.binary_cross_entropy_with_logits(
                v, t.sigmoid(), pos_weight=pw, reduction=reduction
            )
        if kind == "kl":
            return F.kl_div(
                F.log_softmax(v, 1),
                t.softmax(1),
                reduction="batchmean" if reduction == "mean" else reduction,
            )
        if kind == "embedding":
            table = _fill(T, x, (k + 1, 3), s)
            pad = int(y[-1])
            return F.embedding(T.tensor(y), table, padding_idx=pad, max_norm=None)
        return F.one_hot(T.tensor(y), k + 1)

    return Call(
        f"{kind}({p[2]}->({n},{k}), y={y.tolist()}, red={reduction}, ign={ignore}, "
        f"w={weighted}, ls={smooth})",
        [p],
        fn,
    )


@op(weight=3, wide=True)
def linalg(c: Ctx):
    p, s = _src(c)
    r = c.rng
    kind = r.choice(
        [
            "det",
            "slogdet",
            "inv",
            "solve",
            "cholesky",
            "qr",
            "eigh",
            "svdvals",
            "svd_recon",
            "norm_fro",
            "norm_nuc",
            "norm_2",
            "vector_norm",
            "matrix_norm_1",
            "pinv",
            "lstsq",
        ]
    )
    n = r.randint(1, 4)
    batch = r.choice([(), (2,)])
    order = r.choice([1, 2, 3, float("inf"), -float("inf"), 0.5])

    def fn(T, x):
        L = T.linalg
        a = _fill(T, x, batch + (n, n), s) * 0.1
        a = a + T.eye(n, dtype=x.dtype) * 2  # well conditioned
        spd = a @ a.mT + T.eye(n, dtype=x.dtype)
        if kind == "det":
            return L.det(a)
        if kind == "slogdet":
            return list(L.slogdet(a))
        if kind == "inv":
            return L.inv(a)
        if kind == "solve":
            return L.solve(a, _fill(T, x, batch + (n, 2), s + 1))
        if kind == "cholesky":
            return L.cholesky(spd)
        if kind == "qr":
            q, rr = L.qr(a)
            return [q @ rr, rr.abs()]
        if kind == "eigh":
            vals, vecs = L.eigh(spd)
            return [vals, (vecs * vecs)]
        if kind == "svdvals":
            return L.svdvals(a)
        if kind == "svd_recon":
            u, sv, vh = L.svd(a, full_matrices=False)
            return [u @ T.diag_embed(sv) @ vh, sv]
        if kind == "norm_fro":
            return L.norm(a)
        if kind == "norm_nuc":
            return L.matrix_norm(a, "nuc")
        if kind == "norm_2":
            return L.matrix_norm(a, 2)
        if kind == "matrix_norm_1":
            return L.matrix_norm(a, r_ord)
        if kind == "pinv":
            return L.pinv(a)
        if kind == "lstsq":
            return L.lstsq(a, _fill(T, x, batch + (n, 1), s + 2)).solution
        return L.vector_norm(x, order, dim=-1 if x.dim() else None)

    r_ord = r.choice([1, -1, float("inf"), -float("inf"), "fro"])
    return Call(f"linalg.{kind}({p[2]}->{batch + (n, n)}, ord={order}/{r_ord})", [p], fn)


@op(weight=3, wide=True)
def library(c: Ctx):
    """Scans with dtype=, ties in sorts, uniques, index updates, einsum and friends."""
    p = c.pick("fi", min_rank=1, nonempty=True)
    s = c.rng.randrange(2**31)
    r = c.rng
    kind = r.choice(
        [
            "cumsum_dtype",
            "cumprod_dtype",
            "cummin",
            "logcumsumexp",
            "sort_stable_ties",
            "unique",
            "unique_consecutive",
            "unique_dim",
            "median_ties",
            "mode",
            "lerp_t",
            "addcdiv",
            "addcmul",
            "einsum_diag",
            "einsum_outer",
            "einsum_batch",
            "tensordot2",
            "rot90",
            "diag_off",
            "triu_off",
            "diagonal_off",
            "repeat_interleave",
            "masked_select",
            "masked_scatter",
            "index_copy",
            "index_fill",
            "scatter_reduce",
            "nanmean",
            "nanmedian",
            "where_t",
            "clamp_t",
            "take_along",
            "bincount",
            "histc",
            "searchsorted",
        ]
    )
    d = c.dim(p[0], bad=0.0)
    off = r.randint(-2, 2)
    how = r.choice(["sum", "prod", "mean", "amax", "amin"])
    include = r.random() < 0.5

    def fn(T, x):
        g = np.random.default_rng(s)
        n = x.shape[d]
        ties = (x * 2).round() / 2 if x.is_floating_point() else x % 3
        if kind == "cumsum_dtype":
            return T.cumsum(x, d, dtype=T.float64)
        if kind == "cumprod_dtype":
            return x.cumprod(d, dtype=T.float64)
        if kind == "cummin":
            return list(T.cummin(ties, d))
        if kind == "logcumsumexp":
            return T.logcumsumexp(x.double(), d)
        if kind == "sort_stable_ties":
            return list(T.sort(ties, d, stable=True, descending=True))
        if kind == "unique":
            return list(
                T.unique(ties.detach(), sorted=True, return_inverse=True, return_counts=True)
            )
        if kind == "unique_consecutive":
            return list(
                T.unique_consecutive(ties.detach(), return_inverse=True, return_counts=True, dim=d)
            )
        if kind == "unique_dim":
            return list(T.unique(ties.detach(), dim=d, return_inverse=True))
        if kind == "median_ties":
            return T.median(ties, d).values
        if kind == "mode":
            return list(T.mode(ties.detach(), d))
        if kind == "lerp_t":
            return T.lerp(x.double(), x.double().flip(d), T.tensor(g.random(tuple(x.shape))))
        if kind == "addcdiv":
            return T.addcdiv(x.double(), x.double(), x.double().abs() + 1, value=-0.5)
        if kind == "addcmul":
            return T.addcmul(x, x, x, value=2)
        if kind == "einsum_diag":
            return T.einsum("ii->i", x.reshape(-1)[:1].reshape(1, 1).double())
        if kind == "einsum_outer":
            v = x.reshape(-1)
            return T.einsum("i,j->ij", v, v)
        if kind == "einsum_batch":
            v = x.reshape(1, -1, 1).double()
            return T.einsum("bij,bjk->bik", v, v.transpose(1, 2))
        if kind == "tensordot2":
            v = x.reshape(-1, 1).double()
            return T.tensordot(v, v, dims=([0], [0]))
        if kind == "rot90":
            return T.rot90(x, off, [0, -1]) if x.dim() >= 2 else x
        if kind == "diag_off":
            return T.diag(x.reshape(-1)[:3], off)
        if kind == "triu_off":
            return T.triu(x, off) if x.dim() >= 2 else T.tril(x.reshape(1, -1), off)
        if kind == "diagonal_off":
            return T.diagonal(x, off, 0, -1) if x.dim() >= 2 else x
        if kind == "repeat_interleave":
            reps = T.tensor(g.integers(0, 3, size=(n,)))
            return T.repeat_interleave(x, reps, dim=d)
        if kind == "masked_select":
            return T.masked_select(x, x > 0)
        if kind == "masked_scatter":
            src = T.arange(x.numel(), dtype=x.dtype).reshape(x.shape)
            return x.masked_scatter(x > 0, src)
        if kind == "index_copy":
            idx = T.tensor(g.permutation(n)[: max(n - 1, 1)])
            src = x.index_select(d, idx) * 3
            return x.index_copy(d, idx, src)
        if kind == "index_fill":
            return x.index_fill(d, T.tensor([0, n - 1]), -2)
        if kind == "scatter_reduce":
            idx = T.tensor(g.integers(0, n, size=tuple(x.shape)))
            return x.scatter_reduce(d, idx, x * 2, how, include_self=include)
        if kind == "nanmean":
            v = T.where(ties > 0, x.double(), float("nan"))
            return [T.nanmean(v, d), T.nansum(v, d), T.nanmedian(v, d).values]
        if kind == "nanmedian":
            return T.nanmedian(T.where(ties > 0, x.double(), float("nan")))
        if kind == "where_t":
            return T.where(x > 0, x, x.flip(d) * 2)
        if kind == "clamp_t":
            return T.clamp(x, min=x.flip(d) - 1, max=x.flip(d) + 1)
        if kind == "take_along":
            idx = T.tensor(g.integers(0, n, size=tuple(x.shape)))
            return T.take_along_dim(x, idx, d)
        if kind == "bincount":
            v = T.tensor(g.integers(0, 5, size=(x.numel(),)))
            return T.bincount(v, weights=x.reshape(-1).double(), minlength=3)
        if kind == "histc":
            return T.histc(x.double(), bins=4, min=-1, max=1)
        vals = T.sort(x.reshape(-1).detach()).values
        return T.searchsorted(vals, x.detach(), right=include)

    return Call(f"{kind}({p[2]}, d={d}, off={off}, how={how}, incl={include})", [p], fn)
