"""Numeric programs of hunt54, each run on PyTorch and on ember: t-SNE (a perplexity binary
search, early exaggeration), an image-processing pipeline (separable Gaussian blur, Sobel,
histogram equalisation, bilateral and median filters by unfold, morphology, an affine warp),
a spectral Poisson solver, torch.special, the split/move/take_along_dim family, cdist modes,
the tensor utility functions, and Python/NumPy interoperation.
"""

import math

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007, E501, E731, F841, B023, C408, B006, E702, E701, E401, C416, UP031, B905, PIE810, SIM108, RUF005


def tsne(torch, ctx):
    """t-SNE in float64: per-point precisions by a vectorised binary search on the entropy
    (torch.where updates, fill_diagonal_), symmetrised P, a Student-t Q from cdist, early
    exaggeration, SGD with momentum on the embedding."""
    rng = np.random.default_rng(0)
    X = ctx.t(rng.standard_normal((12, 5)).astype(np.float64))
    D = torch.cdist(X, X).pow(2)
    n = X.shape[0]
    target = math.log(4.0)
    beta = torch.ones(n, dtype=torch.float64)
    lo = torch.full((n,), 1e-20, dtype=torch.float64)
    hi = torch.full((n,), 1e20, dtype=torch.float64)
    for _ in range(40):
        P = torch.exp(-D * beta[:, None])
        P.fill_diagonal_(0.0)
        sumP = P.sum(1, keepdim=True).clamp_min(1e-12)
        H = torch.log(sumP).squeeze(1) + beta * (D * P).sum(1) / sumP.squeeze(1)
        P = P / sumP
        too_high = H > target
        lo = torch.where(too_high, beta, lo)
        hi = torch.where(too_high, hi, beta)
        beta = torch.where(hi < 1e19, (lo + hi) / 2, beta * 2)
    P = (P + P.T) / (2 * n)
    P = P.clamp_min(1e-12)
    torch.manual_seed(0)
    Y = (torch.randn(n, 2, dtype=torch.float64) * 1e-2).requires_grad_()
    opt = torch.optim.SGD([Y], lr=50.0, momentum=0.8)
    kls = []
    for it in range(30):
        opt.zero_grad()
        num = 1.0 / (1.0 + torch.cdist(Y, Y).pow(2))
        num = num * (1 - torch.eye(n, dtype=torch.float64))
        Q = (num / num.sum()).clamp_min(1e-12)
        exag = 4.0 if it < 10 else 1.0
        kl = (exag * P * (torch.log(exag * P) - torch.log(Q))).sum()
        kl.backward()
        opt.step()
        kls.append(kl.item())
    return [beta, P, kls, Y]


