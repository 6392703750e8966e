"""Programs of hunt60 on numerics scripts lean on: an STFT/ISTFT round trip with a Griffin-Lim
phase estimate, an FFT low-pass filter with fftshift and ortho norms trained through, a
complex-valued layer with complex Parameters, an einsum zoo with gradients, index_reduce_ and
scatter_reduce("mean") node aggregation with index_put_(accumulate=True), integer-dtype
bookkeeping (uint8 sums, int8 shifts, bool arithmetic, integer clamp), cumulative ops'
gradients (cummax, logcumsumexp, cumprod through a zero, diff with prepend, trapezoid,
searchsorted with sorter), and least squares/pinv/matrix norms.
"""

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007, E501, E731, F841, B023, C408, B006, E702, E701, E401, C416, UP031, B905, PIE810, SIM108, RUF005


def _x(ctx, shape, seed=0, grad=False, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return ctx.t(rng.standard_normal(shape).astype(dtype), requires_grad=grad)


def stft_griffin_lim(torch, ctx):
    """torch.stft with a Hann window (center, reflect padding, return_complex), the magnitude
    spectrogram, istft of the full spectrum back to the signal (length given), and two
    Griffin-Lim iterations from zero phase through torch.polar and .angle(); the gradient of a
    spectral-convergence loss with respect to the signal."""
    rng = np.random.default_rng(0)
    t = np.arange(400) / 100.0
    sig = (np.sin(2 * np.pi * 7 * t) + 0.3 * rng.standard_normal(400)).astype(np.float32)
    x = ctx.t(sig, requires_grad=True)
    win = torch.hann_window(64)
    spec = torch.stft(x, n_fft=64, hop_length=16, win_length=64, window=win, center=True, pad_mode="reflect", return_complex=True)
    mag = spec.abs()
    back = torch.istft(spec, n_fft=64, hop_length=16, window=win, length=400)
    angles = torch.zeros_like(mag)
    est = None
    for _ in range(2):
        est = torch.istft(torch.polar(mag.detach(), angles), n_fft=64, hop_length=16, window=win, length=400)
        angles = torch.stft(est, 64, 16, window=win, return_complex=True).angle()
    target = mag.detach() * 0.9
    sc = torch.linalg.norm(target - mag) / torch.linalg.norm(target)
    sc.backward()
    return [mag, back, est, sc, x.grad, spec.shape[-1], spec.dtype]


def fft_lowpass(torch, ctx):
    """An image low-pass filter with a learnable radial gain: fft2 (norm="ortho"), fftshift,
    a Gaussian mask built from a meshgrid, ifftshift, ifft2 then .real; rfft2/irfft2 with s=
    on an odd width; the gain's gradient."""
    img = _x(ctx, (2, 1, 9, 10), 1)
    sigma = ctx.t(np.array(2.5, np.float32), requires_grad=True)
    H, W = 9, 10
    yy, xx = torch.meshgrid(torch.arange(H) - H // 2, torch.arange(W) - W // 2, indexing="ij")
    r2 = (yy**2 + xx**2).float()

    def forward(img, sigma, r2):
        mask = torch.exp(-r2 / (2 * sigma**2))
        F = torch.fft.fftshift(torch.fft.fft2(img, norm="ortho"), dim=(-2, -1))
        out = torch.fft.ifft2(torch.fft.ifftshift(F * mask, dim=(-2, -1)), norm="ortho").real
        r = torch.fft.irfft2(torch.fft.rfft2(img[..., :9], norm="forward"), s=(9, 9), norm="forward")
        return out, r, (out - img).pow(2).mean() + r.abs().mean()

    out, r, loss = ctx.fn(forward)(img, sigma, r2)
    loss.backward()
    freqs = torch.fft.rfftfreq(10, d=0.5)
    return [out, r, loss, sigma.grad, freqs, torch.fft.fftfreq(5)]


def complex_layer(torch, ctx):
    """A complex-valued linear layer with complex64 Parameters (weight initialised from two
    real tensors via torch.complex), a modReLU activation, view_as_real for the loss, and SGD on
    the complex parameters (their gradients are conjugate Wirtinger derivatives, as PyTorch)."""
    nn = torch.nn

    class CLinear(nn.Module):
        def __init__(self, i, o):
            super().__init__()
            g = torch.Generator().manual_seed(0)
            self.weight = nn.Parameter(torch.complex(torch.randn(o, i, generator=g), torch.randn(o, i, generator=g)) * 0.3)
            self.bias = nn.Parameter(torch.zeros(o, dtype=torch.complex64))

        def forward(self, z):
            return z @ self.weight.T + self.bias

    class ModReLU(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.b = nn.Parameter(torch.full((n,), -0.1))

        def forward(self, z):
            m = z.abs()
            return torch.relu(m + self.b) * z / (m + 1e-6)

    net = nn.Sequential(CLinear(4, 5), ModReLU(5), CLinear(5, 2))
    net = ctx.init(net)
    re, im = _x(ctx, (6, 4), 2), _x(ctx, (6, 4), 3)
    z = torch.complex(re, im)
    target = _x(ctx, (6, 2, 2), 4)
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        out = net(z)
        loss = (torch.view_as_real(out) - target).pow(2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return [losses, net[0].weight, net[0].weight.grad, net[1].b.grad, out.angle(), torch.view_as_complex(target).conj().imag * 1.0]


def einsum_zoo(torch, ctx):
    """einsum as papers write it: multi-head scores 'bhid,bhjd->bhij', a trace 'ii->', a
    diagonal 'ii->i', an elementwise-sum 'ij,ij->', a batched outer product 'bi,bj->bij', a
    bilinear form 'bn,anm,bm->ba', a tensor contraction with ellipsis '...ij,...jk->...ik', and
    a repeated-operand 'i,i,i->'; gradients of all operands."""
    q, k = _x(ctx, (2, 2, 3, 4), 5, True), _x(ctx, (2, 2, 5, 4), 6, True)
    A = _x(ctx, (4, 4), 7, True)
    u, v = _x(ctx, (3, 4), 8, True), _x(ctx, (3, 5), 9, True)
    W = _x(ctx, (2, 4, 5), 10, True)
    s = _x(ctx, (6,), 11, True)
    E = torch.einsum

    def forward(q, k, A, u, v, W, s):
        scores = E("bhid,bhjd->bhij", q, k) / 2.0
        tr = E("ii->", A)
        dg = E("ii->i", A)
        ew = E("ij,ij->", u, u)
        outer = E("bi,bj->bij", u, v)
        bil = E("bn,anm,bm->ba", u, W, v)
        chain = E("...ij,...jk->...ik", q, k.transpose(-1, -2))
        cube = E("i,i,i->", s, s, s)
        total = scores.softmax(-1).pow(2).sum() + tr + dg.sum() + ew + outer.tanh().sum() + bil.sum() + chain.mean() + cube
        return total, scores, tr, dg, ew, bil, cube

    total, scores, tr, dg, ew, bil, cube = ctx.fn(forward)(q, k, A, u, v, W, s)
    total.backward()
    return [scores, tr, dg, ew, bil, cube, q.grad, k.grad, A.grad, u.grad, v.grad, W.grad, s.grad]


def index_reduce_aggregation(torch, ctx):
    """Node aggregation as GNN code writes it: index_reduce_ with 'mean', 'amax' and 'prod'
    (include_self False and True), scatter_reduce('mean'), index_put_ with accumulate=True
    and duplicate indices, masked_scatter and index_copy_; the gradients of the message values
    through index_reduce 'amax' and 'mean'."""
    rng = np.random.default_rng(12)
    idx = ctx.t(np.array([0, 2, 2, 1, 0, 2, 4]))
    msg = _x(ctx, (7, 3), 13, True)
    base = ctx.t(np.ones((5, 3), np.float32))
    mean = base.clone().index_reduce_(0, idx, msg, "mean", include_self=False)
    amax = base.clone().index_reduce_(0, idx, msg, "amax", include_self=True)
    prod = base.clone().index_reduce_(0, idx, msg, "prod", include_self=False)
    smean = torch.zeros(5, 3).scatter_reduce(0, idx[:, None].expand(-1, 3), msg, reduce="mean", include_self=False)
    (mean.sum() + (amax * 2).sum() + smean.pow(2).sum()).backward()
    acc = torch.zeros(4).index_put_((ctx.t(np.array([1, 1, 3, 1])),), ctx.t(np.array([1.0, 2.0, 3.0, 4.0], np.float32)), accumulate=True)
    m = ctx.t(np.array([[True, False, True], [False, True, True]]))
    ms = torch.zeros(2, 3).masked_scatter(m, ctx.t(np.arange(6, dtype=np.float32)))
    ic = torch.zeros(4, 2).index_copy_(0, ctx.t(np.array([3, 0])), ctx.t(np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)))
    return [mean, amax, prod, smean, msg.grad, acc, ms, ic]


def integer_bookkeeping(torch, ctx):
    """uint8 images summed (int64), an int8 shift that overflows, bool sums and bool + int,
    integer clamp with tensor bounds, argmax of ties (first), torch.iinfo bounds, int32 //
    int32 with negatives, abs of int8 -128, and a uint8 histogram by bincount."""
    rng = np.random.default_rng(14)
    img = ctx.t(rng.integers(0, 256, (2, 4, 4)).astype(np.uint8))
    i8 = ctx.t(np.array([1, 64, -1, 127, -128], np.int8))
    b = ctx.t(np.array([True, False, True, True]))
    i32 = ctx.t(np.array([-7, 7, -8, 9], np.int32))
    ties = ctx.t(np.array([[1, 3, 3, 2], [5, 5, 5, 0]]))
    res = [img.sum(), img.sum().dtype, img.sum(dim=0).dtype, img.float().mean(), img.max(), (img > 128).sum(), (i8 << 1), i8.abs(), b.sum(), b + 1, (b * 2.5).dtype, b.float().mean()]
    res += [i32 // ctx.t(np.array([2, -2, 3, 4], np.int32)), torch.clamp(i32, min=ctx.t(np.array([-5, 0, -9, 0], np.int32)), max=ctx.t(np.array([0, 5, 0, 8], np.int32)))]
    res += [ties.argmax(1), ties.argmin(1), torch.iinfo(torch.int16).max, torch.iinfo(torch.uint8).min, torch.bincount(img.flatten() // 64, minlength=4)]
    res += [img.to(torch.int16) - 200, (img // 16).to(torch.uint8).dtype, torch.bitwise_not(i8), i32.float().div(3).round().to(torch.int32)]
    return res


def cumulative_grads(torch, ctx):
    """Gradients of running statistics: cummax/cummin values, logcumsumexp, cumprod through
    an exact zero, cumsum in reverse via flip; diff with prepend/append; trapezoid with x
    spacing; searchsorted with a sorter and right=True; bucketize."""
    x = ctx.t(np.array([0.5, -1.0, 2.0, 0.0, 1.5, 3.0, -0.5], np.float32), requires_grad=True)
    xs = ctx.t(np.array([0.0, 0.5, 1.5, 2.0, 3.0, 3.5, 5.0], np.float32))

    def forward(x, xs):
        cmax, imax = torch.cummax(x, 0)
        cmin, imin = torch.cummin(x, 0)
        lcse = torch.logcumsumexp(x, 0)
        cprod = torch.cumprod(x, 0)
        rev = torch.flip(torch.cumsum(torch.flip(x, [0]), 0), [0])
        d = torch.diff(x, prepend=x[:1] * 0, append=x[-1:] * 2)
        area = torch.trapezoid(x * x, xs)
        loss = cmax.sum() + cmin.sum() + lcse.sum() + cprod.sum() + (rev * rev).sum() + d.abs().sum() + area
        return loss, cmax, imax, cmin, imin, lcse, cprod, rev, d, area

    loss, cmax, imax, cmin, imin, lcse, cprod, rev, d, area = ctx.fn(forward)(x, xs)
    loss.backward()
    unsorted = ctx.t(np.array([3.0, 1.0, 2.0, 5.0], np.float32))
    sorter = torch.argsort(unsorted)
    q = ctx.t(np.array([2.0, 0.5, 5.0, 4.0], np.float32))
    ss = torch.searchsorted(unsorted, q, sorter=sorter, right=True)
    bk = torch.bucketize(q, ctx.t(np.array([1.0, 2.0, 4.0], np.float32)), right=False)
    return [cmax, imax, cmin, imin, lcse, cprod, rev, d, area, x.grad, ss, bk]


def least_squares_misc(torch, ctx):
    """Least squares by linalg.lstsq (driver 'gelsd' on CPU) compared with pinv; matrix
    norms ('fro', 'nuc', 2, -2, inf), svdvals and cond, matrix_rank with a tolerance,
    linalg.vector_norm with ord 3; gradients of the solution and the nuclear norm."""
    A = _x(ctx, (6, 3), 15, True, np.float64)
    b = _x(ctx, (6, 2), 16, False, np.float64)
    sol = torch.linalg.lstsq(A, b).solution
    sol2 = torch.linalg.pinv(A) @ b
    norms = [torch.linalg.matrix_norm(A, ord=o) for o in ("fro", "nuc", 2, -2, float("inf"))]
    sv = torch.linalg.svdvals(A)
    cond = torch.linalg.cond(A)
    low = A @ torch.diag(ctx.t(np.array([1.0, 1.0, 1e-9]))) @ ctx.t(np.eye(3))
    rank = torch.linalg.matrix_rank(low.detach(), atol=1e-6)
    vn = torch.linalg.vector_norm(A, ord=3, dim=0)
    (sol.sum() + norms[1] + vn.sum()).backward()
    return [sol, sol2, norms, sv, cond, rank, vn, A.grad]


PROGRAMS = [stft_griffin_lim, fft_lowpass, complex_layer, einsum_zoo, index_reduce_aggregation, integer_bookkeeping, cumulative_grads, least_squares_misc]
CAPTURED = [fft_lowpass, einsum_zoo, cumulative_grads]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program, rtol=1e-4, atol=1e-5)



@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True, rtol=1e-4, atol=1e-5)
