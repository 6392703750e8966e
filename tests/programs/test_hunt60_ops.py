"""Programs of hunt60 on tensor functions preprocessing and research code call with
gradients: anti-aliased and bicubic image resizing with reflection-padded bicubic grid
sampling, special functions in likelihoods (xlogy, log_ndtr, ndtri, i0e/i1e, polygamma,
multigammaln, erfcx, logit with eps, sinc, entr), robust statistics (nanmedian, quantile by
each interpolation, kthvalue, mode, nanmean/nansum), the *_scatter family and structure
builders (diagonal_scatter, select_scatter, slice_scatter, diag_embed with offsets,
block_diag, kron, cartesian_prod, combinations, tril_indices), sliding windows by
Tensor.unfold and as_strided, sparse COO products, and dilated/strided F.unfold/F.fold.
"""

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007, E501, E731, F841, B023, C408, B006, E702, E701, E401, C416, UP031, B905, PIE810, SIM108, RUF005


def _x(ctx, shape, seed=0, grad=False, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return ctx.t(rng.standard_normal(shape).astype(dtype), requires_grad=grad)


def image_resizing(torch, ctx):
    """Downscaling as torchvision's Resize(antialias=True) does (bilinear and bicubic with
    antialias), upscaling bicubic with align_corners, area interpolation to a non-divisor size,
    trilinear on a volume, and grid_sample bicubic with reflection padding; gradients."""
    F = torch.nn.functional
    img = _x(ctx, (2, 3, 17, 13), 0, True)
    vol = _x(ctx, (1, 2, 4, 5, 6), 1, True)
    a = F.interpolate(img, size=(7, 6), mode="bilinear", antialias=True, align_corners=False)
    b = F.interpolate(img, size=(8, 5), mode="bicubic", antialias=True)
    c = F.interpolate(img, scale_factor=1.5, mode="bicubic", align_corners=True)
    d = F.interpolate(img, size=(5, 4), mode="area")
    e = F.interpolate(vol, size=(3, 7, 4), mode="trilinear", align_corners=False)
    theta = ctx.t(np.array([[[0.9, 0.1, 0.05], [-0.1, 1.1, 0.0]]] * 2, np.float32))
    grid = F.affine_grid(theta, (2, 3, 9, 8), align_corners=False)
    g = F.grid_sample(img, grid, mode="bicubic", padding_mode="reflection", align_corners=False)
    loss = a.pow(2).sum() + b.abs().sum() + c.sum() + d.pow(2).sum() + e.sin().sum() + g.pow(2).sum()
    loss.backward()
    return [a, b, c, d, e, g, img.grad, vol.grad]


def special_likelihoods(torch, ctx):
    """Special functions inside likelihoods: xlogy/xlog1py in a cross-entropy, log_ndtr for a
    probit model, ndtri of quantiles, i0e/i1e in a von Mises normaliser, polygamma(1) (trigamma)
    for a Fisher information, multigammaln for a Wishart, erfcx, logit with eps, sinc, entr;
    gradients where PyTorch defines them."""
    S = torch.special
    p = ctx.t(np.array([0.0, 0.1, 0.5, 0.9, 1.0], np.float32), requires_grad=True)
    y = ctx.t(np.array([0.0, 0.0, 1.0, 1.0, 1.0], np.float32))
    z = _x(ctx, (6,), 2, True)
    k = ctx.t(np.array([0.1, 1.0, 5.0, 30.0], np.float32), requires_grad=True)
    a = ctx.t(np.array([2.5, 3.0, 7.2], np.float32), requires_grad=True)
    ce = -(S.xlogy(y, p + 1e-3) + S.xlog1py(1 - y, -p + 1e-3 * 0)).sum()
    probit = S.log_ndtr(z).sum() + S.log_ndtr(-z * 5).sum()
    vm = (torch.log(S.i0e(k)) + k).sum() + (S.i1e(k) / S.i0e(k)).sum()
    fisher = S.polygamma(1, a).sum() + S.digamma(a).sum()
    wish = S.multigammaln(a, 2).sum()
    misc = S.erfcx(z).sum() + S.logit(p, eps=1e-4).sum() + S.sinc(z).sum() + S.entr(p).sum()
    total = ce + probit + vm + fisher + wish + misc
    total.backward()
    return [ce, probit, vm, fisher, wish, misc, p.grad, z.grad, k.grad, a.grad, S.ndtri(ctx.t(np.array([0.01, 0.5, 0.975], np.float32)))]


def robust_statistics(torch, ctx):
    """Robust statistics with gradients: nanmedian along a dim (ties and NaNs), median of an
    even count, quantile with each interpolation, kthvalue, mode of integer votes, nanmean and
    nansum, and torch.std_mean/var_mean with correction=0."""
    x = ctx.t(np.array([[1.0, np.nan, 3.0, 2.0, 2.0], [5.0, 4.0, np.nan, np.nan, 0.5], [0.1, 0.2, 0.3, 0.4, 0.5]], np.float32), requires_grad=True)
    clean = _x(ctx, (3, 6), 3, True)
    nm, ni = torch.nanmedian(x, dim=1)
    med, mi = torch.median(clean, dim=1)
    qs = [torch.quantile(clean, ctx.t(np.array([0.1, 0.5, 0.77], np.float32)), dim=1, interpolation=m) for m in ("linear", "lower", "higher", "midpoint", "nearest")]
    kv, ki = torch.kthvalue(clean, 2, dim=1, keepdim=True)
    votes = ctx.t(np.array([[1, 2, 2, 3, 3], [0, 0, 1, 1, 1]]))
    mode_v, mode_i = torch.mode(votes, dim=1)
    nmean = torch.nanmean(x, dim=1)
    nsum = torch.nansum(x)
    sd, mu = torch.std_mean(clean, dim=1, correction=0)
    var, mu2 = torch.var_mean(clean, dim=0, keepdim=True)
    total = nm.sum() + med.sum() + sum(q.sum() for q in qs) + kv.sum() + nmean.sum() + nsum + sd.sum() + var.sum()
    total.backward()
    return [nm, ni, med, mi, qs, kv, ki, mode_v, mode_i, nmean, nsum, sd, mu, var, x.grad, clean.grad]


def scatter_family(torch, ctx):
    """The *_scatter functions and structure builders: diagonal_scatter with an offset,
    select_scatter, slice_scatter with a step, diag_embed with offset and dims, block_diag,
    kron, cartesian_prod, combinations with replacement, tril_indices/triu_indices with
    offsets, unravel_index; gradients flow into both the base and the source."""
    base = _x(ctx, (4, 5), 4, True)
    src = _x(ctx, (4,), 5, True)
    row = _x(ctx, (5,), 6, True)
    cols = _x(ctx, (4, 2), 7, True)
    d = torch.diagonal_scatter(base, src, offset=1)
    s = torch.select_scatter(d, row, 0, 2)
    sl = torch.slice_scatter(s, cols, dim=1, start=0, end=4, step=2)
    de = torch.diag_embed(src.view(2, 2), offset=-1, dim1=0, dim2=2)
    bd = torch.block_diag(src.view(2, 2), row[:3].view(1, 3), ctx.t(np.array([[7.0]], np.float32)))
    kr = torch.kron(src.view(2, 2), cols[:2])
    loss = (sl * sl).sum() + de.sum() * 2 + bd.pow(2).sum() + kr.abs().sum()
    loss.backward()
    a = ctx.t(np.array([1, 2, 3]))
    cp = torch.cartesian_prod(a, ctx.t(np.array([10, 20])))
    cb = torch.combinations(a, r=2, with_replacement=True)
    tl = torch.tril_indices(4, 3, offset=-1)
    tu = torch.triu_indices(3, 4, offset=1)
    ur = torch.unravel_index(ctx.t(np.array([0, 7, 11])), (3, 4))
    return [sl, de, bd, kr, base.grad, src.grad, row.grad, cols.grad, cp, cb, tl, tu, list(ur)]


def sliding_windows(torch, ctx):
    """Framing a signal with Tensor.unfold (size 4, step 2) then a windowed mean, overlapping
    2-D patches by unfold twice, a Toeplitz matrix by as_strided over a padded vector (gradients
    sum overlapping positions), and torch.roll/rot90 in an augmentation."""
    sig = _x(ctx, (2, 11), 8, True)
    frames = sig.unfold(-1, 4, 2)
    win = torch.hann_window(4, periodic=False)
    energy = (frames * win).pow(2).mean(-1)
    img = _x(ctx, (1, 6, 7), 9, True)
    patches = img.unfold(1, 3, 2).unfold(2, 3, 2)
    v = _x(ctx, (5,), 10, True)
    padded = torch.cat([v.flip(0)[:-1], v])
    toe = padded.as_strided((5, 5), (1, 1)).flip(1)
    aug = torch.rot90(torch.roll(img, shifts=(1, -2), dims=(1, 2)), k=1, dims=(1, 2))
    loss = energy.sum() + patches.pow(2).sum() + (toe @ v).sum() + (aug * img.transpose(1, 2).roll(1, 1)).sum() * 0 + aug.sum()
    loss.backward()
    return [frames.shape, energy, patches.shape, patches, toe, aug, sig.grad, img.grad, v.grad]


def sparse_coo_products(torch, ctx):
    """A graph Laplacian as a sparse COO tensor (duplicate entries coalesced), torch.sparse.mm
    with a dense feature matrix requiring grad, torch.sparse.sum, to_dense, and a sparse
    adjacency built from edge indices by sparse_coo_tensor then row-normalised densely."""
    idx = ctx.t(np.array([[0, 1, 1, 2, 3, 0, 2], [1, 0, 2, 1, 3, 1, 2]]))
    val = ctx.t(np.array([1.0, 1.0, 2.0, 2.0, 1.0, 0.5, 3.0], np.float32))
    A = torch.sparse_coo_tensor(idx, val, (4, 4))
    Ac = A.coalesce()
    X = _x(ctx, (4, 3), 11, True)
    AX = torch.sparse.mm(Ac, X)
    dense = Ac.to_dense()
    deg = dense.sum(1, keepdim=True).clamp(min=1)
    norm = (dense / deg) @ X
    (AX.pow(2).sum() + norm.sum()).backward()
    return [Ac.indices(), Ac.values(), Ac.is_coalesced(), AX, torch.sparse.sum(Ac).to_dense() if hasattr(torch.sparse.sum(Ac), "to_dense") else torch.sparse.sum(Ac), dense, norm, X.grad]


def unfold_fold_dilated(torch, ctx):
    """F.unfold with dilation, padding and stride feeding a matmul (a convolution written by
    hand, compared with F.conv2d), then F.fold of the columns (overlap-add) divided by the fold
    of ones; gradients of the input and the weight."""
    F = torch.nn.functional
    x = _x(ctx, (2, 3, 9, 8), 12, True)
    w = _x(ctx, (4, 3, 3, 3), 13, True)
    cols = F.unfold(x, kernel_size=3, dilation=2, padding=1, stride=2)
    L = cols.shape[-1]
    out = (w.view(4, -1) @ cols).view(2, 4, 4, 3)
    ref = F.conv2d(x, w, dilation=2, padding=1, stride=2)
    back = F.fold(cols, output_size=(9, 8), kernel_size=3, dilation=2, padding=1, stride=2)
    ones = F.fold(torch.ones_like(cols), output_size=(9, 8), kernel_size=3, dilation=2, padding=1, stride=2)
    avg = back / ones.clamp(min=1)
    (out.pow(2).sum() + avg.sum()).backward()
    return [L, out, ref, avg, ones, x.grad, w.grad]


PROGRAMS = [image_resizing, special_likelihoods, robust_statistics, scatter_family, sliding_windows, sparse_coo_products, unfold_fold_dilated]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program, rtol=1e-4, atol=1e-5)
