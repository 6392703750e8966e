"""Issue 19's long tail (helper c) under ``ember.function`` (compiled, every pass verified
against the interpreter) against eager execution, values and gradients; and what the OpInfo
database does not show: Tensor metadata methods, in-place shape changes, apply_, random fills,
dtype queries, top-level in-place functions and gradients PyTorch cannot compute."""

import numpy as np
import pytest

import ember
from ember.errors import EmberError, ShapeError

from .harness import rng, torch
from .test_issue19a import _check_compiled

R = rng(1919)


def _positive(*shape):
    return R.uniform(0.3, 3.0, shape)


# ------------------------------------------------------------------------------ capture


def test_special_functions_compiled_match_eager():
    def fn(x, y):
        return (
            ember.lgamma(x) + ember.digamma(x) * ember.erfc(y) + ember.i0(y),
            ember.xlogy(y, x) + ember.hypot(x, y) - ember.logaddexp(x, y) + ember.sinc(y),
            ember.special.ndtr(y) + ember.special.log_ndtr(y) + ember.erfinv(y * 0.3),
            ember.polygamma(1, x) + ember.logit(x * 0.2) + ember.special.entr(x),
        )

    _check_compiled(fn, _positive(3, 4), R.uniform(-2, 2, (3, 4)), rtol=2e-4, atol=2e-5)


def test_selections_and_scans_compiled_match_eager():
    def fn(x):
        values, _ = ember.cummax(x, 1)
        low, _ = ember.cummin(x, 0)
        med, idx = ember.median(x, 1)
        return (
            values + low + ember.logcumsumexp(x, 1),
            med + ember.nanmedian(x, 0)[0].sum() + ember.mode(x, 1).values,
            ember.median(x) + ember.nansum(x) + ember.nanmean(x, 1).sum(),
            ember.cumulative_trapezoid(x) + ember.trapezoid(x, dim=0).sum(),
            ember.diff(x, 2, prepend=x[:, :1]),
        )

    x = R.permutation(np.arange(20.0)).reshape(4, 5) * 0.3 - 2.0
    _check_compiled(fn, x, rtol=1e-4, atol=1e-5)


def test_shapes_and_products_compiled_match_eager():
    def fn(x, y):
        return (
            ember.rot90(x, 1, (0, 1)) * 2,
            ember.kron(y[:2, :2], y[:2, :1]),
            ember.diag_embed(x, 1).sum(0)[:4, :5] + ember.block_diag(x[:2, :2], y[:3, :3])[:4, :5],
            x.unfold(1, 2, 1).sum(-1)[:, :3] + ember.cross(x[:, :3], y[:, :3], dim=1),
            x.masked_scatter(x > 0, y) + ember.addmv(y[:, 0], x, y[0]).unsqueeze(1),
            ember.tensor_split(x, 3, 1)[0].sum() + ember.vander(x[0], 3).sum(),
        )

    _check_compiled(fn, R.standard_normal((4, 5)), R.standard_normal((4, 5)), rtol=1e-4,
                    atol=1e-5)  # fmt: skip


def test_searchsorted_histc_and_bucketize_capture():
    seq = ember.tensor(np.sort(R.standard_normal(7)).astype(np.float32))
    v = ember.tensor(R.standard_normal((3, 4)).astype(np.float32))

    def fn(s, x):
        return ember.searchsorted(s, x, right=True), ember.bucketize(x, s), ember.histc(x, 5)

    compiled = ember.function(fn, verify=True)
    for got, want in zip(compiled(seq, v), fn(seq, v), strict=True):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got.numpy(), want.numpy())


# ----------------------------------------------------------------- gradients torch lacks


def _finite_difference(f, x, eps=1e-6):
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[i] += eps
        down[i] -= eps
        grad[i] = (f(up) - f(down)) / (2 * eps)
    return grad


