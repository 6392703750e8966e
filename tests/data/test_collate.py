"""default_collate: leaves become stacked tensors, containers recurse, errors name the element."""

from collections import OrderedDict, namedtuple

import numpy as np
import pytest

import ember
from ember.data import default_collate

Pair = namedtuple("Pair", "x y")


def test_python_numbers_take_pytorchs_dtypes():
    assert default_collate([1, 2, 3]).dtype == ember.int64
    floats = default_collate([1.5, 2, 3])  # a float first: float64, as torch.tensor(dtype=)
    assert floats.dtype == ember.float64 and floats.numpy().tolist() == [1.5, 2.0, 3.0]
    assert default_collate([1, 2.5]).dtype == ember.float32  # inferred: the default dtype
    assert default_collate([True, False]).dtype == ember.bool
    assert default_collate([1, True]).dtype == ember.int64


def test_numpy_scalars_and_arrays_keep_their_dtype():
    out = default_collate([np.float64(1.0), np.float64(2.0)])
    assert out.dtype == ember.float64 and out.shape == (2,)
    arrays = default_collate([np.ones((2, 3), np.int16), np.zeros((2, 3), np.int16)])
    assert arrays.dtype == ember.int16 and arrays.shape == (2, 2, 3)


def test_tensors_stack_and_keep_autograd_when_needed():
    a = ember.tensor([1.0, 2.0], requires_grad=True)
    b = ember.tensor([3.0, 4.0], requires_grad=True)
    out = default_collate([a, b])
    assert out.shape == (2, 2) and out.requires_grad
    (out * ember.tensor([[1.0, 1.0], [2.0, 2.0]])).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [1.0, 1.0])
    np.testing.assert_array_equal(b.grad.numpy(), [2.0, 2.0])
    plain = default_collate([ember.zeros(3, dtype=ember.bfloat16)] * 2)
    assert plain.dtype == ember.bfloat16 and not plain.requires_grad


def test_containers_recurse_and_keep_their_types():
    batch = default_collate(
        [
            Pair(np.zeros(2, np.float32), {"k": [1, "a"]}),
            Pair(np.ones(2, np.float32), {"k": [2, "b"]}),
        ]
    )
    assert isinstance(batch, Pair)
    assert batch.x.shape == (2, 2)
    assert batch.y["k"][0].numpy().tolist() == [1, 2] and batch.y["k"][1] == ["a", "b"]
    ordered = default_collate([OrderedDict(a=1.0), OrderedDict(a=2.0)])
    assert isinstance(ordered, OrderedDict)


def test_mismatches_and_unsupported_types_are_named():
    with pytest.raises(ember.ShapeError, match=r"batch\[0\]: sample 1 has shape \(3,\)"):
        default_collate([(np.zeros(2),), (np.zeros(3),)])
    with pytest.raises(ember.ShapeError, match="keys"):
        default_collate([{"a": 1}, {"b": 1}])
    with pytest.raises(ember.ShapeError, match="2 elements but sample 1 has 3"):
        default_collate([(1, 2), (1, 2, 3)])
    with pytest.raises(ember.DTypeError, match=r"batch\['x'\] of type NoneType"):
        default_collate([{"x": None}, {"x": None}])
    with pytest.raises(ember.DTypeError, match="sample 1 is a str"):
        default_collate([1, "2"])
    with pytest.raises(ember.ShapeError, match="empty"):
        default_collate([])