def image_processing(torch, ctx):
    """Classic image processing: a depthwise Gaussian blur (reflect padding, groups=3), grey
    conversion and Sobel gradients (replicate padding, atan2), histogram equalisation by
    bincount/cumsum/gather, a bilateral and a median filter over unfold patches, dilation
    and erosion by max_pool2d, saturation, contrast, rot90, a resized crop and an affine
    warp with bicubic grid_sample."""
    F = torch.nn.functional
    rng = np.random.default_rng(0)
    img = ctx.t(rng.uniform(0, 1, (2, 3, 16, 16)).astype(np.float32))
    k1 = torch.exp(-((torch.arange(5) - 2.0) ** 2) / (2 * 1.2**2))
    k1 = k1 / k1.sum()
    k2 = torch.outer(k1, k1).expand(3, 1, 5, 5)
    blur = F.conv2d(F.pad(img, (2, 2, 2, 2), mode="reflect"), k2, groups=3)
    gray = (img * torch.tensor([0.299, 0.587, 0.114]).view(1, 3, 1, 1)).sum(1, keepdim=True)
    sobel_x = torch.tensor([[-1.0, 0, 1], [-2, 0, 2], [-1, 0, 1]])
    sob = torch.stack([sobel_x, sobel_x.T]).unsqueeze(1)
    grads = F.conv2d(F.pad(gray, (1, 1, 1, 1), mode="replicate"), sob)
    mag = grads.pow(2).sum(1).sqrt()
    ang = torch.atan2(grads[:, 1], grads[:, 0])
    # histogram equalisation
    q = (gray * 255).long().clamp(0, 255)
    hist = torch.stack([torch.bincount(qi.flatten(), minlength=256) for qi in q]).float()
    cdf = hist.cumsum(1)
    cdf = (cdf - cdf[:, :1]) / (cdf[:, -1:] - cdf[:, :1])
    eq = torch.gather(cdf, 1, q.flatten(1)).view_as(gray)
    # bilateral filter via unfold
    patches = F.unfold(F.pad(gray, (1, 1, 1, 1), mode="reflect"), 3).view(2, 9, 16, 16)
    center = gray
    wr = torch.exp(-((patches - center) ** 2) / (2 * 0.1**2))
    ws = torch.exp(-torch.tensor([2.0, 1, 2, 1, 0, 1, 2, 1, 2]) / 2).view(1, 9, 1, 1)
    bil = (patches * wr * ws).sum(1, keepdim=True) / (wr * ws).sum(1, keepdim=True)
    # median filter, morphology, color jitter
    med = F.unfold(gray, 3, padding=1).median(1).values.view(2, 1, 16, 16)
    dil = F.max_pool2d(gray, 3, 1, 1)
    ero = -F.max_pool2d(-gray, 3, 1, 1)
    hsv_v = img.max(1).values
    hsv_min = img.min(1).values
    sat = torch.where(hsv_v > 0, (hsv_v - hsv_min) / hsv_v, torch.zeros_like(hsv_v))
    adj = torch.clamp(
        (img - img.mean((1, 2, 3), keepdim=True)) * 1.3 + img.mean((1, 2, 3), keepdim=True), 0, 1
    )
    rot = torch.rot90(img, 1, (2, 3))
    crop = F.interpolate(img[:, :, 4:12, 4:12], size=16, mode="bilinear", align_corners=False)
    theta = torch.tensor(
        [[math.cos(0.3), -math.sin(0.3), 0.1], [math.sin(0.3), math.cos(0.3), 0.0]]
    ).expand(2, 2, 3)
    warped = F.grid_sample(
        img,
        F.affine_grid(theta, img.shape, align_corners=False),
        mode="bicubic",
        padding_mode="reflection",
        align_corners=False,
    )
    return [blur, mag, ang, eq, bil, med, dil, ero, sat, adj, rot, crop, warped]


