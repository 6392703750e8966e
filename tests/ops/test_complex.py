"""Complex tensors against PyTorch: dtypes and promotion, creation, printing, casts, the parts
as views, values and gradients of every op that declares complex support (the ``complex`` rule,
ops/_rules.py), the refusal of every op that does not (the whole registry), capture, and a
small spectral-convolution model trained next to its PyTorch twin."""

from __future__ import annotations

import warnings
import zlib

import numpy as np
import pytest

import ember
from ember.errors import ComplexDTypeError, EmberError
from ember.ops import REGISTRY
from ember.ops._registry import apply
from ember.ops._rules import Complex

from .complex_torch import CPLX, REAL, compare, random_inputs, torch

C64, C128 = ember.complex64, ember.complex128
_DT = {
    "bool": (ember.bool, torch.bool),
    "uint8": (ember.uint8, torch.uint8),
    "int32": (ember.int32, torch.int32),
    "int64": (ember.int64, torch.int64),
    "float16": (ember.float16, torch.float16),
    "bfloat16": (ember.bfloat16, torch.bfloat16),
    "float32": (ember.float32, torch.float32),
    "float64": (ember.float64, torch.float64),
    "complex64": (C64, torch.complex64),
    "complex128": (C128, torch.complex128),
}


def test_dtypes_and_their_flags():
    assert ember.cfloat is C64 and ember.cdouble is C128
    for d, t in (_DT["complex64"], _DT["complex128"]):
        assert d.is_complex and not d.is_floating_point and d.is_signed
        assert d.itemsize == t.itemsize
    z = ember.tensor([1 + 2j])
    assert z.dtype is C64 and z.is_complex() and not z.is_floating_point()
    assert ember.is_complex(z) and not ember.ones(2).is_complex()
    assert ember.tensor(np.array([1j])).dtype is C128
    assert ember.get_default_complex_dtype() is C64
    ember.set_default_dtype(ember.float64)
    try:
        assert ember.tensor(1j).dtype is C128 and ember.get_default_complex_dtype() is C128
    finally:
        ember.set_default_dtype(ember.float32)


_ALL = list(_DT)
_PAIRS = [(a, b) for a in _ALL for b in _ALL if "complex" in a + b]


@pytest.mark.parametrize(("a", "b"), _PAIRS)
def test_promotion_equals_torch_result_type(a, b):
    ea, ta = _DT[a]
    eb, tb = _DT[b]
    for shapes in (((2,), (2,)), ((2,), ()), ((), (2,))):
        x = ember.zeros(shapes[0], dtype=ea)
        y = ember.zeros(shapes[1], dtype=eb)
        want = torch.result_type(torch.zeros(shapes[0], dtype=ta), torch.zeros(shapes[1], dtype=tb))
        if want is torch.complex32:  # (ember has no complex32: half with complex gives complex64)
            assert ember.result_type(x, y) is C64
            continue
        assert ember.result_type(x, y) == _DT[str(want).split(".")[1]][0], (a, b, shapes)


@pytest.mark.parametrize("name", ["bool", "int64", "float32", "float64", "complex64", "complex128"])
def test_python_complex_scalars_are_weak(name):
    e, t = _DT[name]
    for scalar in (2j, 1.5, 3):
        want = torch.result_type(torch.zeros(2, dtype=t), scalar)
        if want is torch.complex32:
            continue
        got = ember.result_type(ember.zeros(2, dtype=e), scalar)
        assert got == _DT[str(want).split(".")[1]][0], (name, scalar)
        z = ember.zeros(2, dtype=e) + scalar
        assert z.dtype == got


def test_creation_casts_and_conversions():
    assert ember.zeros(2, 3, dtype=C64).dtype is C64
    np.testing.assert_array_equal(ember.ones(2, dtype=C128).numpy(), np.ones(2, complex))
    full = ember.full((2,), 1 - 2j)
    assert full.dtype is C64 and full.tolist() == [1 - 2j, 1 - 2j]
    assert ember.tensor(3 + 4j).item() == 3 + 4j
    z = ember.randn(40000, dtype=C64)
    assert z.dtype is C64
    # PyTorch's variance split: each part has variance 1/2, E|z|^2 = 1
    assert abs(float(z.real.var()) - 0.5) < 0.02 and abs(float(z.imag.var()) - 0.5) < 0.02
    x = ember.tensor([1.5, -2.0])
    assert x.to(C64).dtype is C64 and x.cdouble().dtype is C128
    with pytest.warns(UserWarning, match="discards the imaginary part"):
        real = ember.tensor([1 + 2j, 3 - 1j]).float()
    np.testing.assert_array_equal(real.numpy(), [1.0, 3.0])
    with pytest.warns(UserWarning, match="discards"):
        assert ember.tensor([2 + 1j]).to(ember.int64).tolist() == [2]
    with pytest.raises(EmberError, match="imaginary"):  # (no silent cast inside ops)
        ember.deg2rad(ember.tensor([[1 + 1j, 2]]))  # (PyTorch refuses it for complex too)


