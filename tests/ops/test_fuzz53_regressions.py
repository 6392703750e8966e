"""Regressions found by differential fuzzing against PyTorch (tests/torch_diff_fuzzing.py,
seeds 100000 on): each case runs on both frameworks and compares."""

import numpy as np
import pytest
import torch

import ember


def _both(fn):
    return fn(torch), fn(ember)


@pytest.mark.parametrize("name", ["cummax", "cummin"])
@pytest.mark.parametrize("dim", [-4, 3, 7])
def test_running_extrema_of_an_empty_tensor_ignore_the_dim(name, dim):
    # PyTorch returns the empty result before it reads the dim (cumsum checks it)
    t, e = _both(lambda T: getattr(T, name)(T.ones(3, 0, 3, requires_grad=True), dim))
    assert tuple(e.values.shape) == tuple(t.values.shape) == (3, 0, 3)
    assert tuple(e.indices.shape) == tuple(t.indices.shape)
    assert e.values.requires_grad == t.values.requires_grad
    for T in (torch, ember):
        with pytest.raises(IndexError):
            getattr(T, name)(T.ones(()), dim)
    np.testing.assert_array_equal(e.indices.numpy(), t.indices.numpy())


@pytest.mark.parametrize("name", ["sum", "prod", "nansum", "cumsum", "cumprod"])
@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "bool", "int64", "float16"])
def test_reduction_dtype_argument_is_the_result_dtype(name, dtype):
    # a narrower integer dtype= wraps; bool is the OR/AND of the truths (scans have no bool
    # kernel and raise NotImplementedError)
    def run(T):
        x = T.tensor([[100, 100, 3], [-7, 0, 120]], dtype=T.int16)
        return getattr(T, name)(x, 1, dtype=getattr(T, dtype))

    if name.startswith("cum") and dtype == "bool":
        for T in (torch, ember):
            with pytest.raises(NotImplementedError):
                run(T)
        return
    t, e = _both(run)
    assert str(e.dtype).rsplit(".")[-1] == str(t.dtype).rsplit(".")[-1]
    np.testing.assert_array_equal(e.numpy(), t.numpy())


@pytest.mark.parametrize("name", ["sum", "prod", "nansum", "cumsum", "cumprod"])
def test_integer_result_of_a_tensor_requiring_grad_is_refused(name):
    for T in (torch, ember):
        x = T.ones(3, requires_grad=True)
        with pytest.raises(RuntimeError):
            getattr(T, name)(x, 0, dtype=T.int32)
        with T.no_grad():
            assert getattr(T, name)(x, 0, dtype=T.int32).dtype == T.int32
    with pytest.raises(NotImplementedError):
        ember.nansum(ember.ones(2), dtype=ember.complex64)


@pytest.mark.parametrize("dtype", ["int32", "uint8", "int8"])
@pytest.mark.parametrize("value", [2**31, 300, -129, 2**63 - 1])
def test_inplace_integer_scalar_out_of_range_wraps(dtype, value):
    # PyTorch wraps the Python int to the tensor's dtype; NumPy's in-place ufunc refused it
    def run(T):
        x = T.tensor([1, 2, 100], dtype=getattr(T, dtype))
        x -= value
        x.add_(value).mul_(value)
        return x

    t, e = _both(run)
    assert e.tolist() == t.tolist()


@pytest.mark.parametrize("name", ["all", "any"])
def test_all_any_of_uint8_stay_uint8(name):
    for call in (lambda T, x: getattr(T, name)(x), lambda T, x: getattr(x, name)(1, keepdim=True)):
        t, e = _both(lambda T: call(T, T.tensor([[3, 0], [1, 1]], dtype=T.uint8)))
        assert str(e.dtype) == "ember.uint8" and t.dtype == torch.uint8
        assert e.tolist() == t.tolist()


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("decimals", [1, 2, -1])
def test_round_decimals_of_16_bit_floats_rounds_once(dtype, decimals):
    # PyTorch scales, rounds and unscales in float32 (0.3496 in bfloat16 * 10 is 3.5 there)
    v = [0.8, 0.49, -1.9, 0.25, 0.35, 0.45, 1234.5, 0.015, 12.34, -0.051]
    t, e = _both(lambda T: T.tensor(v).to(getattr(T, dtype)).round(decimals=decimals))
    assert e.float().tolist() == t.float().tolist()


def test_bool_scan_of_a_0d_or_empty_tensor_needs_no_kernel():
    for shape in [(), (0,), (2, 0)]:
        t, e = _both(lambda T, s=shape: T.cumsum(T.ones(s, dtype=T.uint8), 0, dtype=T.bool))
        assert e.tolist() == t.tolist() and str(e.dtype) == "ember.bool"


def test_complex_nan_to_num_requiring_grad_and_complex_clamp_bounds_are_refused():
    for T in (torch, ember):
        x = T.tensor([1 + 1j, float("nan")], requires_grad=True)
        with pytest.raises(RuntimeError):
            T.nan_to_num(x)
        with T.no_grad():
            assert T.nan_to_num(x).tolist()[1] == 0j
        for call in (lambda v: v.clamp(1j), lambda v: T.clamp(v, max=1j), lambda v: v.clamp_(-1j)):
            with pytest.raises(RuntimeError):
                call(T.tensor([1, 2], dtype=T.int8))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_normalize_of_16_bit_values_sums_squares_in_float32(dtype):
    # 300 ** 2 overflows float16: PyTorch's norm accumulates in float32 and rounds once
    def run(T):
        x = T.tensor([[200.0, 250.0, 300.0], [1e-3, 0.0, -2e-3]]).to(getattr(T, dtype))
        return T.nn.functional.normalize(x, dim=1)

    t, e = _both(run)
    np.testing.assert_array_equal(e.float().numpy(), t.float().numpy())


