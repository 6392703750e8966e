"""Numerics that differed from PyTorch (issue 18), each checked against torch 2.13 on the CPU
where it is installed and against values worked out by hand or in float64 otherwise. The
op-by-op comparison of every public function is tests/ops/test_opinfo.py."""

import numpy as np
import pytest

import ember
import ember.nn.functional as F

try:
    import torch
    import torch.nn.functional as TF
except ImportError:
    torch = TF = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")


# ------------------------------------------------------------------------- Python data


def test_python_floats_convert_straight_to_the_requested_dtype():
    assert ember.tensor(0.7, dtype=ember.float64).item() == 0.7  # not float32's 0.699999988
    assert ember.as_tensor([0.7], dtype=ember.float64).tolist() == [0.7]
    assert ember.Tensor([[0.1, 0.7]], dtype=ember.float64).tolist() == [[0.1, 0.7]]
    big = ember.tensor([1e300, -1e300], dtype=ember.float64)
    assert np.isfinite(big.numpy()).all() and big.tolist() == [1e300, -1e300]
    assert ember.tensor(2**53 + 1, dtype=ember.int64).item() == 2**53 + 1
    # without a dtype: the default float, rounded once from the Python double
    assert ember.tensor([0.7]).dtype == ember.float32
    assert ember.tensor([0.7]).numpy()[0] == np.float32(0.7)
    assert ember.tensor([1e300]).numpy()[0] == np.inf  # (as PyTorch: float32 overflows)
    assert ember.tensor([0.7], dtype=ember.bfloat16).numpy()[0] == np.asarray(
        0.7, ember.bfloat16.np
    )


# ------------------------------------------------------------------------------ arange


def test_float_arange_rounds_each_value_once():
    # start + i * step in double, rounded once to float32 (NumPy's float32 arange was an
    # ulp off in 41 of these 100 values)
    got = ember.arange(0, 10, 0.1).numpy()
    np.testing.assert_array_equal(got, (np.arange(100) * 0.1).astype(np.float32))
    got = ember.arange(-3.3, 7.1, 0.37, dtype=ember.float64).numpy()
    np.testing.assert_array_equal(got, np.arange(29) * 0.37 + -3.3)
    assert ember.arange(5).dtype == ember.int64 and ember.arange(0, 1, 0.25).shape == (4,)
    assert ember.arange(10, 0, -1.5).tolist() == [10.0, 8.5, 7.0, 5.5, 4.0, 2.5, 1.0]


@needs_torch
def test_float_arange_is_within_an_ulp_of_pytorchs():
    # (PyTorch's vectorized kernel adds j * step to each vector's float32-rounded first value,
    # so some of its values are an ulp of that first value away from the once-rounded ones,
    # which ember keeps: 17 of arange(0, 10, 0.1)'s 100 on an AVX512 machine)
    for args in [(0, 10, 0.1), (0, 1, 0.01), (-3.3, 7.1, 0.37), (0, 100, 0.3)]:
        got = ember.arange(*args).numpy()
        want = torch.arange(*args).numpy()
        assert got.shape == want.shape
        assert np.all(np.abs(got - want) <= np.spacing(np.abs(want).max())), args


# ------------------------------------------------------------------------- reductions


def _relative(got, exact):
    return np.max(np.abs(np.asarray(got, np.float64) - exact) / np.abs(exact))


def test_float32_sum_over_a_long_strided_axis_is_accurate():
    x = np.random.default_rng(0).standard_normal((100000, 2)).astype(np.float32) + 1
    exact = x.astype(np.float64).sum(0)
    assert _relative(ember.tensor(x).sum(0).numpy(), exact) < 1e-7  # was 5e-6 (torch: 6e-8)
    transposed = np.ascontiguousarray(x.T).T  # the same values, columns along memory
    assert _relative(ember.tensor(transposed).sum(0).numpy(), exact) < 1e-7
    assert _relative(ember.tensor(x).mean(0).numpy(), exact / len(x)) < 1e-7
    three = x.reshape(1000, 100, 2)
    exact3 = three.astype(np.float64).sum((0, 1))
    assert _relative(ember.tensor(three).sum((0, 1)).numpy(), exact3) < 1e-7


