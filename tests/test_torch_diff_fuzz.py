"""Eager ember against PyTorch on random small programs (tests/torch_diff_fuzzing.py: values,
dtypes, shapes, requires_grad, exception types and the inputs' gradients), a fixed slice of
seeds; and one regression test per divergence the fuzz found."""

import numpy as np
import pytest
import torch

import ember
from tests.torch_diff_fuzzing import check

SEEDS = range(600)


def test_fuzz_seeds_agree_with_torch():
    found = []
    for seed in SEEDS:
        found.extend(check(seed))
    assert not found, "\n\n".join(found[:5])


def _both(fn, *arrays, grad=False):
    """fn on torch and on ember tensors made from the same arrays: (result, grads) each."""
    out = []
    for T in (torch, ember):
        xs = [T.tensor(a.copy(), requires_grad=grad and a.dtype.kind == "f") for a in arrays]
        r = fn(T, *xs)
        grads = None
        if grad:
            r.double().sum().backward()
            grads = [None if x.grad is None else x.grad.numpy() for x in xs]
        out.append((r, grads))
    return out


def _error_types(fn):
    types = []
    for T in (torch, ember):
        with pytest.raises(Exception) as info:
            fn(T)
        types.append(info.value)
    return types


@pytest.mark.parametrize(
    "fn",
    [
        lambda T: T.tensor([1.5]) & T.tensor([1.5]),
        lambda T: T.floor(T.tensor([True])),
        lambda T: T.lerp(T.tensor([True]), T.tensor([False]), 0.3),
        lambda T: T.tensor([1, 2]).frac(),
        lambda T: T.remainder(T.tensor([True]), T.tensor([True])),
        lambda T: T.hypot(T.tensor([1]), T.tensor([2])),
        lambda T: T.logcumsumexp(T.tensor([1, 2]), 0),
        lambda T: T.median(T.tensor([[True]]), 0),
        lambda T: T.tensor([True]) ** T.tensor([True]),
        lambda T: T.kthvalue(T.tensor([True, False]), 1),
        lambda T: T.round(T.tensor([True]), decimals=1),
    ],
)
def test_unsupported_dtype_is_not_implemented_error(fn):
    # PyTorch raises NotImplementedError ("... not implemented for 'Bool'"); ember's
    # KernelDTypeError is one (and still a DTypeError)
    t, e = _error_types(fn)
    assert isinstance(t, NotImplementedError)
    assert isinstance(e, NotImplementedError) and isinstance(e, ember.errors.DTypeError)


@pytest.mark.parametrize(
    "fn",
    [
        lambda T: T.ones(0, 3).max(0),
        lambda T: T.ones(0, 3).argmin(0),
        lambda T: T.amax(T.ones(0, 3), 0),
        lambda T: T.median(T.ones(3, 0), 1),
        lambda T: T.kthvalue(T.ones(3, 0), 1, 1),
        lambda T: T.logcumsumexp(T.tensor([True]), 1),
        lambda T: T.median(T.tensor([[True]]), -3),
    ],
)
def test_empty_or_bad_reduction_dim_is_index_error(fn):
    t, e = _error_types(fn)
    assert isinstance(t, IndexError) and isinstance(e, IndexError)


def test_cat_refuses_zero_dim_and_skips_legacy_empty():
    t, e = _error_types(lambda T: T.cat([T.tensor(1.0), T.tensor(2.0)]))
    assert isinstance(t, RuntimeError) and isinstance(e, RuntimeError)
    a = np.ones((2, 2), np.int64)
    (rt, _), (re, _) = _both(lambda T, x: T.cat([x, T.zeros(0)], 1), a)
    assert str(re.dtype).endswith(str(rt.dtype).rsplit(".", 1)[-1])
    np.testing.assert_array_equal(re.numpy(), rt.numpy())


def test_unbind_and_chunk_of_an_empty_dimension():
    x = np.ones((0, 3))
    (rt, _), (re, _) = _both(lambda T, v: T.unbind(v, 0), x)
    assert len(re) == len(rt) == 0
    x = np.ones((4, 0))
    (rt, _), (re, _) = _both(lambda T, v: v.chunk(2, 1), x)
    assert [tuple(p.shape) for p in re] == [tuple(p.shape) for p in rt]


def test_masked_fill_broadcasts_out_of_place_and_refuses_overflow():
    x, m = np.ones(3), np.array([[True, False, True]])
    (rt, _), (re, _) = _both(lambda T, a, b: T.masked_fill(a, b, 2.0), x, m)
    assert tuple(re.shape) == tuple(rt.shape) == (1, 3)
    np.testing.assert_array_equal(re.numpy(), rt.numpy())
    with pytest.raises(RuntimeError):
        ember.ones(3).masked_fill_(ember.tensor(m), 2.0)
    t, e = _error_types(
        lambda T: T.tensor([1, 2]).masked_fill(T.tensor([True, False]), float("-inf"))
    )
    assert isinstance(t, RuntimeError) and isinstance(e, RuntimeError)
    b = ember.tensor([True, False]).masked_fill(ember.tensor([False, True]), float("-inf"))
    assert b.tolist() == [True, True]


