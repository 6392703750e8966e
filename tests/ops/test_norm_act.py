"""gelu (erf and tanh forms) and layer_norm as primitives (ops/gelu.py, ops/layer_norm.py) and
their C kernels (kernels/cnorm_act.py): against PyTorch in values and gradients, the C kernels
against the NumPy reference kernels, special values, and the fallback without a compiler."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import ember
from ember.kernels import ccompile, cnorm_act
from ember.ops import gelu, layer_norm

torch = pytest.importorskip("torch")
F = ember.nn.functional
DTYPES = (np.float32, np.float64)
needs_cc = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")


def _tol(dtype, length: int = 1):
    """A few eps, growing with the square root of a reduction's length."""
    eps = np.finfo(dtype).eps
    return 16 * eps * np.sqrt(length)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("seed", range(3))
def test_gelu_matches_torch(dtype, approximate, seed):
    r = np.random.default_rng(seed)
    shape = tuple(r.integers(1, 40, r.integers(1, 4)))
    x = (r.standard_normal(shape) * 4).astype(dtype)
    g = r.standard_normal(shape).astype(dtype)
    ex, tx = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    y, ty = (
        F.gelu(ex, approximate=approximate),
        torch.nn.functional.gelu(tx, approximate=approximate),
    )
    y.backward(ember.tensor(g))
    ty.backward(torch.tensor(g))
    tol = _tol(dtype) * 8
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(
        ex.grad.detach().numpy(), tx.grad.detach().numpy(), rtol=tol, atol=tol
    )


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tanh_form", [False, True])
@needs_cc
def test_gelu_c_kernels_match_the_reference(dtype, tanh_form):
    r = np.random.default_rng(5)
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 30.0, -30.0, 1e-30])
    x = np.concatenate([specials, r.standard_normal(50000) * 5]).astype(dtype)
    g = r.standard_normal(x.shape).astype(dtype)
    forward = gelu._gelu_tanh_kernel if tanh_form else gelu._gelu_erf_kernel
    backward = gelu._gelu_tanh_grad_kernel if tanh_form else gelu._gelu_erf_grad_kernel
    tol = _tol(dtype)
    with np.errstate(all="ignore"):
        # the tanh form's gradient adds 0.5 x (1 - t^2) u' g, u' = sqrt(2/pi) (1 + 3c x^2): an
        # ulp of t = tanh(u) near +-1 is |x u' g| ulps of the result (C and NumPy differ by
        # 32 eps there at x = -5.3 on an Intel Xeon: 0 against 3.9e-6, float32)
        amplified = np.abs(np.nan_to_num(x * 0.8 * (1 + 0.134 * x * x) * g))
    for got, want, extra in (
        (cnorm_act.gelu(x, tanh_form), forward(x), 0.0),
        (cnorm_act.gelu_backward(x, g, tanh_form), backward(x, g), amplified),
    ):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        # absolute within a few eps of the scale: 1 + erf(x) and gelu' cancel (a few ulps of
        # erf or tanh become many ulps of a small result)
        scale = np.maximum(np.abs(np.nan_to_num(want, posinf=0, neginf=0)), 1.0) + extra
        finite = np.isfinite(want)
        assert np.all(np.abs(got[finite] - want[finite]) <= tol * scale[finite])
        np.testing.assert_array_equal(
            got[~finite & ~np.isnan(want)], want[~finite & ~np.isnan(want)]
        )


def _layer_norm_case(r, dtype):
    k = int(r.integers(1, 3))
    norm_shape = tuple(int(s) for s in r.integers(1, 70, k))
    lead = tuple(int(s) for s in r.integers(1, 9, r.integers(0, 3)))
    x = (r.standard_normal(lead + norm_shape) * 3 + r.standard_normal()).astype(dtype)
    w = r.standard_normal(norm_shape).astype(dtype)
    b = r.standard_normal(norm_shape).astype(dtype)
    g = r.standard_normal(x.shape).astype(dtype)
    return x, w, b, g, norm_shape


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("seed", range(4))
def test_layer_norm_matches_torch(dtype, seed):
    r = np.random.default_rng(seed)
    x, w, b, g, shape = _layer_norm_case(r, dtype)
    es = [ember.tensor(a, requires_grad=True) for a in (x, w, b)]
    ts = [torch.tensor(a, requires_grad=True) for a in (x, w, b)]
    y = F.layer_norm(es[0], shape, es[1], es[2], eps=1e-5)
    ty = torch.nn.functional.layer_norm(ts[0], shape, ts[1], ts[2], eps=1e-5)
    y.backward(ember.tensor(g))
    ty.backward(torch.tensor(g))
    n = int(np.prod(shape))
    rows = x.size // n
    tol = _tol(dtype, n) * 4
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(
        es[0].grad.detach().numpy(), ts[0].grad.detach().numpy(), rtol=tol, atol=tol * 4
    )
    for e, t in zip(es[1:], ts[1:]):
        np.testing.assert_allclose(
            e.grad.numpy(), t.grad.numpy(), rtol=tol, atol=_tol(dtype, rows) * 4 * np.sqrt(rows)
        )