def test_var_keeps_float32_accuracy_when_the_mean_dwarfs_the_spread():
    r = np.random.default_rng(0)
    for mean, spread in [(1e4, 1.0), (1e3, 1e-2), (1e5, 1.0)]:
        x = (r.standard_normal((100, 10)) * spread + mean).astype(np.float32)
        exact = x.astype(np.float64).var(0, ddof=1)
        assert _relative(ember.tensor(x).var(0).numpy(), exact) < 1e-6  # was 3e-4
        assert _relative(ember.tensor(x).std(0).numpy(), np.sqrt(exact)) < 1e-6
        all_exact = x.astype(np.float64).var(ddof=0)
        assert _relative(ember.tensor(x).var(correction=0).numpy(), all_exact) < 1e-6


def test_var_gradient_is_the_centred_data():
    x = ember.tensor([[1.0, 2.0, 4.0], [3.0, 3.0, 9.0]], dtype=ember.float64, requires_grad=True)
    x.var(1).sum().backward()
    data = x.detach().numpy()
    want = 2 * (data - data.mean(1, keepdims=True)) / 2
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-14)


def test_half_cumsum_accumulates_in_float32_and_float32_in_double():
    ones = ember.ones(5000, dtype=ember.float16)
    assert ones.cumsum(0)[-1].item() == 5000.0  # a float16 running sum stalls at 2048
    x = np.random.default_rng(1).standard_normal(100000).astype(np.float32) + 0.3
    want = np.cumsum(x, dtype=np.float64).astype(np.float32)
    np.testing.assert_array_equal(ember.tensor(x).cumsum(0).numpy(), want)
    if torch is not None:
        h = x[:3000].astype(np.float16)
        np.testing.assert_array_equal(
            ember.tensor(h).cumsum(0).numpy(), torch.tensor(h).cumsum(0).numpy()
        )
        np.testing.assert_array_equal(
            ember.tensor(x).cumsum(0).numpy(), torch.tensor(x).cumsum(0).numpy()
        )


def test_cumsum_takes_a_dtype():
    out = ember.cumsum(ember.tensor([1, 2, 3]), 0, dtype=ember.float32)
    assert out.dtype == ember.float32 and out.tolist() == [1.0, 3.0, 6.0]
    assert ember.tensor([True, True]).cumsum(0).dtype == ember.int64


def test_logsumexp_over_an_empty_dim_is_minus_inf():
    out = ember.logsumexp(ember.zeros(2, 0), 1)
    assert out.shape == (2,) and out.tolist() == [-np.inf, -np.inf]
    assert ember.logsumexp(ember.zeros(0, 3), 0, keepdim=True).shape == (1, 3)


def test_an_empty_dim_tuple_reduces_every_dimension():
    x = ember.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 7.0]])
    assert ember.sum(x, ()).item() == 22.0 and x.sum(dim=[]).shape == ()
    assert x.mean(()).item() == pytest.approx(22.0 / 6)
    assert x.amax(()).item() == 7.0 and x.amin(()).item() == 1.0
    assert x.var(()).item() == pytest.approx(np.var(x.numpy(), ddof=1))
    assert (x > 2).all(()).shape == (2, 3)  # PyTorch's all and any reduce nothing on ()


# ----------------------------------------------------------------------------- promotion


def test_zero_dim_tensors_promote_below_dimensioned_ones():
    f32, f64 = ember.ones(3), ember.tensor(2.0, dtype=ember.float64)
    assert (f32 * f64).dtype == ember.float32  # PyTorch: float32
    assert (f64 * f32).dtype == ember.float32
    assert ember.where(f32 > 0, f32, f64).dtype == ember.float32
    ints = ember.ones(3, dtype=ember.int32)
    assert (ints * f64).dtype == ember.float64  # a higher category: the 0-d tensor's dtype
    assert (ints * ember.tensor(2, dtype=ember.int64)).dtype == ember.int32
    assert (ember.ones(3, dtype=ember.bool_) * ember.tensor(2, dtype=ember.int8)).dtype == (
        ember.int8
    )
    assert (ember.tensor(2, dtype=ember.int8) * 2.5).dtype == ember.float32
    assert ember.cat([f32, ember.ones(2, dtype=ember.float64)]).dtype == ember.float64


