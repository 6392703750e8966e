"""The cases PyTorch's op_db found ember differing on (test_torch_opinfo.py runs only each
OpInfo's first samples), each against PyTorch: values, shapes, dtypes, the inputs' gradients
where they have them, and refusals where PyTorch refuses."""

from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _arg(v, lib):
    if isinstance(v, np.ndarray):
        t = lib.tensor(v)
        return t.requires_grad_(True) if v.dtype.kind in "fc" else t
    if isinstance(v, tuple):
        return tuple(_arg(x, lib) for x in v)
    return v


def _arrays(out):
    out = out if isinstance(out, (tuple, list)) else (out,)
    return [o.detach().numpy() for o in out]


def _compare(fn, *args, grad=True, **kwargs):
    """fn(torch, *args) against fn(ember, *args): results, then the float inputs' gradients
    of the results' sum."""
    t_in = [_arg(a, torch) for a in args]
    e_in = [_arg(a, ember) for a in args]
    want, got = fn(torch, *t_in, **kwargs), fn(ember, *e_in, **kwargs)
    for w, g in zip(_arrays(want), _arrays(got), strict=True):
        assert w.shape == g.shape and w.dtype == g.dtype, (w.shape, g.shape, w.dtype, g.dtype)
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-9)
    if not grad:
        return
    t_leaves = [t for t in t_in if isinstance(t, torch.Tensor) and t.requires_grad]
    e_leaves = [t for t in e_in if isinstance(t, ember.Tensor) and t.requires_grad]
    t_outs = [o for o in (want if isinstance(want, tuple) else (want,)) if o.requires_grad]
    e_outs = [o for o in (got if isinstance(got, tuple) else (got,)) if o.requires_grad]
    if not t_outs:
        return
    t_grads = torch.autograd.grad(sum(o.real.sum() for o in t_outs), t_leaves, allow_unused=True)
    e_grads = ember.autograd.grad(sum(o.real.sum() for o in e_outs), e_leaves, allow_unused=True)
    for tl, w, g in zip(t_leaves, t_grads, e_grads, strict=True):
        w = np.zeros(tuple(tl.shape)) if w is None else w.numpy()
        g = np.zeros(tuple(tl.shape)) if g is None else g.numpy()
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-9)


R = np.random.default_rng(0)


def f64(*shape):
    return R.standard_normal(shape)


MASK = R.random((5, 5)) > 0.5


def i64(*values):
    return np.array(values, np.int64)


@pytest.mark.parametrize("method", ["float", "double", "half", "long", "int", "bool", "cfloat"])
def test_conversion_methods_take_memory_format(method):
    x = f64(2, 3, 4, 5)
    for fmt in ("channels_last", "preserve_format", "contiguous_format"):
        t = getattr(torch.tensor(x), method)(memory_format=getattr(torch, fmt))
        e = getattr(ember.tensor(x), method)(memory_format=getattr(ember, fmt))
        assert e.stride() == t.stride()
        assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
    with pytest.raises(ember.EmberError, match="rank 4"):
        ember.ones(2, 3).float(memory_format=ember.channels_last)


def test_rdiv_and_div():
    _compare(lambda T, x: (x.__rdiv__(3.0), x.__div__(2.0)), f64(4) + 3)


@pytest.mark.parametrize(
    "fn, args",
    [
        (lambda T, x, i, s: T.scatter(x, 0, i, s), (f64(), i64(0).reshape(()), f64())),
        (lambda T, x, i, s: T.scatter_add(x, 0, i, s), (f64(), i64(0).reshape(()), f64())),
        (lambda T, x, i, s: T.scatter_add(x, 0, i, s), (f64(), i64(0, 0), f64(2))),
        (lambda T, x, i, s: T.index_add(x, 0, i, s), (f64(), i64(0), f64())),
        (lambda T, x, i, s: T.index_add(x, 0, i, s), (f64(3), i64(1).reshape(()), f64(1))),
        (lambda T, x, i: T.gather(x, 0, i), (f64(), i64(0, 0))),
        (lambda T, x, i: T.gather(x, 0, i), (f64(5), np.zeros((2, 0), np.int64))),
        (lambda T, x, i: T.gather(x, 1, i), (f64(1, 2), np.zeros((0,), np.int64))),
    ],
)
def test_gathers_and_scatters_of_0d_tensors_and_empty_indices(fn, args):
    _compare(fn, *args)


def test_scatter_of_an_empty_index_is_the_input():
    # (no gradients: PyTorch's backward of it fails, giving src a gradient of the index's shape)
    x, src = f64(2), f64(2)
    _compare(lambda T, x: T.scatter(x, 0, T.zeros((2, 0), dtype=T.int64), T.tensor(src)), x)


def test_take_along_dim_of_a_0d_tensor_is_refused():
    with pytest.raises(IndexError):
        torch.take_along_dim(torch.tensor(1.0), torch.tensor(0), 0)
    with pytest.raises(ember.EmberError, match="take_along_dim"):
        ember.take_along_dim(ember.tensor(1.0), ember.tensor(0), 0)


