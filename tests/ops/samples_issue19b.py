"""Conformance samples for ops/sorting.py, ops/cumulative.py, ops/norms.py,
ops/scatter_reduce.py and ops/sampling.py: sort, argsort, topk, kthvalue, unique, cumprod, the
norms and singular values, scatter_reduce, index_fill, index_copy and multinomial.
test_conformance.py also captures each (trace, script, graph gradients) and compares with eager."""

import numpy as np

import ember

from .harness import Sample, rng

r = rng(191)
A = r.standard_normal((3, 5))  # distinct values: no ties, so finite differences hold
B = r.standard_normal((2, 3, 4))
ZEROS = np.array([[2.0, 0.0, 3.0, 0.0, 5.0], [1.5, 2.0, 0.0, 4.0, 0.5], [0.0, 1.0, 1.0, 2.0, 3.0]])
SQ = r.standard_normal((2, 3, 3))
IDX = np.array([[0, 1, 2, 0, 1], [2, 2, 0, 1, 1], [0, 0, 0, 0, 2]])
SRC = r.standard_normal((3, 5))


def torch():
    import torch as t

    return t


def _sorted(fn):
    return lambda x: tuple(fn(x))


SAMPLES = [
    Sample(
        "argsort/dim1",
        lambda x: ember.argsort(x, 1),
        (A,),
        torch_fn=lambda x: x.argsort(1),
        grad=False,
    ),
    Sample(
        "argsort/descending-stable",
        lambda x: ember.argsort(x, 0, True, stable=True),
        (np.round(A),),
        torch_fn=lambda x: torch().argsort(x, dim=0, descending=True, stable=True),
        grad=False,
    ),
    Sample(
        "sort/dim1",
        _sorted(lambda x: ember.sort(x, 1)),
        (A,),
        torch_fn=lambda x: tuple(torch().sort(x, 1)),
    ),
    Sample(
        "sort/descending-3d",
        _sorted(lambda x: x.sort(-1, descending=True)),
        (B,),
        torch_fn=lambda x: tuple(x.sort(-1, descending=True)),
    ),
    Sample(
        "topk/k2",
        _sorted(lambda x: ember.topk(x, 2)),
        (A,),
        torch_fn=lambda x: tuple(torch().topk(x, 2)),
    ),
    Sample(
        "topk/smallest-dim0",
        _sorted(lambda x: x.topk(2, 0, largest=False)),
        (A,),
        torch_fn=lambda x: tuple(x.topk(2, 0, largest=False)),
    ),
    Sample(
        "topk/long-rows-select-first",
        _sorted(lambda x: ember.topk(x, 5, 1)),
        (r.standard_normal((2, 700)),),
        torch_fn=lambda x: tuple(torch().topk(x, 5, 1)),
        grad=False,
    ),
    Sample(
        "kthvalue/dim1",
        _sorted(lambda x: ember.kthvalue(x, 2, 1)),
        (A,),
        torch_fn=lambda x: tuple(torch().kthvalue(x, 2, 1)),
    ),
    Sample(
        "kthvalue/ties-keepdim",
        _sorted(lambda x: x.kthvalue(3, 1, keepdim=True)),
        (np.round(B),),
        torch_fn=lambda x: tuple(x.kthvalue(3, 1, keepdim=True)),
        grad=False,
    ),
    Sample(
        "unique/flat",
        lambda x: ember.unique(x, return_inverse=True, return_counts=True),
        (np.round(A),),
        torch_fn=lambda x: torch().unique(x, return_inverse=True, return_counts=True),
        grad=False,
    ),
    Sample(
        "unique/dim0",
        lambda x: ember.unique(x, dim=0, return_inverse=True),
        (np.array([[1.0, 2.0], [0.0, 5.0], [1.0, 2.0]]),),
        torch_fn=lambda x: torch().unique(x, dim=0, return_inverse=True),
        grad=False,
    ),
    Sample("cumprod/dim1", lambda x: ember.cumprod(x, 1), (A,), torch_fn=lambda x: x.cumprod(1)),
    Sample(
        "cumprod/zeros",
        lambda x: x.cumprod(1),
        (ZEROS,),
        torch_fn=lambda x: x.cumprod(1),
    ),
    Sample(
        "cumprod/zeros-dim0",
        lambda x: ember.cumprod(x, 0),
        (ZEROS,),
        torch_fn=lambda x: x.cumprod(0),
    ),
    Sample(
        "vector_norm/2",
        lambda x: ember.linalg.vector_norm(x, 2, 1),
        (A,),
        torch_fn=lambda x: torch().linalg.vector_norm(x, 2, 1),
    ),
    Sample(
        "vector_norm/3-keepdim",
        lambda x: ember.linalg.vector_norm(x, 3, (0, 2), keepdim=True),
        (B,),
        torch_fn=lambda x: torch().linalg.vector_norm(x, 3, (0, 2), keepdim=True),
    ),
    Sample(
        "vector_norm/inf",
        lambda x: ember.linalg.vector_norm(x, float("inf"), -1),
        (A,),
        torch_fn=lambda x: torch().linalg.vector_norm(x, float("inf"), -1),
    ),
    Sample(
        "norm/torch-fro",
        lambda x: ember.norm(x),
        (B,),
        torch_fn=lambda x: torch().norm(x),
    ),
    Sample(
        "matrix_norm/nuc",
        lambda x: ember.linalg.matrix_norm(x, "nuc"),
        (SQ,),
        torch_fn=lambda x: torch().linalg.matrix_norm(x, "nuc"),
        float32=False,
    ),
    Sample(
        "matrix_norm/2",
        lambda x: ember.linalg.norm(x, 2, (-2, -1)),
        (SQ,),
        torch_fn=lambda x: torch().linalg.norm(x, 2, (-2, -1)),
        float32=False,
    ),
    Sample(
        "matrix_norm/1",
        lambda x: ember.linalg.matrix_norm(x, 1),
        (SQ,),
        torch_fn=lambda x: torch().linalg.matrix_norm(x, 1),
    ),
    Sample(
        "svdvals/tall",
        lambda x: ember.linalg.svdvals(x),
        (r.standard_normal((4, 3)),),
        torch_fn=lambda x: torch().linalg.svdvals(x),
    ),
]

