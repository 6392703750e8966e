"""The Tensor object: construction, dtype promotion, conversion, Python protocols, in-place ops."""

import ml_dtypes
import numpy as np
import pytest

import ember


def test_construction_dtypes_follow_pytorch():
    assert ember.tensor([1.0, 2.0]).dtype == ember.float32
    assert ember.tensor([1, 2]).dtype == ember.int64
    assert ember.tensor([True, False]).dtype == ember.bool
    assert ember.tensor(np.zeros(3)).dtype == ember.float64  # NumPy arrays keep their dtype
    assert ember.tensor(np.zeros(3, np.int32)).dtype == ember.int32
    assert ember.tensor([1, 2], dtype=ember.float16).dtype == ember.float16
    assert ember.zeros(2, 3).dtype == ember.float32
    assert ember.arange(4).dtype == ember.int64
    assert ember.arange(0.0, 1.0, 0.5).dtype == ember.float32
    assert ember.full((2,), 3).dtype == ember.int64
    assert ember.full((2,), 3.0).dtype == ember.float32


def test_tensor_copies_and_from_numpy_shares():
    a = np.arange(3.0)
    t = ember.tensor(a)
    s = ember.from_numpy(a)
    a[0] = 10
    assert t.numpy()[0] == 0.0
    assert s.numpy()[0] == 10


@pytest.mark.parametrize(
    "left, right, expected",
    [
        (ember.float32, 2.5, ember.float32),  # weak Python scalar
        (ember.float16, 2.5, ember.float16),
        (ember.bfloat16, 2, ember.bfloat16),
        (ember.int32, 2.5, ember.float32),  # higher category -> default float
        (ember.int32, 7, ember.int32),
        (ember.uint8, 300, ember.uint8),
        (ember.bool, 1, ember.int64),
        (ember.int32, ember.int64, ember.int64),
        (ember.uint8, ember.int8, ember.int16),
        (ember.float16, ember.bfloat16, ember.float32),
        (ember.int64, ember.float16, ember.float16),
        (ember.float32, ember.float64, ember.float64),
    ],
)
def test_promotion(left, right, expected):
    assert ember.result_type(left, right) == expected


