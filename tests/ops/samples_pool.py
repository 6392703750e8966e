"""Conformance samples for ops/pool.py, pool_avg.py and pool_adaptive.py: max, average and
adaptive pooling in 1-3 dimensions (padding, ceil_mode, dilation, ties compared with torch's
first-maximum convention), the pool_scatter / pool_gather pair, and gradients of gradients."""

import numpy as np

import ember
import ember.nn.functional as F
from ember.ops import REGISTRY, apply

from .harness import Sample, rng

r = rng(12)


def T():
    import torch.nn.functional as tf

    return tf


def torch():
    import torch as t

    return t


def distinct(*shape):
    """Values whose gaps are far wider than the finite-difference step (no near-ties)."""
    n = int(np.prod(shape))
    return (r.permutation(n) * 0.1 + r.uniform(-0.02, 0.02, n)).reshape(shape)


def ties(*shape):
    """Small integers: many windows hold several equal maxima."""
    return r.integers(0, 3, shape).astype(np.float64)


def pool(fn_name, name, x, tie=False, **kw):
    return Sample(
        f"{fn_name}/{name}",
        lambda a: getattr(F, fn_name)(a, **kw),
        (x,),
        torch_fn=lambda a: getattr(T(), fn_name)(a, **kw),
        fd=not tie,
    )


def ember_grad_of(fn_name, **kw):
    """x -> d/dx sum(pool(x)^2), differentiable again (runs the adjoint's VJP)."""

    def f(x):
        with ember.enable_grad():
            leaf = x if x.requires_grad else x.detach().requires_grad_()
            y = getattr(F, fn_name)(leaf, **kw)
            return ember.autograd.grad((y * y).sum(), [leaf], create_graph=True)[0]

    return f


def torch_grad_of(fn_name, **kw):
    def f(x):
        y = getattr(T(), fn_name)(x, **kw)
        return torch().autograd.grad((y * y).sum(), x, create_graph=True)[0]

    return f


def grad_of(fn_name, x, **kw):
    return Sample(
        f"{fn_name}/grad-of-grad",
        ember_grad_of(fn_name, **kw),
        (x,),
        torch_fn=torch_grad_of(fn_name, **kw),
        float32=False,
    )


# flat indices into 2 x 3 planes of size 4 x 5, with repeats (so scatter really adds)
IDX = r.integers(0, 20, (2, 3, 3, 3))


def torch_scatter(g, idx):
    n, c = g.shape[:2]
    zeros = torch().zeros(n, c, 20, dtype=g.dtype)
    return zeros.scatter_add(2, idx.reshape(n, c, -1), g.reshape(n, c, -1)).reshape(n, c, 4, 5)


def torch_gather(x, idx):
    n, c = x.shape[:2]
    return torch().gather(x.reshape(n, c, -1), 2, idx.reshape(n, c, -1)).reshape(idx.shape)


# window codes (ops/pool_codes.py): 2x3 windows at stride (2, 1) over 4x5 planes, 2x3 outputs
WINDOW = ((2, 3), (2, 1), (0, 0), (1, 1))
CODES = r.integers(0, 6, (2, 3, 2, 3)).astype(np.uint8)


def flat_of_codes(codes):
    """The plane positions of ``codes`` of `WINDOW`, worked out here (not by ember): window
    row a, column b of output (i, j) is at (2i + a, j + b)."""
    a, b = np.divmod(np.asarray(codes, np.int64), 3)
    i = np.arange(2)[:, None]
    j = np.arange(3)[None, :]
    return (2 * i + a) * 5 + (j + b)


def torch_scatter_codes(g, codes):
    return torch_scatter(g, torch().from_numpy(flat_of_codes(codes.numpy())))


def torch_gather_codes(x, codes):
    return torch_gather(x, torch().from_numpy(flat_of_codes(codes.numpy())))


