"""Conformance samples for group_norm_backward (ops/group_norm.py), called directly: its own
VJP (the second derivative of group norm, written with layer norm's ops on the groups) by
finite differences and against PyTorch's double backward, over 1-d, 2-d and 3-d inputs, one
group, several, and one per channel. F.group_norm's samples (samples_functional_norm.py and
the OpInfo database) run the forward op."""

from ember.ops._registry import apply
from ember.ops.group_norm import GROUP_NORM_BACKWARD

from .harness import Sample, rng

r = rng(31)


def _torch_grad(groups, eps):
    def fn(x, w, g):
        torch = __import__("torch")
        x = x if x.requires_grad else x.detach().requires_grad_()
        w = w if w.requires_grad else w.detach().requires_grad_()
        b = torch.zeros_like(w, requires_grad=True)
        y = torch.nn.functional.group_norm(x, groups, w, b, eps)
        return torch.autograd.grad(y, (x, w, b), g, create_graph=True)

    return fn


def _sample(name, shape, groups, eps=1e-5):
    x = r.standard_normal(shape) * 2 + 0.5
    w = r.standard_normal(shape[1])
    g = r.standard_normal(shape)
    return Sample(
        f"group_norm_backward/{name}",
        lambda x, w, g: apply(GROUP_NORM_BACKWARD, x, w, g, groups=groups, eps=eps),
        (x, w, g),
        torch_fn=_torch_grad(groups, eps),
        rtol=1e-4,
        atol=1e-5,
    )


SAMPLES = [
    _sample("2-d 3 groups", (2, 6, 3, 2), 3),
    _sample("1-d per channel", (3, 4, 5), 4),
    _sample("one group, no positions", (4, 6), 1, eps=1e-3),
    _sample("3-d 2 groups", (1, 4, 2, 2, 3), 2),
]
