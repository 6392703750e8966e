"""Behaviour of the convolution and pooling ops beyond the registry conformance samples:
higher-order gradients against torch, the kernel layouts over random geometries and fixed
ones (non-finite values too, reused columns), error
messages, FLOP counts against torch.utils.flop_counter, dtypes, unbatched and empty inputs."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
import ember.nn.functional as F
from ember.ops import REGISTRY
from ember.types import TensorType

torch = pytest.importorskip("torch", reason="PyTorch is the reference for these checks")
TF = torch.nn.functional


def _pair(rng, *shape):
    a = rng.standard_normal(shape)
    return ember.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)


def _close(e, t, rtol=1e-7, atol=1e-9):
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=rtol, atol=atol)


# ------------------------------------------------------------------------ higher order


@pytest.mark.parametrize(
    "kw",
    [
        {"stride": 2, "padding": 1},
        {"padding": "same", "dilation": 2, "groups": 2},
        {"stride": (1, 2), "padding": (2, 0), "groups": 4},
    ],
)
def test_second_order_gradient_of_conv2d_matches_torch(kw):
    rng = np.random.default_rng(0)
    ex, tx = _pair(rng, 2, 4, 7, 6)
    ew, tw = _pair(rng, 4, 4 // kw.get("groups", 1), 3, 3)

    def loss(conv, x, w, grad):
        y = conv(x, w, **kw)
        gx, gw = grad((y * y * y).sum(), (x, w))
        # a second-order objective touching both first-order gradients
        return (gx * gx).sum() + (gw * gw * gw).sum()

    e = loss(F.conv2d, ex, ew, lambda o, i: ember.autograd.grad(o, i, create_graph=True))
    t = loss(TF.conv2d, tx, tw, lambda o, i: torch.autograd.grad(o, i, create_graph=True))
    e_grads = ember.autograd.grad(e, (ex, ew))
    t_grads = torch.autograd.grad(t, (tx, tw))
    assert e.item() == pytest.approx(t.item(), rel=1e-10)
    for a, b in zip(e_grads, t_grads):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-9, atol=1e-9)


def test_third_order_gradient_of_conv_transpose2d_matches_torch():
    rng = np.random.default_rng(1)
    ex, tx = _pair(rng, 1, 2, 3, 4)
    ew, tw = _pair(rng, 2, 3, 3, 3)
    # (torch cannot take this third derivative when output_padding is set)
    kw = {"stride": 2, "padding": 1, "dilation": (1, 2)}

    def third(conv, grad, x, w):
        y = conv(x, w, **kw)
        (gx,) = grad((y**3).sum(), (x,))
        (gw,) = grad((gx**2).sum(), (w,))
        return grad((gw * gw).sum(), (x,))[0]

    e = third(F.conv_transpose2d, lambda o, i: ember.autograd.grad(o, i, create_graph=True), ex, ew)
    t = third(
        TF.conv_transpose2d, lambda o, i: torch.autograd.grad(o, i, create_graph=True), tx, tw
    )
    _close(e, t, rtol=1e-9, atol=1e-8)


def test_second_order_gradient_of_max_pool_matches_torch():
    rng = np.random.default_rng(2)
    a = np.round(rng.standard_normal((2, 2, 6, 6)) * 2)  # ties: torch's first-max convention
    ex, tx = ember.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)

    def run(pool, grad, x):
        y = pool(x, 3, stride=2, padding=1)
        (gx,) = grad((y * y * x.sum()).sum(), (x,))
        return grad((gx * gx).sum(), (x,))[0]

    e = run(F.max_pool2d, lambda o, i: ember.autograd.grad(o, i, create_graph=True), ex)
    t = run(TF.max_pool2d, lambda o, i: torch.autograd.grad(o, i, create_graph=True), tx)
    _close(e, t)


# ------------------------------------------------------------------ random geometries


@st.composite
def conv_cases(draw):
    nd = draw(st.sampled_from([1, 2]))
    groups = draw(st.sampled_from([1, 2]))
    cin = groups * draw(st.integers(1, 2))
    cout = groups * draw(st.integers(1, 2))
    kernel = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    stride = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    dilation = tuple(draw(st.integers(1, 2)) for _ in range(nd))
    padding = tuple(draw(st.integers(0, 2)) for _ in range(nd))
    size = tuple(
        draw(st.integers(d * (k - 1) + 1, d * (k - 1) + 6)) for k, d in zip(kernel, dilation)
    )
    return nd, groups, cin, cout, kernel, stride, dilation, padding, size


@settings(max_examples=40, deadline=None)
@given(conv_cases(), st.integers(0, 2**31))
def test_conv_and_its_gradients_match_torch_on_random_geometries(case, seed):
    nd, groups, cin, cout, kernel, stride, dilation, padding, size = case
    rng = np.random.default_rng(seed)
    ex, tx = _pair(rng, 2, cin, *size)
    ew, tw = _pair(rng, cout, cin // groups, *kernel)
    kw = {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups}
    name = f"conv{nd}d"
    ey, ty = getattr(F, name)(ex, ew, **kw), getattr(TF, name)(tx, tw, **kw)
    _close(ey, ty)
    g = rng.standard_normal(ty.shape)
    ey.backward(ember.tensor(g))
    ty.backward(torch.tensor(g))
    _close(ex.grad, tx.grad)
    _close(ew.grad, tw.grad)


@settings(max_examples=30, deadline=None)
@given(conv_cases(), st.integers(0, 2**31))
def test_conv_transpose_matches_torch_on_random_geometries(case, seed):
    nd, groups, cin, cout, kernel, stride, dilation, padding, size = case
    rng = np.random.default_rng(seed)
    extra = tuple(int(rng.integers(0, max(s, d))) for s, d in zip(stride, dilation))
    padding = tuple(min(p, d * (k - 1)) for p, k, d in zip(padding, kernel, dilation))
    ex, tx = _pair(rng, 2, cin, *size)
    ew, tw = _pair(rng, cin, cout // groups, *kernel)
    kw = {
        "stride": stride,
        "padding": padding,
        "output_padding": extra,
        "dilation": dilation,
        "groups": groups,
    }
    name = f"conv_transpose{nd}d"
    ty = getattr(TF, name)(tx, tw, **kw)
    ey = getattr(F, name)(ex, ew, **kw)
    _close(ey, ty)
    g = rng.standard_normal(ty.shape)
    ey.backward(ember.tensor(g))
    ty.backward(torch.tensor(g))
    _close(ex.grad, tx.grad)
    _close(ew.grad, tw.grad)


def test_scratch_buffers_do_not_leak_between_calls():
    """Kernels reuse padded and column buffers; results must not depend on earlier calls."""
    rng = np.random.default_rng(3)
    w = rng.standard_normal((3, 2, 3, 3))
    for padding in (1, 2, 1, 0, 1):
        for _ in range(2):
            x = rng.standard_normal((2, 2, 6, 5))
            e = F.conv2d(ember.tensor(x), ember.tensor(w), padding=padding)
            t = TF.conv2d(torch.tensor(x), torch.tensor(w), padding=padding)
            _close(e, t)
            e = F.max_pool2d(ember.tensor(x), 3, 2, padding=1)
            t = TF.max_pool2d(torch.tensor(x), 3, 2, padding=1)
            _close(e, t)


@pytest.mark.parametrize(
    "x_shape, w_shape, kw",
    [
        # 'same' padding: the dense layout (one long copy per kernel offset)
        ((3, 4, 7, 6), (5, 4, 3, 3), {"padding": 1}),
        ((2, 3, 6, 7), (4, 3, 2, 4), {"padding": "same"}),
        ((2, 2, 9), (3, 2, 3), {"padding": "same", "dilation": 3}),
        ((2, 4, 5, 6), (4, 2, 3, 1), {"padding": (1, 0), "groups": 2}),
        ((2, 2, 3, 4, 3), (2, 2, 3, 3, 1), {"padding": (1, 1, 0)}),
        # few column rows, more output channels: one matmul per sample on the NC* layout
        ((3, 1, 8, 7), (6, 1, 3, 3), {"padding": 1}),
        ((2, 1, 6, 6), (4, 1, 1, 1), {}),
    ],
)
def test_fast_layouts_match_torch(x_shape, w_shape, kw):
    rng = np.random.default_rng(5)
    ex, tx = _pair(rng, *x_shape)
    ew, tw = _pair(rng, *w_shape)
    name = f"conv{len(x_shape) - 2}d"
    with warnings.catch_warnings():
        # torch warns that 'same' with an even kernel copies the input; not under test
        warnings.simplefilter("ignore", UserWarning)
        ey, ty = getattr(F, name)(ex, ew, **kw), getattr(TF, name)(tx, tw, **kw)
    _close(ey, ty)
    g = rng.standard_normal(ty.shape)
    ey.backward(ember.tensor(g))
    ty.backward(torch.tensor(g))
    _close(ex.grad, tx.grad)
    _close(ew.grad, tw.grad)


def test_dense_layout_keeps_non_finite_values_in_their_windows():
    """Reads that wrap into a neighbouring row or sample are zeroed, not multiplied by zero:
    an inf or a NaN reaches only the outputs whose windows hold it, as in torch."""
    a = np.random.default_rng(9).standard_normal((2, 2, 5, 6))
    a[0, 1, 2, 0] = np.inf
    a[1, 0, 4, 5] = np.nan
    w = np.random.default_rng(10).standard_normal((3, 2, 3, 3))
    e = F.conv2d(ember.tensor(a), ember.tensor(w), padding=1).numpy()
    t = TF.conv2d(torch.tensor(a), torch.tensor(w), padding=1).numpy()
    np.testing.assert_array_equal(np.isfinite(e), np.isfinite(t))
    np.testing.assert_allclose(e[np.isfinite(t)], t[np.isfinite(t)], rtol=1e-7, atol=1e-9)
    g = np.random.default_rng(11).standard_normal(t.shape)
    g[1, 2, 0, 3] = np.inf
    ew = ember.tensor(w, requires_grad=True)
    F.conv2d(ember.tensor(a), ew, padding=1).backward(ember.tensor(g))
    tw = torch.tensor(w, requires_grad=True)
    TF.conv2d(torch.tensor(a), tw, padding=1).backward(torch.tensor(g))
    np.testing.assert_array_equal(np.isnan(ew.grad.numpy()), np.isnan(tw.grad.numpy()))
    ex = ember.tensor(a, requires_grad=True)
    F.conv2d(ex, ember.tensor(w), padding=1).backward(ember.tensor(g))
    tx = torch.tensor(a, requires_grad=True)
    TF.conv2d(tx, torch.tensor(w), padding=1).backward(torch.tensor(g))
    finite = np.isfinite(tx.grad.numpy())
    np.testing.assert_array_equal(np.isfinite(ex.grad.numpy()), finite)
    np.testing.assert_allclose(ex.grad.numpy()[finite], tx.grad.numpy()[finite], rtol=1e-7)


def test_reused_columns_follow_the_input_values():
    """im2col keeps the columns of the last input per plan; a weight gradient must see the
    input it is given, also when the same buffer was changed in place after the forward."""
    from ember.kernels.conv_plan import plan
    from ember.ops import _conv_kernels as K

    rng = np.random.default_rng(12)
    x = rng.standard_normal((2, 3, 5, 5)).astype(np.float32)
    gy = rng.standard_normal((2, 4, 5, 5)).astype(np.float32)
    p = plan((5, 5), (3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), 27, 4)

    def reference():
        tx, tg = torch.tensor(x), torch.tensor(gy)
        return torch.nn.grad.conv2d_weight(tx, (4, 3, 3, 3), tg, padding=1).numpy()

    for _ in range(2):
        K.conv_forward(x, rng.standard_normal((4, 3, 3, 3)).astype(np.float32), p, 1)
        # equal values in another array: the columns are reused
        np.testing.assert_allclose(K.conv_weight_grad(x.copy(), gy, p, 1), reference(), rtol=1e-4)
        x[0, 1, 2, 3] += 1.0  # changed in place: the columns must be rebuilt
        np.testing.assert_allclose(K.conv_weight_grad(x, gy, p, 1), reference(), rtol=1e-4)


# ----------------------------------------------------------------------------- errors


def test_channel_mismatch_names_conv2d_both_shapes_and_the_caller():
    x = ember.zeros(2, 3, 8, 8)
    w = ember.zeros(4, 5, 3, 3)
    with pytest.raises(ember.ShapeError) as info:
        F.conv2d(x, w)
    text = str(info.value)
    assert text.startswith("conv2d:")
    assert "(2, 3, 8, 8)" in text and "(4, 5, 3, 3)" in text
    assert info.value.location.startswith(__file__ + ":")  # the caller's file:line
    assert info.value.location in text


Z = ember.zeros


@pytest.mark.parametrize(
    "call, words",
    [
        (lambda: F.conv2d(Z(1, 4, 5, 5), Z(4, 2, 3, 3), groups=3), "groups"),
        (lambda: F.conv2d(Z(1, 2, 2, 2), Z(4, 2, 3, 3)), "smaller"),
        (lambda: F.conv1d(Z(1, 2, 5), Z(4, 2, 3, 3)), "3 dimensions"),
        (lambda: F.conv2d(Z(1, 2, 5, 5), Z(3, 2, 3, 3), Z(4)), "bias"),
        (lambda: F.conv2d(Z(1, 2, 5, 5), Z(3, 2, 3, 3), stride=2, padding="same"), "stride 1"),
        (
            lambda: F.conv_transpose2d(Z(1, 2, 3, 3), Z(2, 2, 3, 3), stride=2, output_padding=2),
            "output_padding",
        ),
        (lambda: F.conv_transpose2d(Z(1, 3, 3, 3), Z(2, 2, 3, 3)), "(2, 2, 3, 3)"),
        (lambda: F.max_pool2d(Z(1, 1, 4, 4), 2, padding=2), "half"),
        (lambda: F.max_pool2d(Z(1, 1, 4, 4), 5), "too small"),
        (lambda: F.avg_pool2d(Z(1, 1, 4, 4), 3, padding=(0, 2)), "half"),
        (lambda: F.adaptive_avg_pool2d(Z(1, 1, 4, 4), 0), "positive"),
    ],
)
def test_bad_arguments_raise_shape_errors_naming_the_op(call, words):
    with pytest.raises(ember.ShapeError) as info:
        call()
    assert words in str(info.value)
    assert str(info.value).split(":")[0] in {
        "conv1d", "conv2d", "conv_transpose2d", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d"
    }  # fmt: skip


def test_dtype_errors():
    x = ember.zeros(1, 2, 5, 5)
    with pytest.raises(ember.DTypeError, match="conv2d"):
        F.conv2d(x, ember.zeros(3, 2, 3, 3, dtype=ember.float64))
    # (integer convolutions and int64 average pools compute, as PyTorch's CPU kernels:
    # tests/programs/test_hunt53_regressions.py; bool ones and other integer pools do not)
    with pytest.raises(ember.DTypeError, match="conv2d"):
        F.conv2d(x.bool(), ember.zeros(3, 2, 3, 3).bool())
    with pytest.raises(ember.DTypeError, match="conv_transpose2d"):
        F.conv_transpose2d(x.int(), ember.zeros(2, 3, 3, 3).int())
    with pytest.raises(ember.DTypeError, match="avg_pool2d"):
        F.avg_pool2d(x.int(), 2)


# ------------------------------------------------------------------------------ costs


def _torch_flops(fn, *args, backward=False):
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        out = fn(*args)
        if backward:
            out.backward(torch.ones_like(out))
    return counter.get_total_flops()


def _cost(name, in_types, out_type, **attrs):
    return REGISTRY[name].cost(in_types, (out_type,), attrs).flops


def _tt(*shape):
    return TensorType(tuple(shape), ember.float32)


@pytest.mark.parametrize("groups, stride", [(1, 1), (2, 2), (4, 1)])
def test_conv_flops_match_torch_flop_counter(groups, stride):
    x = torch.zeros(2, 4, 9, 8, requires_grad=True)
    w = torch.zeros(6 if groups != 4 else 8, 4 // groups, 3, 2, requires_grad=True)
    y = TF.conv2d(x, w, stride=stride, groups=groups)
    attrs = {"stride": (stride,) * 2, "padding": ((0, 0),) * 2, "dilation": (1, 1)}
    attrs["groups"] = groups
    xt, wt, yt = _tt(*x.shape), _tt(*w.shape), _tt(*y.shape)
    forward = _cost("conv", (xt, wt), yt, **attrs)
    assert forward == _torch_flops(lambda: TF.conv2d(x, w, stride=stride, groups=groups))
    backward = _cost("conv_input_grad", (yt, wt), xt, in_size=(9, 8), **attrs)
    weight = _cost("conv_weight_grad", (xt, yt), wt, kernel_size=(3, 2), **attrs)
    assert weight == forward  # (the same multiply-adds, summed over samples instead)
    both = _torch_flops(lambda: TF.conv2d(x, w, stride=stride, groups=groups), backward=True)
    # (torch's counter counts the weight gradient over all input channels: groups times ours)
    assert forward + backward + weight * groups == both


def test_conv_transpose_flops_match_torch_flop_counter():
    x = torch.zeros(2, 4, 5, 6, requires_grad=True)
    w = torch.zeros(4, 3, 3, 3, requires_grad=True)
    kw = {"stride": 2, "padding": 1, "output_padding": 1, "groups": 2}
    y = TF.conv_transpose2d(x, w, **kw)
    attrs = {"stride": (2, 2), "padding": ((1, 0),) * 2, "dilation": (1, 1), "groups": 2}
    xt, wt, yt = _tt(*x.shape), _tt(*w.shape), _tt(*y.shape)
    forward = _cost("conv_input_grad", (xt, wt), yt, in_size=tuple(y.shape[2:]), **attrs)
    assert forward == _torch_flops(lambda: TF.conv_transpose2d(x, w, **kw))
    # its gradients: conv (input) and conv_weight_grad with the roles of x and gy swapped
    backward = _cost("conv", (yt, wt), xt, **attrs)
    weight = _cost("conv_weight_grad", (yt, xt), wt, kernel_size=(3, 3), **attrs)
    assert weight == forward  # (the same multiply-adds)
    both = _torch_flops(lambda: TF.conv_transpose2d(x, w, **kw), backward=True)
    assert forward + backward + weight * 2 == both  # (torch's: groups times too many)


def test_pool_costs_count_one_op_per_window_element():
    x, y = _tt(2, 3, 8, 8), _tt(2, 3, 4, 4)
    attrs = {"kernel": (3, 3), "stride": (2, 2), "padding": (1, 1), "dilation": (1, 1)}
    cost = REGISTRY["max_pool"].cost((x,), (y, y), attrs | {"ceil_mode": False})
    assert cost.flops == 2 * 3 * 16 * 9
    assert cost.bytes == (2 * 3 * 64 + 2 * 2 * 3 * 16) * 4


# ------------------------------------------------------------- dtypes and odd inputs


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_dtypes_are_preserved_forward_and_backward(dtype):
    rng = np.random.default_rng(4)
    x = ember.tensor(rng.standard_normal((2, 2, 6, 6))).to(dtype).requires_grad_()
    w = ember.tensor(rng.standard_normal((3, 2, 3, 3))).to(dtype).requires_grad_()
    y = F.conv2d(x, w, padding=1)
    z = F.max_pool2d(y, 2) + F.avg_pool2d(y, 2) + F.adaptive_avg_pool2d(y, 3)
    z = F.adaptive_max_pool2d(F.conv_transpose2d(z, w), 2)
    assert z.dtype == getattr(ember, dtype)
    z.sum().backward()
    assert x.grad.dtype == x.dtype and w.grad.dtype == w.dtype
    t = TF.conv2d(
        torch.tensor(x.float().detach().numpy()),
        torch.tensor(w.float().detach().numpy()),
        padding=1,
    )
    tol = {"float32": 1e-5, "float16": 1e-2, "bfloat16": 5e-2}[dtype]
    np.testing.assert_allclose(
        y.float().detach().numpy(), t.detach().numpy(), rtol=tol, atol=tol * 10
    )


def test_unbatched_inputs_like_torch():
    rng = np.random.default_rng(5)
    a, w = rng.standard_normal((2, 7, 6)), rng.standard_normal((3, 2, 3, 3))
    cases = [
        (lambda m, x: m.conv2d(x, w_(m), padding=1)),
        (lambda m, x: m.conv_transpose2d(x, w_(m).transpose(0, 1), stride=2)),
        (lambda m, x: m.max_pool2d(x, 2, return_indices=True)),
        (lambda m, x: m.avg_pool2d(x, 3, stride=2, padding=1)),
        (lambda m, x: m.adaptive_max_pool2d(x, (3, 2), return_indices=True)),
        (lambda m, x: m.adaptive_avg_pool2d(x, (3, 4))),
    ]

    def w_(m):
        return ember.tensor(w) if m is F else torch.tensor(w)

    for case in cases:
        e = case(F, ember.tensor(a))
        t = case(TF, torch.tensor(a))
        for ei, ti in zip(e if isinstance(e, tuple) else (e,), t if isinstance(t, tuple) else (t,)):
            assert ei.shape == tuple(ti.shape)
            _close(ei, ti)


def test_empty_batch():
    w = ember.zeros(4, 3, 3, 3)
    assert F.conv2d(ember.zeros(0, 3, 6, 7), w).shape == (0, 4, 4, 5)
    assert F.max_pool2d(ember.zeros(0, 3, 6, 7), 2).shape == (0, 3, 3, 3)
    assert F.conv_transpose2d(ember.zeros(0, 4, 2, 2), w, stride=2).shape == (0, 3, 5, 5)


def test_integer_max_pool_matches_torch():
    a = np.random.default_rng(6).integers(-5, 5, (2, 3, 5, 6))
    e = F.max_pool2d(ember.tensor(a), 2, padding=1, return_indices=True)
    t = TF.max_pool2d(torch.tensor(a), 2, padding=1, return_indices=True)
    for ei, ti in zip(e, t):
        np.testing.assert_array_equal(ei.numpy(), ti.numpy())


def test_nan_propagates_and_is_selected_like_torch():
    a = np.array([[[[1.0, np.nan, 3.0, np.nan], [np.nan, 0.0, 2.0, 1.0], [4, 5, 6, 7]]]])
    for name, kw in [
        ("max_pool2d", {"kernel_size": 2}),
        ("max_pool2d", {"kernel_size": (2, 3), "padding": 1, "ceil_mode": True}),
        ("adaptive_max_pool2d", {"output_size": (2, 2)}),
    ]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            e = getattr(F, name)(ember.tensor(a), return_indices=True, **kw)
        t = getattr(TF, name)(torch.tensor(a), return_indices=True, **kw)
        np.testing.assert_array_equal(e[1].numpy(), t[1].numpy())
        np.testing.assert_array_equal(np.isnan(e[0].numpy()), np.isnan(t[0].numpy()))


def test_max_pool_without_gathering_windows_matches_torch(monkeypatch):
    """Large pools compare strided views in place of a gathered copy: same results, ties too."""
    import ember.ops.pool as pool

    monkeypatch.setattr(pool, "_GATHER_LIMIT_BYTES", 0)
    a = np.round(np.random.default_rng(7).standard_normal((2, 3, 9, 8)) * 2)
    e, t = ember.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    ey, ei = F.max_pool2d(e, 3, stride=2, padding=1, ceil_mode=True, return_indices=True)
    ty, ti = TF.max_pool2d(t, 3, stride=2, padding=1, ceil_mode=True, return_indices=True)
    _close(ey, ty)
    np.testing.assert_array_equal(ei.numpy(), ti.numpy())
    g = np.random.default_rng(8).standard_normal(ty.shape)
    ey.backward(ember.tensor(g))
    ty.backward(torch.tensor(g))
    _close(e.grad, t.grad)


@pytest.mark.parametrize("kernel", [2, 3, (17, 16)])
def test_max_pool_saves_window_codes_for_its_gradient(kernel):
    """Pooling without return_indices keeps, for its backward, each window's number of its
    maximum (uint8 up to 256 elements, int32 past: ops/pool_codes.py) instead of PyTorch's
    int64 plane positions; the gradient is PyTorch's, ties and padding included."""
    rng = np.random.default_rng(3)
    a = np.round(rng.standard_normal((2, 3, 20, 19)) * 2)  # ties
    saved = []

    def pack(t):
        saved.append(t.dtype)
        return t

    padding = 1 if kernel == 3 else 0
    e, t = ember.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    with ember.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        ey = F.max_pool2d(e, kernel, stride=1, padding=padding)
    ty = TF.max_pool2d(t, kernel, stride=1, padding=padding)
    _close(ey, ty)
    want = ember.uint8 if kernel != (17, 16) else ember.int32
    assert saved == [want]
    g = rng.standard_normal(ty.shape)
    ey.backward(ember.tensor(g))
    ty.backward(torch.tensor(g))
    _close(e.grad, t.grad)
    # asked for, the indices are PyTorch's
    _, indices = F.max_pool2d(e, kernel, stride=1, padding=padding, return_indices=True)
    assert indices.dtype == ember.int64
    np.testing.assert_array_equal(
        indices.numpy(), TF.max_pool2d(t, kernel, 1, padding, return_indices=True)[1].numpy()
    )


