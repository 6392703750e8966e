"""Conformance samples for the backward ops of ops/norm_act.py, ops/softmax.py and ops/glu.py
(and glu itself), called directly: their own VJPs (the second derivatives of gelu, layer_norm,
softmax, log_softmax and glu) are checked by finite differences, and against PyTorch's double
backward."""

import numpy as np

from ember.ops._registry import apply
from ember.ops.batch_norm import BATCH_NORM_BACKWARD
from ember.ops.gelu import GELU_BACKWARD, GELU_TANH_BACKWARD
from ember.ops.glu import GLU, GLU_BACKWARD
from ember.ops.layer_norm import LAYER_NORM_BACKWARD
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


def _torch_glu_grad(dim):
    def fn(x, g):
        torch = _torch()
        x = x if x.requires_grad else x.detach().requires_grad_()
        return torch.autograd.grad(torch.nn.functional.glu(x, dim), x, g, create_graph=True)[0]

    return fn


XG = r.standard_normal((3, 4, 6)) * 2
GG = r.standard_normal((3, 4, 3))


XB = r.standard_normal((4, 3, 5))
BN_OPERANDS = (
    r.standard_normal((4, 3, 5)),  # gy
    r.standard_normal(3),  # gmean
    r.standard_normal(3),  # gvar
    XB,
    XB.mean(axis=(0, 2)) + r.standard_normal(3) * 0.1,  # mean (near the batch's)
    r.uniform(0.5, 2.0, 3),  # var
    r.standard_normal(3),  # weight
)


def _torch_batch_norm_backward(gy, gmean, gvar, x, mean, var, w, eps=1e-5):
    """batch_norm_backward's formula in torch ops (its gradients by torch's autograd)."""
    n = x.numel() // x.shape[1]

    def view(t):
        return t.reshape(1, -1, 1)

    axes = (0, 2)
    r_ = x - view(mean)
    s = (var + eps).rsqrt()
    gb = gy.sum(axes)
    a = (gy * r_).sum(axes)
    gx = view(w * s) * (gy - view(gb / n)) - view(w * s**3 * a / n) * r_
    gx = gx + view(gmean / n) + view(2 * gvar / n) * r_
    return gx, s * a, gb


def _torch_norm_grad(x, w, g):
    torch = _torch()
    x = x if x.requires_grad else x.detach().requires_grad_()
    w = w if w.requires_grad else w.detach().requires_grad_()
    b = torch.zeros_like(w, requires_grad=True)
    y = torch.nn.functional.layer_norm(x, tuple(w.shape), w, b, 1e-5)
    return torch.autograd.grad(y, (x, w, b), g, create_graph=True)


SAMPLES = [
    Sample(
        "batch_norm_backward",
        lambda *a: apply(BATCH_NORM_BACKWARD, *a, eps=1e-5),
        BN_OPERANDS,
        torch_fn=_torch_batch_norm_backward,
        rtol=1e-4,
        atol=1e-5,
    ),
    Sample(
        "glu/axis-2",
        lambda x: apply(GLU, x, axis=2),
        (XG,),
        torch_fn=lambda x: _torch().nn.functional.glu(x, 2),
    ),
    Sample(
        "glu/axis-0",
        lambda x: apply(GLU, x, axis=0),
        (XG.transpose(2, 1, 0).copy(),),
        torch_fn=lambda x: _torch().nn.functional.glu(x, 0),
    ),
    Sample(
        "glu_backward",
        lambda x, g: apply(GLU_BACKWARD, x, g, axis=2),
        (XG, GG),
        torch_fn=_torch_glu_grad(2),
    ),
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
