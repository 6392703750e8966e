"""Complex tensors where PyTorch takes them (complex-valued CNNs, the elementwise and reduction
functions, statistics, indexing) and refusals where it refuses them, against PyTorch 2.13:
values, and the gradients of a random real loss of the result (PyTorch's convention, the
conjugate Wirtinger derivative). The dtype sweep of test_opinfo.py compares the values of the
functions opinfo.COMPLEX_SWEEP names in complex64/complex128; this file compares gradients, the
refusals' messages, branch cuts, and a complex CNN trained eagerly and under ember.function."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.errors import ComplexDTypeError, EmberError

from .complex_torch import CPLX, REAL, compare, random_inputs

torch = pytest.importorskip("torch")

C, R = CPLX, REAL
IDX = np.array([[0, 2, 1], [1, 1, 0]])  # scatter's index (2, 3) into (2, 3)
TARGET = np.array([[1, -1, 1, 1], [-1, -1, 1, -1], [1, 1, -1, 1]]) * (1 - 0.5j)  # (no gradient)


def _index(lib):
    return lib.tensor(IDX)


# (name, function of (library, *tensors), input specs); every input takes a gradient
GRADIENT_CASES = [
    # complex-valued convolutions: stride, padding, groups, dilation, bias
    (
        "conv1d",
        lambda L, x, w, b: L.nn.functional.conv1d(x, w, b, stride=2, padding=1, groups=2),
        [((2, 4, 7), C), ((6, 2, 3), C), ((6,), C)],
    ),
    (
        "conv2d",
        lambda L, x, w: L.nn.functional.conv2d(x, w, padding=1, dilation=2),
        [((1, 2, 6, 5), C), ((3, 2, 3, 2), C)],
    ),
    (
        "conv_transpose2d",
        lambda L, x, w, b: L.nn.functional.conv_transpose2d(x, w, b, stride=2, output_padding=1),
        [((2, 2, 3, 3), C), ((2, 3, 2, 2), C), ((3,), C)],
    ),
    (
        "conv3d",
        lambda L, x, w: L.nn.functional.conv3d(x, w),
        [((1, 2, 3, 4, 3), C), ((2, 2, 2, 2, 2), C)],
    ),
    ("lerp scalar", lambda L, a, b: L.lerp(a, b, 0.3 + 0.8j), [((2, 3), C), ((2, 3), C)]),
    ("lerp tensor", lambda L, a, b, w: L.lerp(a, b, w), [((2, 3), C), ((3,), C), ((2, 3), C)]),
    ("logsumexp", lambda L, x: L.logsumexp(x, 1), [((3, 4), C)]),
    ("logaddexp", lambda L, x, y: L.logaddexp(x, y), [((2, 3), C), ((3,), C)]),
    ("exp2", lambda L, x: L.exp2(x), [((2, 3), C)]),
    ("silu", lambda L, x: L.nn.functional.silu(x), [((2, 3), C)], False),
    ("sinc", lambda L, x: L.sinc(x), [((2, 3), C)]),
    ("softsign", lambda L, x: L.nn.functional.softsign(x), [((2, 3), C)]),
    ("float_power", lambda L, x, y: L.float_power(x, y), [((2, 3), C), ((2, 3), C)]),
    ("cov", lambda L, x: L.cov(x), [((3, 5), C)]),
    ("corrcoef", lambda L, x: L.corrcoef(x), [((3, 5), C)]),
    ("dist", lambda L, x, y: L.dist(x, y, 3), [((2, 3), C), ((2, 3), C)]),
    ("renorm", lambda L, x: L.renorm(x, 2, 0, 1.0), [((3, 4), C)]),
    ("normalize", lambda L, x: L.nn.functional.normalize(x), [((3, 4), C)]),
    ("rms_norm", lambda L, x, w: L.nn.functional.rms_norm(x, (4,), w), [((3, 4), C), ((4,), C)]),
    ("l1_loss", lambda L, x, y: L.nn.functional.l1_loss(x, y), [((3, 4), C), ((3, 4), C)]),
    (
        "soft_margin_loss",
        lambda L, x: L.nn.functional.soft_margin_loss(x, L.tensor(TARGET)),
        [((3, 4), C)],
        False,  # (PyTorch's has no complex derivative; ember's neither)
    ),
    (
        "poisson_nll_loss",
        lambda L, x: L.nn.functional.poisson_nll_loss(x, L.tensor(TARGET)),
        [((3, 4), C)],
    ),
    (
        "triplet_margin_loss",
        lambda L, a, p, n: L.nn.functional.triplet_margin_loss(a, p, n, margin=3.0),
        [((3, 4), C), ((3, 4), C), ((3, 4), C)],
    ),
    (
        "scatter_reduce prod",
        lambda L, x, s: x.scatter_reduce(1, _index(L), s, "prod"),
        [((2, 3), C), ((2, 3), C)],
        False,
    ),
    (
        "scatter_reduce mean",
        lambda L, x, s: x.scatter_reduce(1, _index(L), s, "mean", include_self=False),
        [((2, 3), C), ((2, 3), C)],
        False,  # (PyTorch's scatter_reduce has no complex derivative; ember's neither)
    ),
    (
        "addr",
        lambda L, x, a, b: L.addr(x, a, b, beta=0.5j, alpha=2 - 1j),
        [((2, 3), C), ((2,), C), ((3,), C)],
    ),
    (
        "addmv",
        lambda L, x, m, v: L.addmv(x, m, v, beta=0.5 - 1j, alpha=1j),
        [((2,), C), ((2, 3), C), ((3,), C)],
    ),
    ("vander", lambda L, x: L.vander(x, 3), [((4,), C)], False),  # (PyTorch's fails)
    # the matmul family, reductions and scans
    ("bmm", lambda L, a, b: L.bmm(a, b), [((2, 2, 3), C), ((2, 3, 2), C)]),
    (
        "baddbmm",
        lambda L, i, a, b: L.baddbmm(i, a, b, beta=0.5j, alpha=1 + 1j),
        [((2, 2, 2), C), ((2, 2, 3), C), ((2, 3, 2), C)],
    ),
    ("einsum", lambda L, a, b: L.einsum("bij,bkj->bik", a, b), [((2, 2, 3), C), ((2, 4, 3), C)]),
    ("tensordot", lambda L, a, b: L.tensordot(a, b, dims=([1], [0])), [((2, 3), C), ((3, 2), C)]),
    ("cumsum", lambda L, x: L.cumsum(x, 1), [((2, 4), C)]),
    ("cumprod", lambda L, x: L.cumprod(x, 1), [((2, 4), C)]),
    ("prod", lambda L, x: L.prod(x, 0), [((3, 2), C)]),
    ("mean var std", lambda L, x: L.stack([L.mean(x, 1), L.var(x, 1), L.std(x, 1)]), [((2, 4), C)]),
    ("sum dtype", lambda L, x: L.sum(x, 1, dtype=L.complex128), [((2, 4), C)]),
    # indexing and layout, real and complex together (promotion)
    ("masked_fill", lambda L, x: x.masked_fill(L.tensor(IDX == 1), 2 - 1j), [((2, 3), C)]),
    ("index_put", lambda L, x, v: x.index_put((L.tensor([1, 0]),), v), [((2, 3), C), ((3,), C)]),
    ("scatter", lambda L, x, s: x.scatter(1, _index(L), s), [((2, 3), C), ((2, 3), C)]),
    ("scatter value", lambda L, x: x.scatter(1, _index(L)[:, :2], 2 - 1j), [((2, 3), C)]),
    ("pad reflect", lambda L, x: L.nn.functional.pad(x, (2, 1), mode="reflect"), [((1, 2, 4), C)]),
    (
        "pad circular",
        lambda L, x: L.nn.functional.pad(x, (1, 2), mode="circular"),
        [((1, 2, 4), C)],
    ),
    ("roll flip", lambda L, x: L.flip(L.roll(x, 1, 1), [0]), [((2, 3), C)]),
    ("cat stack mixed", lambda L, x, y: L.cat([x, L.stack([y, y])[0]]), [((2, 3), C), ((2, 3), R)]),
    # elementwise: moduli, phases, powers, roots and branches
    ("abs angle sgn", lambda L, x: L.stack([L.abs(x), L.angle(x)]) + L.sgn(x).real, [((2, 3), C)]),
    ("pow complex exponent", lambda L, x: L.pow(x, 0.5 - 1.5j), [((2, 3), C)]),
    ("pow tensors", lambda L, x, y: L.pow(x, y), [((2, 3), C), ((2, 3), R)]),
    ("reciprocal rsqrt", lambda L, x: L.reciprocal(x) + L.rsqrt(x), [((2, 3), C)]),
    ("sqrt log exp", lambda L, x: L.sqrt(x) * L.log(x) + L.exp(x), [((2, 3), C)]),
    ("tanh sigmoid", lambda L, x: L.tanh(x) + L.sigmoid(x), [((2, 3), C)]),
]


@pytest.mark.parametrize("case", GRADIENT_CASES, ids=[c[0] for c in GRADIENT_CASES])
def test_values_and_gradients_match_pytorch(case):
    name, fn, specs, grad = (*case, True)[:4]  # (grad False: values only, as PyTorch has)
    arrays = random_inputs(np.random.default_rng(len(name)), specs, "float64")
    compare(fn, arrays, "float64", grad=grad, scale=10.0)


@pytest.mark.parametrize(
    "name, fn",
    [
        ("sqrt", lambda L, z: L.sqrt(z)),
        ("log", lambda L, z: L.log(z)),
        ("rsqrt", lambda L, z: L.rsqrt(z)),
        ("reciprocal", lambda L, z: L.reciprocal(z)),
        ("exp", lambda L, z: L.exp(z)),
        ("pow", lambda L, z: L.pow(z, 0.5 + 0.25j)),
        ("tanh", lambda L, z: L.tanh(z)),
        ("sigmoid", lambda L, z: L.sigmoid(z)),
        ("sgn angle", lambda L, z: L.sgn(z) + L.angle(z)),
    ],
)
def test_branch_cuts_and_special_values_match_pytorch(name, fn):
    """Either side of the negative real axis (signed zero imaginary parts), zero, and (but for
    pow and sgn, whose NaN parts at infinities differ from PyTorch's) infinities."""
    re = [-2.0, -2.0, -0.0, 0.0, 0.0, 3.0, -0.5, -np.inf, np.inf, 1.0]
    im = [0.0, -0.0, 0.0, -0.0, 0.0, -0.0, -1e-30, 0.5, 0.0, np.inf]
    if name in ("pow", "sgn angle"):
        re, im = re[:-3], im[:-3]
    z = np.array([complex(a, b) for a, b in zip(re, im)])
    for dtype in (np.complex64, np.complex128):
        with np.errstate(all="ignore"):
            got = fn(ember, ember.tensor(z.astype(dtype))).numpy()
        want = fn(torch, torch.tensor(z.astype(dtype))).numpy()
        assert got.dtype == want.dtype
        for part in (np.real, np.imag):
            g, w = part(got), part(want)
            np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg=name)
            ok = ~np.isnan(w)
            np.testing.assert_allclose(g[ok], w[ok], rtol=4 * np.finfo(dtype).eps, err_msg=name)