def test_printing_equals_torchs():
    rng = np.random.default_rng(1)
    arrays = [
        np.array([1 + 2j, 3.5 - 1j], dtype=np.complex64),
        np.array(1 - 2j),
        (rng.standard_normal((2, 3)) + 1j * rng.standard_normal((2, 3))),
        (rng.standard_normal(40) * 1e5 + 1j * rng.standard_normal(40)).astype(np.complex64),
        np.array([0j, -0.0 - 0j, np.nan + 1j, np.inf - np.inf * 1j], dtype=np.complex64),
        np.zeros((0, 2), dtype=np.complex64),
        (rng.standard_normal(2000) + 1j).astype(np.complex64),  # summarized
    ]
    for a in arrays:
        want = repr(torch.tensor(a)).replace("torch.", "ember.")
        assert repr(ember.tensor(a)) == want
    z = ember.tensor([1 + 1j], requires_grad=True)
    assert "requires_grad=True" in repr(z)


def test_parts_are_views_and_assignable():
    z = ember.tensor([1 + 2j, 3 - 4j])
    z.real.mul_(10)
    z.imag[0] = 7.0
    np.testing.assert_array_equal(z.numpy(), [10 + 7j, 30 - 4j])
    z.real = ember.tensor([0.5, 0.25])
    np.testing.assert_array_equal(z.numpy(), [0.5 + 7j, 0.25 - 4j])
    pairs = ember.view_as_real(z)
    pairs[1, 1] = 9.0
    assert z.numpy()[1] == 0.25 + 9j
    t = torch.tensor([1 + 2j, 3 - 4j])
    t.real.mul_(10)
    assert torch.equal(t, torch.tensor([10 + 2j, 30 - 4j]))
    # a write through a part of a tensor with history is refused, not mis-differentiated
    leaf = ember.tensor([1 + 1j], requires_grad=True)
    y = leaf * 2
    with pytest.raises(ember.AutogradError, match="real or imaginary part"):
        y.real.add_(1.0)
    # view_as_complex copies in ember (documented): a new tensor
    pairs = ember.tensor([[1.0, 2.0]])
    c = ember.view_as_complex(pairs)
    pairs[0, 0] = 5.0
    assert c.item() == 1 + 2j


def test_predicates_and_conjugation_equal_torchs():
    values = np.array([1 + 2j, np.nan + 0j, 1j * np.inf, 0j, -3 + 0j, 2 - 0j], dtype=np.complex64)
    e, t = ember.tensor(values), torch.tensor(values)
    for name in ("isfinite", "isnan", "isinf", "isreal"):
        np.testing.assert_array_equal(getattr(ember, name)(e).numpy(), getattr(torch, name)(t))
    np.testing.assert_array_equal((e == e).numpy(), (t == t).numpy())
    np.testing.assert_array_equal((e != 0).numpy(), (t != 0).numpy())
    assert not e.conj().is_conj() and e.resolve_conj() is e
    np.testing.assert_array_equal(e.conj_physical().numpy(), t.conj_physical().numpy())
    np.testing.assert_array_equal(ember.sgn(e).numpy(), torch.sgn(t).numpy())


