"""Conformance samples for relu_backward (ops/elementwise.py), the eager tape's ReLU gradient,
called directly: its own VJP (linear in the incoming gradient, under the same mask) by finite
differences and against PyTorch's double backward of relu. The results stay away from 0,
where the mask changes (relu's own samples run the kink)."""

from ember.ops._registry import apply
from ember.ops.elementwise import RELU_BACKWARD

from .harness import Sample, away_from, rng

r = rng(41)
# (negative values stand for a ReLU's zeros: the same mask, and finite differences in y are 0)
Y = away_from(r.standard_normal((4, 6)), points=(0.0,), margin=0.1)
G = r.standard_normal((4, 6))


def _torch_relu_grad(g, y):
    torch = __import__("torch")
    # relu's gradient at y: g where y > 0, as relu_backward's mask
    y = y if y.requires_grad else y.detach().requires_grad_()
    out = torch.relu(y)
    return torch.autograd.grad(out, y, g, create_graph=True)[0]


SAMPLES = [
    Sample(
        "relu_backward",
        lambda g, y: apply(RELU_BACKWARD, g, y),
        (G, Y),
        torch_fn=_torch_relu_grad,
    )
]
