"""sort, argsort, topk, unique, cumprod, the norms, scatter_reduce, index_fill, index_copy and
multinomial beyond the OpInfo database (tests/ops/opinfo_issue19b.py): captured by
``ember.function`` (values and gradients against eager), tie orders on long rows against
PyTorch's stable sort, second derivatives, in-place forms, and multinomial's distribution."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

R = np.random.default_rng(1919)


def _t(a, grad=False):
    return ember.tensor(np.asarray(a), requires_grad=grad)


# ------------------------------------------------------------------------------------ ties


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int64", "uint8", "bool"])
@pytest.mark.parametrize("descending", [False, True])
def test_stable_sort_orders_long_rows_of_ties_as_pytorch(dtype, descending):
    """Rows of 3000 values from {0, 1, 2} (NaN too in floats): PyTorch's stable order, index
    for index, and its unstable sort's order (std::sort's) for stable=False."""
    values = R.integers(0, 3, (4, 3000)).astype(np.float64)
    if dtype.startswith("float"):
        values[R.random(values.shape) < 0.05] = np.nan
    x_np = values.astype(bool) if dtype == "bool" else values.astype(getattr(np, dtype))
    x, t = ember.tensor(x_np), torch.tensor(x_np)
    want = torch.sort(t, dim=1, descending=descending, stable=True)
    got = ember.sort(x, 1, descending, stable=True)
    np.testing.assert_array_equal(got.indices.numpy(), want.indices.numpy())
    np.testing.assert_array_equal(got.values.numpy(), want.values.numpy())
    unstable = ember.argsort(x, 1, descending)
    np.testing.assert_array_equal(unstable.numpy(), torch.argsort(t, 1, descending).numpy())


def test_topk_with_ties_selects_the_values_pytorch_selects():
    x_np = R.integers(0, 4, (5, 500)).astype(np.float64)
    x, t = ember.tensor(x_np), torch.tensor(x_np)
    for largest in (True, False):
        got = ember.topk(x, 40, 1, largest)
        want = torch.topk(t, 40, 1, largest)
        np.testing.assert_array_equal(got.values.numpy(), want.values.numpy())
        chosen = np.take_along_axis(x_np, got.indices.numpy(), 1)
        np.testing.assert_array_equal(chosen, got.values.numpy())
        for row in got.indices.numpy():
            assert len(set(row.tolist())) == 40  # no position twice


@pytest.mark.parametrize("dtype", ["float64", "float16", "int64", "uint8"])
def test_kthvalue_reports_the_index_pytorch_reports_among_ties_and_nans(dtype):
    """Rows of few distinct values (NaN among them in floats), short and long, every k along
    each axis: PyTorch's quickselect leaves one of the equal elements at k, not the first."""
    for shape in [(7, 9), (3, 300), (4, 5, 6)]:
        values = R.integers(0, 4, shape).astype(np.float64)
        if dtype.startswith("float"):
            values[R.random(shape) < 0.2] = np.nan
        x, t = ember.tensor(values).to(getattr(ember, dtype)), torch.tensor(values)
        t = t.to(getattr(torch, dtype))
        for dim in range(len(shape)):
            for k in sorted({1, 2, shape[dim] // 2 + 1, shape[dim]}):
                got, want = ember.kthvalue(x, k, dim), torch.kthvalue(t, k, dim)
                np.testing.assert_array_equal(got.indices.numpy(), want.indices.numpy())
                np.testing.assert_array_equal(
                    got.values.numpy().astype(float), want.values.numpy().astype(float)
                )


@pytest.mark.parametrize("dtype", ["float64", "float32", "int8", "bool"])
def test_topk_of_long_rows_of_ties_is_pytorchs(dtype):
    """Rows of ties (-0.0 among 0.0, NaN): which equal values topk picks and their order are
    PyTorch's (its libstdc++ selection's), index for index; the values are the start of the
    sorted row."""
    values = R.integers(-2, 3, (3, 2000, 2)).astype(np.float64)
    if dtype == "float64":
        values[R.random(values.shape) < 0.2] = -0.0
    array = values > 0 if dtype == "bool" else values.astype(getattr(np, dtype))
    with_nan = values.copy()
    with_nan[0, 5, 0] = np.nan
    for a in (array.astype(np.uint8) if dtype == "bool" else array, with_nan):
        t = ember.tensor(a)  # (a bool tensor as uint8: topk refuses bool, as PyTorch's)
        for largest in (True, False):
            for k in (1, 37, 250):
                got = ember.topk(t, k, 1, largest)
                want = torch.topk(torch.tensor(a), k, 1, largest)
                np.testing.assert_array_equal(got.indices.numpy(), want.indices.numpy())
                full = ember.sort(t, 1, descending=largest)
                np.testing.assert_array_equal(got.values.numpy(), full.values.numpy()[:, :k])


def test_sort_and_topk_return_named_tuples():
    out = ember.sort(_t([3.0, 1.0, 2.0]))
    values, indices = out
    assert out.values is values and out.indices is indices
    assert type(out).__name__ == "sort" and type(ember.topk(_t([1.0, 2.0]), 1)).__name__ == "topk"


# ----------------------------------------------------------------------------- capture


def _eager_and_captured(fn, *arrays):
    eager = fn(*[_t(a) for a in arrays])
    captured = ember.function(fn)(*[_t(a) for a in arrays])
    eager = eager if isinstance(eager, tuple) else (eager,)
    captured = captured if isinstance(captured, tuple) else (captured,)
    assert len(eager) == len(captured)
    for e, c in zip(eager, captured):
        np.testing.assert_allclose(c.numpy(), e.numpy(), rtol=1e-12, atol=1e-12)


def _grad_of(objective):
    """The gradients of ``objective`` with respect to every argument, by ember.grad."""

    def grads(*xs):
        return ember.grad(objective, argnums=tuple(range(len(xs))))(*xs)

    return grads


X = R.standard_normal((4, 6))
Z = np.array([[2.0, 0.0, 3.0, 0.0, 5.0, 1.0], [0.0, 2.0, 1.0, 4.0, 0.5, 2.0]])
IDX = np.array([[0, 1, 2, 0, 1, 3], [2, 2, 0, 1, 1, 3]])
C = R.standard_normal((4, 6))


@pytest.mark.parametrize(
    "name, fn, arrays",
    [
        ("sort", lambda x: tuple(ember.sort(x, 1, True)), (X,)),
        ("argsort", lambda x: x.argsort(0), (X,)),
        ("topk", lambda x: tuple(x.topk(3, 1)), (X,)),
        ("cumprod", lambda x: ember.cumprod(x, 1), (Z,)),
        ("vector_norm", lambda x: ember.linalg.vector_norm(x, 3, 1), (X,)),
        ("matrix_norm", lambda x: ember.linalg.matrix_norm(x, "nuc"), (X,)),
        ("norm", lambda x: x.norm(1, 0), (X,)),
        (
            "scatter_reduce",
            lambda x, s: ember.scatter_reduce(x, 0, _t(IDX), s, "amax", include_self=False),
            (X, C[:2]),
        ),
        ("index_fill", lambda x: ember.index_fill(x, 1, _t([5, 0, 5]), -2.0), (X,)),
        ("index_copy", lambda x, s: x.index_copy(0, _t([3, 1]), s), (X, C[:2])),
    ],
)
def test_captured_by_function_agrees_with_eager(name, fn, arrays):
    _eager_and_captured(fn, *arrays)
    floats = fn(*[_t(a) for a in arrays])
    floats = [o for o in (floats if isinstance(floats, tuple) else (floats,))]
    if not any(o.dtype.is_floating_point for o in floats):
        return

    def objective(*xs):
        out = fn(*xs)
        out = out if isinstance(out, tuple) else (out,)
        return sum((o * o).sum() for o in out if o.dtype.is_floating_point)

    _eager_and_captured(_grad_of(objective), *arrays)


def test_capturing_unique_raises_a_trace_error_naming_it():
    with pytest.raises(ember.TraceError, match="unique") as info:
        ember.function(lambda x: ember.unique(x))(_t([1.0, 2.0, 1.0]))
    assert info.value.op == "unique"
    values = ember.unique(_t([3, 1, 3]))  # eagerly it runs
    np.testing.assert_array_equal(values.numpy(), [1, 3])


def test_multinomial_in_a_captured_function_draws_anew_each_call():
    g = ember.Generator(5)
    draw = ember.function(lambda p: ember.multinomial(p, 8, True, generator=g))
    p = _t([0.5, 0.0, 0.5])
    first, second = draw(p).numpy(), draw(p).numpy()
    assert first.shape == (8,) and set(first) | set(second) <= {0, 2}
    assert not np.array_equal(first, second)


# -------------------------------------------------------------------- second derivatives


def test_cumprod_second_derivative_at_zeros_matches_pytorch():
    g = R.standard_normal(Z.shape)
    x = _t(Z, grad=True)
    (gx,) = ember.autograd.grad((ember.cumprod(x, 1) * _t(g)).sum(), [x], create_graph=True)
    (hx,) = ember.autograd.grad((gx * gx).sum(), [x])
    t = torch.tensor(Z, requires_grad=True)
    (tg,) = torch.autograd.grad(
        (torch.cumprod(t, 1) * torch.tensor(g)).sum(), [t], create_graph=True
    )
    (th,) = torch.autograd.grad((tg * tg).sum(), [t])
    np.testing.assert_allclose(gx.detach().numpy(), tg.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(hx.numpy(), th.numpy(), rtol=1e-10, atol=1e-12)


def test_cumprod_gradient_at_infinities_and_nans_matches_pytorch():
    """Rows of zeros, infinities and NaN along every axis (a length-1 axis too): an infinity
    before a zero makes the later outputs NaN, which PyTorch's masked sums never read."""
    rng = np.random.default_rng(7)
    values = [0.0, 0.0, np.inf, -np.inf, np.nan, 2.0, -0.5, 1.5, -1.0]
    for shape in [(6,), (3, 5), (2, 1, 4), (4, 3, 2)]:
        x = rng.choice(values, size=shape)
        g = rng.standard_normal(shape)
        for dim in range(-len(shape), len(shape)):
            e = _t(x, grad=True)
            ember.cumprod(e, dim).backward(_t(g))
            t = torch.tensor(x, requires_grad=True)
            torch.cumprod(t, dim).backward(torch.tensor(g))
            np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), rtol=1e-12, atol=1e-15)


def test_vector_norm_second_derivative_matches_pytorch():
    for ord_ in (2, 3, 1.5):
        x = _t(X, grad=True)
        (gx,) = ember.autograd.grad(
            ember.linalg.vector_norm(x, ord_, 1).sum(), [x], create_graph=True
        )
        (hx,) = ember.autograd.grad((gx * gx).sum(), [x])
        t = torch.tensor(X, requires_grad=True)
        (tg,) = torch.autograd.grad(
            torch.linalg.vector_norm(t, ord_, 1).sum(), [t], create_graph=True
        )
        (th,) = torch.autograd.grad((tg * tg).sum(), [t])
        np.testing.assert_allclose(hx.numpy(), th.numpy(), rtol=1e-9, atol=1e-12)


def test_norm_gradient_at_a_zero_vector_is_zero():
    for ord_ in (2, 3, 1.5, 0.5, float("inf")):
        x = _t(np.zeros((2, 3)), grad=True)
        ember.linalg.vector_norm(x, ord_, 1).sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), np.zeros((2, 3)))


