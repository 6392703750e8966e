"""Conformance samples for ops/conv.py: conv, conv_input_grad and conv_weight_grad through the
public conv1d/2d/3d and conv_transpose1d/2d, plus a gradient-of-gradient sample that runs the
VJPs of the two adjoints (checked by finite differences and against torch's double backward)."""

import warnings

import ember
import ember.nn.functional as F
from ember.ops import REGISTRY, apply

from .harness import Sample, rng

r = rng(11)


def T():
    import torch.nn.functional as tf

    return tf


def torch():
    import torch as t

    return t


def normal(*shape):
    return r.standard_normal(shape)


def conv_sample(name, nd, x_shape, w_shape, bias=False, **kw):
    fn_name = f"conv{nd}d"
    inputs = (normal(*x_shape), normal(*w_shape)) + ((normal(w_shape[0]),) if bias else ())
    return Sample(
        f"{fn_name}/{name}",
        lambda *a: getattr(F, fn_name)(*a, **kw),
        inputs,
        torch_fn=lambda *a: _quiet(getattr(T(), fn_name), *a, **kw),
    )


def _quiet(fn, *args, **kw):
    # torch warns that 'same' with an even kernel copies the input; that is not under test
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return fn(*args, **kw)


def transpose_sample(name, nd, x_shape, w_shape, bias=False, **kw):
    fn_name = f"conv_transpose{nd}d"
    groups = kw.get("groups", 1)
    extra = (normal(w_shape[1] * groups),) if bias else ()
    return Sample(
        f"{fn_name}/{name}",
        lambda *a: getattr(F, fn_name)(*a, **kw),
        (normal(*x_shape), normal(*w_shape)) + extra,
        torch_fn=lambda *a: getattr(T(), fn_name)(*a, **kw),
    )


def _first_grads(framework_grad, conv, x, w, requires):
    y = conv(x, w)
    return framework_grad((y * y * y).sum(), requires)


def ember_grad_of_conv(x, w, **kw):
    """The first-order gradients of sum(conv2d(x, w)^3), differentiable again."""
    with ember.enable_grad():
        # under finite differences the inputs are plain values: make leaves to differentiate
        xs = [t if t.requires_grad else t.detach().requires_grad_() for t in (x, w)]
        y = F.conv2d(xs[0], xs[1], **kw)
        return ember.autograd.grad((y * y * y).sum(), xs, create_graph=True)


def torch_grad_of_conv(x, w, **kw):
    y = T().conv2d(x, w, **kw)
    return torch().autograd.grad((y * y * y).sum(), (x, w), create_graph=True)


def weight_grad(x, gy, **kw):
    """conv_weight_grad called directly, compared with torch.nn.grad.conv2d_weight."""
    k = kw.pop("kernel_size")
    attrs = {
        "stride": kw["stride"],
        "padding": tuple((p, p) for p in kw["padding"]),
        "dilation": kw["dilation"],
        "groups": kw["groups"],
    }
    return apply(REGISTRY["conv_weight_grad"], x, gy, kernel_size=k, **attrs)


def with_bias(op, **attrs):
    """The ``conv`` or ``conv_input_grad`` op called with its bias operand (what half-precision
    convolutions with a bias record, its one rounding; checked here in float64)."""
    return lambda *a: apply(REGISTRY[op], *a, **attrs)


WG = {"stride": (2, 1), "padding": (1, 0), "dilation": (1, 2), "groups": 2, "kernel_size": (3, 2)}