SAMPLES = [
    pool("max_pool2d", "k2", distinct(1, 2, 4, 6), kernel_size=2),
    pool(
        "max_pool2d",
        "k3-s2-p1-ceil-indices",
        distinct(1, 2, 6, 5),
        kernel_size=3,
        stride=2,
        padding=1,
        ceil_mode=True,
        return_indices=True,
    ),
    pool(
        "max_pool2d", "dilated-padded", distinct(1, 2, 7, 6), kernel_size=3, padding=1, dilation=2
    ),
    pool("max_pool2d", "rect-stride", distinct(2, 1, 5, 7), kernel_size=(2, 3), stride=(1, 2)),
    pool("max_pool2d", "ties", ties(2, 2, 4, 6), tie=True, kernel_size=2, return_indices=True),
    pool("max_pool2d", "ties-overlapping", ties(1, 2, 5, 5), tie=True, kernel_size=3, stride=1),
    pool("max_pool2d", "unbatched", distinct(2, 4, 4), kernel_size=2, return_indices=True),
    pool(
        "max_pool1d",
        "k3-s2-p1-ceil",
        distinct(2, 2, 9),
        kernel_size=3,
        stride=2,
        padding=1,
        ceil_mode=True,
        return_indices=True,
    ),
    pool("max_pool1d", "ties-padded", ties(2, 2, 9), tie=True, kernel_size=3, padding=1),
    pool("max_pool3d", "k2-p1", distinct(1, 2, 3, 4, 3), kernel_size=2, padding=1),
    pool("avg_pool2d", "k2", distinct(1, 2, 4, 6), kernel_size=2),
    pool(
        "avg_pool2d",
        "k3-s2-p1-ceil-exclude-pad",
        distinct(1, 2, 6, 5),
        kernel_size=3,
        stride=2,
        padding=1,
        ceil_mode=True,
        count_include_pad=False,
    ),
    pool(
        "avg_pool2d",
        "ceil-include-pad",
        distinct(1, 2, 6, 6),
        kernel_size=3,
        stride=2,
        padding=1,
        ceil_mode=True,
    ),
    pool(
        "avg_pool2d",
        "divisor-override",
        distinct(1, 2, 5, 4),
        kernel_size=(3, 2),
        stride=(2, 1),
        padding=(1, 0),
        divisor_override=4,
    ),
    pool(
        "avg_pool1d",
        "p1-ceil",
        distinct(2, 2, 8),
        kernel_size=3,
        stride=2,
        padding=1,
        ceil_mode=True,
    ),
    pool("avg_pool3d", "k2", distinct(1, 2, 4, 4, 3), kernel_size=2, padding=1),
    pool("adaptive_avg_pool2d", "uneven", distinct(1, 2, 5, 7), output_size=(3, 4)),
    pool("adaptive_avg_pool2d", "even-and-none", distinct(1, 2, 6, 4), output_size=(3, None)),
    pool("adaptive_avg_pool2d", "global", distinct(2, 3, 3, 4), output_size=1),
    pool("adaptive_avg_pool1d", "uneven", distinct(2, 2, 7), output_size=3),
    pool(
        "adaptive_max_pool2d",
        "uneven",
        distinct(1, 2, 5, 7),
        output_size=(3, 4),
        return_indices=True,
    ),
    pool("adaptive_max_pool2d", "ties", ties(1, 2, 5, 7), tie=True, output_size=(2, 3)),
    pool("adaptive_max_pool1d", "uneven", distinct(2, 2, 7), output_size=3, return_indices=True),
    grad_of("max_pool2d", distinct(1, 2, 4, 4), kernel_size=3, stride=1, padding=1),
    grad_of("avg_pool2d", distinct(1, 2, 4, 5), kernel_size=3, stride=2, padding=1, ceil_mode=True),
    grad_of("adaptive_max_pool2d", distinct(1, 2, 5, 5), output_size=(2, 3)),
    Sample(
        "pool_scatter/repeated-indices",
        lambda g, idx: apply(REGISTRY["pool_scatter"], g, idx, in_size=(4, 5)),
        (r.standard_normal((2, 3, 3, 3)), IDX),
        torch_fn=torch_scatter,
    ),
    Sample(
        "pool_gather",
        lambda x, idx: apply(REGISTRY["pool_gather"], x, idx),
        (r.standard_normal((2, 3, 4, 5)), IDX),
        torch_fn=torch_gather,
    ),
    Sample(
        "pool_scatter/window-codes",
        lambda g, codes: apply(REGISTRY["pool_scatter"], g, codes, in_size=(4, 5), window=WINDOW),
        (r.standard_normal((2, 3, 2, 3)), CODES),
        torch_fn=torch_scatter_codes,
    ),
    Sample(
        "pool_gather/window-codes",
        lambda x, codes: apply(REGISTRY["pool_gather"], x, codes, window=WINDOW),
        (r.standard_normal((2, 3, 4, 5)), CODES),
        torch_fn=torch_gather_codes,
    ),
]