@needs_torch
def test_result_type_table_equals_pytorchs():
    names = ["bool", "uint8", "int8", "int16", "int32", "int64"]
    names += ["float16", "bfloat16", "float32", "float64"]
    for a in names:
        for b in names:
            for shapes in [((2,), (2,)), ((2,), ()), ((), (2,)), ((), ())]:
                x = ember.ones(shapes[0], dtype=getattr(ember, a))
                y = ember.ones(shapes[1], dtype=getattr(ember, b))
                tx = torch.ones(shapes[0], dtype=getattr(torch, a))
                ty = torch.ones(shapes[1], dtype=getattr(torch, b))
                want = str(torch.result_type(tx, ty)).split(".")[1]
                assert ember.result_type(x, y).name == want, (a, b, shapes)
        for scalar in (True, 2, 2.5):
            for shape in ((2,), ()):
                x = ember.ones(shape, dtype=getattr(ember, a))
                tx = torch.ones(shape, dtype=getattr(torch, a))
                want = str(torch.result_type(tx, scalar)).split(".")[1]
                assert ember.result_type(x, scalar).name == want, (a, scalar, shape)


# ------------------------------------------------------------------------ in-place ops


def _inplace_grads(lib, method, operand_requires_grad=False):
    x = lib.tensor([0.5, 1.5, -2.0, 0.25], dtype=lib.float64, requires_grad=True)
    w = lib.tensor([1.0, 2.0, 3.0, -0.5], dtype=lib.float64, requires_grad=operand_requires_grad)
    b = x * 2
    method(b, w)
    (b * b).sum().backward()
    return x.grad.numpy(), None if w.grad is None else w.grad.numpy()


def _imul(b, w):
    b *= w


INPLACE = {
    "pow_": lambda b, w: b.pow_(2),
    "pow_ tensor": lambda b, w: b.abs_().pow_(w),
    "clamp_": lambda b, w: b.clamp_(-1.0, 2.0),
    "abs_": lambda b, w: b.abs_(),
    "sin_": lambda b, w: b.sin_(),
    "exp_": lambda b, w: b.exp_(),
    "mul_": lambda b, w: b.mul_(w),
    "div_": lambda b, w: b.div_(w),
    "*=": _imul,
    "sigmoid_": lambda b, w: b.sigmoid_(),
    "tanh_": lambda b, w: b.tanh_(),
}


@pytest.mark.parametrize("name", sorted(INPLACE))
def test_inplace_ops_on_non_leaf_tensors_backpropagate(name):
    method = INPLACE[name]
    for wants_w in (False, True):
        gx, gw = _inplace_grads(ember, method, wants_w)
        # the out-of-place twin's gradients
        x = ember.tensor([0.5, 1.5, -2.0, 0.25], dtype=ember.float64, requires_grad=True)
        w = ember.tensor([1.0, 2.0, 3.0, -0.5], dtype=ember.float64, requires_grad=wants_w)
        twin = {
            "pow_": lambda b: b**2,
            "pow_ tensor": lambda b: b.abs() ** w,
            "clamp_": lambda b: b.clamp(-1.0, 2.0),
            "abs_": lambda b: b.abs(),
            "sin_": lambda b: b.sin(),
            "exp_": lambda b: b.exp(),
            "mul_": lambda b: b * w,
            "div_": lambda b: b / w,
            "*=": lambda b: b * w,
            "sigmoid_": lambda b: b.sigmoid(),
            "tanh_": lambda b: b.tanh(),
        }[name](x * 2)
        (twin * twin).sum().backward()
        np.testing.assert_allclose(gx, x.grad.numpy(), rtol=1e-12)
        if wants_w and w.grad is not None:
            np.testing.assert_allclose(gw, w.grad.numpy(), rtol=1e-12)
        if torch is not None:
            tx, tw = _inplace_grads(torch, method, wants_w)
            np.testing.assert_allclose(gx, tx, rtol=1e-12)
            if tw is not None:
                np.testing.assert_allclose(gw, tw, rtol=1e-12)


