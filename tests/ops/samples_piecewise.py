"""Conformance samples for leaky_relu_backward, hardswish_backward and hardsigmoid_backward
(ops/piecewise.py),
called directly: their own VJPs (linear in the incoming gradient; hardswish's also through the
middle piece's slope) by finite differences and against PyTorch's double backward. The inputs
stay away from the kinks (F.leaky_relu's and F.hardswish's samples in
samples_functional_act.py run the forward ops)."""

import numpy as np

from ember.ops._registry import apply
from ember.ops.output_grads import SIGMOID_BACKWARD, TANH_BACKWARD
from ember.ops.piecewise import HARDSIGMOID_BACKWARD, HARDSWISH_BACKWARD, LEAKY_RELU_BACKWARD

from .harness import Sample, away_from, rng

r = rng(29)
X = away_from(r.standard_normal((3, 5)) * 4, points=(-3.0, 0.0, 3.0), margin=0.1)
G = r.standard_normal((3, 5))


def _torch_grad(name, **kwargs):
    def fn(g, x):
        torch = __import__("torch")
        x = x if x.requires_grad else x.detach().requires_grad_()
        y = getattr(torch.nn.functional, name)(x, **kwargs)
        return torch.autograd.grad(y, x, g, create_graph=True)[0]

    return fn


SAMPLES = [
    Sample(
        f"leaky_relu_backward/{slope}",
        lambda g, x, slope=slope: apply(LEAKY_RELU_BACKWARD, g, x, slope=slope),
        (G, X),
        torch_fn=_torch_grad("leaky_relu", negative_slope=slope),
    )
    for slope in (0.01, 0.2, -0.5)
] + [
    Sample(
        "hardswish_backward",
        lambda g, x: apply(HARDSWISH_BACKWARD, g, x),
        (G, X),
        torch_fn=_torch_grad("hardswish"),
    ),
    Sample(
        "hardsigmoid_backward",
        lambda g, x: apply(HARDSIGMOID_BACKWARD, g, x),
        (G, X),
        # (finite differences only: PyTorch has no derivative of aten::hardsigmoid_backward)
    ),
    # sigmoid's and tanh's gradients from their results (ops/output_grads.py), against
    # PyTorch's own aten::sigmoid_backward and aten::tanh_backward and their double backward
    Sample(
        "sigmoid_backward",
        lambda g, y: apply(SIGMOID_BACKWARD, g, y),
        (G, 1 / (1 + np.exp(-X))),
        torch_fn=lambda g, y: __import__("torch").ops.aten.sigmoid_backward(g, y),
    ),
    Sample(
        "tanh_backward",
        lambda g, y: apply(TANH_BACKWARD, g, y),
        (G, np.tanh(X / 4)),
        torch_fn=lambda g, y: __import__("torch").ops.aten.tanh_backward(g, y),
    ),
]
