"""The torchnames branch's additions that OpInfos do not reach: Tensor attributes and
new_empty_strided, named result tuples, capture of the composites, the in-place comparisons'
dtype, and torch.range's deprecation warning; each against PyTorch where it has the name."""

import numpy as np
import pytest
import torch

import ember


def test_itemsize_and_output_nr_match_pytorch():
    for name in ("bool", "uint8", "int16", "int64", "float16", "bfloat16", "float32"):
        assert ember.zeros(2, dtype=getattr(ember, name)).itemsize == (
            torch.zeros(2, dtype=getattr(torch, name)).itemsize
        )
    e = ember.randn(4, requires_grad=True)
    t = torch.randn(4, requires_grad=True)
    assert [p.output_nr for p in e.split(2)] == [p.output_nr for p in t.split(2)] == [0, 1]
    assert e.output_nr == t.output_nr == 0


def test_new_empty_strided_layout():
    x = ember.zeros(3, dtype=ember.float16)
    y = x.new_empty_strided((2, 3), (1, 2))
    t = torch.zeros(3, dtype=torch.float16).new_empty_strided((2, 3), (1, 2))
    assert tuple(y.shape) == tuple(t.shape) and y.stride() == t.stride()
    assert y.dtype == ember.float16
    assert x.new_empty_strided((2,), (1,), dtype=ember.int32).dtype == ember.int32


def test_named_tuples():
    r = ember.frexp(ember.tensor([3.0, -0.25]))
    m, e = r
    assert r.mantissa is m and r.exponent is e
    assert type(r).__name__ == "frexp" and r._fields == ("mantissa", "exponent")
    np.testing.assert_array_equal(m.numpy(), [0.75, -0.5])
    np.testing.assert_array_equal(e.numpy(), [2, -1])


def test_quantile_and_scatters_capture():
    x = np.random.default_rng(0).standard_normal((4, 5))

    def f(t):
        q = ember.quantile(t, ember.tensor([0.2, 0.8], dtype=t.dtype), dim=1)
        return q.sum() + ember.slice_scatter(t, t[:, :2] * 2, 1, 0, 2).sum()

    captured = ember.function(f)
    want = f(ember.tensor(x))
    got = captured(ember.tensor(x))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)


def test_inplace_comparisons_keep_the_dtype():
    for name in ("eq_", "ne_", "lt_", "le_", "gt_", "ge_"):
        e = ember.tensor([1.0, 2.0, 3.0])
        t = torch.tensor([1.0, 2.0, 3.0])
        assert getattr(e, name)(2.0) is e
        getattr(t, name)(2.0)
        assert e.dtype == ember.float32
        np.testing.assert_array_equal(e.numpy(), t.numpy())
    e, t = ember.tensor([0, 3, 5]), torch.tensor([0, 3, 5])
    e.logical_and_(ember.tensor([1, 0, 2]))
    t.logical_and_(torch.tensor([1, 0, 2]))
    assert e.dtype == ember.int64
    np.testing.assert_array_equal(e.numpy(), t.numpy())


def test_range_warns_as_pytorch():
    with pytest.warns(UserWarning, match="deprecated"):
        ember.range(1, 3)


def test_constants_and_dtype_aliases_match_pytorch():
    for name in ("pi", "e", "inf", "nan", "newaxis"):
        a, b = getattr(ember, name), getattr(torch, name)
        assert (a is None and b is None) or a == b or (a != a and b != b), name
    assert ember.short is ember.int16 and str(torch.short) == "torch.int16"
    x = ember.zeros(2, 3)
    assert tuple(x[:, ember.newaxis].shape) == (2, 1, 3)
    assert ember.tensor([1.0, 2.0]).masked_fill(ember.tensor([True, False]), -ember.inf)[0] < 0


def test_detach_in_place_refuses_views_as_pytorch():
    for lib in (ember, torch):
        base = lib.ones(4, 4, requires_grad=True) * 2
        with pytest.raises(RuntimeError):
            base[:, 1:].detach_()
        y = lib.ones(3, requires_grad=True) * 2
        assert lib.detach_(y) is y and not y.requires_grad


def test_the_old_init_names_warn_and_initialize():
    for name in ("uniform", "normal", "constant", "xavier_uniform", "kaiming_normal", "eye"):
        w = ember.empty(3, 4)
        args = (0.5,) if name == "constant" else ()
        with pytest.warns(FutureWarning, match=f"nn.init.{name}_"):
            out = getattr(ember.nn.init, name)(w, *args)
        assert out is w
        assert np.isfinite(w.numpy()).all()
    np.testing.assert_array_equal(ember.nn.init.eye_(ember.empty(2, 3)).numpy(), np.eye(2, 3))


def _synced(e, t, rng):
    state = {}
    for key, value in t.state_dict().items():
        if value.dtype.is_floating_point:
            array = rng.standard_normal(tuple(value.shape)).astype(np.float32)
            if key.endswith("running_var"):
                array = np.abs(array) + 0.1
            state[key] = torch.tensor(array)
        else:
            state[key] = value
    t.load_state_dict(state)
    e.load_state_dict({k: ember.tensor(v.numpy()) for k, v in state.items()})
    e.eval()
    t.eval()


