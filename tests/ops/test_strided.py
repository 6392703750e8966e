"""``as_strided`` (ops/strided.py) and ``resize_`` (_tensor_extras.py) against PyTorch:
windows over a contiguous tensor's own elements, its storage offset (a slice's included),
overlapping windows' gradients summed, under ember.function too, and the refusals (a
non-contiguous tensor, a window outside); resize_'s kept elements."""

from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


@pytest.mark.parametrize(
    "size, stride, offset",
    [((2, 2), (1, 2), 1), ((3, 2), (1, 1), None), ((4,), (2,), 0), ((2, 3, 2), (4, 1, 2), 1)],
)
def test_windows_and_their_gradients_equal_torchs(size, stride, offset):
    values = np.arange(12.0) ** 1.5
    e = ember.tensor(values, requires_grad=True)
    t = torch.tensor(values, requires_grad=True)
    got, want = e.as_strided(size, stride, offset), t.as_strided(size, stride, offset)
    np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
    g = np.random.default_rng(0).standard_normal(size)
    got.backward(ember.tensor(g))
    want.backward(torch.tensor(g))
    np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), rtol=1e-12)
    compiled = ember.function(lambda x: ember.as_strided(x, size, stride, offset) * 2)
    np.testing.assert_array_equal(compiled(ember.tensor(values)).numpy(), 2 * want.detach().numpy())


def test_a_slice_reads_from_its_storage_offset():
    e, t = ember.arange(10.0)[3:], torch.arange(10.0)[3:]
    for offset in (None, 3, 5):
        np.testing.assert_array_equal(
            e.as_strided((2, 2), (2, 1), offset).numpy(), t.as_strided((2, 2), (2, 1), offset)
        )


def test_refusals_name_the_fix():
    # (a transposed tensor's windows are over its storage, as PyTorch's: no refusal)
    got = ember.arange(6.0).reshape(2, 3).t().as_strided((2, 2), (1, 1))
    want = torch.arange(6.0).reshape(2, 3).t().as_strided((2, 2), (1, 1))
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    with pytest.raises(ember.EmberError, match="out of bounds"):
        ember.arange(6.0).as_strided((2, 3), (1, 2), 1)
    with pytest.raises(ember.EmberError, match="length"):
        ember.arange(6.0).as_strided((2, 3), (1,))


def test_resize_keeps_the_leading_elements_as_torch():
    e, t = ember.arange(5.0), torch.arange(5.0)
    assert e.resize_(2, 2) is e
    t.resize_(2, 2)
    np.testing.assert_array_equal(e.numpy(), t.numpy())
    e.resize_((3,))
    assert tuple(e.shape) == (3,) and e.numpy().tolist() == [0.0, 1.0, 2.0]
    grown = ember.arange(3.0).resize_(2, 3)  # (new elements: zeros, PyTorch's uninitialised)
    assert grown.numpy().tolist() == [[0.0, 1.0, 2.0], [0.0, 0.0, 0.0]]
    assert tuple(ember.zeros(4).resize_as_(ember.ones(2, 2)).shape) == (2, 2)
    with pytest.raises(ember.EmberError, match="require grad"):
        ember.ones(2, requires_grad=True).resize_(3)
