"""ember.library.custom_op (PyTorch's torch.library): an operator opaque to autograd until a
backward is registered, then differentiated by it, eagerly and captured."""

import numpy as np
import pytest

import ember
from ember.errors import ArgumentError


def test_a_custom_op_is_opaque_until_its_backward_is_registered_then_uses_it():
    @ember.library.custom_op("embertest::scaled", mutates_args=())
    def scaled(x: ember.Tensor, k: float = 2.0) -> ember.Tensor:
        return x * k

    @scaled.register_fake
    def _(x, k=2.0):
        return ember.empty_like(x)

    x = ember.randn(3, requires_grad=True)
    assert not scaled(x).requires_grad  # (no backward yet: PyTorch's op is opaque too)
    assert ember.ops.embertest.scaled is scaled  # (PyTorch's torch.ops.<namespace>.<name>)

    def setup_context(ctx, inputs, output):
        ctx.k = inputs[1]

    def backward(ctx, g):
        return g * ctx.k * 10, None  # (not the true gradient: proves this one runs)

    scaled.register_autograd(backward, setup_context=setup_context)
    scaled(x, k=3.0).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full(3, 30.0))
    x.grad = None
    step = ember.function(lambda a: scaled(a).sum())  # captured: the same backward
    (grad,) = ember.autograd.grad(step(x), [x])
    np.testing.assert_allclose(grad.numpy(), np.full(3, 20.0))


def test_a_numpy_backed_op_trains_eagerly_and_a_compile_falls_back_to_eager():
    @ember.library.custom_op("embertest::npsin", mutates_args=())
    def npsin(x: ember.Tensor) -> ember.Tensor:
        return ember.from_numpy(np.sin(x.detach().numpy()))

    ember.library.register_autograd(
        "embertest::npsin",
        lambda ctx, g: g * ctx.saved_tensors[0].cos(),
        setup_context=lambda ctx, inputs, output: ctx.save_for_backward(inputs[0]),
    )
    z = ember.randn(5, requires_grad=True)
    npsin(z).sum().backward()
    np.testing.assert_allclose(z.grad.numpy(), np.cos(z.detach().numpy()), rtol=1e-6)
    with pytest.warns(UserWarning, match="runs eagerly"):
        out = ember.compile(lambda a: npsin(a) * 2)(z)
    np.testing.assert_allclose(out.detach().numpy(), 2 * np.sin(z.detach().numpy()), rtol=1e-6)


def test_names_and_arguments_are_checked():
    with pytest.raises(ArgumentError, match="namespace::name"):
        ember.library.custom_op("noname", mutates_args=())(lambda x: x)
    with pytest.raises(ArgumentError, match="mutates_args"):
        ember.library.custom_op("embertest::bad", mutates_args=None)(lambda x: x)
    with pytest.raises(ArgumentError, match="no custom op"):
        ember.library.register_fake("embertest::never_made", lambda x: x)