def test_nn_grad_convolution_gradients_match_pytorchs():
    """ember.nn.grad.conv{1,2,3}d_input / _weight (torch.nn.grad), strided, padded, grouped."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    for dims, x_shape, w_shape, kw in [
        (1, (2, 3, 10), (5, 3, 4), {}),
        (2, (2, 4, 9, 9), (6, 2, 3, 3), {"stride": 2, "padding": 1, "groups": 2}),
        (3, (1, 2, 5, 6, 5), (3, 2, 2, 3, 2), {"dilation": 2, "padding": 1}),
    ]:
        x = rng.standard_normal(x_shape).astype(np.float32)
        w = rng.standard_normal(w_shape).astype(np.float32)
        conv = getattr(torch.nn.functional, f"conv{dims}d")
        g = rng.standard_normal(conv(torch.tensor(x), torch.tensor(w), **kw).shape)
        g = g.astype(np.float32)
        want_x = getattr(torch.nn.grad, f"conv{dims}d_input")(
            x_shape, torch.tensor(w), torch.tensor(g), **kw
        )
        want_w = getattr(torch.nn.grad, f"conv{dims}d_weight")(
            torch.tensor(x), w_shape, torch.tensor(g), **kw
        )
        got_x = getattr(ember.nn.grad, f"conv{dims}d_input")(
            x_shape, ember.tensor(w), ember.tensor(g), **kw
        )
        got_w = getattr(ember.nn.grad, f"conv{dims}d_weight")(
            ember.tensor(x), w_shape, ember.tensor(g), **kw
        )
        np.testing.assert_allclose(got_x.numpy(), want_x.numpy(), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(got_w.numpy(), want_w.numpy(), rtol=1e-4, atol=1e-5)