@pytest.mark.parametrize("dtype", DTYPES)
@needs_cc
def test_layer_norm_c_kernels_match_the_reference(dtype):
    r = np.random.default_rng(9)
    for _ in range(4):
        x, w, b, g, shape = _layer_norm_case(r, dtype)
        n = int(np.prod(shape))
        tol = _tol(dtype, n) * 4
        got = cnorm_act.layer_norm(x, w, b, 1e-5)
        want = layer_norm._norm_kernel(x, w, b, eps=1e-5)
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
        got = cnorm_act.layer_norm_backward(x, w, g, 1e-5)
        want = layer_norm._norm_grad_kernel(x, w, g, eps=1e-5)
        rows = x.size // n
        for i, (a, e) in enumerate(zip(got, want)):
            scale = np.abs(e).max() + 1
            np.testing.assert_allclose(
                a, e, rtol=tol, atol=tol * scale * np.sqrt(rows), err_msg=f"output {i}"
            )


@needs_cc
def test_layer_norm_special_values_follow_the_reference():
    x = np.array([[1.0, np.nan, 2.0], [np.inf, 0.0, 1.0], [3.0, 3.0, 3.0]], dtype=np.float32)
    w, b = np.ones(3, np.float32), np.zeros(3, np.float32)
    got, want = cnorm_act.layer_norm(x, w, b, 1e-5), layer_norm._norm_kernel(x, w, b, eps=1e-5)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got[2], want[2])  # a constant row: zeros (rstd = 1/sqrt(eps))


def test_zero_d_and_empty_inputs():
    for shape in ((), (0,), (3, 0)):
        x = np.full(shape, 0.5)
        for approximate in ("none", "tanh"):
            y = F.gelu(ember.tensor(x), approximate=approximate)
            want = torch.nn.functional.gelu(torch.tensor(x), approximate=approximate)
            assert y.shape == tuple(want.shape)
            np.testing.assert_allclose(y.numpy(), want.numpy(), rtol=1e-12)


