"""``Tensor.unfold`` is a view, as PyTorch's (ops/unfold.py): the windows share the tensor's
memory whatever its layout, writes through disjoint windows reach it, writes through
overlapping ones are refused, gradients (first and second order) and captured graphs agree with
PyTorch, and the view exports to ONNX."""

from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

# (shape, a transposed layout?, dimension, size, step): windows overlapping, disjoint, with
# gaps, the whole length, empty windows, along the first, a middle and the last dimension
CASES = [
    ((12,), False, 0, 4, 2),
    ((12,), False, 0, 3, 3),
    ((2, 11, 3), False, 1, 3, 4),
    ((5, 6), True, 0, 2, 1),
    ((5, 6), True, -1, 5, 2),
    ((3, 4), False, 1, 4, 1),
    ((3, 4), False, 1, 0, 2),
]


def _pair(shape, transposed, seed=0):
    values = np.random.default_rng(seed).standard_normal(shape)
    x, t = ember.tensor(values), torch.tensor(values)
    return (x.t(), t.t()) if transposed else (x, t)


@pytest.mark.parametrize("shape, transposed, dim, size, step", CASES)
def test_windows_are_pytorchs_view_of_the_same_memory(shape, transposed, dim, size, step):
    x, t = _pair(shape, transposed)
    got, want = x.unfold(dim, size, step), t.unfold(dim, size, step)
    assert tuple(got.shape) == tuple(want.shape) and got.stride() == want.stride()
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    if got.numel():  # (an empty result holds no memory to share)
        assert got._base is (x._base if x._base is not None else x)
        assert np.shares_memory(got.numpy(), x.numpy())


def test_a_write_through_windows_reaches_the_tensor_and_an_order_dependent_one_is_refused():
    x, t = ember.arange(12.0), torch.arange(12.0)
    for v in (x, t):
        w = v.unfold(0, 3, 3)  # disjoint windows
        w[1].zero_()
        w[:, 0] += 100
        v.unfold(0, 4, 2)[1:3].fill_(-1.0)  # overlapping: one value wherever they meet
    np.testing.assert_array_equal(x.numpy(), t.numpy())
    # an update of overlapping windows: PyTorch, which cannot tell that they overlap, adds once
    # per window element by element; ember refuses rather than pick an order
    with pytest.raises(RuntimeError, match="single memory location"):
        ember.arange(12.0).unfold(0, 4, 2).add_(1.0)


@pytest.mark.parametrize("shape, transposed, dim, size, step", CASES[:5])
def test_gradients_add_up_over_overlapping_windows_as_pytorchs(shape, transposed, dim, size, step):
    x, t = _pair(shape, transposed, seed=1)
    x.requires_grad_(True)
    t.requires_grad_(True)
    weights = np.random.default_rng(2).standard_normal(tuple(t.unfold(dim, size, step).shape))
    (gx,) = ember.autograd.grad(
        (x.unfold(dim, size, step) ** 3 * ember.tensor(weights)).sum(), x, create_graph=True
    )
    (gt,) = torch.autograd.grad(
        (t.unfold(dim, size, step) ** 3 * torch.tensor(weights)).sum(), t, create_graph=True
    )
    np.testing.assert_allclose(gx.detach().numpy(), gt.detach().numpy(), rtol=1e-12)
    (hx,) = ember.autograd.grad((gx**2).sum(), x)
    (ht,) = torch.autograd.grad((gt**2).sum(), t)
    np.testing.assert_allclose(hx.numpy(), ht.numpy(), rtol=1e-12)


def test_captured_windows_equal_eager_and_their_gradient():
    def step(x):
        return (x.unfold(-1, 3, 2).exp() * 0.5).sum(-1).square().mean()

    x = ember.randn(4, 9, requires_grad=True)
    eager = step(x)
    (want,) = ember.autograd.grad(eager, x)
    fn = ember.function(step)
    got = fn(x)
    (grad,) = ember.autograd.grad(got, x)
    np.testing.assert_allclose(got.item(), eager.item(), rtol=1e-6)
    np.testing.assert_allclose(grad.numpy(), want.numpy(), rtol=1e-5, atol=1e-7)


def test_a_zero_dim_tensor_unfolds_to_at_most_one_element():
    for size, step in ((1, 1), (0, 3)):
        got, want = ember.tensor(5.0).unfold(0, size, step), torch.tensor(5.0).unfold(0, size, step)
        assert tuple(got.shape) == tuple(want.shape)
    with pytest.raises(ember.errors.ShapeError, match="size 2 and step 1"):
        ember.tensor(5.0).unfold(0, 2, 1)
    with pytest.raises(ember.errors.ShapeError, match="size 6 and step 1 do not fit dim 0"):
        ember.arange(5.0).unfold(0, 6, 1)


def test_the_view_exports_to_onnx_and_runs_in_onnxruntime(tmp_path):
    ort = pytest.importorskip("onnxruntime")

    class Windows(ember.nn.Module):
        def forward(self, x):
            return x.unfold(1, 3, 2) * 2.0

    x = ember.randn(2, 9, 3)
    path = tmp_path / "windows.onnx"
    ember.onnx.export(Windows(), str(path), x)
    session = ort.InferenceSession(str(path))
    (got,) = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    np.testing.assert_array_equal(got, (x.unfold(1, 3, 2) * 2.0).numpy())