S = (3, 4)
GRADIENT_CASES = [
    ("add", lambda m, a, b: a + b, [(S, CPLX), (S, CPLX)]),
    ("add/real", lambda m, a, b: a + b, [(S, CPLX), ((4,), REAL)]),
    ("sub/alpha", lambda m, a, b: m.sub(a, b, alpha=2), [(S, CPLX), (S, REAL)]),
    ("mul", lambda m, a, b: a * b, [(S, CPLX), (S, CPLX)]),
    ("mul/real", lambda m, a, b: a * b, [(S, CPLX), ((1, 4), REAL)]),
    ("div", lambda m, a, b: a / b, [(S, CPLX), (S, CPLX)]),
    ("div/real", lambda m, a, b: b / a, [(S, CPLX), (S, REAL)]),
    ("neg/conj", lambda m, a: -a.conj() * a.conj_physical(), [(S, CPLX)]),
    ("reciprocal", lambda m, a: m.reciprocal(a), [(S, CPLX)]),
    ("exp", lambda m, a: m.exp(a), [(S, CPLX)]),
    ("log", lambda m, a: m.log(a), [(S, CPLX)]),
    ("sqrt", lambda m, a: m.sqrt(a), [(S, CPLX)]),
    ("pow/int", lambda m, a: a**3, [(S, CPLX)]),
    ("pow/float", lambda m, a: a**2.5, [(S, CPLX)]),
    ("pow/complex", lambda m, a, b: m.pow(a, b), [(S, CPLX), (S, CPLX)]),
    ("pow/real-exponent", lambda m, a, b: m.pow(a, b), [(S, CPLX), (S, REAL)]),
    ("pow/complex-exponent", lambda m, a: (1.5 + 0.5j) ** a, [(S, CPLX)]),
    ("abs", lambda m, a: m.abs(a), [(S, CPLX)]),
    ("angle", lambda m, a: m.angle(a), [(S, CPLX)]),
    ("sgn", lambda m, a: m.sgn(a), [(S, CPLX)]),
    ("real/imag", lambda m, a: m.real(a) * a.imag, [(S, CPLX)]),
    ("complex", lambda m, a, b: m.complex(a, b), [(S, REAL), ((4,), REAL)]),
    ("polar", lambda m, a, b: m.polar(m.abs(a) + 0.1, b), [(S, REAL), (S, REAL)]),
    ("view_as_real", lambda m, a: m.view_as_real(a) ** 2, [(S, CPLX)]),
    ("view_as_complex", lambda m, a: m.view_as_complex(a) ** 2, [((3, 2), REAL)]),
    ("sum", lambda m, a: a.sum(0), [(S, CPLX)]),
    ("mean", lambda m, a: a.mean(1, keepdim=True), [(S, CPLX)]),
    ("prod", lambda m, a: a.prod(1), [(S, CPLX)]),
    ("cumsum", lambda m, a: a.cumsum(1), [(S, CPLX)]),
    ("matmul", lambda m, a, b: a @ b, [((3, 4), CPLX), ((4, 5), CPLX)]),
    ("matmul/batch", lambda m, a, b: a @ b, [((2, 3, 4), CPLX), ((4, 5), CPLX)]),
    ("mm", lambda m, a, b: m.mm(a, b), [((3, 4), CPLX), ((4, 5), CPLX)]),
    ("bmm", lambda m, a, b: m.bmm(a, b), [((2, 3, 4), CPLX), ((2, 4, 5), CPLX)]),
    (
        "einsum",
        lambda m, a, b: m.einsum("bix,iox->box", a, b),
        [((2, 3, 4), CPLX), ((3, 5, 4), CPLX)],
    ),
    ("shape", lambda m, a: a.reshape(4, 3).transpose(0, 1).permute(1, 0).flip(0), [(S, CPLX)]),
    ("cat/stack", lambda m, a, b: m.cat([a, m.stack([b, a], 0)[0]], 1), [(S, CPLX), (S, CPLX)]),
    ("index", lambda m, a: a[1:, ::2] * a[0, :2], [(S, CPLX)]),
    ("gather", lambda m, a: m.gather(a, 1, m.tensor([[0, 1], [2, 3], [1, 1]])), [(S, CPLX)]),
    ("where", lambda m, a, b: m.where(m.real(a) > 0, a, b), [(S, CPLX), (S, CPLX)]),
    ("masked_fill", lambda m, a: a.masked_fill(m.imag(a) > 0, 2.0), [(S, CPLX)]),
    ("clone/detach", lambda m, a: a.clone() * 1j + a.detach(), [(S, CPLX)]),
    ("sin/cos", lambda m, a: m.sin(a) * m.cos(a), [(S, CPLX)]),
    ("tanh/sigmoid", lambda m, a: m.tanh(a) + m.sigmoid(a), [(S, CPLX)]),
    ("square", lambda m, a: m.square(a), [(S, CPLX)]),
    ("scalar", lambda m, a: a * (2 - 1j) + 1j, [(S, REAL)]),
    ("to", lambda m, a: a.to(m.complex128) * (1 + 1j), [(S, REAL)]),
    ("abs/squared", lambda m, a: (a * a.conj()).real, [(S, CPLX)]),
    ("tan", lambda m, a: m.tan(a * 0.5), [(S, CPLX)]),
    ("asin/acos", lambda m, a: m.asin(a) + m.acos(a * 0.5), [(S, CPLX)]),
    ("atan", lambda m, a: m.atan(a), [(S, CPLX)]),
    ("sinh/cosh", lambda m, a: m.sinh(a) * m.cosh(a * 0.5), [(S, CPLX)]),
    ("asinh/acosh/atanh", lambda m, a: m.asinh(a) + m.acosh(a) + m.atanh(a), [(S, CPLX)]),
    ("log2/log10", lambda m, a: m.log2(a) + m.log10(a), [(S, CPLX)]),
    ("log1p/expm1", lambda m, a: m.log1p(a) + m.expm1(a * 0.5), [(S, CPLX)]),
    ("rsqrt", lambda m, a: m.rsqrt(a), [(S, CPLX)]),
    ("vdot", lambda m, a, b: m.vdot(a, b), [((5,), CPLX), ((5,), CPLX)]),
    ("var/std", lambda m, a: a.var(1) + a.std(0).sum(), [(S, CPLX)]),
    ("var/correction", lambda m, a: a.var(correction=0, keepdim=True), [(S, CPLX)]),
    ("cumprod", lambda m, a: a.cumprod(1), [(S, CPLX)]),
    ("cumprod/zero", lambda m, a: (a * m.tensor([1.0, 0.0, 1.0, 1.0])).cumprod(1), [(S, CPLX)]),
]


