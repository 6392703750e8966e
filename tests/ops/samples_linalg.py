"""Conformance samples for ops/linalg.py, ops/products.py and ops/einsum.py: matmul's 1-D and
batched broadcasting cases and layouts, mm/bmm/mv/dot/outer, F.linear, addmm, F.bilinear and
einsum forms."""

import numpy as np

import ember

from .harness import Sample, rng

r = rng(11)


def torch():
    import torch as t

    return t


def F():
    import torch.nn.functional as f

    return f


def _n(*shape):
    return r.standard_normal(shape)


def _double(f):
    """(a, b) -> df/da, differentiable again."""

    def run(a, b):
        with ember.enable_grad():
            leaf = a if a.requires_grad else a.detach().requires_grad_()
            return ember.autograd.grad(f(leaf, b), leaf, create_graph=True)[0]

    return run


def _torch_double(f):
    def run(a, b):
        leaf = a if a.requires_grad else a.detach().requires_grad_()
        return torch().autograd.grad(f(leaf, b), leaf, create_graph=True)[0]

    return run


SAMPLES: list[Sample] = []

_MATMUL_SHAPES = [
    ((3, 4), (4, 2)),  # matrix x matrix
    ((4,), (4,)),  # dot product, 0-d result
    ((4,), (4, 3)),  # 1-D left: a row, removed again
    ((3, 4), (4,)),  # 1-D right: a column, removed again
    ((4,), (2, 4, 3)),  # 1-D left against a batch
    ((2, 3, 4), (4,)),  # batch against 1-D right
    ((2, 3, 4), (4, 2)),  # batch x matrix (folded into one GEMM)
    ((3, 4), (2, 4, 2)),  # matrix x batch
    ((2, 1, 3, 4), (3, 4, 2)),  # batch dimensions broadcast both ways
    ((1, 3, 4), (2, 4, 2)),  # a size-1 batch dimension broadcast
]
for sa, sb in _MATMUL_SHAPES:
    SAMPLES.append(
        Sample(
            f"matmul/{sa}x{sb}", lambda a, b: a @ b, (_n(*sa), _n(*sb)), torch_fn=lambda a, b: a @ b
        )
    )

SAMPLES += [
    Sample(
        "matmul/transposed-views",
        lambda a, b: (a.T @ b, ember.matmul(a.T, b.T.T), (b.T @ a) @ a.T),
        (_n(4, 3), _n(4, 2)),
        torch_fn=lambda a, b: (a.T @ b, torch().matmul(a.T, b.T.T), (b.T @ a) @ a.T),
    ),
    Sample(
        "matmul/strided-slices",  # column-strided layouts that BLAS cannot read directly
        lambda a, b: a[:, ::2] @ b[::2, 1:],
        (_n(3, 8), _n(8, 3)),
        torch_fn=lambda a, b: a[:, ::2] @ b[::2, 1:],
    ),
    Sample(
        "matmul/rmatmul-numpy",
        lambda a: np.ones((2, 3)) @ a,
        (_n(3, 2),),
        torch_fn=lambda a: torch().ones(2, 3, dtype=a.dtype) @ a,
        float32=False,  # a NumPy float64 operand promotes, as in NumPy
    ),
    Sample(
        "matmul/int",
        lambda a, b: a @ b,
        (np.arange(6).reshape(2, 3), np.arange(12).reshape(3, 4) - 5),
        torch_fn=lambda a, b: a @ b,
        grad=False,
    ),
    Sample(
        # the gradient wrt a, differentiated again (wrt a and b): matmul's VJP of its VJP
        "matmul/double-backward",
        _double(lambda a, b: ((a @ b) ** 2).sum()),
        (_n(3, 4), _n(2, 4, 2)),
        torch_fn=_torch_double(lambda a, b: ((a @ b) ** 2).sum()),
    ),
    Sample("mm", lambda a, b: ember.mm(a, b), (_n(2, 3), _n(3, 4)), torch_fn=lambda a, b: a.mm(b)),
    Sample(
        "bmm",
        lambda a, b: a.bmm(b),
        (_n(2, 2, 3), _n(2, 3, 4)),
        torch_fn=lambda a, b: torch().bmm(a, b),
    ),
    Sample("mv", lambda a, v: ember.mv(a, v), (_n(2, 3), _n(3)), torch_fn=lambda a, v: a.mv(v)),
    Sample("dot", lambda a, b: ember.dot(a, b), (_n(5), _n(5)), torch_fn=lambda a, b: a.dot(b)),
    Sample(
        "outer", lambda a, b: ember.outer(a, b), (_n(3), _n(4)), torch_fn=lambda a, b: a.outer(b)
    ),
    Sample(
        "linear",
        lambda x, w, b: ember.nn.functional.linear(x, w, b),
        (_n(2, 3, 4), _n(5, 4), _n(5)),
        torch_fn=lambda x, w, b: F().linear(x, w, b),
    ),
    Sample(
        "linear/no-bias",
        lambda x, w: ember.nn.functional.linear(x, w),
        (_n(3, 4), _n(2, 4)),
        torch_fn=lambda x, w: F().linear(x, w),
    ),
    Sample(
        "linear/1d-input-scalar-bias",
        lambda x, w, b: ember.nn.functional.linear(x, w, b),
        (_n(4), _n(3, 4), _n(1)),
        torch_fn=lambda x, w, b: F().linear(x, w, b),
    ),
    Sample(
        "linear/1d-weight",
        lambda x, w: ember.nn.functional.linear(x, w, 0.5),
        (_n(3, 4), _n(4)),
        torch_fn=lambda x, w: F().linear(x, w) + 0.5,
    ),
    Sample(
        "bilinear",
        lambda a, b, w, bias: ember.nn.functional.bilinear(a, b, w, bias),
        (_n(3, 2), _n(3, 4), _n(2, 2, 4), _n(2)),
        torch_fn=lambda a, b, w, bias: F().bilinear(a, b, w, bias),
    ),
]

