"""PyTorch's legacy tensor types (``torch.FloatTensor``, ``torch.LongTensor``, ...) as ember
spells them after ``torch`` -> ``ember``: instance checks by dtype, construction, casts."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

NAMES = [
    "FloatTensor",
    "DoubleTensor",
    "HalfTensor",
    "BFloat16Tensor",
    "CharTensor",
    "ByteTensor",
    "ShortTensor",
    "IntTensor",
    "LongTensor",
    "BoolTensor",
]


@pytest.mark.parametrize("name", NAMES)
def test_legacy_types_build_check_and_cast_as_torch(name):
    ours, theirs = getattr(ember, name), getattr(torch, name)
    data = [1, 0, 3]
    a, b = ours(data), theirs(data)
    assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
    np.testing.assert_array_equal(a.float().numpy(), b.float().numpy())
    assert tuple(ours(2, 3).shape) == tuple(theirs(2, 3).shape) == (2, 3)
    assert tuple(ours().shape) == (0,)
    assert isinstance(a, ours) and isinstance(a, ember.Tensor)
    other = "LongTensor" if name != "LongTensor" else "FloatTensor"
    assert not isinstance(a, getattr(ember, other))
    cast = ember.ones(2).type(ours)
    assert cast.type() == ember.ones(2).to(a.dtype).type() == torch.ones(2).type(theirs).type()


def test_legacy_types_refuse_gpu_devices_and_mixed_arguments():
    with pytest.raises(ember.DeviceError):
        ember.FloatTensor(2, device="cuda")
    with pytest.raises(TypeError, match="FloatTensor"):
        ember.FloatTensor([1.0], 2)