@pytest.mark.parametrize(
    "call, op, words",
    [
        (lambda L, z: L.sort(z), "sort", "Sort does not support complex"),
        (lambda L, z: z.argsort(), "argsort", "Sort does not support complex"),
        (lambda L, z: L.msort(z), "msort", "Sort does not support complex"),
        (lambda L, z: L.topk(z, 1), "topk", "topk does not support complex"),
        (lambda L, z: L.isin(z, z), "isin", "isin"),
        (lambda L, z: L.isposinf(z), "isposinf", "complex"),
        (lambda L, z: L.nansum(z), "nansum", "complex"),
        (lambda L, z: L.nn.functional.interpolate(z[None], size=4), "interpolate", "Complex"),
        (lambda L, z: L.nn.functional.dropout(z, 0.5), "dropout", "bernoulli"),
        (lambda L, z: L.nn.functional.alpha_dropout(z, 0.5, True), "alpha_dropout", "bernoulli"),
        (lambda L, z: z.scatter_reduce(1, L.tensor(IDX), z, "amax"), "scatter_reduce", "amax"),
        (
            lambda L, z: z.index_reduce(0, L.tensor([1, 0]), z, "mean", include_self=False),
            "index_reduce",
            "include_self",
        ),
        (
            lambda L, z: L.convolution(z[None], z[:, :2, None], None, [1], [0], [1], False, [0], 1),
            "convolution",
            "Complex",
        ),
        (lambda L, z: L.logaddexp2(z, z), "logaddexp2", "float"),
        (lambda L, z: z.real.masked_fill(z.real > 1, 1j), "masked_fill", "1j"),
        (lambda L, z: z.real.scatter(1, L.tensor(IDX), 1j), "scatter", "1j"),
        (lambda L, z: L.nn.functional.silu(z.requires_grad_()), "silu", "differentiation"),
        (
            lambda L, z: L.nn.functional.soft_margin_loss(z.requires_grad_(), z.detach()),
            "soft_margin_loss",
            "differentiation",
        ),
        (
            lambda L, z: z.requires_grad_().scatter_reduce(1, L.tensor(IDX), z, "sum"),
            "scatter_reduce",
            "derivative",
        ),
        (
            lambda L, z: L.nn.functional.embedding(L.tensor([1]), z.requires_grad_()),
            "embedding",
            "automatic differentiation",
        ),
    ],
)
def test_refusals_name_the_function_as_pytorch_refuses(call, op, words):
    """Where PyTorch refuses complex tensors, ember does too, naming the function the user
    called (not a primitive underneath), with PyTorch's words where it has some."""
    z = np.array([[1 + 1j, 2, 0.5j], [3, 4 - 1j, -1]])
    with pytest.raises((RuntimeError, NotImplementedError)):
        call(torch, torch.tensor(z))
    with pytest.raises(EmberError) as info:
        call(ember, ember.tensor(z))
    assert info.value.op == op and words in str(info.value), str(info.value)
    assert isinstance(info.value, RuntimeError)


