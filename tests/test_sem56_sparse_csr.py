"""Sparse CSR basics (ops/sparse_csr.py) against PyTorch: to_sparse_csr, sparse_csr_tensor,
crow_indices, col_indices, values, to_dense, the layout, printing, and products with dense
matrices (values and the dense operand's gradient)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():  # (PyTorch's CSR support is "beta")
        warnings.simplefilter("ignore")
        yield


def _matrix(seed: int, shape=(5, 7)) -> np.ndarray:
    rs = np.random.RandomState(seed)
    x = rs.randn(*shape).astype(np.float32)
    x[rs.rand(*shape) < 0.6] = 0
    x[1] = 0  # (an empty row)
    return x


def _parts(s):
    return [s.crow_indices().numpy(), s.col_indices().numpy(), s.values().detach().numpy()]


@pytest.mark.parametrize("seed", range(4))
def test_to_sparse_csr_and_products(seed):
    x = _matrix(seed)
    d = np.random.RandomState(9).randn(7, 3).astype(np.float32)
    out = []
    for m in (torch, ember):
        s = m.tensor(x).to_sparse_csr()
        dense = m.tensor(d, requires_grad=True)
        prod = s @ dense
        prod.sum().backward()
        out.append((_parts(s), s.to_dense(), prod, m.mm(s, dense), m.matmul(s, dense),
                    dense.grad, s.layout, s.shape, s._nnz(), None))  # fmt: skip
    (tp, *trest), (ep, *erest) = out
    for a, b in zip(tp, ep, strict=True):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(trest[:5], erest[:5], strict=True):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6, atol=1e-6)
    assert repr(erest[5]) == "ember.sparse_csr" and tuple(erest[6]) == tuple(trest[6])
    assert erest[7] == trest[7]


def test_printing():
    for x in ([[1.0, 0.0, 2.0], [0.0, 0.0, 3.0]], [[5, 0], [0, 7]]):
        t, e = torch.tensor(x).to_sparse_csr(), ember.tensor(x).to_sparse_csr()
        assert repr(e).replace("ember.", "torch.") == repr(t)


def test_sparse_csr_tensor_constructor_and_checks():
    crow, col, vals = [0, 2, 2, 3], [0, 3, 1], [1.0, 2.0, 3.0]
    t = torch.sparse_csr_tensor(torch.tensor(crow), torch.tensor(col), torch.tensor(vals))
    e = ember.sparse_csr_tensor(ember.tensor(crow), ember.tensor(col), ember.tensor(vals))
    assert tuple(e.shape) == tuple(t.shape)
    np.testing.assert_array_equal(e.to_dense().numpy(), t.to_dense().numpy())
    sized = ember.sparse_csr_tensor(ember.tensor(crow), ember.tensor(col), ember.tensor(vals),
                                    (3, 6))  # fmt: skip
    assert tuple(sized.to_dense().shape) == (3, 6)
    for bad in ([1, 2, 2, 3], [0, 2, 1, 3], [0, 2, 2, 4]):
        for m in (torch, ember):
            with pytest.raises(RuntimeError):
                m.sparse_csr_tensor(m.tensor(bad), m.tensor(col), m.tensor(vals), (3, 6),
                                    check_invariants=True)  # fmt: skip
    with pytest.raises(RuntimeError):
        ember.ones(2, 3, 4).to_sparse_csr()