def test_strided_and_half_inputs():
    r = np.random.default_rng(3)
    x = r.standard_normal((6, 20)).astype(np.float32)[:, ::2]  # not contiguous
    w, b = np.ones(10, np.float32), np.zeros(10, np.float32)
    y = F.layer_norm(ember.tensor(x), (10,), ember.tensor(w), ember.tensor(b))
    want = torch.nn.functional.layer_norm(torch.tensor(x), (10,), torch.tensor(w), torch.tensor(b))
    np.testing.assert_allclose(y.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
    h = ember.tensor(x.astype(np.float16))
    assert F.gelu(h).dtype is ember.float16
    np.testing.assert_allclose(
        F.gelu(h).numpy().astype(np.float32),
        torch.nn.functional.gelu(torch.tensor(x.astype(np.float16))).float().numpy(),
        atol=2e-3,
    )


@pytest.mark.parametrize("dtype", [ember.bfloat16.np, np.float16], ids=str)
def test_half_precision_c_kernels_read_and_write_16_bits(dtype):
    # GELU, layer norm, softmax and their gradients: the float32 kernels' arithmetic on the
    # widened values, each result rounded once: equal to the float32 kernels on widened copies
    from ember.kernels import cnorm_act

    if not cnorm_act.available(dtype):
        pytest.skip("no C compiler")
    r = np.random.default_rng(4)
    x = (r.standard_normal((33, 96)) * 3).astype(np.float32).astype(dtype)
    g = r.standard_normal((33, 96)).astype(np.float32).astype(dtype)
    w, b = (r.standard_normal(96).astype(np.float32).astype(dtype) for _ in range(2))
    x.reshape(-1)[::97] = np.nan

    def wide(*arrays):
        return [a.astype(np.float32) for a in arrays]

    def same(got, want):
        assert got.dtype == dtype
        assert got.tobytes() == want.astype(dtype).tobytes()

    def near(got, want, bound):
        # GELU's tails cancel (1 + erf(x), 1 - tanh^2): the vector erf/tanh the loop gets
        # differs with its vector width (the 16-bit and float32 loops differ on an Intel Xeon,
        # not on an AMD EPYC), and an ulp of erf is |x| ulps of the result there: within one
        # 16-bit rounding of the float32 kernel plus that
        assert got.dtype == dtype
        a, e = got.astype(np.float32), want.astype(np.float32)
        np.testing.assert_array_equal(np.isnan(a), np.isnan(e))
        info = ml_dtypes.finfo(dtype)
        ulp = float(info.eps) * np.abs(e) + float(info.smallest_subnormal)
        ok = np.isnan(e) | (np.abs(a - e) <= ulp + bound)
        assert ok.all(), (a[~ok][:5], e[~ok][:5])

    eps32 = np.finfo(np.float32).eps
    xw, gw = wide(x, g)
    with np.errstate(all="ignore"):
        reach = 16 * eps32 * np.maximum(np.abs(xw), 1)
        reach_grad = reach * (1 + 0.134 * xw * xw) * np.maximum(np.abs(gw), 1)
    for tanh_form in (False, True):
        near(cnorm_act.gelu(x, tanh_form), cnorm_act.gelu(xw, tanh_form), reach)
        near(
            cnorm_act.gelu_backward(x, g, tanh_form),
            cnorm_act.gelu_backward(xw, gw, tanh_form),
            reach_grad,
        )
    same(cnorm_act.layer_norm(x, w, b, 1e-5), cnorm_act.layer_norm(*wide(x, w, b), 1e-5))
    from ember.kernels import csoftmax, csoftmax_grad

    for safe in (False, True):
        same(csoftmax.softmax(x, safe), csoftmax.softmax(*wide(x), safe))
    same(csoftmax.log_softmax(x), csoftmax.log_softmax(*wide(x)))
    y = csoftmax.softmax(x, True)
    same(csoftmax_grad.softmax_backward(y, g), csoftmax_grad.softmax_backward(*wide(y, g)))
    same(
        csoftmax_grad.log_softmax_backward(y, g),
        csoftmax_grad.log_softmax_backward(*wide(y, g)),
    )
    got = cnorm_act.layer_norm_backward(x, w, g, 1e-5)
    for a, want in zip(got, cnorm_act.layer_norm_backward(*wide(x, w, g), 1e-5)):
        same(a, want)


def test_without_a_compiler_the_reference_runs(monkeypatch):
    monkeypatch.setattr(cnorm_act, "_functions", lambda dtype: None)
    r = np.random.default_rng(4)
    x = r.standard_normal((5, 7)).astype(np.float64)
    assert cnorm_act.gelu(x, False) is None and cnorm_act.layer_norm(x, x[0], x[0], 1e-5) is None
    ex = ember.tensor(x, requires_grad=True)
    F.gelu(
        F.layer_norm(
            ex, (7,), ember.ones(7, dtype=ember.float64), ember.zeros(7, dtype=ember.float64)
        )
    ).sum().backward()
    tx = torch.tensor(x, requires_grad=True)
    torch.nn.functional.gelu(torch.nn.functional.layer_norm(tx, (7,))).sum().backward()
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_errors_name_the_op():
    x = ember.ones((2, 3))
    with pytest.raises(ember.ShapeError, match="layer_norm"):
        ember.ops._registry.apply(layer_norm.LAYER_NORM, x, ember.ones(4), ember.ones(4), eps=1e-5)
    with pytest.raises(ember.ShapeError, match="gelu_backward"):
        ember.ops._registry.apply(gelu.GELU_BACKWARD, x, ember.ones((3, 2)))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("log_form", [False, True])
@pytest.mark.parametrize("seed", range(3))
def test_softmax_gradients_match_torch(dtype, log_form, seed):
    r = np.random.default_rng(seed)
    shape = tuple(int(s) for s in r.integers(1, 50, r.integers(1, 4)))
    dim = int(r.integers(0, len(shape)))
    x = (r.standard_normal(shape) * 5).astype(dtype)
    g = r.standard_normal(shape).astype(dtype)
    ours = F.log_softmax if log_form else F.softmax
    theirs = torch.log_softmax if log_form else torch.softmax
    ex, tx = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ours(ex, dim).backward(ember.tensor(g))
    theirs(tx, dim).backward(torch.tensor(g))
    tol = _tol(dtype, shape[dim]) * 4
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", DTYPES)
@needs_cc
def test_softmax_backward_c_kernels_match_the_reference(dtype):
    from ember.kernels import csoftmax_grad
    from ember.ops import softmax as sm

    r = np.random.default_rng(6)
    for n in (1, 7, 64, 1000):
        logits = (r.standard_normal((9, n)) * 4).astype(dtype)
        logits[0, 0] = -np.inf  # a masked entry: y = 0, log y = -inf
        y = np.exp(logits - logits.max(-1, keepdims=True))
        y = (y / y.sum(-1, keepdims=True)).astype(dtype)
        g = r.standard_normal((9, n)).astype(dtype)
        g[1, 0] = np.nan
        tol = _tol(dtype, n)
        for got, want in (
            (csoftmax_grad.softmax_backward(y, g), sm._softmax_grad_kernel(y, g, axis=-1)),
            (
                csoftmax_grad.log_softmax_backward(np.log(y), g),
                sm._log_softmax_grad_kernel(np.log(y), g, axis=-1),
            ),
        ):
            np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
            ok = ~np.isnan(want)
            scale = np.abs(g).sum(-1, keepdims=True) + 1
            assert np.all(np.abs(got - want)[ok] <= (tol * np.broadcast_to(scale, want.shape))[ok])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("offset", [0.0, 1e3, -1e4])
@needs_cc
def test_layer_norm_backward_c_kernel_with_rows_far_from_zero(dtype, offset):
    """float32's backward sums a row's values and squares in one double pass: rows whose mean
    is far from zero next to their spread must still match the two-pass reference."""
    r = np.random.default_rng(int(abs(offset)) + 1)
    for rows, n in ((7, 1), (33, 128), (5, 300), (2080, 128)):
        x = (r.standard_normal((rows, n)) + offset).astype(dtype)
        w = r.standard_normal(n).astype(dtype)
        g = r.standard_normal((rows, n)).astype(dtype)
        got = cnorm_act.layer_norm_backward(x, w, g, 1e-5)
        want = layer_norm._norm_grad_kernel(x, w, g, eps=1e-5)
        tol = _tol(dtype, n) * 4
        for i, (a, e) in enumerate(zip(got, want)):
            scale = np.abs(e).max() + 1
            # x - mean cancels: each normalized value carries the kernel's double rounding at
            # the offset's scale (|offset| / spread ulps of double), summed over the rows by
            # the weight's gradient (float64 at -1e4 on an Intel Xeon: 2.5e-11 apart); a
            # one-pass variance would be ~1e-7 off, far outside
            cancel = 4 * np.finfo(np.float64).eps * (1 + abs(offset)) * np.sqrt(rows) * scale
            np.testing.assert_allclose(
                a, e, rtol=tol, atol=tol * scale * np.sqrt(rows) + cancel, err_msg=f"output {i}"
            )


@needs_cc
def test_layer_norm_backward_special_values_follow_the_reference():
    x = np.array(
        [[1.0, np.nan, 2.0], [np.inf, 0.0, 1.0], [3.0, 3.0, 3.0], [1.0, 2.0, 4.0]],
        dtype=np.float32,
    )
    w = np.array([1.0, -2.0, 0.5], np.float32)
    g = np.ones_like(x)
    got = cnorm_act.layer_norm_backward(x, w, g, 1e-5)
    want = layer_norm._norm_grad_kernel(x, w, g, eps=1e-5)
    for a, e in zip(got, want):
        np.testing.assert_array_equal(np.isnan(a), np.isnan(e))
    np.testing.assert_allclose(got[0][2:], want[0][2:], rtol=1e-5, atol=1e-4)
