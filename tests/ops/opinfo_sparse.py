"""Sparse COO tensors in the OpInfo database: their Tensor methods return or take sparse
tensors, which the OpInfo comparison (dense values and gradients) does not hold; the sparse
suite (tests/sparse/) compares each with PyTorch's sparse tensors instead."""

OPS: list = []

NO_TORCH = {
    "M:to_sparse": "returns a sparse COO tensor: tests/sparse/test_sparse.py compares its "
    "indices, values and gradients with torch's to_sparse",
    "M:to_sparse_coo": "to_sparse's newer name, a sparse COO tensor: tests/sparse/test_sparse.py "
    "compares it with torch's to_sparse_coo",
    "M:to_dense": "a sparse tensor's dense form (a dense tensor's is itself): "
    "tests/sparse/test_sparse.py compares it with torch's to_dense",
}

INTERNAL = {
    "sampled_dot": "the product of ember.sparse.sampled_addmm, whose result is a sparse tensor, "
    "and the gradient of sparse_mm's values; tests/ops/samples_sparse.py checks it and its VJP "
    "against torch.sparse.sampled_addmm and finite differences",
    "sparse_mm": "its operand is a sparse tensor (ember.sparse.mm); tests/ops/samples_sparse.py "
    "and tests/sparse/test_sparse.py check it and its VJP against torch.sparse.mm",
}
