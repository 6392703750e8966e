"""Conformance samples of the sparse COO product (ops/sparse.py's ``sparse_mm``), reached
through ``ember.sparse.mm`` on a sparse tensor built from the sample's indices and values (with
a repeated index, which adds), through its transpose (the backward's direction), and the
sampled product ``sampled_dot`` through ``ember.sparse.sampled_addmm`` (PyTorch's takes CSR).
test_conformance.py checks the rule against the kernel, the gradients of the values and the
dense operand against finite differences and PyTorch's ``torch.sparse.mm``, and capture."""

import numpy as np

import ember

from .harness import Sample, rng

r = rng(2404)
IDX = np.array([[0, 2, 1, 2, 0], [3, 0, 1, 0, 1]], dtype=np.int64)  # (2, 0) twice
VALS = r.standard_normal(5)
DENSE = r.standard_normal((4, 3))
DENSE_T = r.standard_normal((3, 2))
IDX_C = np.array([[0, 0, 1, 2], [1, 3, 1, 0]], dtype=np.int64)  # coalesced: CSR's order
M1 = r.standard_normal((3, 5))
M2 = r.standard_normal((5, 4))


def torch():
    import torch as t

    return t


def _t_sparse(i, v, size):
    return torch().sparse_coo_tensor(i, v, size, check_invariants=True)


SAMPLES = [
    Sample(
        "sparse_mm/coo-times-dense",
        lambda i, v, d: ember.sparse.mm(ember.sparse_coo_tensor(i, v, (3, 4)), d),
        (IDX, VALS, DENSE),
        torch_fn=lambda i, v, d: torch().sparse.mm(_t_sparse(i, v, (3, 4)), d),
    ),
    Sample(
        "sparse_mm/transposed",
        lambda i, v, d: ember.sparse.mm(ember.sparse_coo_tensor(i, v, (3, 4)).t(), d),
        (IDX, VALS, DENSE_T),
        torch_fn=lambda i, v, d: torch().sparse.mm(_t_sparse(i, v, (3, 4)).t(), d),
    ),
    Sample(
        "sampled_dot/sampled-addmm",
        lambda i, v, a, b: ember.sparse.sampled_addmm(
            ember.sparse_coo_tensor(i, v, (3, 4)), a, b, beta=0.5, alpha=2.0
        )._values(),
        (IDX_C, VALS[:4], M1, M2),
        torch_fn=lambda i, v, a, b: (
            torch()
            .sparse.sampled_addmm(
                _t_sparse(i, v, (3, 4)).to_sparse_csr(), a, b, beta=0.5, alpha=2.0
            )
            .values()
        ),
    ),
]
