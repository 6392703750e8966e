"""functional/toplevel_native.py's functions and the Tensor methods map_, map2_, dim_order
and as_subclass (_tensor_extras.py) beyond the OpInfo database
(tests/ops/opinfo_api8_toplevel.py): capture, as_strided_scatter's gradient against finite
differences and its transposed inputs, the methods against PyTorch."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

R = np.random.default_rng(11)


def test_captured_match_eager():
    x = R.standard_normal((2, 3, 4))
    h, c = R.standard_normal((3, 5)), R.standard_normal((3, 5))
    w_ih, w_hh = R.standard_normal((20, 4)), R.standard_normal((20, 5))
    tbc_w = R.standard_normal((3, 4, 6))

    def step(x, h, c, w_ih, w_hh, tbc_w):
        out, mean, rstd = ember.native_layer_norm(x, [4], None, None, 1e-5)
        h2, c2 = ember.lstm_cell(x[0], (h, c), w_ih, w_hh)
        y = ember.conv_tbc(x, tbc_w, None, 1)
        z = ember.convolution(
            x, ember.ones(2, 3, 2, dtype=ember.float64), None, [1], [0], [1], False, [0], 1
        )
        s = ember.as_strided_scatter(x, ember.ones(2, 2, dtype=ember.float64), (2, 2), (4, 1), 3)
        return out, mean, rstd, h2, c2, y, z, s

    args = [ember.tensor(a) for a in (x, h, c, w_ih, w_hh, tbc_w)]
    eager = step(*args)
    f = ember.function(step)
    for _ in range(2):
        for e, g in zip(eager, f(*args)):
            np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-12, atol=1e-12)
    t = [torch.tensor(a) for a in (x, h, c, w_ih, w_hh, tbc_w)]
    ref = (
        *torch.native_layer_norm(t[0], [4], None, None, 1e-5),
        *torch.lstm_cell(t[0][0], (t[1], t[2]), t[3], t[4]),
        torch.conv_tbc(t[0], t[5], torch.zeros(6, dtype=torch.float64), 1),
        torch.convolution(
            t[0], torch.ones(2, 3, 2, dtype=torch.float64), None, [1], [0], [1], False, [0], 1
        ),
        torch.as_strided_scatter(t[0], torch.ones(2, 2, dtype=torch.float64), (2, 2), (4, 1), 3),
    )
    for e, r in zip(eager, ref):
        np.testing.assert_allclose(e.numpy(), r.numpy(), rtol=1e-10, atol=1e-12)


def test_as_strided_scatter_gradient_and_layouts():
    x = R.standard_normal((3, 4))
    s = R.standard_normal((2, 2))
    g = R.standard_normal((3, 4))

    def f(a, b):
        out = ember.as_strided_scatter(ember.tensor(a), ember.tensor(b), (2, 2), (1, 2), 1)
        return float((out.numpy() * g).sum())

    xe, se = ember.tensor(x, requires_grad=True), ember.tensor(s, requires_grad=True)
    out = ember.as_strided_scatter(xe, se, (2, 2), (1, 2), 1)
    (out * ember.tensor(g)).sum().backward()
    for leaf, base, which in ((xe, x, 0), (se, s, 1)):
        numeric = np.zeros(base.shape)
        for i in np.ndindex(base.shape):
            d = np.zeros(base.shape)
            d[i] = 1e-6
            args = [x, s]
            plus = f(*[a + d if k == which else a for k, a in enumerate(args)])
            minus = f(*[a - d if k == which else a for k, a in enumerate(args)])
            numeric[i] = (plus - minus) / 2e-6
        np.testing.assert_allclose(leaf.grad.numpy(), numeric, atol=1e-8)
    # a transposed input: positions count its memory, as PyTorch's
    xt = ember.tensor(x).t()
    got = ember.as_strided_scatter(xt, ember.tensor(s), (2, 2), (1, 2), 1)
    want = torch.as_strided_scatter(torch.tensor(x).t(), torch.tensor(s), (2, 2), (1, 2), 1)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    with pytest.raises(ember.EmberError, match="densely"):
        ember.as_strided_scatter(ember.tensor(x)[:, ::2], ember.tensor(s), (2, 2), (1, 2))


def test_map_and_map2_match_torch():
    a = R.standard_normal((3, 4))
    b = R.standard_normal(4)
    e, t = ember.tensor(a), torch.tensor(a)
    assert e.map_(ember.tensor(b), lambda u, v: u * v + 1) is e
    t.map_(torch.tensor(b), lambda u, v: u * v + 1)
    np.testing.assert_allclose(e.numpy(), t.numpy())
    e.map2_(ember.tensor(b), ember.tensor(a), lambda u, v, w: max(u, v) - w)
    t.map2_(torch.tensor(b), torch.tensor(a), lambda u, v, w: max(u, v) - w)
    np.testing.assert_allclose(e.numpy(), t.numpy())
    view = e[0]  # a write through a view reaches the base
    view.map_(ember.zeros(4), lambda u, v: 5.0)
    assert (e.numpy()[0] == 5.0).all()
    with pytest.raises(ember.EmberError, match="requires grad"):
        ember.ones(2, requires_grad=True).map_(ember.ones(2), lambda u, v: u)
    with pytest.raises(ember.ShapeError):
        ember.ones(2, 3).map_(ember.ones(4), lambda u, v: u)


@pytest.mark.parametrize(
    "make",
    [
        lambda lib: lib.zeros(2, 3, 4),
        lambda lib: lib.zeros(2, 3, 4).permute(2, 0, 1),
        lambda lib: lib.zeros(2, 3, 4).transpose(0, 1),
        lambda lib: lib.zeros(2, 1, 4),
        lambda lib: lib.zeros(5, 6)[:, ::2],
    ],
)
def test_dim_order_matches_torch(make):
    e, t = make(ember), make(torch)
    assert e.dim_order() == t.dim_order()
    try:
        want = t.dim_order(ambiguity_check=True)
    except RuntimeError:
        with pytest.raises(RuntimeError):
            e.dim_order(ambiguity_check=True)
    else:
        assert e.dim_order(ambiguity_check=True) == want


def test_as_subclass_aliases_and_keeps_history():
    class Marked(ember.Tensor):
        def mark(self):
            return "marked"

    x = ember.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x.as_subclass(Marked)
    assert type(y) is Marked and y.mark() == "marked"
    (y * ember.tensor([1.0, 2.0, 3.0])).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 2.0, 3.0])
    z = ember.zeros(3)
    z.as_subclass(Marked).add_(2.0)
    np.testing.assert_array_equal(z.numpy(), [2.0, 2.0, 2.0])
    with pytest.raises(TypeError):
        x.as_subclass(int)


def test_set_default_tensor_type_warns_and_sets():
    try:
        with pytest.warns(UserWarning, match="deprecated"):
            ember.set_default_tensor_type(ember.DoubleTensor)
        assert ember.get_default_dtype() is ember.float64
        assert ember.tensor([1.5]).dtype is ember.float64
        with pytest.warns(UserWarning):
            ember.set_default_tensor_type("torch.FloatTensor")
        assert ember.get_default_dtype() is ember.float32
    finally:
        ember.set_default_dtype(ember.float32)


def test_native_batch_norm_updates_running_stats_as_torch():
    x = R.standard_normal((4, 3, 5))
    rm, rv = ember.zeros(3, dtype=ember.float64), ember.ones(3, dtype=ember.float64)
    trm, trv = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    ember.native_batch_norm(ember.tensor(x), None, None, rm, rv, True, 0.1, 1e-5)
    torch.native_batch_norm(torch.tensor(x), None, None, trm, trv, True, 0.1, 1e-5)
    np.testing.assert_allclose(rm.numpy(), trm.numpy(), rtol=1e-12)
    np.testing.assert_allclose(rv.numpy(), trv.numpy(), rtol=1e-12)


def test_grid_sample_mode_tables_match_torch():
    F, TF = ember.nn.functional, torch.nn.functional
    assert F.GRID_SAMPLE_INTERPOLATION_MODES == TF.GRID_SAMPLE_INTERPOLATION_MODES
    assert F.GRID_SAMPLE_PADDING_MODES == TF.GRID_SAMPLE_PADDING_MODES
