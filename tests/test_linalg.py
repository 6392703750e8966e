"""Behaviour of matmul and einsum beyond the conformance samples: errors, dtypes (no float64
leaks), cost formulas against torch.utils.flop_counter, canonical einsum equations, and
property tests of matmul broadcasting against NumPy."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from ember.ops import REGISTRY
from ember.types import TensorType

from .ops.harness import TORCH_MISSING, torch

needs_torch = pytest.mark.skipif(torch is None, reason=TORCH_MISSING)


def _r(*shape, dtype=np.float32):
    return ember.tensor(np.random.default_rng(0).standard_normal(shape).astype(dtype))


def test_matmul_mismatch_names_op_shapes_and_caller():
    with pytest.raises(ember.ShapeError, match=r"matmul.*\(2, 3\).*\(4, 5\).*3 vs 4") as info:
        _r(2, 3) @ _r(4, 5)
    assert "test_linalg.py" in str(info.value)
    with pytest.raises(ember.ShapeError, match=r"matmul.*\(3,\).*\(4,\)"):
        ember.matmul(_r(3), _r(4))
    with pytest.raises(ember.ShapeError, match=r"matmul.*\(2, 2, 3\).*\(3, 3, 4\).*broadcast"):
        _r(2, 2, 3) @ _r(3, 3, 4)
    with pytest.raises(ember.ShapeError, match="at least 1 dimension"):
        ember.matmul(_r(), _r(3))


def test_mm_bmm_dot_check_their_ranks():
    with pytest.raises(ember.ShapeError, match=r"mm.*\(2, 3, 4\)"):
        ember.mm(_r(2, 3, 4), _r(4, 2))
    with pytest.raises(ember.ShapeError, match=r"bmm.*batch sizes"):
        ember.bmm(_r(2, 3, 4), _r(3, 4, 2))
    with pytest.raises(ember.ShapeError, match="dot"):
        ember.dot(_r(2, 3), _r(3))


def test_float32_stays_float32_and_mixed_dtypes_are_refused():
    a, b = _r(4, 3), _r(3, 2)
    assert (a @ b).dtype is ember.float32
    assert ember.einsum("ij,jk->ik", a, b).dtype is ember.float32
    assert ember.nn.functional.linear(a, _r(5, 3), _r(5)).dtype is ember.float32
    # PyTorch multiplies operands of one dtype only ("expected m1 and m2 to have the same
    # dtype"): a RuntimeError, which a float32 @ float64 product is here too
    for call in (
        lambda: a @ b.double(),
        lambda: ember.matmul(a[0], b.double()),
        lambda: ember.nn.functional.linear(a, _r(5, 3), _r(5).double()),
    ):
        with pytest.raises(RuntimeError, match="dtype"):
            call()
    h = a.half() @ b.half()
    assert h.dtype is ember.float16
    np.testing.assert_allclose(h.numpy(), (a @ b).numpy(), rtol=1e-2, atol=1e-2)
    a.requires_grad_()
    (a @ b).sum().backward()
    assert a.grad.dtype is ember.float32


def test_bool_matmul_is_refused():
    x = ember.tensor([[True]])
    with pytest.raises(ember.DTypeError, match="matmul"):
        x @ x


@needs_torch
def test_costs_match_torch_flop_counter():
    from torch.utils.flop_counter import FlopCounterMode

    def ours(name, *shapes):
        types = [TensorType(s, ember.float32) for s in shapes]
        op = REGISTRY[name]
        attrs = {} if name == "matmul" else {"equation": "abc,acd->abd"}
        out = op.infer(*types, **attrs)
        return op.cost(types, [out], attrs).flops

    for sa, sb, fn in [((8, 5), (5, 3), torch.mm), ((4, 8, 5), (4, 5, 3), torch.bmm)]:
        with FlopCounterMode(display=False) as counter:
            fn(torch.ones(sa), torch.ones(sb))
        assert ours("matmul", sa, sb) == counter.get_total_flops()
        if len(sa) == 3:
            assert ours("einsum", sa, sb) == counter.get_total_flops()


def test_einsum_equations_are_canonical():
    a, b = _r(2, 3).requires_grad_(), _r(3, 4)
    x = ember.einsum("ij,jk->ik", a, b)
    y = ember.einsum("ab , bc", a, b)
    assert x.grad_fn.attrs == y.grad_fn.attrs == {"equation": "ab,bc->ac"}
    z = ember.einsum("...j,jk", a, b)
    assert z.grad_fn.attrs["equation"] == "ab,bc->ac"
    np.testing.assert_allclose(z.detach().numpy(), x.detach().numpy())


def test_einsum_errors_name_the_equation_and_shapes():
    with pytest.raises(ember.ShapeError, match=r"einsum.*'ij,jk->ik'.*\(2, 3\), \(4, 5\).*'j'"):
        ember.einsum("ij,jk->ik", _r(2, 3), _r(4, 5))
    with pytest.raises(ember.ShapeError, match="2 terms for 1 operands"):
        ember.einsum("ij,jk", _r(2, 3))
    with pytest.raises(ember.ShapeError, match="repeats"):
        ember.einsum("ij->ii", _r(2, 2))
    with pytest.raises(ember.ShapeError, match="no operand"):
        ember.einsum("ij->k", _r(2, 2))
    with pytest.raises(ember.ShapeError, match="letters"):
        ember.einsum("i1->i", _r(2, 2))


def test_einsum_diagonal_returns_its_own_memory():
    x = ember.tensor(np.arange(9.0).reshape(3, 3))
    d = ember.einsum("ii->i", x)
    assert not np.shares_memory(d.numpy(), x.numpy())


@needs_torch
def test_einsum_hessian_vector_product_matches_torch():
    rng = np.random.default_rng(1)
    a0, b0, v0 = rng.standard_normal((3, 3)), rng.standard_normal((3, 4)), rng.standard_normal(3)

    def hvp(lib, grad, a, b):
        f = (lib.einsum("ii,ij->j", a, b) ** 2).sum() + lib.einsum("ij,ij->", a, a) ** 2
        (g,) = grad(f, a, create_graph=True)
        return grad((g.sum(1) * lib.tensor(v0)).sum(), a)[0]

    a = ember.tensor(a0, requires_grad=True)
    ours = hvp(ember, ember.autograd.grad, a, ember.tensor(b0))
    ta = torch.tensor(a0, requires_grad=True)
    theirs = hvp(torch, lambda f, x, **k: torch.autograd.grad(f, x, **k), ta, torch.tensor(b0))
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-10)


def test_linear_and_bilinear_check_shapes():
    with pytest.raises(ember.ShapeError, match=r"linear.*\(2, 3\).*\(4, 5\)"):
        ember.nn.functional.linear(_r(2, 3), _r(4, 5))
    with pytest.raises(ember.ShapeError, match="bilinear"):
        ember.nn.functional.bilinear(_r(2, 3), _r(2, 4), _r(5, 3, 3))


def test_weight_gradient_of_linear_is_exact():
    x, w = _r(5, 3, dtype=np.float64), _r(4, 3, dtype=np.float64).requires_grad_()
    ember.nn.functional.linear(x, w).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), np.ones((4, 5)) @ x.numpy())


_DIMS = st.integers(1, 3)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.sampled_from([1, 2, 3]), max_size=3),
    st.lists(st.sampled_from([1, 2, 3]), max_size=3),
    _DIMS,
    _DIMS,
    _DIMS,
    st.booleans(),
    st.booleans(),
)
def test_matmul_matches_numpy(batch_a, batch_b, m, k, n, vec_a, vec_b):
    rng = np.random.default_rng(0)
    sa = (k,) if vec_a else tuple(batch_a) + (m, k)
    sb = (k,) if vec_b else tuple(batch_b) + (k, n)
    try:
        np.broadcast_shapes(sa[:-2], sb[:-2])
    except ValueError:
        with pytest.raises(ember.ShapeError, match="matmul"):
            ember.tensor(np.ones(sa)) @ ember.tensor(np.ones(sb))
        return
    a0, b0 = rng.standard_normal(sa), rng.standard_normal(sb)
    a, b = ember.tensor(a0, requires_grad=True), ember.tensor(b0, requires_grad=True)
    out = a @ b
    np.testing.assert_allclose(out.detach().numpy(), a0 @ b0, rtol=1e-12, atol=1e-12)
    out.sum().backward()
    # sum(a @ b) is linear in each operand: its gradient element e is the sum for a basis tensor
    basis_a = np.eye(a0.size).reshape((a0.size,) + sa)
    basis_b = np.eye(b0.size).reshape((b0.size,) + sb)
    expected_a = np.array([np.sum(e @ b0) for e in basis_a]).reshape(sa)
    expected_b = np.array([np.sum(a0 @ e) for e in basis_b]).reshape(sb)
    np.testing.assert_allclose(a.grad.numpy(), expected_a, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(b.grad.numpy(), expected_b, rtol=1e-12, atol=1e-12)


@needs_torch
def test_einsum_sublist_form_matches_torch():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((4, 5))
    cases = [
        (a, [0, 1, 2], b, [2, 3], [0, 1, 3]),
        (a, [Ellipsis, 25, 51]),  # labels 25 ('Z') and 51 ('z'), implicit output
        (a, [0, 1, 1 + 1], [2, 0]),  # a reduction over the middle label
        (b, [7, 7 + 1], b, [9, 7 + 1], [Ellipsis, 7, 9]),
    ]
    for args in cases:
        want = torch.einsum(*[torch.tensor(x) if isinstance(x, np.ndarray) else x for x in args])
        got = ember.einsum(*[ember.tensor(x) if isinstance(x, np.ndarray) else x for x in args])
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
    for bad, error in ((52, ValueError), (-1, ValueError), (1.0, TypeError)):
        with pytest.raises(error, match="einsum.*sublist") as info:
            ember.einsum(ember.tensor(a), [0, 1, bad])
        assert isinstance(info.value, ember.EmberError)
        with pytest.raises(error):
            torch.einsum(torch.tensor(a), [0, 1, bad])