def test_embedding_looks_up_complex_rows_without_a_gradient():
    w = np.arange(12).reshape(4, 3) * (1 - 0.5j)
    idx = np.array([[3, 0], [1, 1]])
    want = torch.nn.functional.embedding(torch.tensor(idx), torch.tensor(w), padding_idx=1)
    got = ember.nn.functional.embedding(ember.tensor(idx), ember.tensor(w), padding_idx=1)
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_dropout_passes_complex_where_it_draws_no_mask():
    z = ember.tensor(np.array([[1 + 1j, 2], [3, 4 - 1j]]))
    F = ember.nn.functional
    for out in (F.dropout(z, 0.0), F.dropout(z, 0.5, training=False), F.dropout2d(z[None], 0.0)):
        np.testing.assert_array_equal(out.numpy().reshape(2, 2), z.numpy())
    assert not F.dropout(z, 1.0).numpy().any()


def test_fast_paths_decline_complex_operands():
    """The conv primitives' C fast rules never see complex arrays (they would compute them
    wrong): `OpDef.run` falls back to the NumPy reference."""
    from ember.ops.conv import CONV

    rng = np.random.default_rng(3)
    x = (rng.standard_normal((1, 2, 5)) + 1j * rng.standard_normal((1, 2, 5))).astype(np.complex64)
    w = (rng.standard_normal((3, 2, 3)) + 1j * rng.standard_normal((3, 2, 3))).astype(np.complex64)
    attrs = dict(stride=(1,), padding=((0, 0),), dilation=(1,), groups=1)
    assert CONV.fast is not None and CONV.fast(x, w, **attrs) is None
    np.testing.assert_array_equal(CONV.run(x, w, **attrs), CONV.kernel(x, w, **attrs))
    assert isinstance(ComplexDTypeError("x", op="conv"), RuntimeError)


