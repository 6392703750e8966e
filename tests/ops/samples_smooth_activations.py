"""Conformance samples for silu_backward, softplus_backward and elu_backward
(ops/smooth_activations.py) and log_sigmoid_backward (ops/log_sigmoid.py), called directly:
their own VJPs (linear in the incoming gradient, and the second derivative in the input) by
finite differences and against PyTorch's double backward. ELU's inputs stay away from its kink
at 0 and softplus' from its threshold (F.silu's, F.softplus' and F.elu's samples in
samples_functional_act.py run the forward ops)."""

from ember.ops._registry import apply
from ember.ops.log_sigmoid import LOG_SIGMOID_BACKWARD
from ember.ops.smooth_activations import ELU_BACKWARD, SILU_BACKWARD, SOFTPLUS_BACKWARD

from .harness import Sample, away_from, rng
from .samples_piecewise import _torch_grad  # (PyTorch's gradient, differentiable again)

r = rng(31)
X = away_from(r.standard_normal((3, 5)) * 3, points=(0.0, 2.5), margin=0.1)
G = r.standard_normal((3, 5))


_SELU = dict(alpha=1.6732632423543772, scale=1.0507009873554805, input_scale=1.0)

SAMPLES = [
    Sample(
        "silu_backward",
        lambda g, x: apply(SILU_BACKWARD, g, x),
        (G, X),
        torch_fn=_torch_grad("silu"),
    ),
    Sample(
        "softplus_backward",
        lambda g, x: apply(SOFTPLUS_BACKWARD, g, x, beta=1.0, threshold=20.0),
        (G, X),
        torch_fn=_torch_grad("softplus"),
    ),
    Sample(
        "softplus_backward/beta2_threshold5",
        lambda g, x: apply(SOFTPLUS_BACKWARD, g, x, beta=2.0, threshold=5.0),
        (G, X),
        torch_fn=_torch_grad("softplus", beta=2.0, threshold=5.0),
    ),
    Sample(
        "elu_backward",
        lambda g, x: apply(ELU_BACKWARD, g, x, alpha=0.7, scale=1.0, input_scale=1.0),
        (G, X),
        torch_fn=_torch_grad("elu", alpha=0.7),
    ),
    Sample(
        "elu_backward/selu",
        lambda g, x: apply(ELU_BACKWARD, g, x, **_SELU),
        (G, X),
        torch_fn=_torch_grad("selu"),
    ),
    Sample(
        "log_sigmoid_backward",
        lambda g, x: apply(LOG_SIGMOID_BACKWARD, g, x),
        (G, X),
        torch_fn=_torch_grad("logsigmoid"),
    ),
]
