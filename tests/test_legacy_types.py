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


def test_the_tensor_class_is_pytorchs_legacy_constructor():
    """``torch.Tensor(...)``: sizes give an (uninitialized in PyTorch, zero here) tensor of
    the default float dtype, data is converted to it, nothing gives an empty one; arrays
    and tensors keep their dtype."""
    import numpy as np

    import ember.nn as nn

    w = nn.Parameter(ember.Tensor(3, 4))
    nn.init.kaiming_uniform_(w)
    assert tuple(w.shape) == (3, 4) and w.dtype is ember.float32 and w.requires_grad
    assert ember.Tensor([1, 2]).dtype is ember.float32  # (torch: FloatTensor, whatever data)
    assert ember.Tensor([1, 2]).tolist() == [1.0, 2.0]
    assert tuple(ember.Tensor().shape) == (0,)
    assert tuple(ember.Tensor(ember.Size([2, 5])).shape) == (2, 5)
    assert ember.Tensor(np.arange(3)).dtype is ember.int64
    with pytest.raises(ember.EmberError):
        ember.Tensor(2, -1)
    with pytest.raises(TypeError):
        ember.Tensor(2, "x")


def test_var_and_std_take_unbiased_positionally_as_pytorch():
    import numpy as np
    import torch

    x = np.arange(12.0).reshape(3, 4)
    for call in (
        lambda m, t: t.var(1, True),
        lambda m, t: t.std(1, False),
        lambda m, t: t.var(1, True, True),
        lambda m, t: t.std(False),
        lambda m, t: m.var(t, 0, False, True),
        lambda m, t: t.var(dim=1, correction=2),
    ):
        want = call(torch, torch.tensor(x)).numpy()
        got = call(ember, ember.tensor(x)).numpy()
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want)
    with pytest.raises(TypeError):
        ember.tensor(x).var(1, unbiased=True, correction=0)
