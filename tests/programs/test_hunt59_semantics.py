"""Programs of hunt59 on tensor semantics users lean on without noticing, run on PyTorch and
on ember: integer preprocessing (uint8 images brightened with wraparound and saturating by
clamp, a hashing trick with int64 multiply/xor/shift overflow, floor division and remainder
of negative numbers, bit counts by masks), type promotion of int tensors with Python floats
and of mixed dtypes in a feature pipeline, unique/unique_consecutive/bincount/histc/
bucketize bookkeeping of a label set, forward-mode AD with dual numbers, saved-tensor hooks
that pack to float16 and back, and custom Functions with vmap support under torch.func.vmap.
"""

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007, E501, E731, F841, B023, C408, B006, E702, E701, E401, C416, UP031, B905, PIE810, SIM108, RUF005


def integer_preprocessing(torch, ctx):
    """uint8 images: brightness added in uint8 (wraps), in int16 then clamped and cast back
    (saturates), mean in float; a feature-hashing trick over int64 token ids (multiply by a
    large odd constant with overflow, xor with a shift, modulo a bucket count), floor_divide
    and remainder of negative values, torch.div rounding modes, bitwise_and/or/left shift."""
    rng = np.random.default_rng(0)
    img = ctx.t(rng.integers(0, 256, (2, 3, 4, 4)).astype(np.uint8))
    ids = ctx.t(rng.integers(-(2**40), 2**40, 12))
    neg = ctx.t(np.array([-7, -6, -1, 0, 5, 7]))
    return ctx.fn(_integer_steps(torch))(img, ids, neg)


def _integer_steps(torch):
    def f(img, ids, neg):
        return _integer_body(torch, img, ids, neg)

    return f


def _integer_body(torch, img, ids, neg):
    wrapped = img + 100
    sat = (img.to(torch.int16) + 100).clamp(0, 255).to(torch.uint8)
    inv = 255 - img
    half = img // 2
    mean = img.float().mean(dim=(0, 2, 3))
    h = ids * 2654435761
    h = h ^ (h >> 13)
    buckets = torch.remainder(h, 97)
    fd = torch.floor_divide(neg, 3)
    rem = neg % 3
    fm = torch.fmod(neg, 3)
    d_floor = torch.div(neg, 4, rounding_mode="floor")
    d_trunc = torch.div(neg, 4, rounding_mode="trunc")
    d_true = neg / 4
    bits = (ids & 0xFF) | (1 << 3)
    sh = neg[3:].to(torch.int32) << 28
    popcount = sum(((buckets >> k) & 1) for k in range(7))
    return [wrapped, sat, inv, half, mean, h, buckets, fd, rem, fm, d_floor, d_trunc, d_true, bits, sh, popcount, img.sum().dtype, img.sum()]


def promotion_pipeline(torch, ctx):
    """A feature pipeline mixing dtypes: int64 counts divided by an int (true division:
    float32), int tensor times a Python float, bool masks summed (int64), int32 + int64, a
    float16 embedding added to float32 features, a 0-dim float64 tensor with a float32 tensor
    (stays float32), comparisons of int with float, where() of int and float branches,
    torch.result_type and promote_types."""
    rng = np.random.default_rng(1)
    counts = ctx.t(rng.integers(0, 10, (3, 4)))
    i32 = ctx.t(rng.integers(0, 10, 4).astype(np.int32))
    f16 = ctx.t(rng.standard_normal(4).astype(np.float16))
    f32 = ctx.t(rng.standard_normal((3, 4)).astype(np.float32))
    scalar64 = torch.tensor(0.5, dtype=torch.float64)
    return ctx.fn(_promotions(torch))(counts, i32, f16, f32, scalar64)


def _promotions(torch):
    def f(counts, i32, f16, f32, scalar64):
        return _promotion_body(torch, counts, i32, f16, f32, scalar64)

    return f


def _promotion_body(torch, counts, i32, f16, f32, scalar64):
    res = {
        "div": counts / 3,
        "mulf": counts * 1.5,
        "mask_sum": (counts > 4).sum(1),
        "mix_int": i32 + counts,
        "half_plus": f16 + f32,
        "zero_dim": f32 * scalar64,
        "cmp": counts > 4.5,
        "where": torch.where(counts > 5, counts, f32),
        "where_scalar": torch.where(counts > 5, counts, 0.5),
        "pow_int": counts**2,
        "pow_neg": counts.float() ** -1,
        "mean_int_as_float": counts.float().mean(0),
        "cumsum_bool": (counts > 3).cumsum(1),
        "argmax": f32.argmax(),
        "int_mul_bool": counts * (counts > 2),
    }
    types = [torch.result_type(counts, 1.0), torch.result_type(i32, counts), torch.promote_types(torch.int32, torch.float16), torch.result_type(f16, scalar64)]
    return [res, {k: v.dtype for k, v in res.items()}, types]