@pytest.mark.parametrize("precision", ["float32", "float64"])
@pytest.mark.parametrize(
    ("name", "fn", "specs"), GRADIENT_CASES, ids=[c[0] for c in GRADIENT_CASES]
)
def test_values_and_gradients_equal_torchs(name, fn, specs, precision):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    compare(fn, random_inputs(rng, specs, precision), precision, scale=4.0)


def test_a_complex_loss_needs_a_gradient():
    z = ember.tensor([1 + 1j], requires_grad=True)
    with pytest.raises(RuntimeError, match="real scalar"):
        (z * z).sum().backward()
    (z * z).sum().backward(ember.tensor(1 + 0j))
    assert z.grad.item() == 2 - 2j  # torch: (z * z).sum().backward(torch.tensor(1 + 0j))


def _complex_sample(op):
    return ember.zeros((2, 2), dtype=C64)


def test_every_op_without_the_rule_refuses_a_complex_operand():
    """The whole registry: an op that does not declare ``complex`` refuses a complex operand
    at dispatch, with a ComplexDTypeError (a RuntimeError and NotImplementedError, as
    PyTorch's) naming the op and the dtype, before its shape rule or kernel sees it."""
    refused = 0
    for name, op in sorted(REGISTRY.items()):
        if op.complex is not None:
            assert isinstance(op.complex, Complex)
            continue
        for position in range(2):
            inputs = [ember.zeros((2, 2))] * position + [_complex_sample(op)]
            with pytest.raises(ComplexDTypeError) as info:
                apply(op, *inputs)
            assert info.value.op == name and "ComplexFloat" in str(info.value)
            assert isinstance(info.value, (RuntimeError, NotImplementedError))
        refused += 1
    assert refused > 150  # (most ops take no complex operands)


@pytest.mark.parametrize(
    "call",
    [
        lambda z: ember.erf(z),
        lambda z: ember.relu(z),
        lambda z: z.max(),
        lambda z: z.sort(),
        lambda z: z < z,
        lambda z: ember.sign(z),
        lambda z: ember.softmax(z, -1),
        lambda z: ember.nn.functional.avg_pool2d(z[None, None], 2),
        lambda z: ember.floor(z),
        lambda z: ember.maximum(z, z),
        lambda z: ember.trunc(z),
        lambda z: ember.atan2(z, z),
        lambda z: ember.nn.functional.layer_norm(z, (2,)),
        lambda z: ember.clamp(z, 0, 1),
        lambda z: ember.erfinv(z),
    ],
)
def test_public_functions_refuse_complex_operands_cleanly(call):
    z = ember.tensor([[1 + 1j, 2], [3, 4 - 1j]])
    with pytest.raises(EmberError):
        call(z)


