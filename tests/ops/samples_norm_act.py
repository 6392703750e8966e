"""Conformance samples for the backward ops of ops/norm_act.py and ops/softmax.py, called
directly: their own VJPs (the second derivatives of gelu, layer_norm, softmax and log_softmax)
are checked by finite differences, and against PyTorch's double backward."""

import numpy as np

from ember.ops._registry import apply
from ember.ops.norm_act import GELU_BACKWARD, GELU_TANH_BACKWARD, LAYER_NORM_BACKWARD
from ember.ops.softmax import LOG_SOFTMAX_BACKWARD, SOFTMAX_BACKWARD

from .harness import Sample, away_from, rng

r = rng(11)
# away from the zeros of gelu'' (x = +-sqrt 2 for the erf form, +-1.4185 for the tanh form):
# the second derivative cancels there, and a fused loop's vector tanh a few ulps from NumPy's
# would give a result many ulps from the reference's (tests/conftest.py checks fused loops)
X = away_from(r.standard_normal((3, 5)) * 2, points=(-1.4185, 1.4185, -1.4142, 1.4142), margin=0.1)
G = r.standard_normal((3, 5))
XN = r.standard_normal((2, 3, 4))
W = r.standard_normal((3, 4))
GN = r.standard_normal((2, 3, 4))
# softmax_backward reads softmax's result; log_softmax_backward log_softmax's
LOGITS = r.standard_normal((3, 6))
Y = np.exp(LOGITS) / np.exp(LOGITS).sum(-1, keepdims=True)
LOG_Y = np.log(Y)
GS = r.standard_normal((3, 6))


def _torch():
    return __import__("torch")


def _torch_gelu_grad(approximate):
    def fn(x, g):
        torch = _torch()
        x = x if x.requires_grad else x.detach().requires_grad_()
        y = torch.nn.functional.gelu(x, approximate=approximate)
        return torch.autograd.grad(y, x, g, create_graph=True)[0]

    return fn


def _torch_norm_grad(x, w, g):
    torch = _torch()
    x = x if x.requires_grad else x.detach().requires_grad_()
    w = w if w.requires_grad else w.detach().requires_grad_()
    b = torch.zeros_like(w, requires_grad=True)
    y = torch.nn.functional.layer_norm(x, tuple(w.shape), w, b, 1e-5)
    return torch.autograd.grad(y, (x, w, b), g, create_graph=True)


SAMPLES = [
    Sample(
        "gelu_backward",
        lambda x, g: apply(GELU_BACKWARD, x, g),
        (X, G),
        torch_fn=_torch_gelu_grad("none"),
    ),
    Sample(
        "gelu_tanh_backward",
        lambda x, g: apply(GELU_TANH_BACKWARD, x, g),
        (X, G),
        torch_fn=_torch_gelu_grad("tanh"),
    ),
    Sample(
        "layer_norm_backward/trailing-2-dims",
        lambda x, w, g: apply(LAYER_NORM_BACKWARD, x, w, g, eps=1e-5),
        (XN, W, GN),
        torch_fn=_torch_norm_grad,
        rtol=1e-4,
        atol=1e-5,
    ),
    Sample(
        "softmax_backward",
        lambda y, g: apply(SOFTMAX_BACKWARD, y, g, axis=1),
        (Y, GS),
        torch_fn=lambda y, g: _torch().ops.aten._softmax_backward_data(g, y, 1, y.dtype),
    ),
    Sample(
        "log_softmax_backward/axis-0",
        lambda y, g: apply(LOG_SOFTMAX_BACKWARD, y, g, axis=0),
        (LOG_Y.T.copy(), GS.T.copy()),
        torch_fn=lambda y, g: _torch().ops.aten._log_softmax_backward_data(g, y, 0, y.dtype),
    ),
]
