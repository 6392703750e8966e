"""softmax and log_softmax of tensors with no elements (along the reduced axis or another):
empty results of the input's shape, as PyTorch gives, and empty gradients (found by the ONNX
importer's fuzzer: NumPy has no maximum of an empty slice)."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("shape,axis", [((0,), 0), ((3, 0), 1), ((0, 3), 1), ((0, 3), 0)])
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_empty(shape, axis, name):
    x = ember.zeros(*shape, requires_grad=True)
    y = getattr(ember, name)(x, axis)
    want = getattr(torch, name)(torch.zeros(shape), axis)
    assert tuple(y.shape) == tuple(want.shape)
    y.sum().backward()
    assert tuple(x.grad.shape) == shape
    graph_fn = ember.function(lambda t: getattr(ember, name)(t, axis))
    np.testing.assert_array_equal(graph_fn(ember.zeros(*shape)).numpy(), want.numpy())