def test_vander_gradient_by_finite_differences_also_at_zero():
    x = np.array([0.0, 0.7, -1.3])
    w = R.standard_normal((3, 4))

    def value(a):
        return float((ember.vander(ember.tensor(a), 4) * ember.tensor(w)).sum())

    t = ember.tensor(x, requires_grad=True)
    (ember.vander(t, 4) * ember.tensor(w)).sum().backward()
    np.testing.assert_allclose(t.grad.numpy(), _finite_difference(value, x), rtol=1e-6)


def test_median_without_dim_shares_the_gradient_among_ties_as_pytorch():
    x = np.array([3.0, 1.0, 2.0, 2.0, 5.0, 2.0])
    t = ember.tensor(x, requires_grad=True)
    ember.median(t).backward()
    if torch is not None:
        tt = torch.tensor(x, requires_grad=True)
        torch.median(tt).backward()
        np.testing.assert_allclose(t.grad.numpy(), tt.grad.numpy())
    np.testing.assert_allclose(t.grad.numpy(), [0, 0, 1 / 3, 1 / 3, 0, 1 / 3])


# ---------------------------------------------------------------------- Tensor metadata


def test_metadata_methods_follow_pytorch():
    a = ember.arange(12.0).reshape(3, 4)
    ta = torch.arange(12.0).reshape(3, 4) if torch is not None else None
    view = a[1:, 2:]
    assert a.stride() == (4, 1) and a.stride(1) == 1 and a.stride(-2) == 4
    assert a.t().stride() == (1, 4)
    assert view.storage_offset() == 6 and a.storage_offset() == 0
    assert view.data_ptr() == a.data_ptr() + 6 * 4
    assert a.ndimension() == 2 and a.nelement() == 12
    assert a.mH.shape == (4, 3) and a.H.shape == (4, 3)
    assert not a.is_shared() and a.share_memory_() is a
    with pytest.raises(ShapeError):
        _ = ember.ones(2, 3, 4).H
    if ta is not None:
        assert view.stride() == ta[1:, 2:].stride()
        assert view.storage_offset() == ta[1:, 2:].storage_offset()


def test_in_place_shape_changes_re_view_the_memory_and_differentiate():
    w = ember.ones(2, 3, requires_grad=True)
    y = w * 2
    alias = y[0]
    assert y.unsqueeze_(0) is y and y.shape == (1, 2, 3)
    y.transpose_(1, 2)
    assert y.shape == (1, 3, 2)
    y.squeeze_(0).t_()
    assert y.shape == (2, 3)
    with ember.no_grad():
        y.mul_(5)
    assert alias.tolist() == [10.0, 10.0, 10.0]  # the view still shares the memory
    z = w * 2
    z.unsqueeze_(0).swapdims_(0, 1)
    assert z.shape == (2, 1, 3)
    (z * ember.arange(3.0)).sum().backward()
    assert w.grad.tolist() == [[0.0, 2.0, 4.0]] * 2
    with pytest.raises(ember.AutogradError, match="leaf"):
        w.unsqueeze_(0)


def test_in_place_shape_changes_refuse_capture_naming_the_alternative():
    with pytest.raises(EmberError, match=r"x = x.unsqueeze"):
        ember.function(lambda t: t.unsqueeze_(0))(ember.ones(2))


def test_apply_calls_python_per_element():
    x = ember.tensor([[1.0, -2.0], [3.0, 4.0]])
    view = x[:, 1]
    assert x.apply_(lambda v: v * v + 1) is x
    assert x.tolist() == [[2.0, 5.0], [10.0, 17.0]]
    view.apply_(lambda v: -v)
    assert x.tolist() == [[2.0, -5.0], [10.0, -17.0]]
    with pytest.raises(EmberError):
        ember.ones(2, requires_grad=True).apply_(abs)


def test_split_accepts_a_list_of_sizes():
    parts = ember.split(ember.arange(10), [3, 7])
    assert [p.tolist() for p in parts] == [[0, 1, 2], [3, 4, 5, 6, 7, 8, 9]]


# ------------------------------------------------------------------------- random fills


