"""Sparse COO tensors in more of PyTorch's functions (ops/sparse_methods.py), against PyTorch's
sparse tensors: the elementwise methods that keep zeros (on the coalesced tensor but for the
linear ones), a dense operand times a sparse one, mv, addmm and spmm on a sparse operand,
torch.cat and torch.stack of sparse tensors, the legacy constructors, and the errors of a
sparse tensor given to a dense-only function or of the layouts ember lacks."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

IDX = np.array([[0, 2, 1, 2, 0], [3, 0, 1, 0, 1]])  # (2, 0) twice, unsorted
VALS = np.array([1.5, -2.0, 3.0, 0.25, -4.0], np.float32)


def _pair(idx=IDX, vals=VALS, size=(3, 4)):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (torch's note on unchecked invariants)
        theirs = torch.sparse_coo_tensor(torch.tensor(idx), torch.tensor(vals), size)
    return ember.sparse_coo_tensor(idx, vals, size), theirs


def _same_sparse(ours, theirs):
    assert ours.is_sparse and theirs.is_sparse
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert ours.is_coalesced() == theirs.is_coalesced()
    np.testing.assert_array_equal(ours._indices().numpy(), theirs._indices().numpy())
    np.testing.assert_allclose(
        ours._values().detach().numpy(), theirs._values().detach().numpy(), rtol=1e-6
    )


@pytest.mark.parametrize(
    "name",
    "abs sqrt sin tan tanh square expm1 log1p sign sgn floor ceil trunc relu asin atan sinh "
    "asinh atanh erf erfinv deg2rad rad2deg frac isnan signbit nan_to_num neg positive".split(),
)
def test_elementwise_methods_match_pytorch(name):
    ours, theirs = _pair()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _same_sparse(getattr(ours, name)(), getattr(theirs, name)())


def test_pow_round_clone_and_cpu():
    ours, theirs = _pair()
    _same_sparse(ours.pow(3), theirs.pow(3))
    _same_sparse((ours * 3.3).round(), (theirs * 3.3).round())
    _same_sparse(ours.clone(), theirs.clone())
    _same_sparse(ours.coalesce().clone(), theirs.coalesce().clone())
    assert ours.cpu() is ours


def test_dense_times_sparse_values_and_gradients():
    """(The sparse operand's gradient is left out: PyTorch's is dense here, ember's, as for
    sparse @ dense, lies on the operand's pattern.)"""
    ours, theirs = _pair()
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    v = np.array([1.0, -2.0, 0.5], np.float32)
    results = []
    for lib, s in ((ember, ours), (torch, theirs)):
        a = lib.tensor(x, requires_grad=True)
        outs = [a @ s, lib.mm(a, s), lib.matmul(lib.tensor(v), s), lib.tensor(v) @ s]
        sum((o * (i + 1)).sum() for i, o in enumerate(outs)).backward()
        results.append([o.detach().numpy() for o in outs] + [a.grad.numpy()])
    for ours_value, theirs_value in zip(*results):
        np.testing.assert_allclose(ours_value, theirs_value, rtol=1e-5, atol=1e-6)


def test_mv_addmm_and_spmm_on_a_sparse_operand():
    ours, theirs = _pair()
    vec = np.array([1.0, 2.0, -1.0, 0.5], np.float32)
    mat = np.arange(8, dtype=np.float32).reshape(4, 2)
    bias = np.ones((3, 2), np.float32)
    for got, want in [
        (ember.mv(ours, ember.tensor(vec)), torch.mv(theirs, torch.tensor(vec))),
        (ours.mv(ember.tensor(vec)), theirs.mv(torch.tensor(vec))),
        (ember.spmm(ours, ember.tensor(mat)), torch.spmm(theirs, torch.tensor(mat))),
        (
            ember.addmm(ember.tensor(bias), ours, ember.tensor(mat), beta=0.5, alpha=2),
            torch.addmm(torch.tensor(bias), theirs, torch.tensor(mat), beta=0.5, alpha=2),
        ),
    ]:
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cat_and_stack_of_sparse_tensors(dim):
    ours, theirs = _pair()
    ours2, theirs2 = _pair(IDX[:, :3], VALS[:3] * 2)
    _same_sparse(ember.cat([ours, ours2], dim), torch.cat([theirs, theirs2], dim))
    _same_sparse(ember.stack([ours, ours2], dim), torch.stack([theirs, theirs2], dim))
    _same_sparse(ember.stack([ours, ours2], 2), torch.stack([theirs, theirs2], 2))


def test_cat_keeps_the_values_gradient():
    ours, _ = _pair()
    values = ember.tensor(VALS, requires_grad=True)
    other = ember.sparse_coo_tensor(IDX, values, (3, 4))
    joined = ember.cat([ours, other], 1)
    (joined @ ember.ones(8, 1)).sum().backward()
    np.testing.assert_array_equal(values.grad.numpy(), np.ones(5, np.float32))


def test_legacy_constructors():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = torch.sparse.FloatTensor(torch.tensor(IDX), torch.tensor(VALS), torch.Size([3, 4]))
        empty = torch.sparse.FloatTensor(3, 4)
    ours = ember.sparse.FloatTensor(ember.tensor(IDX), ember.tensor(VALS), ember.Size([3, 4]))
    _same_sparse(ours, theirs)
    _same_sparse(ember.sparse.FloatTensor(3, 4), empty)
    assert ember.sparse.DoubleTensor(IDX, VALS.astype(np.float64)).dtype == ember.float64
    assert ember.ones(3, 4).to_sparse_coo().is_sparse


def test_a_sparse_tensor_in_a_dense_function_says_to_convert_it():
    ours, _ = _pair()
    with pytest.raises(ember.EmberError, match=r"sparse tensor.*\.to_dense\(\)"):
        ember.nn.functional.linear(ours, ember.ones(2, 4))
    with pytest.raises(ember.EmberError, match="sparse and dense tensors do not join"):
        ember.cat([ours, ember.ones(3, 4)])


def test_the_compressed_layouts_name_coo_instead():
    # (CSR matrices exist: tests/test_sem56_sparse_csr.py; CSC, BSR and BSC do not)
    with pytest.raises(ember.NotInEmberError, match="sparse_coo_tensor"):
        ember.sparse_csc_tensor  # noqa: B018
    with pytest.raises(ember.NotInEmberError, match="COO"):
        ember.ones(2, 2).to_sparse_csc()