@pytest.mark.parametrize(
    "fn, args",
    [
        (lambda T, x: T.cov(x), (f64(1, 5),)),
        (lambda T, x: T.corrcoef(x), (f64(1, 5),)),
        (lambda T, x: T.nonzero(x, as_tuple=True), (np.array(3.0),)),
        (lambda T, x: T.nonzero(x, as_tuple=True), (np.array(0.0),)),
        (lambda T, x: T.masked_select(x, T.tensor(True)), (f64(),)),
        (lambda T, x: T.masked_select(x, T.tensor([True, False])), (f64(),)),
        (lambda T, x, s: T.masked_scatter(x, T.tensor(MASK), s), (f64(5), f64(25))),
    ],
)
def test_selections(fn, args):
    _compare(fn, *args)


@pytest.mark.parametrize("eps", [-0.5, -1e-3, float("inf")])
def test_group_norm_takes_any_float_eps(eps):
    _compare(
        lambda T, x, w, b: T.nn.functional.group_norm(x, 2, w, b, eps), f64(2, 6, 5), f64(6), f64(6)
    )


@pytest.mark.parametrize(
    "fn, args",
    [
        (lambda T, x: T.nn.functional.multi_margin_loss(x, T.tensor(0)), (np.array(0.3),)),
        (
            lambda T, x: T.nn.functional.multi_margin_loss(x, T.tensor([1]), reduction="none"),
            (f64(5),),
        ),
        (lambda T, x: T.nn.functional.multilabel_margin_loss(x, T.tensor(0)), (np.array(0.3),)),
        (lambda T, x: T.nn.functional.feature_alpha_dropout(x, 0.5, training=False), (f64(5),)),
        (lambda T, x: T.nn.functional.batch_norm(x, T.zeros(0), T.ones(0)), (f64(0),)),
        (
            lambda T, x: T.nn.functional.cross_entropy(
                x, T.zeros(0, dtype=T.int64), reduction="sum"
            ),
            (f64(0, 0),),
        ),
        (
            lambda T, x: T.nn.functional.nll_loss(x, T.zeros(0, 4, dtype=T.int64), reduction="sum"),
            (f64(0, 3, 4),),
        ),
    ],
)
def test_losses_and_normalization(fn, args):
    _compare(fn, *args)