def test_an_ops_saved_result_survives_a_later_inplace_op():
    # exp_ saves exp's result, which is its own array (then copied into b): a later in-place
    # op on b leaves it intact, so the chain differentiates correctly (PyTorch, which saves
    # b's memory itself, refuses this chain)
    x = ember.tensor([0.5, -1.0], dtype=ember.float64, requires_grad=True)
    b = x * 2
    b.exp_().sqrt_()
    b.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.exp(x.detach().numpy()), rtol=1e-14)


def test_a_value_saved_before_an_inplace_op_is_still_guarded():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    a = x * 2
    b = a * a  # saves a
    a.sin_()  # sin_ gets a's old value; b's saved a is overwritten all the same
    with pytest.raises(ember.AutogradError, match="modified by an in-place operation"):
        b.sum().backward()


# ------------------------------------------------ gradients, NaN, division, rounding


def test_max_min_with_dim_send_the_gradient_to_the_returned_index():
    x = ember.tensor([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]], requires_grad=True)
    values, indices = ember.max(x, 1)
    values.sum().backward()
    assert indices.tolist() == [1, 0]
    assert x.grad.tolist() == [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]  # not 0.5 and 0.5
    x.grad = None
    values, indices = x.min(0, keepdim=True)
    values.sum().backward()
    assert indices.tolist() == [[0, 1, 1]] and values.shape == (1, 3)
    assert x.grad.tolist() == [[1.0, 0.0, 0.0], [0.0, 1.0, 1.0]]
    x.grad = None
    x.amax(1).sum().backward()  # amax keeps sharing ties, as PyTorch's does
    assert x.grad.tolist() == [[0.0, 0.5, 0.5], [0.5, 0.5, 0.0]]
    assert ember.max(ember.tensor(3.0), 0) == (3.0, 0)  # a 0-d tensor's dim 0


def test_pow_gradient_at_zero_to_the_zero():
    x = ember.tensor([0.0, 0.0, 2.0], requires_grad=True)
    y = ember.tensor([0.0, 2.0, 0.0], requires_grad=True)
    (x**y).sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0]  # 0 * 0**-1 was NaN
    assert y.grad.tolist() == [0.0, 0.0, pytest.approx(np.log(2.0))]
    z = ember.tensor([0.0], requires_grad=True)
    (z**0).sum().backward()
    assert z.grad.tolist() == [0.0]


def test_threshold_and_shrinks_keep_nan():
    x = ember.tensor([float("nan"), 0.3, 0.7, -0.7], requires_grad=True)
    for fn, want in [
        (lambda t: F.threshold(t, 0.5, -1.0), [np.nan, -1.0, 0.7, -1.0]),
        (F.hardshrink, [np.nan, 0.0, 0.7, -0.7]),
        (F.softshrink, [np.nan, 0.0, 0.2, -0.2]),
    ]:
        x.grad = None
        out = fn(x)
        np.testing.assert_allclose(out.detach().numpy(), want, rtol=1e-6)
        out.sum().backward()
        assert x.grad.tolist()[0] == 1.0  # PyTorch passes the gradient through NaN


def test_sign_of_nan_is_zero():
    for dtype in (ember.float32, ember.float64, ember.float16, ember.bfloat16):
        x = ember.tensor([float("nan"), -2.0, 0.0, 3.0], dtype=dtype)
        assert ember.sign(x).tolist() == [0.0, -1.0, 0.0, 1.0]


