"""``add``/``sub`` with ``alpha`` on floating tensors, bit for bit against PyTorch 2.13's CPU
kernel, which computes ``x + alpha * y`` as one fused multiply-add (one rounding): eagerly,
in place, broadcast, strided, promoted, reflected (rsub), captured (ember.compile's C loop) and
in the NumPy kernel alone (the specification, also what runs without a compiler); the cases
where two roundings differ are built on purpose (a sum just off a float32 or float64 halfway
point); gradients are PyTorch's (``g`` and ``alpha * g``)."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.ops.add_alpha import ADD_ALPHA

torch = pytest.importorskip("torch")

ALPHAS = [0.1, -0.3, 1.7, 3, 1e-3]


def _pair(dtype, shape=(300, 37), seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(shape, generator=g, dtype=dtype) * 10
    b = torch.randn(shape, generator=g, dtype=dtype)
    return a, b


def _e(t):
    return ember.tensor(t.numpy().copy())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("alpha", ALPHAS)
def test_add_sub_bit_for_bit(dtype, alpha):
    a, b = _pair(dtype)
    for name in ("add", "sub"):
        want = getattr(torch, name)(a, b, alpha=alpha).numpy()
        got = getattr(ember, name)(_e(a), _e(b), alpha=alpha).numpy()
        np.testing.assert_array_equal(got, want)
        # (two roundings differ on a good share of these: the test can tell)
        two = (
            (a.numpy() + np.asarray(alpha, a.numpy().dtype) * b.numpy()) if name == "add" else None
        )
        if two is not None and alpha not in (3,):
            assert (two != want).any()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_layouts_in_place_and_promotion(dtype):
    a, b = _pair(dtype, (40, 41))
    alpha = 0.37
    cases = {
        "strided": lambda m, x, y: m.add(x, y.t().t().transpose(0, 1).transpose(0, 1), alpha=alpha),
        "transposed": lambda m, x, y: m.add(x[:40, :40], y[:40, :40].t(), alpha=alpha),
        "broadcast_row": lambda m, x, y: m.add(x, y[0], alpha=alpha),
        "broadcast_self": lambda m, x, y: m.add(x[0], y, alpha=alpha),
        "in_place": lambda m, x, y: x.clone().add_(y, alpha=alpha),
        "sub_in_place": lambda m, x, y: x.clone().sub_(y, alpha=alpha),
        "method": lambda m, x, y: x.sub(y, alpha=-alpha),
        "rsub": lambda m, x, y: m.rsub(x, y, alpha=alpha),
        "int_self": lambda m, x, y: m.add(m.arange(41), y, alpha=alpha),
        "int_other": lambda m, x, y: m.add(y, m.arange(41), alpha=alpha),
        "zero_d_self": lambda m, x, y: m.add(m.tensor(1.5, dtype=y.dtype), y, alpha=alpha),
    }
    for name, case in cases.items():
        want = case(torch, a, b).numpy()
        got = case(ember, _e(a), _e(b)).numpy()
        np.testing.assert_array_equal(got, want, err_msg=name)


def _halfway_cases(np_dtype):
    """Sums just below a halfway point, which rounding the product first lands on: float32's
    1 + 2**-23 plus (1 + 2**-15) * 2**-24 * (1 - 2**-15), and float64's analogue."""
    if np_dtype == np.float32:
        ulp, half_bits = 2.0**-23, 15
    else:
        ulp, half_bits = 2.0**-52, 27
    scale = np.array([1, -1, 3, -5, 0.75], np_dtype)
    x = (scale * (1 + ulp)).astype(np_dtype)
    y = (scale * (ulp / 2) * (1 - 2.0**-half_bits)).astype(np_dtype)
    return x, float(1 + 2.0**-half_bits), y


@pytest.mark.parametrize("np_dtype", [np.float32, np.float64])
def test_halfway_sums_round_once(np_dtype):
    x, alpha, y = _halfway_cases(np_dtype)
    want = torch.add(torch.from_numpy(x), torch.from_numpy(y), alpha=alpha).numpy()
    assert (want != (x + np_dtype(alpha) * y)).any()  # (two roundings differ here)
    np.testing.assert_array_equal(ADD_ALPHA.kernel(x, y, alpha=alpha), want)
    np.testing.assert_array_equal(
        ember.add(ember.tensor(x), ember.tensor(y), alpha=alpha).numpy(), want
    )


def test_specials_and_subnormals():
    tiny = np.finfo(np.float32).tiny
    x = np.array([np.inf, -np.inf, np.nan, 3e38, 1.0, tiny * 0.3, -tiny, 0.0, -0.0], np.float32)
    y = np.array([1, np.inf, 1, 3e38, np.inf, tiny * 0.7, tiny * 0.2, -0.0, -0.0], np.float32)
    for dtype in (np.float32, np.float64):
        xs, ys = x.astype(dtype), y.astype(dtype)
        want = torch.add(torch.from_numpy(xs), torch.from_numpy(ys), alpha=0.7).numpy()
        got = ADD_ALPHA.kernel(xs, ys, alpha=0.7)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_fused_in_float32(dtype):
    """PyTorch's vectorized loop: alpha rounded to the dtype, fused in float32, rounded once
    (the first 32-element blocks; its scalar remainder rounds twice, see ops/add_alpha.py)."""
    a, b = _pair(dtype, (64,))
    want = torch.add(a, b, alpha=1.7).float().numpy()
    name = str(dtype).split(".")[-1]
    ea, eb = (ember.tensor(t.float().numpy()).to(getattr(ember, name)) for t in (a, b))
    got = ember.add(ea, eb, alpha=1.7).float().numpy()
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_compiled_loop_bit_for_bit(dtype):
    def program(m):
        def f(a, b, c):
            return (m.add(a * 1.5, b, alpha=0.3) - c).sub(b, alpha=1.7).add(c, alpha=-0.7)

        return f

    tensors = [_pair(dtype, (64, 33), seed)[0] for seed in range(3)]
    want = program(torch)(*tensors).numpy()
    compiled = ember.compile(program(ember), fullgraph=True)
    for _ in range(2):
        np.testing.assert_array_equal(compiled(*[_e(t) for t in tensors]).numpy(), want)