SAMPLES = [
    conv_sample("basic+bias", 2, (2, 2, 5, 5), (3, 2, 3, 3), bias=True),
    conv_sample("stride2-pad1", 2, (1, 2, 6, 5), (3, 2, 3, 3), stride=2, padding=1),
    conv_sample("dilated", 2, (1, 2, 6, 6), (2, 2, 3, 3), dilation=2, padding=2),
    conv_sample("grouped", 2, (1, 4, 5, 5), (4, 2, 3, 3), bias=True, groups=2),
    conv_sample("depthwise", 2, (1, 3, 5, 5), (6, 1, 3, 3), groups=3, padding=1),
    # an even kernel with padding='same' pads asymmetrically (the extra column after)
    conv_sample("same-asymmetric", 2, (1, 2, 5, 6), (2, 2, 2, 4), padding="same"),
    conv_sample("same-dilated", 2, (1, 2, 5, 5), (2, 2, 3, 2), padding="same", dilation=(1, 3)),
    conv_sample(
        "valid-mixed-stride", 2, (1, 2, 7, 6), (2, 2, 3, 2), stride=(2, 1), padding="valid"
    ),
    conv_sample("mixed-padding", 2, (1, 2, 4, 5), (2, 2, 3, 3), padding=(0, 2), stride=(1, 3)),
    conv_sample("big-kernel", 2, (1, 1, 6, 6), (2, 1, 5, 5)),
    # the forward's relaid inputs (kernels/cconv_split.py, kernels/cconv_side.py): a strided
    # shortcut reading one stride phase, a stem's 7x7 stride 2, a batch of small planes
    conv_sample("shortcut-1x1-stride2", 2, (2, 5, 6, 7), (9, 5, 1, 1), stride=2),
    conv_sample(
        "stem-7x7-stride2", 2, (2, 3, 11, 10), (4, 3, 7, 7), bias=True, stride=2, padding=3
    ),
    conv_sample("small-planes-batch", 2, (3, 4, 4, 4), (6, 4, 3, 3), padding=1),
    conv_sample("stride-pad", 1, (2, 3, 9), (4, 3, 3), bias=True, stride=2, padding=1),
    conv_sample(
        "same-grouped-dilated", 1, (2, 4, 8), (4, 2, 3), padding="same", dilation=2, groups=2
    ),
    conv_sample("3d", 3, (1, 2, 4, 4, 3), (2, 2, 2, 2, 2), padding=1, stride=(1, 2, 1)),
    transpose_sample(
        "stride-pad-outpad+bias",
        2,
        (1, 3, 3, 4),
        (3, 2, 3, 3),
        bias=True,
        stride=2,
        padding=1,
        output_padding=1,
    ),
    transpose_sample(
        "grouped-dilated",
        2,
        (1, 4, 3, 3),
        (4, 1, 2, 3),
        groups=2,
        dilation=(2, 1),
        stride=(1, 2),
        output_padding=(0, 1),
    ),
    # output_padding below the dilation but not below the stride
    transpose_sample(
        "outpad-dilation", 2, (1, 2, 3, 3), (2, 2, 2, 2), dilation=2, output_padding=1
    ),
    transpose_sample(
        "1d", 1, (2, 2, 4), (2, 3, 3), bias=True, stride=3, padding=1, output_padding=2
    ),
    Sample(
        "conv2d/grad-of-grad",
        lambda x, w: ember_grad_of_conv(x, w, stride=2, padding=1, groups=2),
        (normal(1, 4, 5, 4), normal(2, 2, 3, 3)),
        torch_fn=lambda x, w: torch_grad_of_conv(x, w, stride=2, padding=1, groups=2),
        float32=False,
    ),
    Sample(
        "conv/bias-operand",
        with_bias("conv", stride=(2, 1), padding=((1, 1), (0, 0)), dilation=(1, 1), groups=2),
        (normal(2, 4, 5, 4), normal(4, 2, 3, 3), normal(4)),
        torch_fn=lambda x, w, b: T().conv2d(x, w, b, stride=(2, 1), padding=(1, 0), groups=2),
    ),
    Sample(
        "conv_input_grad/bias-operand",
        with_bias(
            "conv_input_grad",
            stride=(2, 2),
            padding=((1, 1), (1, 1)),
            dilation=(1, 1),
            groups=1,
            in_size=(5, 5),
        ),
        (normal(2, 3, 3, 3), normal(3, 2, 3, 3), normal(2)),
        torch_fn=lambda gy, w, b: T().conv_transpose2d(gy, w, b, stride=2, padding=1),
    ),
    Sample(
        "conv_weight_grad/direct",
        lambda x, gy: weight_grad(x, gy, **WG),
        (normal(2, 4, 6, 5), normal(2, 2, 3, 3)),
        torch_fn=lambda x, gy: torch().nn.grad.conv2d_weight(
            x, (2, 2, 3, 2), gy, stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=2
        ),
    ),
]