def test_captured_functions_run_complex_programs_on_the_reference_kernels():
    rng = np.random.default_rng(4)
    a = ember.tensor(rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4)))
    a.requires_grad_(True)
    b = ember.tensor(rng.standard_normal((3, 4)).astype(np.complex128))

    def loss(a, b):
        return (ember.exp(a * b) + a).abs().sum() + (a * 2.0).real.sum()

    eager = loss(a, b)
    eager.backward()
    want = a.grad.numpy().copy()
    a.grad = None

    def step(a, b):
        out = loss(a, b)
        out.backward()
        return out

    got = ember.function(step)(a, b)
    np.testing.assert_allclose(got.numpy(), eager.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(a.grad.numpy(), want, rtol=1e-12)
    np.testing.assert_allclose(ember.grad(loss)(a, b).numpy(), want, rtol=1e-12)
    a.grad = None
    ember.compile(loss)(a, b).backward()
    np.testing.assert_allclose(a.grad.numpy(), want, rtol=1e-12)
    graph = ember.trace(loss, a, b).graph
    from ember.transforms.pipeline import optimize

    optimized = optimize(graph, level=3)
    optimized = optimized[0] if isinstance(optimized, tuple) else optimized
    for node in optimized.nodes:  # no fused loop or C step over complex values
        if node.kind == "call" and node.op.fused is not None:
            assert all(not v.dtype.is_complex for v in (*node.inputs, *node.outputs))


# ----------------------------------------------------------- a spectral convolution (FNO)


def _spectral_model(m, x, w, modes):
    """FNO's spectral convolution: rfft2, the low modes mixed by a complex weight, irfft2."""
    spectrum = m.fft.rfft2(x, norm="ortho")
    low = spectrum[:, :, :modes, :modes]
    mixed = m.einsum("bixy,ioxy->boxy", low, w)
    out = m.zeros((x.shape[0], w.shape[1], x.shape[2], x.shape[3] // 2 + 1), dtype=mixed.dtype)
    out = m.cat([m.cat([mixed, out[:, :, :modes, modes:]], 3), out[:, :, modes:, :]], 2)
    return m.fft.irfft2(out, s=(x.shape[2], x.shape[3]), norm="ortho")


def test_a_spectral_convolution_trains_as_its_torch_twin():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((4, 2, 8, 8)).astype(np.float32)
    target = rng.standard_normal((4, 3, 8, 8)).astype(np.float32)
    w0 = (rng.standard_normal((2, 3, 3, 3)) + 1j * rng.standard_normal((2, 3, 3, 3))) * 0.3
    w0 = w0.astype(np.complex64)
    ew = ember.tensor(w0.copy(), requires_grad=True)
    tw = torch.tensor(w0.copy(), requires_grad=True)
    losses = []
    for _ in range(5):
        el = ((_spectral_model(ember, ember.tensor(x), ew, 3) - ember.tensor(target)) ** 2).mean()
        tl = ((_spectral_model(torch, torch.tensor(x), tw, 3) - torch.tensor(target)) ** 2).mean()
        el.backward()
        tl.backward()
        np.testing.assert_allclose(ew.grad.numpy(), tw.grad.numpy(), rtol=1e-4, atol=1e-6)
        with ember.no_grad():
            ew -= 0.5 * ew.grad
        with torch.no_grad():
            tw -= 0.5 * tw.grad
        ew.grad = None
        tw.grad = None
        losses.append((float(el), float(tl)))
    for mine, theirs in losses:
        assert abs(mine - theirs) <= 1e-5 * abs(theirs)
    assert losses[-1][0] < losses[0][0]


def test_no_python_warnings_from_numpy_in_complex_arithmetic():
    z = ember.tensor([1 + 1j, 0j])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ember.abs(z), z * z, z.real, ember.angle(z)


@pytest.mark.parametrize("fn", ["linspace", "logspace"])
@pytest.mark.parametrize(
    "start, end, dtype",
    [(0, 1 + 2j, None), (2j, -1j, None), (0.5, 3 - 1j, "complex128"), (-1.0, 2.0, None)],
)
def test_spaces_with_complex_ends_match_pytorch(fn, start, end, dtype):
    """linspace and logspace kept only the real parts of complex ends (NumPy's cast to float);
    they take the default complex dtype now, as PyTorch's."""
    torch = pytest.importorskip("torch")
    want = getattr(torch, fn)(start, end, 5, dtype=None if dtype is None else getattr(torch, dtype))
    got = getattr(ember, fn)(start, end, 5, dtype=None if dtype is None else getattr(ember, dtype))
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


def test_spaces_refuse_complex_ends_with_a_real_dtype():
    from ember.errors import DTypeError

    with pytest.raises(DTypeError, match="linspace: complex ends"):
        ember.linspace(0, 1j, 3, dtype=ember.float32)
    with pytest.raises(DTypeError, match="logspace: complex ends"):
        ember.logspace(0, 1j, 3, dtype=ember.int64)


def test_composites_that_dropped_or_mistook_complex_values():
    """Found by running the OpInfo samples in complex64/complex128 against PyTorch: addcmul's
    and addcdiv's ``value`` truncated to an int (0.5 gave 0), nan_to_num left complex NaN and
    infinities, cholesky_solve/cholesky_inverse used the transpose where A = L L^H, and
    pairwise_distance returned a complex "distance"."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(12)

    def c(*shape):
        return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)

    x, y, z = c(2, 3), c(2, 3), c(1, 3)
    for value in (0.5, 0.5 + 1j, 2):
        for name in ("addcmul", "addcdiv"):
            want = getattr(torch, name)(*map(torch.tensor, (x, y, z)), value=value)
            got = getattr(ember, name)(*map(ember.tensor, (x, y, z)), value=value)
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-12)
    odd = np.array([np.nan + 1j, complex(np.inf, np.nan), 1 + 1j, complex(-np.inf, 2)])
    for kwargs in ({}, {"nan": 2.0, "posinf": 5.0, "neginf": -5.0}):
        np.testing.assert_array_equal(
            ember.nan_to_num(ember.tensor(odd), **kwargs).numpy(),
            torch.nan_to_num(torch.tensor(odd), **kwargs).numpy(),
        )
    m = c(3, 3)
    lower = np.linalg.cholesky(m @ m.conj().T + 3 * np.eye(3))
    b = c(3, 2)
    for factor, upper in ((lower, False), (lower.conj().T, True)):
        np.testing.assert_allclose(
            ember.cholesky_solve(ember.tensor(b), ember.tensor(factor), upper=upper).numpy(),
            torch.cholesky_solve(torch.tensor(b), torch.tensor(factor), upper=upper).numpy(),
            rtol=1e-10,
            atol=1e-12,
        )
        np.testing.assert_allclose(
            ember.cholesky_inverse(ember.tensor(factor), upper=upper).numpy(),
            torch.cholesky_inverse(torch.tensor(factor), upper=upper).numpy(),
            rtol=1e-10,
            atol=1e-12,
        )
    for p in (2, 1, 3.0, float("inf"), 0):
        want = torch.nn.functional.pairwise_distance(torch.tensor(x), torch.tensor(y), p=p)
        got = ember.nn.functional.pairwise_distance(ember.tensor(x), ember.tensor(y), p=p)
        assert got.dtype == ember.float64
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)


@pytest.mark.parametrize("captured", [False, True])
def test_complex_linear_layers_match_pytorch(captured):
    """nn.Linear / F.linear / addmm on complex tensors (complex-valued networks): values and
    the conjugate Wirtinger gradients of a real loss, eagerly and under ember.function."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)

    def c(*shape):
        return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)

    cases = [
        (lambda L, x, w, b: L.nn.functional.linear(x, w, b), (c(2, 5, 3), c(4, 3), c(4))),
        (lambda L, x, w: L.nn.functional.linear(x, w), (c(5, 3), c(4, 3))),
        (
            lambda L, i, a, b: L.addmm(i, a, b, beta=0.5 + 1j, alpha=2.0 - 0.5j),
            (c(4), c(2, 3), c(3, 4)),
        ),
        (lambda L, i, a, b: L.addmm(i, a, b), (c(2, 4), c(2, 3), c(3, 4))),
    ]
    for fn, arrays in cases:
        grads = {}
        for lib in (torch, ember):
            leaves = [lib.tensor(a, requires_grad=True) for a in arrays]

            def loss(*ts, lib=lib):
                return (fn(lib, *ts).abs() ** 2).sum()

            run = ember.function(loss) if captured and lib is ember else loss
            run(*leaves).backward()
            grads[lib] = [t.grad.resolve_conj().numpy() for t in leaves]
        for got, want in zip(grads[ember], grads[torch]):
            np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