def test_c_loop_matches_the_numpy_kernel():
    from ember.ops import _half

    if not _half.c_runs():
        pytest.skip("no C compiler")
    rng = np.random.default_rng(3)
    for dtype in (np.float32, np.float64):
        x, y = (rng.standard_normal(5000).astype(dtype) * 7 for _ in range(2))
        fast = ADD_ALPHA.fast(x, y, alpha=-0.45)
        if fast is not None:  # (the loop was measured faster at this size)
            np.testing.assert_array_equal(fast, ADD_ALPHA.kernel(x, y, alpha=-0.45))


def test_gradients_and_node_names():
    a, b = _pair(torch.float64, (5, 3))
    for name in ("add", "sub"):
        ta, tb = a.clone().requires_grad_(), b.clone().requires_grad_()
        ea, eb = _e(a).requires_grad_(), _e(b).requires_grad_()
        tout = getattr(torch, name)(ta, tb, alpha=0.3)
        eout = getattr(ember, name)(ea, eb, alpha=0.3)
        assert type(eout.grad_fn).__name__ == type(tout.grad_fn).__name__
        g = torch.linspace(-1, 1, 15, dtype=torch.float64).reshape(5, 3)
        tout.backward(g)
        eout.backward(_e(g))
        np.testing.assert_array_equal(ea.grad.numpy(), ta.grad.numpy())
        np.testing.assert_array_equal(eb.grad.numpy(), tb.grad.numpy())


def test_integer_and_complex_keep_their_arithmetic():
    a = torch.tensor([100, -7, 3], dtype=torch.int8)
    for alpha in (3, -2):
        np.testing.assert_array_equal(
            ember.add(ember.tensor(a.numpy()), ember.tensor(a.numpy()), alpha=alpha).numpy(),
            torch.add(a, a, alpha=alpha).numpy(),
        )
    c = torch.tensor([1 + 2j, -0.5j], dtype=torch.complex64)
    got = ember.add(_e(c), _e(c), alpha=0.3).numpy()
    np.testing.assert_allclose(got, torch.add(c, c, alpha=0.3).numpy(), rtol=1e-6)


def test_alpha_kinds():
    a, b = _pair(torch.float32, (64,))
    want = torch.add(a, b, alpha=0.3).numpy()
    got = ember.add(_e(a), _e(b), alpha=np.float64(0.3)).numpy()  # (a NumPy scalar: fused too)
    np.testing.assert_array_equal(got, want)
    for m, x in ((torch, a), (ember, _e(a))):
        with pytest.raises(RuntimeError, match="alpha must not be a complex number"):
            m.add(x, x, alpha=1j)
        with pytest.raises(RuntimeError, match="(B|b)oolean alpha|bool alpha"):
            m.add(x, x, alpha=True)


@pytest.mark.parametrize("alpha", [-1.7, 0.3, 1e-5])
def test_float64_across_the_whole_range(alpha):
    """Products past float64's range that x brings back, products below 2**-960, infinities
    and NaN: the emulation's scaled and special paths, bit for bit (signs too)."""
    rng = np.random.default_rng(1)
    edges_x = [np.inf, 1.7e308, -np.inf, 1e-300, 1.0, np.inf, 0.0, -0.0, 5e-324]
    edges_y = [1e308, 1e308, np.inf, 1e-300, np.nan, -np.inf, -0.0, 1e-320, -5e-324]
    x, y = (
        np.concatenate([e, rng.standard_normal(2000) * 10.0 ** rng.integers(-320, 300, 2000)])
        for e in (edges_x, edges_y)
    )
    want = torch.add(torch.from_numpy(x), torch.from_numpy(y), alpha=alpha).numpy()
    got = ADD_ALPHA.kernel(x, y, alpha=alpha)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def test_the_numpy_kernels_results_are_writable():
    """The specification's result is the user's tensor where no compiler runs: a later
    in-place op writes it (it was a read-only broadcast view: ``sign_`` refused)."""
    from ember.ops.add_alpha import _kernel

    rng = np.random.default_rng(3)
    for dtype in (np.float32, np.float64):
        x = rng.standard_normal((5, 4)).astype(dtype)
        for y in (rng.standard_normal((5, 4)), rng.standard_normal(4), rng.standard_normal((5, 1))):
            out = _kernel(x, y.astype(dtype), alpha=0.3)
            assert out.flags.writeable and out.shape == (5, 4)
            out[...] = 0.0
