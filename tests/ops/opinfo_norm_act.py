"""OpInfo database entries for the backward ops of ops/norm_act.py, ops/softmax.py, ops/glu.py
and ops/batch_norm.py.

They have no public function (F.gelu, F.layer_norm, F.softmax and F.log_softmax, whose OpInfo
entries run them forward, record them in their VJPs), so no sample here calls them; their own
VJPs are second derivatives, which tests/ops/samples_norm_act.py (samples_hardtanh.py,
samples_piecewise.py for the piecewise activations, samples_smooth_activations.py for
silu's, softplus' and elu's, samples_group_norm.py for group norm's)
checks against PyTorch's double backward and by finite differences."""

OPS = []

_WHY = (
    "(its VJP only) a backward op: its VJP, a second derivative, is checked against PyTorch's "
    "double backward and by finite differences in tests/ops/samples_norm_act.py"
)
INTERNAL = {
    name: _WHY
    for name in (
        "batch_norm_backward",
        "gelu_backward",
        "gelu_tanh_backward",
        "glu_backward",
        "group_norm_backward",
        "hardsigmoid_backward",
        "hardswish_backward",
        "hardtanh_backward",
        "huber_backward",
        "layer_norm_backward",
        "leaky_relu_backward",
        "log_sigmoid_backward",
        "log_softmax_backward",
        "softmax_backward",
        "sigmoid_backward",
        "smooth_l1_backward",
        "silu_backward",
        "softplus_backward",
        "tanh_backward",
        "elu_backward",
    )
}
INTERNAL.update(
    {
        name: "(its VJP only) a backward op of ops/shrink.py or ops/prelu.py: its VJP, a second "
        "derivative, is checked against PyTorch's double backward and by finite differences in "
        "tests/ops/samples_shrink.py"
        for name in (
            "prelu_backward",
            "prelu_weight_backward",
            "shrink_backward",
            "threshold_backward",
        )
    }
)