def label_bookkeeping(torch, ctx):
    """Label statistics: unique sorted with inverse and counts, unique along dim 0 of a pairs
    matrix, unique_consecutive of run-length data, bincount with weights and minlength, histc
    of scores, bucketize into quantile bins (right=True and False), searchsorted on sorted
    thresholds, and class weights from counts."""
    rng = np.random.default_rng(2)
    y = ctx.t(rng.integers(0, 6, 30))
    u, inv, cnt = torch.unique(y, sorted=True, return_inverse=True, return_counts=True)
    pairs = ctx.t(rng.integers(0, 3, (10, 2)))
    up, pinv = torch.unique(pairs, dim=0, return_inverse=True)
    runs = ctx.t(np.array([1, 1, 2, 2, 2, 3, 1, 1, 4]))
    uc, ucnt = torch.unique_consecutive(runs, return_counts=True)
    w = ctx.t(rng.uniform(size=30).astype(np.float32))
    bc = torch.bincount(y, weights=w, minlength=8)
    scores = ctx.t(rng.standard_normal(50).astype(np.float32))
    hist = torch.histc(scores, bins=5, min=-2, max=2)
    qs = torch.quantile(scores, torch.tensor([0.25, 0.5, 0.75]))
    b1 = torch.bucketize(scores[:10], qs)
    b2 = torch.bucketize(scores[:10], qs, right=True)
    ss = torch.searchsorted(qs, scores[:10].contiguous(), side="right")
    cw = len(y) / (len(u) * cnt.float())
    clipped = ctx.fn(lambda s, q: (torch.bucketize(s, q), torch.histc(s, bins=4, min=-1, max=1), torch.bincount(torch.bucketize(s, q), minlength=5)))(scores, qs)
    return [clipped, u, inv, cnt, up, pinv, uc, ucnt, bc, hist, qs, b1, b2, ss, cw]


def forward_ad(torch, ctx):
    """Forward-mode AD with dual numbers: the JVP of an MLP with respect to its input along a
    direction, of a function with two dual inputs, unpack_dual's tangent None for a plain
    tensor, and a directional second derivative by forward-over-reverse (jvp of grad via
    torch.func)."""
    fwAD = torch.autograd.forward_ad
    nn = torch.nn
    net = ctx.init(nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)), "net")
    rng = np.random.default_rng(3)
    x = ctx.t(rng.standard_normal((5, 3)).astype(np.float32))
    v = ctx.t(rng.standard_normal((5, 3)).astype(np.float32))
    with fwAD.dual_level():
        dx = fwAD.make_dual(x, v)
        out = net(dx)
        p, t = fwAD.unpack_dual(out)
        a = fwAD.make_dual(x[:, 0], v[:, 0])
        b = fwAD.make_dual(x[:, 1], v[:, 1])
        y = torch.sin(a) * b.exp() + a / (1 + b**2)
        yp, yt = fwAD.unpack_dual(y)
        plain_t = fwAD.unpack_dual(x).tangent
    f = lambda w: (torch.tanh(x @ w) ** 2).sum()
    w0 = ctx.t(rng.standard_normal(3).astype(np.float32))
    _, hvp = torch.func.jvp(torch.func.grad(f), (w0,), (v[0],))
    return [p, t, yp, yt, plain_t is None, hvp]


def saved_hooks_and_vmap_functions(torch, ctx):
    """saved_tensors_hooks packing every saved activation to float16 and unpacking to float32
    (a memory-saving trick): the gradient differs from the exact one by float16 rounding and
    equals PyTorch's; a custom Function with generate_vmap_rule=True (setup_context style)
    under torch.func.vmap and grad; a Function with its own vmap staticmethod."""
    nn = torch.nn
    net = ctx.init(nn.Sequential(nn.Linear(4, 8), nn.Sigmoid(), nn.Linear(8, 1)), "net")
    rng = np.random.default_rng(4)
    x = ctx.t(rng.standard_normal((6, 4)).astype(np.float32))
    packed = []

    def pack(t):
        packed.append(tuple(t.shape))
        return t.to(torch.float16)

    def unpack(t):
        return t.to(torch.float32)

    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        loss = net(x).pow(2).sum()
    loss.backward()
    g_half = net[0].weight.grad.clone()

    class Cube(torch.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(x):
            return x**3

        @staticmethod
        def setup_context(ctx_, inputs, output):
            (x,) = inputs
            ctx_.save_for_backward(x)

        @staticmethod
        def backward(ctx_, g):
            (x,) = ctx_.saved_tensors
            return 3 * x**2 * g

    class Scale(torch.autograd.Function):
        @staticmethod
        def forward(x, s):
            return x * s

        @staticmethod
        def setup_context(ctx_, inputs, output):
            ctx_.s = inputs[1]

        @staticmethod
        def backward(ctx_, g):
            return g * ctx_.s, None

        @staticmethod
        def vmap(info, in_dims, x, s):
            return x * s, in_dims[0]

    cubes = torch.func.vmap(Cube.apply)(x)
    gcube = torch.func.vmap(torch.func.grad(lambda r: Cube.apply(r).sum()))(x)
    scaled = torch.func.vmap(Scale.apply, in_dims=(0, None))(x, 2.5)
    return [g_half, len(packed) > 0, cubes, gcube, scaled]


PROGRAMS = [integer_preprocessing, promotion_pipeline, label_bookkeeping, forward_ad, saved_hooks_and_vmap_functions]


CAPTURED = [integer_preprocessing, promotion_pipeline, label_bookkeeping]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
