"""Sparse COO tensors (ops/sparse_tensor.py, ops/sparse.py) against PyTorch's: construction,
coalescing, conversions, products and their gradients (also against finite differences), sums,
sums with dense tensors, capture in ember.function, and the errors of bad input."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.ops import _sparse_kernels

torch = pytest.importorskip("torch")


def t_sparse(i, v, size=None):
    i, v = torch.tensor(np.asarray(i)), torch.tensor(np.asarray(v))
    if size is None:
        return torch.sparse_coo_tensor(i, v, check_invariants=True)
    return torch.sparse_coo_tensor(i, v, size, check_invariants=True)


def np_of(x):
    return x.detach().numpy() if hasattr(x, "detach") else x.numpy()


IDX = np.array([[0, 2, 1, 2, 0, 3], [3, 0, 1, 0, 1, 2]])  # (2, 0) twice, unsorted
VALS = np.array([1.0, -2.0, 3.0, 0.5, 4.0, -1.5])


def test_the_pytorch_documentation_example():
    """torch.sparse.mm's documented example: the sparse input's gradient is sparse on its own
    pattern, values [1, 0, 2]."""
    a = ember.tensor([[1.0, 0, 2], [0, 3, 0]]).to_sparse().requires_grad_(True)
    b = ember.tensor([[0.0, 1], [2, 0], [0, 0]], requires_grad=True)
    ember.sparse.mm(a, b).sum().backward()
    ta = torch.tensor([[1.0, 0, 2], [0, 3, 0]]).to_sparse().requires_grad_(True)
    tb = torch.tensor([[0.0, 1], [2, 0], [0, 0]], requires_grad=True)
    torch.sparse.mm(ta, tb).sum().backward()
    assert a.grad.is_sparse and a.grad.layout is ember.sparse_coo
    np.testing.assert_array_equal(a.grad.values().numpy(), [1.0, 0.0, 2.0])
    np.testing.assert_array_equal(a.grad.indices().numpy(), ta.grad.coalesce().indices().numpy())
    np.testing.assert_array_equal(a.grad.values().numpy(), ta.grad.coalesce().values().numpy())
    np.testing.assert_array_equal(b.grad.numpy(), tb.grad.numpy())


def test_construction_matches_pytorch():
    a = ember.sparse_coo_tensor(IDX, VALS)
    ta = t_sparse(IDX, VALS)
    assert tuple(a.shape) == tuple(ta.shape) == (4, 4)
    assert a.is_sparse and a.layout is ember.sparse_coo and not ember.ones(2).is_sparse
    assert ember.ones(2).layout is ember.strided
    assert a.sparse_dim() == ta.sparse_dim() == 2 and a.dense_dim() == ta.dense_dim() == 0
    assert a._nnz() == a.nnz == ta._nnz() == 6
    assert a.is_coalesced() == ta.is_coalesced() is False
    assert a.dtype == ember.float64
    np.testing.assert_array_equal(a._indices().numpy(), ta._indices().numpy())
    b = ember.sparse_coo_tensor(IDX.tolist(), VALS.tolist(), (5, 6), dtype=ember.float32)
    assert b.dtype == ember.float32 and tuple(b.shape) == (5, 6)
    assert ember.sparse_coo_tensor(IDX, VALS, requires_grad=True).requires_grad


def test_coalesce_sums_duplicates_and_sorts():
    a = ember.sparse_coo_tensor(IDX, VALS).coalesce()
    ta = t_sparse(IDX, VALS).coalesce()
    assert a.is_coalesced() and a.nnz == ta._nnz() == 5
    np.testing.assert_array_equal(a.indices().numpy(), ta.indices().numpy())
    np.testing.assert_allclose(a.values().numpy(), ta.values().numpy())
    assert a.coalesce() is a
    with pytest.raises(ember.EmberError, match="uncoalesced"):
        ember.sparse_coo_tensor(IDX, VALS).indices()


def test_coalesce_is_differentiable():
    v = ember.tensor(VALS, requires_grad=True)
    tv = torch.tensor(VALS, requires_grad=True)
    w = np.arange(5.0) + 1
    (ember.sparse_coo_tensor(IDX, v).coalesce().values() * ember.tensor(w)).sum().backward()
    tc = torch.sparse_coo_tensor(torch.tensor(IDX), tv, check_invariants=True).coalesce()
    (tc.values() * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(v.grad.numpy(), tv.grad.numpy())


def test_hybrid_to_dense_and_round_trip():
    rng = np.random.default_rng(0)
    dense = rng.standard_normal((4, 3, 2)) * (rng.random((4, 3, 1)) < 0.5)
    for sd in (None, 2, 1):
        s = ember.tensor(dense).to_sparse(sd)
        ts = torch.tensor(dense).to_sparse() if sd is None else torch.tensor(dense).to_sparse(sd)
        assert s.is_coalesced() and s.sparse_dim() == ts.sparse_dim()
        np.testing.assert_array_equal(s.indices().numpy(), ts.indices().numpy())
        np.testing.assert_array_equal(s.values().numpy(), ts.values().numpy())
        np.testing.assert_array_equal(s.to_dense().numpy(), dense)
    hybrid = ember.sparse_coo_tensor(IDX[:, :3], np.arange(6.0).reshape(3, 2))
    t_hybrid = t_sparse(IDX[:, :3], np.arange(6.0).reshape(3, 2))
    assert tuple(hybrid.shape) == tuple(t_hybrid.shape) == (3, 4, 2)
    assert hybrid.dense_dim() == 1
    np.testing.assert_array_equal(hybrid.to_dense().numpy(), t_hybrid.to_dense().numpy())


def test_to_dense_and_to_sparse_gradients():
    v = ember.tensor(VALS, requires_grad=True)
    tv = torch.tensor(VALS, requires_grad=True)
    w = np.arange(16.0).reshape(4, 4)
    (ember.sparse_coo_tensor(IDX, v).to_dense() * ember.tensor(w)).sum().backward()
    (
        torch.sparse_coo_tensor(torch.tensor(IDX), tv, check_invariants=True).to_dense()
        * torch.tensor(w)
    ).sum().backward()
    np.testing.assert_allclose(v.grad.numpy(), tv.grad.numpy())
    x = ember.tensor([[0.0, 2.0], [3.0, 0.0]], requires_grad=True)
    (x.to_sparse().values() * ember.tensor([5.0, 7.0])).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0.0, 5.0], [7.0, 0.0]])


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_mm_values_and_gradients_match_pytorch(dtype):
    rng = np.random.default_rng(1)
    d = rng.standard_normal((4, 5)).astype(dtype)
    vals = VALS.astype(dtype)
    g = rng.standard_normal((4, 5)).astype(dtype)
    a = ember.sparse_coo_tensor(IDX, vals, requires_grad=True)
    x = ember.tensor(d, requires_grad=True)
    ta = t_sparse(IDX, vals).requires_grad_(True)
    tx = torch.tensor(d, requires_grad=True)
    out, t_out = ember.sparse.mm(a, x), torch.sparse.mm(ta, tx)
    tol = {"rtol": 1e-12} if dtype == "float64" else {"rtol": 1e-5, "atol": 1e-6}
    np.testing.assert_allclose(out.detach().numpy(), t_out.detach().numpy(), **tol)
    (out * ember.tensor(g)).sum().backward()
    (t_out * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), **tol)
    tg = ta.grad.coalesce()
    np.testing.assert_allclose(a.grad.coalesce().to_dense().numpy(), tg.to_dense().numpy(), **tol)
    assert a.grad.nnz == a.coalesce().nnz  # on the input's own pattern, as torch's
    vg = a._values().grad.numpy()  # each entry's own derivative, repeated ones included
    want = tg.to_dense().numpy()[IDX[0], IDX[1]]
    np.testing.assert_allclose(vg, want, **tol)


def test_mm_gradients_match_finite_differences():
    rng = np.random.default_rng(2)
    d = rng.standard_normal((4, 3))
    g = rng.standard_normal((4, 3))

    def f(v, x):
        return float((ember.sparse.mm(ember.sparse_coo_tensor(IDX, v), x).numpy() * g).sum())

    v = ember.tensor(VALS, requires_grad=True)
    x = ember.tensor(d, requires_grad=True)
    (ember.sparse.mm(ember.sparse_coo_tensor(IDX, v), x) * ember.tensor(g)).sum().backward()
    eps = 1e-6
    for arr, grad, other in ((VALS, v.grad, d), (d, x.grad, None)):
        fd = np.zeros_like(arr)
        for k in range(arr.size):
            plus, minus = arr.copy(), arr.copy()
            plus.flat[k] += eps
            minus.flat[k] -= eps
            if other is not None:
                fd.flat[k] = (f(plus, other) - f(minus, other)) / (2 * eps)
            else:
                fd.flat[k] = (f(VALS, plus) - f(VALS, minus)) / (2 * eps)
        np.testing.assert_allclose(grad.numpy(), fd, rtol=1e-6, atol=1e-8)


def test_addmm_matmul_and_vectors_match_pytorch():
    rng = np.random.default_rng(3)
    d = rng.standard_normal((4, 2))
    c = rng.standard_normal((4, 2))
    a, ta = ember.sparse_coo_tensor(IDX, VALS), t_sparse(IDX, VALS)
    got = ember.sparse.addmm(ember.tensor(c), a, ember.tensor(d), beta=0.5, alpha=2.0)
    want = torch.sparse.addmm(torch.tensor(c), ta, torch.tensor(d), beta=0.5, alpha=2.0)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
    for spelled in (ember.mm(a, ember.tensor(d)), ember.matmul(a, ember.tensor(d)), a @ d):
        np.testing.assert_allclose(spelled.numpy(), (ta @ torch.tensor(d)).numpy(), rtol=1e-12)
    vec = rng.standard_normal(4)
    np.testing.assert_allclose(
        (a @ ember.tensor(vec)).numpy(), (ta @ torch.tensor(vec)).numpy(), rtol=1e-12
    )
    np.testing.assert_allclose(
        ember.sparse.mm(a.t(), ember.tensor(c)).numpy(),
        torch.sparse.mm(ta.t(), torch.tensor(c)).numpy(),
        rtol=1e-12,
    )


def test_sum_matches_pytorch():
    a, ta = ember.sparse_coo_tensor(IDX, VALS), t_sparse(IDX, VALS)
    np.testing.assert_allclose(ember.sparse.sum(a).numpy(), torch.sparse.sum(ta).numpy())
    np.testing.assert_allclose(
        ember.sparse.sum(a, (0, 1)).numpy(), torch.sparse.sum(ta, (0, 1)).numpy()
    )
    for dim in (0, 1, -1):
        got, want = ember.sparse.sum(a, dim), torch.sparse.sum(ta, dim)
        assert got.is_sparse and want.is_sparse
        np.testing.assert_array_equal(got.indices().numpy(), want.indices().numpy())
        np.testing.assert_allclose(got.values().numpy(), want.values().numpy())
    h = np.arange(6.0).reshape(3, 2)
    hybrid, t_hybrid = ember.sparse_coo_tensor(IDX[:, :3], h), t_sparse(IDX[:, :3], h)
    for dim in ((0, 1), 2, (1, 2)):
        got, want = ember.sparse.sum(hybrid, dim), torch.sparse.sum(t_hybrid, dim)
        got = got.to_dense() if got.is_sparse else got
        want = want.to_dense() if want.is_sparse else want
        np.testing.assert_allclose(got.numpy(), want.numpy())


def test_add_scale_and_transpose_match_pytorch():
    rng = np.random.default_rng(4)
    d = rng.standard_normal((4, 4))
    a, ta = ember.sparse_coo_tensor(IDX, VALS), t_sparse(IDX, VALS)
    # (PyTorch refuses sparse + dense, asking for dense + sparse; ember computes both)
    np.testing.assert_allclose((a + ember.tensor(d)).numpy(), (torch.tensor(d) + ta).numpy())
    np.testing.assert_allclose((ember.tensor(d) + a).numpy(), (torch.tensor(d) + ta).numpy())
    both, t_both = a + a * 3.0, ta + ta * 3.0
    assert both.is_sparse
    np.testing.assert_allclose(both.to_dense().numpy(), t_both.to_dense().numpy())
    np.testing.assert_allclose((2 * a).to_dense().numpy(), (2 * ta).to_dense().numpy())
    np.testing.assert_allclose(
        (a * ember.tensor(d)).to_dense().numpy(), (ta * torch.tensor(d)).to_dense().numpy()
    )
    np.testing.assert_array_equal(a.t().to_dense().numpy(), ta.t().to_dense().numpy())


def test_capture_in_ember_function():
    """A captured function closes over a sparse adjacency, and one builds its own sparse
    tensor from traced indices and values; both compute eager's values and gradients."""
    rng = np.random.default_rng(5)
    adj = ember.sparse_coo_tensor(IDX, VALS, (4, 4)).coalesce()
    w = ember.tensor(rng.standard_normal((3, 2)), requires_grad=True)

    def layer(x):
        return ember.sparse.mm(adj, x @ w).tanh().sum()

    x = ember.tensor(rng.standard_normal((4, 3)))
    eager = layer(x)
    eager.backward()
    g_eager = w.grad.numpy().copy()
    w.grad = None
    f = ember.function(layer)
    out = f(x)
    out.backward()
    np.testing.assert_allclose(out.detach().numpy(), eager.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(w.grad.numpy(), g_eager, rtol=1e-12)

    def built(i, v, x):
        return ember.sparse.mm(ember.sparse_coo_tensor(i, v, (4, 4)), x)

    args = (ember.tensor(IDX), ember.tensor(VALS), x)
    np.testing.assert_allclose(
        ember.function(built)(*args).numpy(), built(*args).numpy(), rtol=1e-12
    )
    graph = ember.trace(built, *args).graph
    assert "sparse_mm" in str(graph)


def test_csr_structure_is_cached_per_indices_array():
    rng = np.random.default_rng(6)
    idx = np.stack([rng.integers(0, 50, 300), rng.integers(0, 40, 300)])
    a = ember.sparse_coo_tensor(idx, rng.standard_normal(300), (50, 40))
    x = ember.tensor(rng.standard_normal((40, 3)))
    first = ember.sparse.mm(a, x)
    made = _sparse_kernels.structure(a._indices().numpy(), (50, 40))
    again = ember.sparse.mm(a, x)
    assert _sparse_kernels.structure(a._indices().numpy(), (50, 40)) is made
    np.testing.assert_array_equal(first.numpy(), again.numpy())
    ref = _sparse_kernels.coo_mm(
        idx, a._values().numpy(), x.numpy(), rows=50, cols=40, transpose=False
    )
    np.testing.assert_allclose(first.numpy(), ref, rtol=1e-12)
    a._indices().numpy()[0, 0] = (idx[0, 0] + 1) % 50  # written in place: converted again
    moved = ember.sparse.mm(a, x)
    assert _sparse_kernels.structure(a._indices().numpy(), (50, 40)) is not made
    np.testing.assert_allclose(
        moved.numpy(), a.to_dense().numpy() @ x.numpy(), rtol=1e-10, atol=1e-12
    )


@pytest.mark.parametrize(
    "indices, values, size, match, torch_refuses",
    [
        ([[0, 1], [2, 5]], [1.0, 2.0], (2, 3), "size .* smaller than the indices need", True),
        ([[0, -1], [2, 1]], [1.0, 2.0], (2, 3), "negative", True),
        ([[0, 1], [2, 1]], [1.0, 2.0, 3.0], (2, 3), "values has 3 entries .* indices has 2", True),
        ([0, 1, 2], [1.0, 2.0, 3.0], (3,), "indices must be 2-D", True),
        ([[0.0, 1.0], [2.0, 1.0]], [1.0, 2.0], (2, 3), "indices must be integers", False),
        ([[0, 1], [2, 1]], [1.0, 2.0], (2, 3, 4), "size .* has 3 dimensions", True),
    ],
)
def test_bad_input_raises_ember_errors(indices, values, size, match, torch_refuses):
    with pytest.raises(ember.EmberError, match=match):
        ember.sparse_coo_tensor(indices, values, size)
    if not torch_refuses:  # PyTorch truncates float indices; ember refuses them
        return
    with pytest.raises(Exception):  # noqa: B017 (PyTorch refuses each as well)
        torch.sparse_coo_tensor(
            torch.tensor(indices), torch.tensor(values), size, check_invariants=True
        )


def test_bad_products_raise_ember_errors():
    a = ember.sparse_coo_tensor(IDX, VALS)
    with pytest.raises(ember.EmberError, match="4 rows"):
        ember.sparse.mm(a, ember.ones(3, 2, dtype=ember.float64))
    hybrid = ember.sparse_coo_tensor(IDX[:, :3], np.ones((3, 2)))
    with pytest.raises(ember.EmberError, match="dense_dim"):
        ember.sparse.mm(hybrid, ember.ones(4, 2))
    with pytest.raises(ember.TraceError, match="outside the captured function"):
        ember.trace(lambda x: x.to_sparse().values(), ember.ones(2, 2))


def test_sampled_addmm_matches_pytorch():
    rng = np.random.default_rng(7)
    idx = np.array([[0, 0, 1, 2], [1, 3, 1, 0]])
    v, m1, m2 = rng.standard_normal(4), rng.standard_normal((3, 5)), rng.standard_normal((5, 4))
    got = ember.sparse.sampled_addmm(ember.sparse_coo_tensor(idx, v, (3, 4)), m1, m2, beta=0.5)
    want = torch.sparse.sampled_addmm(
        t_sparse(idx, v, (3, 4)).to_sparse_csr(), torch.tensor(m1), torch.tensor(m2), beta=0.5
    )
    assert got.is_sparse
    np.testing.assert_allclose(got.to_dense().numpy(), want.to_dense().numpy(), rtol=1e-12)


def test_sparse_tensors_as_arguments_of_a_captured_function():
    """A sparse argument's indices and values are the graph's inputs and its size part of the
    key: one trace serves every sparse tensor of one shape (fresh objects, whose ids Python
    reuses, included), a new size traces again, and gradients reach the values."""
    rng = np.random.default_rng(8)
    f = ember.function(lambda s, x: ember.sparse.mm(s, x) * 2)
    x = ember.tensor(rng.standard_normal((4, 3)))
    for _ in range(6):
        values = rng.standard_normal(6).astype(np.float32).astype(np.float64)
        s = ember.sparse_coo_tensor(IDX, values, (4, 4)).float().double()  # (temporaries)
        want = 2 * (t_sparse(IDX, values, (4, 4)) @ torch.tensor(x.numpy())).numpy()
        np.testing.assert_allclose(f(s, x).numpy(), want, rtol=1e-12)
    assert f.stats.traces == 1
    wide = ember.sparse_coo_tensor(IDX, VALS, (5, 4))
    assert tuple(f(wide, x).shape) == (5, 3) and f.stats.traces == 2
    a = ember.sparse_coo_tensor(IDX, VALS, (4, 4), requires_grad=True)
    ta = t_sparse(IDX, VALS, (4, 4)).requires_grad_(True)
    (f(a, x) ** 2).sum().backward()
    ((2 * torch.sparse.mm(ta, torch.tensor(x.numpy()))) ** 2).sum().backward()
    np.testing.assert_allclose(
        a.grad.to_dense().numpy(), ta.grad.coalesce().to_dense().numpy(), rtol=1e-12
    )


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("transpose", [False, True])
def test_fast_products_equal_the_reference(dtype, transpose, monkeypatch):
    """The C CSR loop (kernels/csparse.py) and scipy's fallback compute the NumPy reference's
    product: unsorted and repeated indices, empty rows, both directions."""
    from ember.kernels import csparse

    rng = np.random.default_rng(9)
    rows, cols, nnz = 70, 50, 400
    idx = np.stack([rng.integers(0, rows - 10, nnz), rng.integers(0, cols, nnz)])  # rows 60+ empty
    values = rng.standard_normal(nnz).astype(dtype)
    dense = rng.standard_normal((cols if not transpose else rows, 33)).astype(dtype)
    kw = {"rows": rows, "cols": cols, "transpose": transpose}
    want = _sparse_kernels.coo_mm(idx, values, dense, **kw)
    tol = {"rtol": 1e-5, "atol": 1e-5} if dtype == np.float32 else {"rtol": 1e-12, "atol": 1e-12}
    got = _sparse_kernels.coo_mm_fast(idx, values, dense, **kw)
    assert got.dtype == dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, **tol)
    form = _sparse_kernels.structure(idx, (rows, cols)).form(transpose)
    c_only = csparse.csr_mm(form.indptr, form.indices, values[form.order], dense, form.shape[0])
    if c_only is not None:  # (None without a C compiler)
        np.testing.assert_allclose(c_only, want, **tol)
    monkeypatch.setattr(csparse, "csr_mm", lambda *args: None)  # scipy's product
    np.testing.assert_allclose(_sparse_kernels.coo_mm_fast(idx, values, dense, **kw), want, **tol)


def test_unchecked_indices_are_refused_by_the_kernels():
    """With check_invariants=False nothing is checked when the tensor is made; the product
    still refuses indices outside the matrix (the reference and the CSR path alike)."""
    a = ember.sparse_coo_tensor([[0, 5], [1, 0]], [1.0, 2.0], (2, 2), check_invariants=False)
    with pytest.raises(IndexError, match="outside the sparse matrix"):
        ember.sparse.mm(a, ember.ones(2, 3))
    with pytest.raises(IndexError, match="outside the sparse matrix"):
        _sparse_kernels.coo_mm(
            np.array([[0, -1], [1, 0]]), np.ones(2), np.ones((2, 3)), rows=2, cols=2,
            transpose=False,
        )  # fmt: skip


def test_sparse_times_sparse_is_sparse():
    a, ta = ember.sparse_coo_tensor(IDX, VALS), t_sparse(IDX, VALS)
    got, want = ember.sparse.mm(a, a.t()), torch.sparse.mm(ta, ta.t())
    assert got.is_sparse and want.is_sparse
    np.testing.assert_allclose(got.to_dense().numpy(), want.to_dense().numpy(), rtol=1e-12)
