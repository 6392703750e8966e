"""Conformance samples for the backward ops of ops/shrink.py and ops/prelu.py, called directly:
their own VJPs (linear in the incoming gradient under the same mask; prelu's also in the weight
and, for the weight's gradient, in the input) by finite differences and against PyTorch's double
backward (``torch.ops.aten._prelu_kernel_backward`` for prelu's two halves). The inputs stay away
from the kinks (F.threshold's, F.hardshrink's, F.softshrink's and F.prelu's samples in
samples_functional_act.py run the forward ops)."""

from ember.ops._registry import apply
from ember.ops.prelu import PRELU_BACKWARD, PRELU_WEIGHT_BACKWARD
from ember.ops.shrink import SHRINK_BACKWARD, THRESHOLD_BACKWARD

from .harness import Sample, away_from, rng

r = rng(59)
X = away_from(r.standard_normal((3, 5)) * 2, points=(-0.5, 0.0, 0.3, 0.5), margin=0.1)
G = r.standard_normal((3, 5))
X3 = away_from(r.standard_normal((2, 3, 4)), points=(0.0,), margin=0.1)
G3 = r.standard_normal((2, 3, 4))
W3 = r.standard_normal((3, 1))


def _torch_grad(name, *args):
    def fn(g, x):
        torch = __import__("torch")
        x = x if x.requires_grad else x.detach().requires_grad_()
        y = getattr(torch.nn.functional, name)(x, *args)
        return torch.autograd.grad(y, x, g, create_graph=True)[0]

    return fn


def _torch_prelu(half):
    def fn(g, x, w):
        torch = __import__("torch")
        return torch.ops.aten._prelu_kernel_backward(g, x, w)[half]

    return fn


SAMPLES = (
    [
        Sample(
            f"threshold_backward/{threshold}",
            lambda g, x, threshold=threshold: apply(THRESHOLD_BACKWARD, g, x, threshold=threshold),
            (G, X),
            torch_fn=_torch_grad("threshold", threshold, -2.0),
        )
        for threshold in (0.3, -0.5)
    ]
    + [
        Sample(
            f"shrink_backward/{name}",
            lambda g, x: apply(SHRINK_BACKWARD, g, x, lambd=0.5),
            (G, X),
            torch_fn=_torch_grad(name, 0.5),
        )
        for name in ("hardshrink", "softshrink")
    ]
    + [
        Sample(
            f"{op.name}/channels",
            lambda g, x, w, op=op: apply(op, g, x, w),
            (G3, X3, W3),
            torch_fn=_torch_prelu(half),
        )
        for half, op in enumerate((PRELU_BACKWARD, PRELU_WEIGHT_BACKWARD))
    ]
)