# addmm: each broadcast of input, scaled both ways, and beta=0 ignoring a NaN input
_ADDMM = [
    ((3, 2), {}),
    ((2,), {"beta": 0.5, "alpha": 2.0}),
    ((3, 1), {"beta": -1.5}),
    ((), {"alpha": 0.25}),
    ((1, 2), {"beta": 2.0, "alpha": -1.0}),
]
for shape, kw in _ADDMM:
    SAMPLES.append(
        Sample(
            f"addmm/{shape}{''.join(f',{k}={v}' for k, v in kw.items())}",
            lambda i, a, b, kw=kw: ember.addmm(i, a, b, **kw),
            (_n(*shape), _n(3, 4), _n(4, 2)),
            torch_fn=lambda i, a, b, kw=kw: torch().addmm(i, a, b, **kw),
        )
    )
SAMPLES += [
    Sample(
        "addmm/beta0-ignores-nan",
        lambda i, a, b: ember.addmm(i, a, b, beta=0),
        (np.full((3, 2), np.nan), _n(3, 4), _n(4, 2)),
        torch_fn=lambda i, a, b: torch().addmm(i, a, b, beta=0),
        nondiff=(0,),
    ),
    Sample(
        "addmm/method",
        lambda i, a, b: i.addmm(a, b, alpha=3.0),
        (_n(2), _n(3, 4), _n(4, 2)),
        torch_fn=lambda i, a, b: i.addmm(a, b, alpha=3.0),
    ),
]


_EINSUM = [
    ("ij,jk->ik", (2, 3), (3, 4)),
    ("bij,bjk->bik", (2, 2, 3), (2, 3, 2)),
    ("ii->i", (3, 3)),
    ("ii", (3, 3)),  # trace (implicit output)
    ("ij->", (2, 3)),
    ("ij->ji", (2, 3)),
    ("i,j->ij", (3,), (4,)),
    ("...ij,...jk->...ik", (2, 2, 3), (3, 2)),
    ("bhqd,bhkd->bhqk", (2, 2, 3, 2), (2, 2, 4, 2)),
    ("ij,jk", (2, 3), (3, 2)),  # implicit output, alphabetical
    ("iij,jk->ik", (3, 3, 2), (2, 2)),  # a diagonal inside a contraction
    ("ij,ij->ij", (3, 1), (3, 4)),  # a size-1 label broadcasts
    ("ijk,jl,kl->il", (2, 3, 2), (3, 2), (2, 2)),  # three operands
    ("ij,kl->", (2, 2), (3, 2)),  # every label summed; labels only one operand has
    ("... i, ... i -> ...", (2, 1, 3), (4, 3)),  # spaces; ellipsis broadcasting
]
for eq, *shapes in _EINSUM:
    SAMPLES.append(
        Sample(
            f"einsum/{eq.replace(' ', '')}",
            lambda *ops, eq=eq: ember.einsum(eq, *ops),
            tuple(_n(*s) for s in shapes),
            torch_fn=lambda *ops, eq=eq: torch().einsum(eq, *ops),
        )
    )
SAMPLES.append(
    Sample(
        "einsum/list-operands",
        lambda a, b: ember.einsum("ij,j", [a, b]),
        (_n(2, 3), _n(3)),
        torch_fn=lambda a, b: torch().einsum("ij,j", [a, b]),
    )
)