@pytest.mark.parametrize("name", ["det", "inv", "cholesky", "eigh", "svdvals", "qr", "slogdet"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_linalg_of_16_bit_matrices_is_not_implemented(name, dtype):
    # PyTorch has no 16-bit LAPACK kernels: NotImplementedError ("lu_cpu" not implemented for
    # 'BFloat16'), or a RuntimeError for inv and slogdet; ember's KernelDTypeError is both
    for T in (torch, ember):
        a = (T.eye(2) * 2).to(getattr(T, dtype))
        with pytest.raises(RuntimeError):
            getattr(T.linalg, name)(a)
    with pytest.raises(NotImplementedError):
        getattr(ember.linalg, name)((ember.eye(2) * 2).to(getattr(ember, dtype)))


def test_histc_result_never_requires_grad():
    t, e = _both(lambda T: T.histc(T.linspace(-1, 1, 7).requires_grad_(), 4, -1, 1))
    assert e.requires_grad == t.requires_grad is False
    assert e.tolist() == t.tolist()


def test_captured_function_returns_a_one_piece_split_of_an_input_as_a_tensor():
    # the returned view of an input is replayed eagerly: a split's op gives a tuple
    def f(x):
        return [*x.split(5, 0), *x.chunk(1, 1), *ember.unbind(x[:1], 0)]

    x = ember.randn(2, 3, requires_grad=True)
    eager, captured = f(x), ember.function(f)(x)
    for a, b in zip(eager, captured):
        assert isinstance(b, ember.Tensor) and tuple(a.shape) == tuple(b.shape)
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())


def test_captured_overwrite_by_a_constant_keeps_the_history():
    # y.copy_(constant) / zero_() / fill_: PyTorch keeps y in the graph (requires grad, zero
    # gradient to its old value); the captured function did not
    def f(T, x):
        y, z, w = x * 1, x * 2, x * 3
        y.copy_(T.tensor(-1.5))
        z.zero_()
        w[0].fill_(2)
        return y, z, w

    grads = []
    for T, g in ((torch, lambda fn: fn), (ember, ember.function)):
        x = T.tensor([0.5, -1.0, 2.0], requires_grad=True)
        outs = g(lambda v: f(T, v))(x)
        assert all(o.requires_grad for o in outs)
        sum((o * T.arange(3)).sum() for o in outs).backward()
        grads.append(x.grad.tolist())
    assert grads[0] == grads[1]


def test_captured_inplace_update_by_a_tensor_requiring_grad_requires_grad():
    # zeros(3).add_(x): the traced tensor did not note that it now requires grad, so a later
    # overwrite by a constant (y.zero_()) dropped it from the graph
    def g(x):
        s = ember.zeros(3, dtype=x.dtype).add_(x)
        y = s * 1
        y.zero_()
        s.mul_(2)
        return [y, s]

    grads = []
    for fn in (g, ember.function(g)):
        x = ember.tensor([0.5, -1.0, 2.0], requires_grad=True)
        outs = fn(x)
        assert [o.requires_grad for o in outs] == [True, True]
        sum((o * ember.arange(3)).sum() for o in outs).backward()
        grads.append(x.grad.tolist())
    assert grads[0] == grads[1] == [0.0, 2.0, 4.0]


def test_complex_logcumsumexp_matches_torch_with_gradient():
    rows = [[1 + 1j, -2 + 3j, 0.5 - 1j, 100 + 0j], [3j, 0.1 + 3.1j, -1 - 3j, 2.0]]
    got = []
    for T in (torch, ember):
        x = T.tensor(rows, requires_grad=True)
        r = T.logcumsumexp(x, 1)
        (r.abs().sum() + r.real.sum()).backward()
        parts = (r.detach(), x.grad, T.logcumsumexp(x.detach(), 0))
        got.append([p.resolve_conj().numpy() for p in parts])
    for a, b in zip(*got):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype, ulp", [("bfloat16", 2**-7), ("float16", 2**-10)])
@pytest.mark.parametrize("align", [False, True])
def test_bicubic_interpolation_of_16_bit_values_is_within_one_rounding(dtype, ulp, align):
    # PyTorch computes both axes in float32 and rounds once; ember rounded every tap's
    # product and sum in 16 bits (4 bfloat16 ulps off)
    a = np.random.default_rng(0).standard_normal((1, 2, 3, 4)).astype(np.float32) * 10

    def run(T):
        x = T.tensor(a).to(getattr(T, dtype))
        return T.nn.functional.interpolate(x, scale_factor=2.5, mode="bicubic", align_corners=align)

    t, e = _both(run)
    assert str(e.dtype).endswith(dtype)
    np.testing.assert_allclose(e.float().numpy(), t.float().numpy(), rtol=ulp, atol=ulp)


@pytest.mark.parametrize(
    "dtype, exponent", [("uint8", 256), ("int8", 128), ("int64", 2**63), ("int32", 2**31)]
)
def test_integer_pow_refuses_an_exponent_outside_the_base_type(dtype, exponent):
    # PyTorch converts the exponent to the base's type with a range check (add and mul wrap)
    for T in (torch, ember):
        x = T.tensor([1, 2], dtype=getattr(T, dtype))
        with pytest.raises(RuntimeError):
            x**exponent
        with pytest.raises(RuntimeError):
            x.clone().pow_(exponent)
        assert (x ** (exponent - 1)).dtype == x.dtype


@pytest.mark.parametrize("dim", [1, (0, 5), -2])
def test_nansum_checks_the_dim_before_refusing_complex(dim):
    for T in (torch, ember):
        with pytest.raises(IndexError):
            T.nansum(T.ones((), dtype=T.complex64), dim)
