"""Conformance samples for hardtanh_backward (ops/hardtanh.py), called directly: its own VJP
(linear in the incoming gradient, under the same mask) by finite differences and against
PyTorch's double backward of hardtanh. The inputs stay away from the bounds, where the mask
changes (F.hardtanh's samples in samples_functional_act.py run the kinks forward)."""

from ember.ops._registry import apply
from ember.ops.hardtanh import HARDTANH_BACKWARD

from .harness import Sample, away_from, rng

r = rng(23)
X = away_from(r.standard_normal((3, 5)) * 4, points=(-1.0, 0.0, 1.0, 6.0), margin=0.1)
G = r.standard_normal((3, 5))


def _torch_hardtanh_grad(lo, hi):
    def fn(g, x):
        torch = __import__("torch")
        x = x if x.requires_grad else x.detach().requires_grad_()
        y = torch.nn.functional.hardtanh(x, lo, hi)
        return torch.autograd.grad(y, x, g, create_graph=True)[0]

    return fn


SAMPLES = [
    Sample(
        f"hardtanh_backward/[{lo},{hi}]",
        lambda g, x, lo=lo, hi=hi: apply(HARDTANH_BACKWARD, g, x, lo=lo, hi=hi),
        (G, X),
        torch_fn=_torch_hardtanh_grad(lo, hi),
    )
    for lo, hi in ((-1.0, 1.0), (0.0, 6.0))
]