# --------------------------------------------------------------- a complex-valued CNN


def _cnn(L, x, w1, b1, w2, b2):
    """Two complex convolutions with a complex tanh between, on a (N, 1, T) signal."""
    F = L.nn.functional
    h = L.tanh(F.conv1d(x, w1, b1, padding=2))
    return F.conv1d(h, w2, b2, stride=2)


@pytest.mark.parametrize("captured", [False, True])
def test_a_complex_cnn_trains_as_its_torch_twin(captured):
    """A 2-layer complex CNN fitting a toy analytic signal: three SGD steps (momentum) eagerly
    or under ember.function, losses and parameters equal to PyTorch's."""
    rng = np.random.default_rng(9)
    t = np.linspace(0, 1, 16)
    x = np.stack([np.exp(2j * np.pi * f * t) for f in (1.0, 2.5, 4.0)])[:, None]
    target = np.stack([np.exp(2j * np.pi * f * t[1::2]) * 0.5j for f in (1.0, 2.5, 4.0)])[:, None]

    def c(*shape):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)) * 0.4

    params0 = [c(4, 1, 5), c(4), c(1, 4, 3), c(1)]
    results = {}
    for lib in (torch, ember):
        params = [lib.tensor(p, requires_grad=True) for p in params0]
        opt = lib.optim.SGD(params, lr=0.05, momentum=0.9)
        xs, ys = lib.tensor(x), lib.tensor(target)

        def step(xs, ys, lib=lib, params=params, opt=opt):
            opt.zero_grad()
            out = _cnn(lib, xs, *params)  # (3, 1, 7)
            loss = ((out - ys[..., :7]).abs() ** 2).mean()
            loss.backward()
            opt.step()
            return loss

        run = ember.function(step) if captured and lib is ember else step
        losses = [float(run(xs, ys)) for _ in range(3)]
        results[lib] = losses, [p.detach().numpy() for p in params]
    (e_losses, e_params), (t_losses, t_params) = results[ember], results[torch]
    np.testing.assert_allclose(e_losses, t_losses, rtol=1e-12)
    assert e_losses[-1] < e_losses[0]
    for got, want in zip(e_params, t_params):
        np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-12)
