"""Conformance samples for huber_backward and smooth_l1_backward (ops/robust_losses.py),
called directly: their own VJPs (linear in the incoming gradient; the second derivative in the
difference, inside the quadratic part) against PyTorch's double backward of F.huber_loss and
F.smooth_l1_loss with reduction="none", and by finite differences; the differences stay away
from the kinks at +-delta (F.huber_loss' and F.smooth_l1_loss' samples run the forward ops)."""

from ember.ops._registry import apply
from ember.ops.robust_losses import HUBER_BACKWARD, SMOOTH_L1_BACKWARD

from .harness import Sample, away_from, rng

r = rng(37)
G = r.standard_normal((3, 5))


def _torch_grad(name, **kwargs):
    def fn(g, d):
        torch = __import__("torch")
        d = d if d.requires_grad else d.detach().requires_grad_()
        y = getattr(torch.nn.functional, name)(d, torch.zeros_like(d), reduction="none", **kwargs)
        return torch.autograd.grad(y, d, g, create_graph=True)[0]

    return fn


SAMPLES = []
for _bound in (1.0, 0.4):
    _d = away_from(r.standard_normal((3, 5)) * 2, points=(-_bound, _bound), margin=0.1)
    SAMPLES += [
        Sample(
            f"huber_backward/delta={_bound}",
            lambda g, d, b=_bound: apply(HUBER_BACKWARD, g, d, delta=b),
            (G, _d),
            torch_fn=_torch_grad("huber_loss", delta=_bound),
        ),
        Sample(
            f"smooth_l1_backward/beta={_bound}",
            lambda g, d, b=_bound: apply(SMOOTH_L1_BACKWARD, g, d, beta=b),
            (G, _d),
            torch_fn=_torch_grad("smooth_l1_loss", beta=_bound),
        ),
    ]