def test_scalar_arithmetic_keeps_float32():
    x = ember.ones(3)
    for y in (x * 2.5, 2.5 * x, x / 3, x + 1, x - np.float32(1), 2**x, x**2):
        assert y.dtype == ember.float32
        assert y.numpy().dtype == np.float32
    assert (ember.tensor([1, 2]) / 2).dtype == ember.float32  # true division of ints
    assert (ember.tensor([1, 2]) // 2).dtype == ember.int64


def test_mixed_tensor_promotion_matches_torch():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    pairs = [
        (np.float32, np.float64),
        (np.int32, np.float32),
        (np.uint8, np.int8),
        (np.int16, np.int64),
        (np.float16, np.float32),
        (np.bool_, np.int32),
    ]
    for a, b in pairs:
        ours = (ember.tensor(np.ones(2, a)) + ember.tensor(np.ones(2, b))).dtype
        theirs = (torch.tensor(np.ones(2, a)) + torch.tensor(np.ones(2, b))).dtype
        assert str(theirs) == f"torch.{ours.name}", (a, b)


def test_bfloat16_round_trip():
    x = ember.tensor([1.0, 2.5, -3.0], dtype=ember.bfloat16)
    assert x.numpy().dtype == ml_dtypes.bfloat16
    assert x.tolist() == [1.0, 2.5, -3.0]
    assert (x * 2).dtype == ember.bfloat16
    assert x.float().dtype == ember.float32


def test_metadata_and_conversions():
    x = ember.arange(6).reshape(2, 3).float()
    assert x.shape == (2, 3) and x.ndim == 2 and x.dim() == 2 and x.numel() == 6
    assert x.size() == (2, 3) and x.size(1) == 3 and len(x) == 2
    assert x.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert np.asarray(x).dtype == np.float32
    assert np.asarray(x, dtype=np.float64).dtype == np.float64
    assert ember.tensor(3.5).item() == 3.5 and float(ember.tensor([2.0])) == 2.0
    assert int(ember.tensor(7)) == 7
    assert [t.tolist() for t in ember.tensor([[1, 2], [3, 4]])] == [[1, 2], [3, 4]]
    with pytest.raises(ember.EmberError, match="ambiguous"):
        bool(ember.ones(2))
    with pytest.raises(ember.EmberError, match="one-element"):
        ember.ones(2).item()


def test_repr_shows_dtype_and_grad_fn():
    assert repr(ember.tensor([1.0, 2.0])) == "tensor([1., 2.])"
    assert "dtype=ember.float64" in repr(ember.tensor(np.ones(2)))
    x = ember.tensor([1.0], requires_grad=True)
    assert "requires_grad=True" in repr(x)
    assert "grad_fn=<MulBackward0>" in repr(x * 2)


def test_inplace_ops_and_versions():
    x = ember.zeros(3)
    x.add_(2).mul_(3)
    np.testing.assert_allclose(x.numpy(), [6, 6, 6])
    x.clamp_(max=4.0)
    np.testing.assert_allclose(x.numpy(), [4, 4, 4])
    x += 1
    x.sqrt_()
    np.testing.assert_allclose(x.numpy(), np.sqrt([5, 5, 5]), rtol=1e-6)
    x.zero_()
    assert x.tolist() == [0, 0, 0]
    x.fill_(1.5)
    assert x.tolist() == [1.5, 1.5, 1.5]
    assert x._version == 7
    x.copy_(ember.tensor([1, 2, 3]))
    assert x.tolist() == [1.0, 2.0, 3.0] and x.dtype == ember.float32


def test_inplace_cannot_change_shape_or_narrow_dtype():
    x = ember.zeros(3)
    with pytest.raises(ember.EmberError, match="cannot change a tensor's shape"):
        x.add_(ember.zeros(2, 3))
    i = ember.zeros(3, dtype=ember.int64)
    with pytest.raises(ember.DTypeError, match="float32 cannot be written in place"):
        i.add_(ember.ones(3))


def test_views_share_memory_and_version_counter():
    x = ember.zeros(2, 3)
    v = x.reshape(6)
    v.add_(1)
    np.testing.assert_allclose(x.numpy(), np.ones((2, 3)))
    assert x._version == v._version == 1


def test_inplace_on_view_of_leaf_or_overlapping_view_is_refused():
    """As PyTorch: a view of a leaf that requires grad, or an expanded view, cannot be written
    in place (writes through other views: tests/test_inplace.py)."""
    leaf = ember.zeros(2, 3, requires_grad=True)
    with pytest.raises(ember.AutogradError, match="view of a leaf"):
        leaf.reshape(6).add_(1)
    x = ember.zeros(2, 3, requires_grad=True) * 1
    with pytest.raises(ember.AutogradError, match="single memory location"):
        x[:, :1].expand(2, 3).add_(1)
    np.testing.assert_array_equal(x.detach().numpy(), 0)  # refused before anything is written


def test_to_and_casts():
    x = ember.tensor([1.7, -1.7])
    assert x.to(ember.float64).dtype == ember.float64
    assert x.to("cpu") is x
    assert x.double().dtype == ember.float64
    assert x.int().tolist() == [1, -1]  # C casting truncates, like torch
    assert x.to(ember.int64).dtype == ember.int64
    assert x.type_as(ember.zeros(1, dtype=ember.float16)).dtype == ember.float16
    assert x.bool().tolist() == [True, True]


def test_bitwise_operators_are_logical_on_bools_bitwise_on_integers():
    a = ember.tensor([True, False])
    b = ember.tensor([True, True])
    assert (a & b).tolist() == [True, False]
    assert (a | b).tolist() == [True, True]
    assert (a ^ b).tolist() == [False, True]
    assert (~a).tolist() == [False, True]
    assert (True ^ a).tolist() == [False, True]
    # integers, as PyTorch: &, |, ^, ~, <<, >> and their in-place and reflected forms
    i = ember.tensor([-7, -3, 0, 4, 9])
    assert (i & 6).tolist() == [0, 4, 0, 4, 0]
    assert (i | 8).tolist() == [-7, -3, 8, 12, 9]
    assert (i ^ 5).tolist() == [-4, -8, 5, 1, 12]
    assert (~i).tolist() == [6, 2, -1, -5, -10]
    assert (i << 2).tolist() == [-28, -12, 0, 16, 36]
    assert (i >> 1).tolist() == [-4, -2, 0, 2, 4]
    assert (1 << ember.tensor([1, 2])).tolist() == [2, 4]
    j = i.clone()
    j &= 3
    j <<= 1
    j ^= i
    assert j.tolist() == [-5, -1, 0, 4, 11]
    with pytest.raises(ember.DTypeError, match="integer or bool tensors only"):
        ember.tensor([1.0]) & ember.tensor([3.0])


def test_float_math_promotes_integers_and_mean_rejects_them():
    # PyTorch's int-to-float promotion: exp of an int64 tensor is a default-float tensor
    y = ember.exp(ember.tensor([1, 2]))
    assert y.dtype == ember.float32
    np.testing.assert_allclose(y.numpy(), np.exp([1.0, 2.0]), rtol=1e-6)
    message = "exp: expected a floating-point tensor, got ember.int64"
    with pytest.raises(ember.DTypeError, match=message):
        ember.ops.REGISTRY["exp"].infer(ember.tensor([1, 2]))  # the primitive stays strict
    with pytest.raises(ember.DTypeError, match="mean"):  # as in PyTorch
        ember.tensor([1, 2]).mean()


def test_broadcast_error_names_op_shapes_and_caller_line():
    with pytest.raises(ember.ShapeError) as info:
        ember.ones(3, 4) + ember.ones(5)  # the line reported below
    message = str(info.value)
    assert "add" in message and "(3, 4)" in message and "(5,)" in message
    assert f"{__file__}:" in message
    line = int(message.rsplit(":", 1)[1])
    with open(__file__) as f:
        assert "the line reported below" in f.readlines()[line - 1]


def test_random_is_reproducible_and_generators_are_independent():
    ember.manual_seed(123)
    a = ember.randn(5)
    ember.manual_seed(123)
    b = ember.randn(5)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    g = ember.Generator(7)
    state = g.get_state()
    first = ember.rand(4, generator=g)
    g.set_state(state)
    np.testing.assert_array_equal(first.numpy(), ember.rand(4, generator=g).numpy())
    assert ember.randint(3, 5, (100,)).numpy().min() >= 3
    perm = ember.randperm(10).numpy()
    assert sorted(perm.tolist()) == list(range(10))
    assert ember.randn(2, dtype=ember.float16).dtype == ember.float16


def test_random_distributions():
    ember.manual_seed(0)
    u = ember.rand(20000).numpy()
    assert 0 <= u.min() and u.max() < 1 and abs(u.mean() - 0.5) < 0.01
    n = ember.normal(2.0, 3.0, (20000,)).numpy()
    assert abs(n.mean() - 2.0) < 0.1 and abs(n.std() - 3.0) < 0.1
    p = ember.bernoulli(ember.full((20000,), 0.3)).numpy()
    assert set(np.unique(p)) <= {0.0, 1.0} and abs(p.mean() - 0.3) < 0.02
    w = ember.zeros(20000)
    w.uniform_(-2, 2)
    assert w.numpy().min() >= -2 and w.numpy().max() < 2 and abs(w.numpy().mean()) < 0.05


@pytest.mark.parametrize(
    "data, where",
    [
        ([[1, 2], [3]], r"depth 2 the lengths are \[1, 2\]"),
        ([[1, 2], 3], "depth 1 some items are sequences"),
        ([[[1.0, 2.0]], [[3.0]]], r"depth 3 the lengths are \[1, 2\]"),
    ],
)
def test_ragged_nested_lists_raise_a_shape_error(data, where):
    with pytest.raises(ember.ShapeError, match=f"tensor: .*unequal lengths: at {where}"):
        ember.tensor(data)


def test_in_compares_elements_as_torch():
    torch = pytest.importorskip("torch")
    for lib in (torch, ember):
        x = lib.arange(6.0).reshape(2, 3)
        assert (5.0 in x, 7 in x, lib.tensor([0.0, 1, 2]) in x, lib.tensor(4) in x) == (
            True,
            False,
            True,
            True,
        )
        with pytest.raises(RuntimeError, match="Tensor or scalar"):
            "a" in x  # noqa: B015
        with pytest.raises(RuntimeError):
            lib.tensor([0.0, 1]) in x  # noqa: B015