def test_random_fills_follow_their_distributions():
    ember.manual_seed(0)
    n = 20000
    e = ember.empty(n).exponential_(2.0).numpy()
    assert e.min() > 0 and abs(e.mean() - 0.5) < 0.02
    g = ember.empty(n).geometric_(0.25).numpy()
    assert g.min() >= 1 and np.all(g == np.round(g)) and abs(g.mean() - 4.0) < 0.15
    ln = ember.empty(n).log_normal_(0.0, 0.5).numpy()
    assert abs(np.median(np.log(ln))) < 0.02 and abs(np.log(ln).std() - 0.5) < 0.02
    c = ember.empty(n).cauchy_(1.0, 2.0).numpy()
    assert abs(np.median(c) - 1.0) < 0.1
    assert abs(np.percentile(c, 75) - np.percentile(c, 25) - 4.0) < 0.3  # 2 * sigma
    r = ember.empty(n, dtype=ember.int32).random_(-3, 4).numpy()
    assert set(np.unique(r)) == set(range(-3, 4))
    assert ember.zeros(100, dtype=ember.uint8).random_().numpy().max() > 200
    assert ember.zeros(100, dtype=ember.bool).random_().numpy().any()
    h = ember.empty(n, dtype=ember.float16).random_().numpy()
    assert h.max() <= 2048 and h.min() >= 0
    g0 = ember.Generator().manual_seed(3)
    g1 = ember.Generator().manual_seed(3)
    a = ember.empty(5).exponential_(generator=g0)
    b = ember.empty(5).exponential_(generator=g1)
    assert a.tolist() == b.tolist()
    with pytest.raises(EmberError):
        ember.zeros(3, dtype=ember.int64).exponential_()


# ----------------------------------------------------------------------------- dtypes


@pytest.mark.skipif(torch is None, reason="compares with PyTorch")
@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32", "float64"])
def test_finfo_matches_pytorch(name):
    e, t = ember.finfo(getattr(ember, name)), torch.finfo(getattr(torch, name))
    for field in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype"):
        assert getattr(e, field) == getattr(t, field), field


@pytest.mark.skipif(torch is None, reason="compares with PyTorch")
def test_iinfo_promote_types_and_can_cast_match_pytorch():
    names = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
             "float32", "float64"]  # fmt: skip
    for name in names[1:6]:
        e, t = ember.iinfo(getattr(ember, name)), torch.iinfo(getattr(torch, name))
        assert (e.bits, e.min, e.max, e.dtype) == (t.bits, t.min, t.max, t.dtype)
    for a in names:
        for b in names:
            ea, eb, ta, tb = (getattr(ember, a), getattr(ember, b), getattr(torch, a),
                              getattr(torch, b))  # fmt: skip
            assert (
                str(ember.promote_types(ea, eb)).split(".")[-1]
                == str(torch.promote_types(ta, tb)).split(".")[-1]
            )
            assert ember.can_cast(ea, eb) == torch.can_cast(ta, tb), (a, b)
    assert ember.finfo().dtype == "float32"
    with pytest.raises(EmberError):
        ember.finfo(ember.int32)
    with pytest.raises(EmberError):
        ember.iinfo(ember.float32)


# ------------------------------------------------------------------ top-level in-place


@pytest.mark.skipif(torch is None, reason="compares with PyTorch")
def test_top_level_in_place_functions_are_pytorch_names():
    from ember.ops.extra_inplace import NAMES

    for name in NAMES:
        assert hasattr(torch, name), name
        assert callable(getattr(ember, name)), name
    x = ember.tensor([-1.5, 0.5])
    assert ember.abs_(x) is x and x.tolist() == [1.5, 0.5]
    assert ember.clamp_(x, max=1.0) is x and x.tolist() == [1.0, 0.5]
    assert ember.zero_(x) is x and x.tolist() == [0.0, 0.0]


def test_triu_and_tril_in_place():
    x = ember.ones(3, 3)
    assert x.triu_(1) is x and x.tolist() == [[0, 1, 1], [0, 0, 1], [0, 0, 0]]
    y = ember.ones(2, 2)
    assert y.tril_() is y and y.tolist() == [[1, 0], [1, 1]]