for _reduce in ("sum", "prod", "mean", "amax", "amin"):
    for _self in (True, False):
        SAMPLES.append(
            Sample(
                f"scatter_reduce/{_reduce}{'' if _self else '-without-self'}",
                lambda x, s, reduce=_reduce, inc=_self: ember.scatter_reduce(
                    x, 0, ember.tensor(IDX), s, reduce, include_self=inc
                ),
                (A, SRC),
                torch_fn=lambda x, s, reduce=_reduce, inc=_self: x.scatter_reduce(
                    0, torch().tensor(IDX), s, reduce, include_self=inc
                ),
            )
        )

SAMPLES += [
    Sample(
        "scatter_reduce/prod-zeros",
        lambda x, s: x.scatter_reduce(1, ember.tensor(IDX), s, "prod"),
        (ZEROS, np.where(IDX == 1, 0.0, SRC)),
        torch_fn=lambda x, s: x.scatter_reduce(1, torch().tensor(IDX), s, "prod"),
    ),
    Sample(
        "index_fill/tensor-value",
        lambda x, v: ember.index_fill(x, 1, ember.tensor([3, 0, 3]), v),
        (A, np.array(0.5)),
        torch_fn=lambda x, v: x.index_fill(1, torch().tensor([3, 0, 3]), v),
    ),
    Sample(
        "index_copy/columns",
        lambda x, s: x.index_copy(1, ember.tensor([4, 1]), s),
        (A, r.standard_normal((3, 2))),
        torch_fn=lambda x, s: x.index_copy(1, torch().tensor([4, 1]), s),
    ),
    Sample(
        "random_multinomial/with-replacement",
        lambda p: ember.multinomial(p, 6, True, generator=ember.Generator(0)),
        (np.array([[0.2, 0.0, 0.8], [1.0, 1.0, 1.0]]),),
        grad=False,
    ),
    Sample(
        "random_multinomial/without-replacement",
        lambda p: p.multinomial(3, generator=ember.Generator(0)),
        (np.array([0.2, 0.5, 0.3, 1.0]),),
        grad=False,
    ),
]
