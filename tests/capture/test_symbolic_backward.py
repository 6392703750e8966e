"""The backward of a function captured over symbolic sizes, where the gradient is broadcast back
to an input's symbolic shape from something that holds none of its sizes (``x.sum()``,
``x[:, -1].sum()``, a mean's scalar). Before onnx52 the AOT partition gave the backward graph
only the saved activations and the 0-d cotangent, so compiling it failed ("the symbolic
size(s) ['N', 't'] appear in no input dimension"); the forward now also saves a value of no
bytes whose shape holds the sizes the backward lacks."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import TensorSpec

torch = pytest.importorskip("torch")

FUNCTIONS = {
    "sum": lambda m, x: x.sum(),
    "select_last": lambda m, x: (x[:, -1] * x[:, 0]).sum(),
    "mean_of_square": lambda m, x: (x * x).mean(),
    "linear_then_sum": lambda m, x: m.tanh(x[..., None] * 2.0 + 1.0).sum(),
}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_gradients_over_symbolic_sizes_equal_pytorch(name):
    fn = FUNCTIONS[name]
    f = ember.function(lambda x: fn(ember, x), input_signature=[TensorSpec((None, "t"))])
    for shape in ((2, 5), (3, 7), (1, 2)):
        data = np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)
        x = ember.tensor(data, requires_grad=True)
        f(x).backward()
        reference = torch.tensor(data, requires_grad=True)
        fn(torch, reference).backward()
        np.testing.assert_allclose(x.grad.numpy(), reference.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_the_saved_sizes_cost_no_bytes():
    f = ember.function(lambda x: x.sum(), input_signature=[TensorSpec((None, "t"))])
    x = ember.ones(4, 3, requires_grad=True)
    f(x).backward()
    forward, backward = f.compile(x).graphs["forward"], f.compile(x).graphs["backward"]
    carrier = backward.inputs[0]
    assert carrier.name == "saved_sizes" and 0 in carrier.type.shape
    assert {str(d) for d in carrier.type.shape if not isinstance(d, int)} == {"N", "t"}
    assert len(forward.outputs) == 2