def test_a_second_derivative_through_singular_values_raises():
    x = _t(R.standard_normal((3, 3)), grad=True)
    (gx,) = ember.autograd.grad(ember.linalg.matrix_norm(x, "nuc"), [x], create_graph=True)
    with pytest.raises(ember.AutogradError, match="svd"):
        ember.autograd.grad(gx.sum(), [x])


# ----------------------------------------------------------------------------- in place


def test_in_place_forms_write_into_the_tensor_and_keep_gradients():
    src = _t(C[:2], grad=True)
    base = _t(X, grad=True)
    y = base * 1.0
    out = y.scatter_reduce_(0, _t(IDX), src, "sum")
    assert out is y
    y.index_fill_(1, _t([0]), 0.0).index_copy_(0, _t([3]), src[:1] * 2)
    y.sum().backward()
    expected = X.copy()
    np.add.at(expected, (IDX, np.arange(6)[None, :].repeat(2, 0)), C[:2])
    expected[:, 0] = 0.0
    expected[3] = 2 * C[0]
    np.testing.assert_allclose(y.detach().numpy(), expected)
    gbase = np.ones((4, 6))
    gbase[:, 0] = 0.0
    gbase[3] = 0.0
    np.testing.assert_allclose(base.grad.numpy(), gbase)
    z = _t([1.0, 2.0, 3.0])
    z.cumprod_(0)
    np.testing.assert_array_equal(z.numpy(), [1.0, 2.0, 6.0])
    with pytest.raises(ember.DTypeError, match="cumprod_"):
        z.cumprod_(0, dtype=ember.float32)  # (z is float64)