def test_integer_floor_division_and_remainder_by_zero_raise():
    a, b = ember.tensor([5, 6]), ember.tensor([2, 0])
    with pytest.raises(ember.DivisionByZeroError, match="floor_div: integer division by zero"):
        a // b
    with pytest.raises(ember.DivisionByZeroError, match="mod: integer division by zero"):
        a.remainder(b)
    assert (a // 2).tolist() == [2, 3] and (a % ember.tensor([2, 4])).tolist() == [1, 2]
    assert np.isinf((ember.tensor([1.0]) // 0).item())  # floats divide by zero as IEEE says


def test_round_to_decimals():
    x = ember.tensor([1.2345, -2.5, 0.125, 1234.5])
    assert ember.round(x, decimals=2).numpy().tolist() == pytest.approx([1.23, -2.5, 0.12, 1234.5])
    assert x.round(decimals=-2).tolist() == [0.0, -0.0, 0.0, 1200.0]
    y = x.clone()
    y.round_(decimals=1)
    assert y.numpy().tolist() == pytest.approx([1.2, -2.5, 0.1, 1234.5])
    if torch is not None:
        data = np.random.default_rng(0).standard_normal(1000).astype(np.float32) * 100
        for d in (-2, -1, 1, 2, 3):
            np.testing.assert_array_equal(
                ember.round(ember.tensor(data), decimals=d).numpy(),
                torch.round(torch.tensor(data), decimals=d).numpy(),
            )


# ---------------------------------------------------------------------- call forms


def test_tensor_where_method_keeps_self():
    x = ember.tensor([1.0, 2.0, 3.0])
    assert x.where(ember.tensor([True, False, True]), 0.0).tolist() == [1.0, 0.0, 3.0]
    assert ember.where(x > 1.5, x, -x).tolist() == [-1.0, 2.0, 3.0]


def test_float_math_on_integer_tensors_promotes_to_the_default_float():
    ints = ember.tensor([1, 2, 3])
    for name in ("exp", "log", "sqrt", "sin", "cos", "tanh", "sigmoid", "rsqrt", "erf"):
        out = getattr(ember, name)(ints)
        assert out.dtype == ember.float32, name
        want = getattr(ember, name)(ember.tensor([1.0, 2.0, 3.0]))
        np.testing.assert_array_equal(out.numpy(), want.numpy())
    assert ember.logsumexp(ints, 0).item() == pytest.approx(np.log(np.exp([1, 2, 3]).sum()))
    assert ember.exp(ember.tensor([True])).dtype == ember.float32
    with pytest.raises(ember.DTypeError, match="cannot be written in place"):
        ints.exp_()  # (the float result does not fit an int64 tensor: PyTorch refuses too)


def test_movedim_takes_tuples():
    x = ember.zeros(2, 3, 4, 5)
    assert ember.movedim(x, (0, 1), (3, 0)).shape == (3, 4, 5, 2)
    assert x.movedim((-1, 0), (0, -1)).shape == (5, 3, 4, 2)
    assert ember.movedim(x, 1, -1).shape == (2, 4, 5, 3)
    with pytest.raises(ember.ShapeError, match="repeats"):
        ember.movedim(x, (0, 0), (1, 2))


def test_pad_with_negative_sizes_crops():
    x = ember.arange(6.0).reshape(1, 1, 6)
    assert F.pad(x, (-1, -2)).tolist() == [[[1.0, 2.0, 3.0]]]
    assert F.pad(x, (2, -1)).tolist() == [[[0.0, 0.0, 0.0, 1.0, 2.0, 3.0, 4.0]]]
    assert F.pad(x, (-2, 2), mode="circular").tolist() == [[[2.0, 3.0, 4.0, 5.0, 2.0, 3.0]]]
    assert F.pad(x, (2, -1), mode="reflect").tolist() == [[[2.0, 1.0, 0.0, 1.0, 2.0, 3.0, 4.0]]]
    with pytest.raises(ember.ShapeError, match="leaves dimension 2"):
        F.pad(x, (-4, -4))
    y = ember.arange(6.0, requires_grad=True)
    F.pad(y, (-1, 2), value=9.0).sum().backward()
    assert y.grad.tolist() == [0.0, 1.0, 1.0, 1.0, 1.0, 1.0]


def test_one_argument_where_is_nonzero_as_a_tuple():
    rows, cols = ember.where(ember.tensor([[True, False], [False, True]]))
    assert rows.tolist() == [0, 1] and cols.tolist() == [0, 1]


# ------------------------------------------- found by the OpInfo suite (tests/ops/test_opinfo.py)


def test_bool_tensors_where_pytorch_takes_or_refuses_them():
    b = ember.tensor([True, False])
    assert ember.sign(b).tolist() == [True, False] and ember.sign(b).dtype == ember.bool_
    assert b.amax().item() is True and ember.max(b, 0) == (True, 0)
    assert b.clamp(min=0.5).tolist() == [1.0, 0.5] and b.clamp(0, 1).dtype == ember.int64
    for refused in (
        lambda: b - b,
        lambda: 2.5 - b,
        lambda: ember.ones(2) - True,
        lambda: b % b,
        lambda: b // b,
        lambda: b**b,
        lambda: ember.argmax(b),
        lambda: b.clamp(min=True),
    ):
        with pytest.raises(ember.DTypeError):
            refused()


@needs_torch
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_scalar_powers_are_pytorchs_arithmetic():
    """x ** 2, 3, -0.5, -1, -2 by a Python number: PyTorch's products and quotients (not
    powf), bit for bit, special values included; 0.5 is the correctly rounded sqrt (PyTorch's
    float32 sqrt is not: it may differ from it by an ulp); a tensor exponent stays pow."""
    rng = np.random.default_rng(0)
    for dtype in (np.float32, np.float64):
        x = (rng.standard_normal(4000) * 5).astype(dtype)
        x[:6] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30]
        for p in (2, 3, -0.5, -1, -2, 2.0, 3.0):
            got, want = (ember.tensor(x) ** p).numpy(), (torch.tensor(x) ** p).numpy()
            np.testing.assert_array_equal(got, want, err_msg=f"{dtype} ** {p}")
        np.testing.assert_array_equal((ember.tensor(x) ** 0.5).numpy(), np.sqrt(x))
        assert ember.pow(ember.tensor(x), 3).dtype == ember.tensor(x).dtype
        tensor_exponent = np.full_like(x, 3)
        np.testing.assert_array_equal(
            ember.pow(ember.tensor(x), ember.tensor(tensor_exponent)).numpy(),
            np.power(x, tensor_exponent),
        )


def test_integer_powers_and_wrapping_scalars():
    x = ember.tensor([2, 3, -2, 1, -1, -1])
    y = ember.tensor([-1, 2, -3, -4, -3, -2])
    assert (x**y).tolist() == [0, 9, 0, 1, -1, 1]  # PyTorch's truncated 1 / x
    with pytest.raises(ember.DTypeError, match="negative integer powers"):
        x**-1
    u = ember.tensor([5, 6], dtype=ember.uint8)
    assert (u - 1).tolist() == [4, 5] and (u + 300).tolist() == [49, 50]  # wraps, as in torch
    assert u.masked_fill(ember.tensor([True, False]), -1).tolist() == [255, 6]


def test_maximum_and_minimum_gradients_at_nan_and_ties():
    x = ember.tensor([1.0, 2.0, float("nan"), 5.0], requires_grad=True)
    y = ember.tensor([1.0, 0.0, 4.0, float("nan")], requires_grad=True)
    ember.maximum(x, y).sum().backward()
    # a tie splits, the loser gets nothing, NaN (no order) gives both all of it (PyTorch's)
    assert x.grad.tolist() == [0.5, 1.0, 1.0, 1.0] and y.grad.tolist() == [0.5, 0.0, 1.0, 1.0]


def test_hardswish_gradient_at_infinity_and_int_promotions():
    x = ember.tensor([float("inf"), -float("inf"), 1.0], requires_grad=True)
    out = F.hardswish(x)
    out.sum().backward()
    assert out.tolist()[:2] == [float("inf"), 0.0]
    assert x.grad.tolist()[:2] == [1.0, 0.0]  # (0 * inf = NaN before)
    assert F.tanhshrink(ember.tensor([1, 2])).dtype == ember.float32
    assert ember.tensor(1.5).cumsum(0).shape == ()  # (a 0-d input gave (1,))
    added = ember.zeros(3, dtype=ember.int32).index_add(
        0, ember.tensor([0, 0]), ember.ones(2, dtype=ember.int32), alpha=2
    )
    assert added.dtype == ember.int32 and added.tolist() == [4, 0, 0]


def test_filling_a_non_leaf_keeps_it_in_the_graph_with_a_zero_gradient():
    x = ember.tensor([1.0, float("inf")], requires_grad=True)
    y = x * 2
    y.fill_(3.0)  # (PyTorch: y still requires grad; its old value gets a zero gradient)
    assert y.requires_grad and y.grad_fn is not None and y.tolist() == [3.0, 3.0]
    y.sum().backward()
    assert x.grad.tolist() == [0.0, 0.0]  # (no 0 * inf = NaN from the old value)
    z = x * 2
    z.copy_(ember.tensor([5.0, 6.0]))
    (z * z).sum().backward()
    assert x.grad.tolist() == [0.0, 0.0]


def test_half_precision_sigmoid_and_glu_kernels_round_once_as_pytorch():
    """The NumPy kernels (the interpreter's, the specification) of sigmoid and glu compute
    16-bit operands in float32 and round once, as PyTorch's CPU kernels and ember's C loops:
    step by step in 16 bits, 4 in 10 sigmoids were an ulp or more off."""
    torch = pytest.importorskip("torch")
    import ml_dtypes

    from ember.ops._registry import REGISTRY

    x = np.random.default_rng(0).standard_normal((64, 32)).astype(np.float32) * 4
    for np_dtype, torch_dtype in (
        (ml_dtypes.bfloat16, torch.bfloat16),
        (np.float16, torch.float16),
    ):
        half = x.astype(np_dtype)
        t = torch.tensor(x).to(torch_dtype).requires_grad_()
        got = REGISTRY["sigmoid"].kernel(half)
        np.testing.assert_array_equal(got.astype(np.float32), t.sigmoid().float().detach().numpy())
        y = torch.nn.functional.glu(t, dim=1)
        got = REGISTRY["glu"].kernel(half, axis=1)
        np.testing.assert_array_equal(got.astype(np.float32), y.float().detach().numpy())
        # the backward against float64's, rounded once: within half an ulp of 16 bits
        # (PyTorch's float32 s (1 - s) loses its value where s rounds to 1; e / (1 + e)^2 not)
        wide = torch.tensor(half.astype(np.float64), requires_grad=True)
        (want,) = torch.autograd.grad(
            torch.nn.functional.glu(wide, dim=1), wide, torch.ones(64, 16)
        )
        got = REGISTRY["glu_backward"].kernel(half, np.ones((64, 16), np_dtype), axis=1)
        eps = float(ml_dtypes.finfo(np_dtype).eps)
        tiny = float(ml_dtypes.finfo(np_dtype).smallest_subnormal)
        error = np.abs(got.astype(np.float64) - want.numpy())
        assert (error <= eps / 2 * np.abs(want.numpy()) * 1.01 + tiny).all(), error.max()


@pytest.mark.parametrize("grad", [False, True])
def test_half_precision_attention_is_computed_in_float32_and_rounded_once(grad):
    """scaled_dot_product_attention on bfloat16/float16 operands (the fused op without grad,
    the composite with it; a float mask of the query's dtype, causal) is the float32
    computation rounded once, as PyTorch's CPU attention accumulates in float: within half an
    ulp of float64's, and so are the gradients. Rounded op by op it was an ulp off on average
    and hundreds where the output cancels."""
    torch = pytest.importorskip("torch")
    import ml_dtypes

    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal((2, 3, 12, 8)).astype(np.float32) for _ in range(4)]
    mask = np.where(rng.random((12, 12)) < 0.3, -np.inf, rng.standard_normal((12, 12)))
    mask[:, 0] = 0.0
    for np_dtype in (ml_dtypes.bfloat16, np.float16):
        half = [a.astype(np_dtype) for a in arrays]
        eps = float(ml_dtypes.finfo(np_dtype).eps)
        for kw in ({"is_causal": True}, {"attn_mask": mask.astype(np_dtype)}):
            t_kw = dict(kw)
            if "attn_mask" in kw:
                t_kw["attn_mask"] = torch.tensor(kw["attn_mask"].astype(np.float64))
            wide = [torch.tensor(a.astype(np.float64), requires_grad=True) for a in half[:3]]
            want = torch.nn.functional.scaled_dot_product_attention(*wide, **t_kw)
            want_grads = torch.autograd.grad(want, wide, torch.tensor(half[3].astype(np.float64)))
            e_kw = dict(kw)
            if "attn_mask" in kw:
                e_kw["attn_mask"] = ember.tensor(kw["attn_mask"])
            ins = [ember.tensor(a, requires_grad=grad) for a in half[:3]]
            out = F.scaled_dot_product_attention(*ins, **e_kw)
            assert out.dtype == ember.tensor(half[0]).dtype
            got = out.float().detach().numpy().astype(np.float64)
            truth = want.detach().numpy()
            # half an ulp of the rounding, and float32's own error on the sums
            bound = (0.5 * eps * 1.01) * np.abs(truth) + 1e-5 * np.abs(truth).max()
            assert (np.abs(got - truth) <= bound).all(), np.abs(got - truth).max()
            if grad:
                out.backward(ember.tensor(half[3]))
                for t, w in zip(ins, want_grads):
                    w = w.numpy()
                    g = t.grad.float().numpy().astype(np.float64)
                    bound = (0.5 * eps * 1.01) * np.abs(w) + 1e-5 * np.abs(w).max()
                    assert (np.abs(g - w) <= bound).all(), np.abs(g - w).max()


def test_half_precision_rms_norm_is_pytorchs_float32_computation():
    """rms_norm of bfloat16/float16 input is computed in float32 and rounded once, its weight's
    product included, with float32's epsilon by default: PyTorch's bits (op by op in 16 bits,
    with the 16-bit epsilon, a quarter of the values were an ulp off)."""
    torch = pytest.importorskip("torch")
    import ml_dtypes

    rng = np.random.default_rng(0)
    x = (rng.standard_normal((16, 64)) * 2).astype(np.float32)
    w = rng.standard_normal(64).astype(np.float32)
    for np_dtype, torch_dtype in (
        (ml_dtypes.bfloat16, torch.bfloat16),
        (np.float16, torch.float16),
    ):
        for weight in (None, w):
            tw = None if weight is None else torch.tensor(weight).to(torch_dtype)
            want = torch.nn.functional.rms_norm(torch.tensor(x).to(torch_dtype), (64,), tw)
            ew = None if weight is None else ember.tensor(weight.astype(np_dtype))
            got = F.rms_norm(ember.tensor(x.astype(np_dtype)), (64,), ew)
            assert got.dtype == ember.tensor(x.astype(np_dtype)).dtype
            np.testing.assert_array_equal(got.float().numpy(), want.float().numpy())


def test_half_precision_var_and_std_are_computed_in_float32_and_rounded_once():
    """var and std of bfloat16/float16 input: float32 arithmetic rounded once, PyTorch's bits
    (the centred values and their sums rounded to 16 bits had lost the digits that the
    shifted sums' cancellation leaves)."""
    torch = pytest.importorskip("torch")
    import ml_dtypes

    x = (np.random.default_rng(0).standard_normal((16, 64)) * 2 + 3).astype(np.float32)
    for np_dtype, torch_dtype in (
        (ml_dtypes.bfloat16, torch.bfloat16),
        (np.float16, torch.float16),
    ):
        t, e = torch.tensor(x).to(torch_dtype), ember.tensor(x.astype(np_dtype))
        for name, kw in (("var", {"dim": 1}), ("std", {"dim": 1, "correction": 0}), ("var", {})):
            want = getattr(t, name)(**kw).float().numpy()
            got = getattr(e, name)(**kw)
            assert got.dtype == e.dtype
            np.testing.assert_array_equal(got.float().numpy(), want)