def test_copysign_requires_grad_through_other():
    x, y = np.array([1.0, -2.0]), np.array([-1.0, 3.0])
    (rt, gt), (re, ge) = _both(lambda T, a, b: T.copysign(a.detach(), b), x, y, grad=True)
    assert re.requires_grad and rt.requires_grad
    np.testing.assert_array_equal(ge[1], gt[1])


def test_trunc_division_gradient_is_zero_at_a_zero_divisor():
    x, y = np.array([1.0, -2.0, 3.0]), np.array([0.0, 2.0, -0.0])
    (rt, gt), (re, ge) = _both(lambda T, a, b: T.div(a, b, rounding_mode="trunc"), x, y, grad=True)
    np.testing.assert_array_equal(re.detach().numpy(), rt.detach().numpy())
    np.testing.assert_array_equal(ge[0], gt[0])
    np.testing.assert_array_equal(ge[1], gt[1])


def test_clamp_with_tensor_bounds_gives_ties_whole_to_the_input():
    nan = float("nan")
    x = np.array([1.0, 2.0, 3.0, nan, 0.5, nan, 2.5])
    m = np.array([2.0, 2.0, 2.0, 1.0, nan, nan, 0.0])
    for fn in (
        lambda T, a, b: T.clamp(a, min=b),
        lambda T, a, b: a.clamp(max=b),
        lambda T, a, b: T.clamp(a, min=b - 1, max=b),
        lambda T, a, b: T.clamp(a, min=b + 1, max=b),
    ):
        (rt, gt), (re, ge) = _both(lambda T, a, b: fn(T, a, b) * T.arange(1, 8), x, m, grad=True)
        np.testing.assert_array_equal(re.detach().numpy(), rt.detach().numpy())
        np.testing.assert_array_equal(ge[0], gt[0])
        np.testing.assert_array_equal(ge[1], gt[1])


def test_remainder_keeps_the_sign_of_an_exact_zero():
    a = np.array([-4.0, 4.0, -3.5, 3.5, 5.0, -5.0, 0.0, -0.0])
    b = np.array([2.0, -2.0, 2.0, -2.0, np.inf, np.inf, -3.0, 3.0])
    (rt, _), (re, _) = _both(lambda T, x, y: 1 / T.remainder(x, y), a, b)
    np.testing.assert_array_equal(re.numpy(), rt.numpy())


def test_matmul_with_an_empty_inner_dimension():
    (rt, _), (re, _) = _both(lambda T, a, b: a @ b, np.ones((2, 1, 0)), np.ones(0))
    assert tuple(re.shape) == tuple(rt.shape) == (2, 1)
    np.testing.assert_array_equal(re.numpy(), rt.numpy())


def test_small_shape_and_sign_cases():
    assert tuple(ember.movedim(ember.tensor(2.0), 0, -1).shape) == ()
    t, e = _error_types(lambda T: +T.tensor([True]))
    assert isinstance(t, RuntimeError) and isinstance(e, RuntimeError)
    t, e = _error_types(lambda T: T.nn.functional.group_norm(T.ones(1, 4), 4))
    assert isinstance(t, ValueError) and isinstance(e, ValueError)
    assert tuple(ember.nn.functional.group_norm(ember.ones(0, 2, 3), 1).shape) == (0, 2, 3)
    (rt, _), (re, _) = _both(lambda T, x: T.nn.functional.hardtanh(x), np.array([3, -4, 0]))
    assert re.tolist() == rt.tolist() and str(re.dtype) == "ember.int64"
    (rt, _), (re, _) = _both(lambda T, x, y: T.hypot(x, y), np.ones(2), np.array([1, 2]))
    np.testing.assert_allclose(re.numpy(), rt.numpy())


def test_empty_results_broadcast_and_divide_nothing():
    x, i = np.ones((2, 2, 0)), np.zeros((1, 1, 1), np.int64)
    (rt, _), (re, _) = _both(lambda T, a, b: T.take_along_dim(a, b, 1), x, i)
    assert tuple(re.shape) == tuple(rt.shape) == (2, 1, 0)
    a, b = np.ones((0, 1), np.int64), np.array([False])
    (rt, _), (re, _) = _both(lambda T, u, v: T.div(u, v, rounding_mode="trunc"), a, b)
    assert tuple(re.shape) == tuple(rt.shape) == (0, 1)


def test_cat_keeps_a_legacy_empty_operand_in_the_history():
    for T in (torch, ember):
        e = T.zeros(0, requires_grad=True)
        r = T.cat([T.ones(2, 3), e], 1)
        assert r.requires_grad and tuple(r.shape) == (2, 3)
        r.sum().backward()
        assert tuple(e.grad.shape) == (0,)


def test_roll_of_an_empty_tensor_reads_no_dims():
    # PyTorch copies an empty tensor before looking at dims (out of range ones too), but still
    # checks that shifts and dims pair up
    for shifts, dims in [((1,), (5,)), ((1, 2), (5, -7)), (3, None)]:
        (rt, _), (re, _) = _both(lambda T, v, s=shifts, d=dims: T.roll(v, s, d), np.ones((0, 3)))
        assert tuple(re.shape) == tuple(rt.shape) == (0, 3)
    for shifts, dims in [((1, 2), (5,)), ((), ())]:
        t, e = _error_types(lambda T, s=shifts, d=dims: T.roll(T.ones(0, 3), s, d))
        assert isinstance(t, RuntimeError) and isinstance(e, RuntimeError)