@pytest.mark.parametrize("shape", [(0, 0), (3, 0, 0), (0, 2, 2)])
def test_ex_factorizations_of_empty_matrices(shape):
    _compare(lambda T, a: tuple(T.linalg.cholesky_ex(a)), np.zeros(shape), grad=False)
    _compare(lambda T, a: tuple(T.linalg.inv_ex(a)), np.zeros(shape), grad=False)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"atol": np.array([[0.1], [1.0], [2.0]])},
        {"rtol": np.array(1.0)},
        {"rtol": np.array(0.3), "atol": 0.5},
        {"atol": np.array(0.9)},
    ],
)
def test_pinv_with_tensor_tolerances(kwargs):
    def fn(T, a):
        return T.linalg.pinv(
            a, **{k: T.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
        )

    _compare(fn, f64(2, 5, 5))
    if all(np.ndim(v) == 0 for v in kwargs.values()):  # (PyTorch's empty result ignores them)
        _compare(fn, np.zeros((0, 5, 5)))


@pytest.mark.parametrize(
    "a, b, dims",
    [((2, 3, 6), (2, 3), (0, 2)), ((3, 4, 4, 3), (3, 4), (0, 2)), ((3, 2, 6), (2, 3), None)],
)
def test_tensorsolve_dims(a, b, dims):
    _compare(lambda T, a, b: T.linalg.tensorsolve(a, b, dims=dims), f64(*a), f64(*b))


@pytest.mark.parametrize(
    "a, b, dims",
    [
        ((2, 2, 1), (2, 1, 2), ([0, 1], [2, 0])),
        ((1, 3), (2, 3), ([0], [0])),
        ((2, 0), (1, 0), ([0], [0])),
    ],
)
def test_tensordot_broadcasts_contracted_dims_of_size_1(a, b, dims):
    _compare(lambda T, a, b: T.tensordot(a, b, dims), f64(*a), f64(*b))


@pytest.mark.parametrize(
    "fn, args",
    [
        (lambda T, x: T.gradient(x, spacing=None), (f64(5),)),
        (lambda T, a, b: T.matmul(a, b), (f64(5, 5, 0), f64(0))),
        (lambda T, a, b: T.matmul(a, b), (f64(5, 5, 0), f64(0, 5))),
        (lambda T, x: T.linalg.vander(x, N=3), (np.array(2.0),)),
        (lambda T, x: T.nn.functional.pad(x, (-4, 5, 0, 0), "replicate"), (f64(2, 3, 4, 4),)),
        (lambda T, x: T.nn.functional.pad(x, (0, 0, 2, -4), "replicate"), (f64(2, 3, 4, 4),)),
        (
            lambda T, x, y: T.nextafter(x, y),
            (np.array([0.0, 1.0, 1.0, 2.0]), np.array([1.0, 1.0, 0.0, 3.0])),
        ),
    ],
)
def test_more_cases(fn, args):
    _compare(fn, *args)


@pytest.mark.parametrize(
    "args", [(0.0, -8.000001, -4.0), (0, 3.7, 1.5), (0.9, 5, 1.9), (-0.5, 3, 1)]
)
def test_integer_arange_truncates_its_ends_and_step(args):
    _compare(lambda T: T.arange(*args, dtype=T.int64))


def test_integer_results():
    x = np.array([[True, False]])
    _compare(lambda T, x: T.addr(x, T.tensor([True]), T.tensor([False, True]), beta=3, alpha=2), x)
    _compare(lambda T, x: T.addr(x, T.tensor([True]), T.tensor([False, True]), beta=0), x)
    _compare(lambda T, x: x.sum_to_size(()), np.array(True))
    _compare(lambda T, x: T.searchsorted(T.zeros(3, 0), x), f64(3, 2))


def test_complex_truth_values_and_fills():
    z = np.array([0j, 1j, 2, 0])
    _compare(
        lambda T, z: (T.logical_and(z, T.tensor([1.0, 0, 1, 0])), T.logical_not(z)), z, grad=False
    )
    _compare(lambda T, z: (z.all(), z.any(), T.any(z.reshape(2, 2), 1)), z, grad=False)
    _compare(lambda T, z: T.constant_pad_nd(z, (1, 0), 2j), z)
    with pytest.raises(ember.EmberError, match="pad"):
        ember.constant_pad_nd(ember.ones(2), (1, 1), 3 + 4j)


def test_complex_cases():
    a = f64(4, 4) + 1j * f64(4, 4)
    spd = a @ a.conj().T + 4 * np.eye(4)
    _compare(lambda T, m: tuple(T.linalg.cholesky_ex(m, upper=True)), spd)
    z = f64(2, 3, 3) + 1j * f64(2, 3, 3)
    _compare(lambda T, i, a, b: T.baddbmm(i, a, b, beta=0.2, alpha=0.6), z, z, z)
    _compare(lambda T, z: T.nn.functional.normalize(z, p=0.0, dim=-1), z)
    with pytest.warns(UserWarning):
        _compare(lambda T, z: T.softmax(z, 0, dtype=T.float64), f64(3) + 1j * f64(3), grad=False)


def test_istft_with_a_complex_window_divides_by_its_complex_square():
    z = f64(10, 6) + 1j * f64(10, 6)
    w = np.abs(f64(10)) + 0.5 + 1j * f64(10)

    def fn(T, z, w):
        return T.istft(z, n_fft=10, window=w, center=True, return_complex=True)

    _compare(fn, z, w)


@pytest.mark.parametrize("name", ["dropout", "alpha_dropout", "feature_alpha_dropout"])
@pytest.mark.parametrize("dtype", ["int64", "bool"])
def test_dropouts_outside_training_return_any_dtype(name, dtype):
    x = np.arange(6).reshape(2, 3).astype(dtype)
    _compare(lambda T, x: getattr(T.nn.functional, name)(x, 0.5, training=False), x)


@pytest.mark.parametrize("shape", [(0, 5), (5, 0), (3, 0, 4)])
@pytest.mark.parametrize("ord", ["fro", "nuc", 2, 1, -1, np.inf, -np.inf, -2])
def test_matrix_norms_of_empty_matrices(shape, ord):
    """op_db's reference inputs: the largest of no values is 0 (norms are non-negative), the
    smallest of none an error, as PyTorch's."""
    x = np.ones(shape)
    try:
        torch.linalg.matrix_norm(torch.tensor(x), ord)
    except IndexError:  # (PyTorch's amin of nothing)
        with pytest.raises(IndexError):
            ember.linalg.matrix_norm(ember.tensor(x), ord)
        return
    _compare(lambda lib, a: lib.linalg.matrix_norm(a, ord), x)


def test_diff_with_no_differences_is_the_input_alone():
    """n=0: PyTorch returns the input, prepend and append left out (op_db's reference inputs)."""
    x, before, after = np.arange(6.0).reshape(2, 3), np.ones((2, 1)), np.zeros((2, 2))
    _compare(lambda lib, a, b, c: lib.diff(a, 0, 1, b, c), x, before, after)


@pytest.mark.parametrize(
    "tolerances",
    [
        {"atol": np.array([0.1, 1.0, 10.0])},
        {"rtol": np.array(0.05)},
        {"atol": np.array([0.0, 1.0, 2.0]), "rtol": np.array(0.003)},
        {"atol": np.array([0.0, 0.5, 2.0])},
    ],
)
def test_matrix_rank_takes_tensor_tolerances(tolerances):
    """op_db's reference inputs: tolerances as tensors, per matrix (pinv's too)."""
    a = np.random.default_rng(0).standard_normal((3, 4, 4)) @ np.diag([10, 1, 0.1, 0.01])
    want = torch.linalg.matrix_rank(
        torch.tensor(a), **{k: torch.tensor(v) for k, v in tolerances.items()}
    )
    got = ember.linalg.matrix_rank(
        ember.tensor(a), **{k: ember.tensor(v) for k, v in tolerances.items()}
    )
    np.testing.assert_array_equal(got.numpy(), want.numpy())
