"""Conformance samples for ``pointwise_depthwise`` (ops/pointwise_depthwise.py): an expansion
1x1 convolution with its bias and ReLU6, then a strided depthwise convolution with its bias and
a clamp, against PyTorch's convolutions and clamps. No gradient (the op is made by a pass of
inference graphs). tests/onnx/test_onnx55_inverted_residual.py checks its C kernel."""

from ember.ops._registry import apply
from ember.ops.pointwise_depthwise import POINTWISE_DEPTHWISE

from .harness import Sample, rng

r = rng(55)
CIN, CMID = 3, 5
X = r.standard_normal((2, CIN, 7, 6))
W1 = r.standard_normal((CMID, CIN, 1, 1))
B1 = r.standard_normal((1, CMID, 1, 1))
W2 = r.standard_normal((CMID, 1, 3, 3))
B2 = r.standard_normal(CMID)
RELU6 = (0.0, 6.0, True, True)
HARDTANH = (-0.5, 0.5, True, True)


def _ours(clamp2, stride, padding):
    def run(x, w1, b1, w2, b2):
        return apply(
            POINTWISE_DEPTHWISE, x, w1, b1, w2, b2, stride=stride, padding=padding,
            dilation=(1, 1), clamp1=RELU6, clamp2=clamp2,
        )  # fmt: skip

    return run


def _theirs(clamp2, stride, pad):
    def run(x, w1, b1, w2, b2):
        F = __import__("torch").nn.functional
        e = (F.conv2d(x, w1) + b1.reshape(1, -1, 1, 1)).clamp(0.0, 6.0)
        y = F.conv2d(e, w2, stride=stride, padding=pad, groups=CMID) + b2.reshape(1, -1, 1, 1)
        return y if clamp2 is None else y.clamp(clamp2[0], clamp2[1])

    return run


SAMPLES = [
    Sample(
        "pointwise_depthwise/relu6-stride2",
        _ours(RELU6, (2, 2), ((1, 1), (1, 1))),
        (X, W1, B1, W2, B2),
        torch_fn=_theirs(RELU6, 2, 1),
        grad=False,
    ),
    Sample(
        "pointwise_depthwise/hardtanh-stride1",
        _ours(HARDTANH, (1, 1), ((1, 1), (1, 1))),
        (X, W1, B1, W2, B2),
        torch_fn=_theirs(HARDTANH, 1, 1),
        grad=False,
    ),
    Sample(
        "pointwise_depthwise/no-clamp-unpadded",
        _ours(None, (1, 1), ((0, 0), (0, 0))),
        (X, W1, B1, W2, B2),
        torch_fn=_theirs(None, 1, 0),
        grad=False,
    ),
]