@pytest.mark.parametrize("kind", ["conv", "conv_transpose", "linear"])
def test_conv_and_linear_fused_with_batch_norm_as_pytorch(kind):
    rng = np.random.default_rng(0)
    if kind == "linear":
        layers = ember.nn.Linear(4, 6), torch.nn.Linear(4, 6)
        norms = ember.nn.BatchNorm1d(6), torch.nn.BatchNorm1d(6)
        x = rng.standard_normal((3, 4)).astype(np.float32)
    else:
        cls = "ConvTranspose2d" if kind == "conv_transpose" else "Conv2d"
        layers = getattr(ember.nn, cls)(3, 5, 3), getattr(torch.nn, cls)(3, 5, 3)
        norms = ember.nn.BatchNorm2d(5), torch.nn.BatchNorm2d(5)
        x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    _synced(layers[0], layers[1], rng)
    _synced(norms[0], norms[1], rng)
    if kind == "linear":
        fused_e = ember.nn.utils.fuse_linear_bn_eval(*[p[0] for p in (layers, norms)])
        fused_t = torch.nn.utils.fuse_linear_bn_eval(*[p[1] for p in (layers, norms)])
    else:
        transpose = kind == "conv_transpose"
        fused_e = ember.nn.utils.fuse_conv_bn_eval(layers[0], norms[0], transpose)
        fused_t = torch.nn.utils.fuse_conv_bn_eval(layers[1], norms[1], transpose)
    got = fused_e(ember.tensor(x)).detach().numpy()
    np.testing.assert_allclose(got, fused_t(torch.tensor(x)).detach().numpy(), atol=2e-5)
    unfused = norms[0](layers[0](ember.tensor(x))).detach().numpy()
    np.testing.assert_allclose(got, unfused, atol=2e-5)
    assert isinstance(fused_e.weight, ember.nn.Parameter) and fused_e.weight.requires_grad
    assert fused_e is not layers[0]  # a copy: the original layer is unchanged
    layers[0].train()
    fuse = (
        ember.nn.utils.fuse_linear_bn_eval
        if kind == "linear"
        else (ember.nn.utils.fuse_conv_bn_eval)
    )
    with pytest.raises(ember.errors.EmberError, match="eval"):
        fuse(layers[0], norms[0])


def test_gradgradcheck_checks_second_derivatives():
    x = ember.randn(4, dtype=ember.float64, requires_grad=True)
    y = ember.randn(4, dtype=ember.float64, requires_grad=True)
    assert ember.autograd.gradgradcheck(lambda a, b: (a * b.sin()).exp(), (x, y))

    class FlatBackward(ember.autograd.Function):
        """x**3 whose backward hides x from the second derivative (a wrong double backward)."""

        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a**3

        @staticmethod
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            return g * 3 * a.detach() ** 2

    assert ember.autograd.gradcheck(FlatBackward.apply, (x,))
    with pytest.raises(RuntimeError, match="Jacobian mismatch"):
        ember.autograd.gradgradcheck(FlatBackward.apply, (x,))
    assert not ember.autograd.gradgradcheck(FlatBackward.apply, (x,), raise_exception=False)


def test_variable_inference_mode_and_fork_rng_as_pytorch():
    x = ember.randn(3)
    v = ember.autograd.Variable(x, requires_grad=True)
    assert v.requires_grad and v.is_leaf and not x.requires_grad
    assert isinstance(x, ember.autograd.Variable)
    np.testing.assert_array_equal(v.detach().numpy(), x.numpy())
    with ember.autograd.inference_mode():
        assert not (v * 2).requires_grad
    ember.manual_seed(7)
    with ember.random.fork_rng():
        inside = ember.randn(3)
    after = ember.randn(3)
    np.testing.assert_array_equal(inside.numpy(), after.numpy())  # the stream was restored


def test_stack_dataset_as_pytorch():
    from torch.utils.data import StackDataset as TorchStack

    from ember.utils.data import DataLoader, StackDataset

    a, b = np.arange(6.0).reshape(3, 2), np.arange(3)
    mine = StackDataset(ember.tensor(a), ember.tensor(b))
    theirs = TorchStack(torch.tensor(a), torch.tensor(b))
    assert len(mine) == len(theirs) == 3
    for i in range(3):
        for m, t in zip(mine[i], theirs[i]):
            np.testing.assert_array_equal(m.numpy(), t.numpy())
    named = StackDataset(image=ember.tensor(a), label=ember.tensor(b))
    assert set(named[1]) == {"image", "label"}
    batch = next(iter(DataLoader(named, batch_size=2)))
    assert tuple(batch["image"].shape) == (2, 2)
    with pytest.raises(ValueError, match="Size mismatch"):
        StackDataset(ember.tensor(a), ember.tensor(b[:2]))
    with pytest.raises(ValueError):
        StackDataset(ember.tensor(a), label=ember.tensor(b))