# ---------------------------------------------------------------------------- multinomial


def test_multinomial_with_replacement_follows_the_weights():
    """Chi-square of the counts against the weights (3 degrees of freedom among the positive
    ones): below 16.3, the 0.1% quantile, at a fixed seed; weight 0 is never drawn."""
    weights = np.array([[1.0, 0.0, 3.0, 2.0, 4.0], [5.0, 5.0, 5.0, 5.0, 0.0]])
    n = 40_000
    draws = ember.multinomial(_t(weights), n, True, generator=ember.Generator(123)).numpy()
    assert draws.shape == (2, n) and draws.dtype == np.int64
    for row, w in zip(draws, weights):
        counts = np.bincount(row, minlength=5)
        assert counts[w == 0].sum() == 0
        expected = n * w[w > 0] / w.sum()
        chi2 = ((counts[w > 0] - expected) ** 2 / expected).sum()
        assert chi2 < 16.3, (counts, expected, chi2)


def test_multinomial_without_replacement_never_repeats_and_follows_the_weights():
    weights = np.array([0.1, 0.2, 0.3, 0.4])
    g = ember.Generator(7)
    first = np.zeros(4)
    trials = 20_000
    draws = ember.multinomial(_t(np.tile(weights, (trials, 1))), 3, generator=g).numpy()
    for row in draws[:2000]:
        assert len(set(row.tolist())) == 3
    assert (np.sort(draws, 1)[:, 1:] != np.sort(draws, 1)[:, :-1]).all()
    first = np.bincount(draws[:, 0], minlength=4)
    expected = trials * weights
    assert ((first - expected) ** 2 / expected).sum() < 16.3  # the first draw: by the weights
    # the second draw given the first: P(j second | i first) = w_j / (1 - w_i)
    second_after_3 = np.bincount(draws[draws[:, 0] == 3, 1], minlength=4)[:3]
    expected = second_after_3.sum() * weights[:3] / weights[:3].sum()
    assert ((second_after_3 - expected) ** 2 / expected).sum() < 13.8  # 2 dof, 0.1%
    every = ember.multinomial(_t([0.0, 2.0, 0.0, 1.0]), 4, generator=g).numpy()
    assert sorted(every.tolist()) == [0, 1, 2, 3] and set(every[:2].tolist()) == {1, 3}


def test_multinomial_is_reproducible_and_checks_its_weights():
    p = _t([[0.2, 0.3, 0.5]])
    a = ember.multinomial(p, 10, True, generator=ember.Generator(9)).numpy()
    b = ember.multinomial(p, 10, True, generator=ember.Generator(9)).numpy()
    np.testing.assert_array_equal(a, b)
    ember.manual_seed(4)
    c = p.multinomial(2).numpy()
    ember.manual_seed(4)
    np.testing.assert_array_equal(p.multinomial(2).numpy(), c)
    for bad in ([0.5, -0.1, 0.6], [0.0, 0.0, 0.0], [1.0, np.inf, 1.0], [1.0, np.nan, 1.0]):
        with pytest.raises(ember.EmberError, match="multinomial"):
            ember.multinomial(_t(bad), 1)
    with pytest.raises(ember.ShapeError, match="without replacement"):
        ember.multinomial(_t([1.0, 1.0]), 3)
    with pytest.raises(ember.DTypeError, match="multinomial"):
        ember.multinomial(_t([1, 2]), 1)
