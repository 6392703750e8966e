"""Sparse CSR matrices' flags and conversions against PyTorch 2.13: ``is_sparse`` (True for
COO only), ``is_sparse_csr``, ``layout``, and round trips between dense, COO and CSR
(``to_sparse_csr``, ``to_sparse``, ``to_sparse(layout=...)``, ``to_sparse_coo``,
``to_dense``), their row pointers, column indices and values."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _matrix(dtype="float32", shape=(5, 7), seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape) * (rng.random(shape) < 0.35)
    a[1] = 0  # (an empty row)
    return a.astype(dtype)


def _both(a):
    return torch.from_numpy(a.copy()), ember.tensor(a.copy())


def _layout(t):
    return str(t.layout).split(".")[-1]


CONVERSIONS = {
    "dense": lambda m, x: x,
    "coo": lambda m, x: x.to_sparse(),
    "csr": lambda m, x: x.to_sparse_csr(),
    "csr_via_layout": lambda m, x: x.to_sparse(layout=m.sparse_csr),
    "coo_to_csr": lambda m, x: x.to_sparse().to_sparse_csr(),
    "csr_to_coo": lambda m, x: x.to_sparse_csr().to_sparse(),
    "csr_to_sparse_coo": lambda m, x: x.to_sparse_csr().to_sparse_coo(),
    "csr_to_csr": lambda m, x: x.to_sparse_csr().to_sparse_csr(),
    "csr_layout_csr": lambda m, x: x.to_sparse_csr().to_sparse(layout=m.sparse_csr),
    "coo_layout_csr": lambda m, x: x.to_sparse().to_sparse(layout=m.sparse_csr),
}


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
@pytest.mark.parametrize("how", sorted(CONVERSIONS))
def test_flags_and_round_trips(dtype, how):
    t, e = _both(_matrix(dtype))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (PyTorch's beta-state warning for CSR)
        want = CONVERSIONS[how](torch, t)
    got = CONVERSIONS[how](ember, e)
    assert (got.is_sparse, got.is_sparse_csr) == (want.is_sparse, want.is_sparse_csr)
    assert _layout(got) == _layout(want)
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_array_equal(got.to_dense().numpy(), want.to_dense().numpy())
    if want.layout is torch.sparse_csr:
        for part in ("crow_indices", "col_indices", "values"):
            np.testing.assert_array_equal(
                getattr(got, part)().numpy(), getattr(want, part)().numpy()
            )
        back = got.to_dense().to_sparse_csr()
        np.testing.assert_array_equal(back.crow_indices().numpy(), want.crow_indices().numpy())


def test_csr_refuses_what_pytorch_refuses():
    t, e = _both(_matrix())
    for x in (t.to_sparse_csr(), e.to_sparse_csr()):
        with pytest.raises(RuntimeError, match="do not have is_contiguous"):
            x.is_contiguous()
    with pytest.raises(RuntimeError, match="layouts only"):
        e.to_sparse(layout=ember.sparse_csr, blocksize=(2, 2))


def test_products_still_take_csr():
    t, e = _both(_matrix(shape=(4, 6)))
    d = np.arange(12, dtype=np.float32).reshape(6, 2)
    want = (t.to_sparse_csr() @ torch.from_numpy(d)).numpy()
    np.testing.assert_allclose((e.to_sparse_csr() @ ember.tensor(d)).numpy(), want, rtol=1e-6)
    assert not ember.ones(2).is_sparse_csr and not e.to_sparse().is_sparse_csr