def poisson_fft(torch, ctx):
    """A periodic Poisson solver by fft2/ifft2 and rfft2/irfft2 over fftfreq wave numbers,
    fftshift/ifftshift, hfft/ihfft, an orthonormal DCT through rfft, rfftfreq and a forward-
    normalised fftn."""
    n = 16
    x = torch.linspace(0, 2 * math.pi, n + 1)[:-1]
    X, Y = torch.meshgrid(x, x, indexing="ij")
    f = torch.sin(X) * torch.cos(2 * Y)
    kx = torch.fft.fftfreq(n, d=1.0 / n)
    KX, KY = torch.meshgrid(kx, kx, indexing="ij")
    k2 = KX**2 + KY**2
    k2[0, 0] = 1.0
    fh = torch.fft.fft2(f)
    uh = -fh / k2
    uh[0, 0] = 0
    u = torch.fft.ifft2(uh).real
    r = torch.fft.rfft2(f)
    ur = torch.fft.irfft2(
        -r / torch.where(k2[:, : n // 2 + 1] == 0, 1.0, k2[:, : n // 2 + 1]), s=(n, n)
    )
    sh = torch.fft.fftshift(torch.fft.fft(torch.ones(8)))
    ish = torch.fft.ifftshift(sh)
    z = torch.fft.hfft(torch.tensor([1.0, 2.0, 3.0], dtype=torch.complex64))
    zz = torch.fft.ihfft(torch.arange(6.0)).resolve_conj()
    dct = torch.fft.rfft(torch.cat([f[0], f[0].flip(0)]), norm="ortho")
    return [
        u,
        ur,
        sh,
        ish,
        z,
        zz,
        dct,
        torch.fft.rfftfreq(9, 0.5),
        torch.fft.fftn(f, dim=(0,), norm="forward"),
    ]


def special_zoo(torch, ctx):
    """torch.special's functions (logit with eps, expit, erfcx, i0e/i1e, xlog1py, log_ndtr,
    ndtri, multigammaln, entr, sinc, polygamma, zeta, Bessel functions, gammainc/gammaincc,
    ...) with the gradients of the differentiable ones."""
    x = ctx.t(np.linspace(0.05, 0.95, 11).astype(np.float32)).requires_grad_()
    y = ctx.t(np.linspace(-3, 4, 11).astype(np.float32)).requires_grad_()
    sp = torch.special
    outs = [
        sp.logit(x),
        sp.logit(x, eps=0.1),
        sp.expit(y),
        sp.erfcx(y),
        sp.i0e(y),
        sp.i1e(y),
        sp.i0(y),
        sp.i1(y),
        sp.xlog1py(x, y.abs()),
        sp.log_ndtr(y),
        sp.ndtr(y),
        sp.ndtri(x),
        sp.multigammaln(y.abs() + 2, 3),
        sp.entr(x),
        sp.sinc(y),
        sp.round(y * 1.3),
        sp.log1p(x),
        sp.expm1(y),
        sp.exp2(y),
        sp.psi(x + 1),
        sp.digamma(x + 1),
        sp.polygamma(1, x + 1),
        sp.gammaln(x + 1),
        sp.erfinv(x * 2 - 1),
        sp.xlogy(x, x),
        sp.logsumexp(y, 0),
        sp.softmax(y, 0),
        sp.log_softmax(y, 0),
        sp.zeta(y.detach().abs() + 1.5, x.detach() + 1),
        sp.bessel_j0(y),
        sp.bessel_j1(y),
        sp.gammainc(x.detach() + 1, y.abs()),
        sp.gammaincc(x.detach() + 1, y.abs()),
        sp.spherical_bessel_j0(y),
        sp.modified_bessel_i0(y),
        sp.modified_bessel_k0(y.abs() + 0.1),
        sp.scaled_modified_bessel_k1(y.abs() + 0.1),
    ]
    total = sum(o.sum() for o in outs if o.requires_grad)
    total.backward()
    return [outs, x.grad, y.grad]


def tensor_reshaping(torch, ctx):
    """tensor_split by count, indices and an index tensor, unflatten, movedim,
    swapdims/swapaxes, narrow_copy, narrow with a tensor start, take_along_dim (with an
    argmax index, and flat), hsplit/dsplit, chunk, Tensor.unfold, atleast_3d; the gradient
    of every piece."""
    a = ctx.t(np.arange(60, dtype=np.float32).reshape(3, 4, 5)).requires_grad_()
    parts = torch.tensor_split(a, 3, dim=2)
    parts2 = torch.tensor_split(a, [1, 3], dim=1)
    parts3 = a.tensor_split(ctx.t(np.array([1, 2])), dim=0)
    u = a.unflatten(2, (5, 1)).flatten(-2)
    m = torch.movedim(a, (0, 1), (2, 0))
    s = torch.swapdims(a, 0, 2)
    s2 = a.swapaxes(1, 2)
    n = torch.narrow_copy(a, 1, 1, 2)
    n2 = a.narrow(2, ctx.t(np.array(1)), 3)
    idx = ctx.t(np.array([[[0], [2], [1], [3]]] * 3))
    t = torch.take_along_dim(a, idx, dim=1)
    t2 = torch.take_along_dim(a, a.argmax(dim=2, keepdim=True), dim=2)
    t3 = torch.take_along_dim(a, ctx.t(np.array([5, 0, 59])))
    hs = torch.hsplit(a, 2)
    vs = torch.dsplit(a, [2])
    ch = torch.chunk(a, 4, dim=2)
    uf = a.unfold(2, 2, 2)
    loss = (
        sum(p.sum() * (i + 1) for i, p in enumerate(parts + parts2 + parts3))
        + (u * m.permute(2, 0, 1)).sum()
        + (s.transpose(0, 2) ** 2).mean()
        + s2.sum()
        + n.sum()
        + n2.sum()
        + t.sum()
        + t2.sum()
        + t3.sum()
        + uf.pow(2).sum()
        + ch[-1].sum()
    )
    loss.backward()
    return [
        parts,
        parts2,
        parts3,
        m,
        n,
        n2,
        t,
        t2,
        t3,
        hs,
        vs,
        [c.shape[-1] for c in ch],
        uf,
        a.grad,
        list(u.shape),
        list(torch.atleast_3d(a[0, 0]).shape),
    ]


def cdist_modes(torch, ctx):
    """cdist with p = 1, inf, 0.5, 2 and 3 under each compute_mode, pdist, pairwise_distance
    with keepdim, and their gradients."""
    a = torch.randn(2, 5, 3, requires_grad=True)
    b = torch.randn(2, 4, 3, requires_grad=True)
    outs = [
        torch.cdist(a, b, p=1),
        torch.cdist(a, b, p=float("inf")),
        torch.cdist(a, b, p=0.5),
        torch.cdist(a, b, p=2, compute_mode="use_mm_for_euclid_dist"),
        torch.cdist(a, b, p=2, compute_mode="donot_use_mm_for_euclid_dist"),
        torch.cdist(a, b, p=3),
        torch.cdist(a, b, compute_mode="use_mm_for_euclid_dist_if_necessary"),
        torch.pdist(a[0], p=1),
        torch.pdist(a[1]),
        torch.nn.functional.pairwise_distance(a[0, :4], b[0], p=1, keepdim=True),
    ]
    loss = sum(o.sum() * (i + 1) for i, o in enumerate(outs))
    loss.backward()
    return [outs, a.grad, b.grad]


def tensor_utilities(torch, ctx):
    """The tensor utilities: where/nonzero/argwhere, bucketize, searchsorted (side, sorter),
    unique_consecutive, unique over a dim, diff with prepend/append, cummax, kthvalue, mode,
    nanmedian, quantile modes, histogram, histc, weighted bincount, index_put_ accumulate,
    advanced-index updates, block_diag, cartesian_prod, combinations, tril/triu_indices,
    rot90, roll, vander, logcumsumexp, renorm, isin, clamp by tensors, heaviside,
    nan_to_num, frexp/ldexp, trapezoid, corrcoef, weighted cov, aminmax, std_mean."""
    x = torch.tensor([[3.0, 1.0, 2.0, 2.0], [0.0, -1.0, 5.0, 5.0]])
    out = []
    out += list(torch.where(x > 1))
    out += list(x.nonzero(as_tuple=True))
    out.append(torch.argwhere(x))
    out.append(torch.bucketize(x, torch.tensor([0.0, 2.0, 4.0]), right=True))
    out.append(torch.searchsorted(torch.tensor([1.0, 2.0, 2.0, 3.0]), x, side="right"))
    srt = torch.tensor([3.0, 1.0, 2.0])
    out.append(torch.searchsorted(srt, torch.tensor([2.5]), sorter=srt.argsort()))
    out += list(
        torch.unique_consecutive(
            torch.tensor([1, 1, 2, 2, 3, 1, 1]), return_inverse=True, return_counts=True
        )
    )
    out += list(torch.unique(x, sorted=True, return_inverse=True, return_counts=True, dim=1))
    out.append(torch.diff(x, n=2, dim=1, prepend=torch.zeros(2, 1), append=torch.ones(2, 2)))
    out += list(torch.cummax(x, 1))
    out += list(torch.kthvalue(x, 2, 1, keepdim=True))
    out += list(torch.mode(x, 1))
    out.append(torch.nanmedian(torch.tensor([1.0, float("nan"), 3.0, 2.0])))
    out.append(torch.quantile(x, torch.tensor([0.25, 0.5]), dim=1, interpolation="midpoint"))
    out.append(
        torch.nanquantile(torch.tensor([1.0, float("nan"), 3.0]), 0.5, interpolation="higher")
    )
    out += list(torch.histogram(x.flatten(), bins=4, range=(-1.0, 5.0), density=True))
    out.append(torch.histc(x, bins=3, min=0, max=5))
    out.append(
        torch.bincount(torch.tensor([0, 2, 2, 5]), weights=torch.tensor([0.5, 1.0, 1.0, 2.0]))
    )
    y = torch.zeros(5)
    y.index_put_((torch.tensor([0, 0, 3]),), torch.tensor([1.0, 2.0, 3.0]), accumulate=True)
    out.append(y)
    z = torch.zeros(3, 3)
    z[torch.tensor([0, 2]), torch.tensor([1, 1])] += torch.tensor([1.0, 2.0])
    z[z == 0] = -1
    z[:, 0] *= 3
    out.append(z)
    out.append(torch.block_diag(torch.ones(2, 2), torch.tensor([[5.0]])))
    out.append(torch.cartesian_prod(torch.tensor([1, 2]), torch.tensor([3, 4, 5])))
    out.append(torch.combinations(torch.tensor([1, 2, 3]), r=2, with_replacement=True))
    out.append(torch.tril_indices(3, 4, offset=1))
    out.append(torch.triu_indices(4, 3, -1))
    out.append(torch.rot90(x, 1, (0, 1)))
    out.append(torch.flip(x, (0, 1)))
    out.append(torch.roll(x, shifts=(1, -1), dims=(0, 1)))
    out.append(torch.vander(torch.tensor([1.0, 2.0, 3.0]), N=4, increasing=True))
    out.append(torch.logcumsumexp(x, 1))
    out.append(torch.renorm(x, 2, 0, 3.0))
    out.append(torch.count_nonzero(x, dim=0))
    out.append(torch.isin(x, torch.tensor([2.0, 5.0]), invert=True))
    out.append(torch.clamp(x, min=torch.tensor([0.0, 1.0, 2.0, 3.0]), max=torch.tensor(4.0)))
    out.append(torch.heaviside(x - 2, torch.tensor(0.5)))
    out.append(
        torch.nan_to_num(torch.tensor([float("nan"), float("inf"), -float("inf")]), posinf=9.0)
    )
    out.append(torch.frexp(x)[0])
    out.append(torch.ldexp(x, torch.tensor(2)))
    out.append(torch.trapezoid(x, dx=0.5))
    out.append(torch.cumulative_trapezoid(x, dim=1))
    out.append(torch.diag_embed(x, offset=1))
    out.append(torch.corrcoef(x))
    out.append(torch.cov(x, correction=0, aweights=torch.tensor([1.0, 2.0, 1.0, 1.0])))
    out.append(torch.aminmax(x, dim=1).min)
    out.append(torch.std_mean(x, dim=1, correction=0)[0])
    out.append(torch.var(x, unbiased=False))
    out.append(torch.msort(x.T))
    out.append(torch.ravel(x.T))
    out.append(x.new_full((2,), 7))
    out.append(x.new_tensor([1, 2]))
    return out


def python_numpy_interop(torch, ctx):
    """Tensors among Python and NumPy values: NumPy scalars and arrays on either side, math
    functions and builtins on tensors, integer division and modulo signs, bool masks, Size
    arithmetic, type strings and legacy tensor types, Variable, formatting, shifts, hashing,
    and the dtypes torch.tensor infers."""
    x = torch.tensor([[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]])
    out = []
    out.append(np.float32(2.0) * x)
    out.append(np.float64(0.5) + x)
    out.append(x * np.array([1.0, 2.0, 3.0], dtype=np.float32))
    out.append((np.float32(2.0) * x).dtype)
    out.append((x + np.float64(1)).dtype)
    out.append((x * np.int64(3)).dtype)
    out.append(math.sqrt(torch.tensor(16.0)))
    out.append(round(torch.tensor(2.6).item()))
    out.append(abs(x))
    out.append(divmod(7, 3))
    out.append(x // 2)
    out.append(x % -3)
    out.append(torch.tensor([-7, 7]) % 3)
    out.append(torch.tensor([-7, 7]) // 2)
    out.append(torch.fmod(torch.tensor([-7.0, 7.0]), 3))
    m = x > 0
    out += [
        ~m,
        m ^ m.flip(0),
        m & ~m,
        (m | True),
        m.sum().dtype,
        m.float().mean(),
        x.bool().all(1),
        x.int().sum(0).dtype,
    ]
    out.append(sum([x[0], x[1]]))
    out.append(max(torch.tensor(2.0), torch.tensor(3.0)))
    out.append(sorted([torch.tensor(3), torch.tensor(1)]))
    out.append(3.0 in x)
    out.append(len(x))
    out.append([r.sum() for r in x])
    out.append(list(zip(*x))[0])
    s = x.shape
    out += [
        list(s + (1,)),
        list(s[1:]),
        torch.Size([2, 3]).numel(),
        s == (2, 3),
        x.size(-1),
        x.dim(),
        x.ndimension(),
        x.nelement(),
        x.element_size(),
        x.is_contiguous(),
        x.t().stride(),
        x[:, 1:].storage_offset(),
    ]
    out.append(x.type())
    out.append(x.long().type())
    out.append(x.type(torch.DoubleTensor).dtype)
    out.append(x.type("torch.IntTensor").dtype)
    out.append(torch.FloatTensor([1, 2]).dtype)
    out.append(torch.LongTensor([1, 2]).dtype)
    out.append(torch.FloatTensor(2, 3).shape)
    out.append(torch.BoolTensor([True]).dtype)
    out.append(isinstance(x, torch.FloatTensor))
    out.append(isinstance(x.long(), torch.FloatTensor))
    out.append(x.new_zeros(2).dtype)
    out.append(x.new_ones((1, 2)))
    out.append(x.new_empty(3).shape)
    v = torch.autograd.Variable(torch.ones(2), requires_grad=True)
    (v * 2).sum().backward()
    out.append(v.grad)
    out.append(x.data[0])
    out.append(x.numpy().sum())
    out.append(float(x.sum()))
    out.append(f"{x.sum():.2f}")
    out.append(f"{torch.tensor(3.14159).item():.3f}")
    out.append(torch.tensor(5) * 2.5)
    out.append((torch.tensor(5) / 2).dtype)
    out.append(torch.tensor([5]) ** 2)
    out.append(2 ** torch.tensor([1, 3]))
    out.append(torch.tensor(2.0) ** torch.tensor([2, 3]))
    out.append(-torch.tensor([True, False]).int())
    out.append(torch.tensor([1, 2]) << 2)
    out.append(torch.tensor([8, 3]) >> 1)
    out.append(torch.tensor([5]) & 3)
    out.append(hash(x) == hash(x))
    out.append({x: 1}[x])
    out.append(torch.tensor(np.array([1, 2], dtype=np.uint8)).dtype)
    out.append(torch.tensor([np.float32(1.5)]).dtype)
    out.append(torch.tensor(np.float64(2.0)).dtype)
    out.append(torch.tensor([1, 2.5]).dtype)
    out.append(torch.tensor([True, 1]).dtype)
    out.append(torch.tensor([[1, 2], [3, 4]], dtype=torch.float16).dtype)
    out.append(torch.tensor([x[0, 0], x[1, 1]]))
    out.append(torch.stack([torch.tensor(1.0), torch.tensor(2.0)]))
    out.append(torch.as_tensor([1, 2], dtype=torch.float32))
    out.append(torch.tensor(range(4)))
    out.append(torch.tensor([]).shape)
    out.append(torch.tensor([[]]).shape)
    out.append(torch.zeros(0, 3).sum(0))
    out.append(torch.empty(2, 0).max(0).values.shape if False else torch.empty(0).sum())
    return out


def numpy_sharing(torch, ctx):
    """Memory shared with NumPy: from_numpy, numpy(), as_tensor and asarray alias their array
    (writes seen both ways), torch.tensor and asarray(copy=True) copy, .data writes, and the
    Python numbers item/tolist/float/int/bool give."""
    arr = np.arange(6, dtype=np.float32)
    t = torch.from_numpy(arr)
    arr[0] = 100
    t[1] = -5
    n = t.numpy()
    n[2] = 42
    v = t.view(2, 3)
    v[1, 1] = 7
    a2 = np.ones((2, 2))
    t2 = torch.as_tensor(a2)
    a2[0, 0] = 9
    t3 = torch.tensor(a2)
    a2[1, 1] = 8
    t4 = torch.asarray(a2)
    a2[0, 1] = 3
    t5 = torch.asarray(a2, copy=True)
    a2[1, 0] = 4
    x = torch.zeros(3)
    xn = x.numpy()
    x += 1
    y = torch.ones(2, requires_grad=True)
    yn = y.detach().numpy()
    y.data.mul_(3)
    nn_arr = np.array(torch.arange(3.0))
    li = torch.tensor([1.5, 2.5]).tolist()
    s = torch.tensor(3).item()
    f = float(torch.tensor([2.5]))
    i = int(torch.tensor(7.9))
    b = bool(torch.tensor([1]))
    idx = torch.tensor(2)
    lst = [10, 20, 30][idx]
    rng = range(10)[torch.tensor(3)]
    return [
        arr.copy(),
        t,
        n.copy(),
        t2,
        t3,
        t4,
        t5,
        xn.copy(),
        yn.copy(),
        nn_arr,
        li,
        s,
        f,
        i,
        b,
        lst,
        rng,
        np.asarray(t).dtype.str,
    ]


PROGRAMS = [
    tsne,
    image_processing,
    poisson_fft,
    special_zoo,
    tensor_reshaping,
    cdist_modes,
    tensor_utilities,
    python_numpy_interop,
    numpy_sharing,
]
TOLERANCES = {}


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program, **TOLERANCES.get(program.__name__, {}))
