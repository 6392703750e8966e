"""The ONNX forms (``onnx`` rules, ops/_rules.py) of ops/conv.py's convolution and its two
adjoints: Conv, and ConvTranspose for the adjoints, with ember's (before, after) padding pairs (a
negative "after" crops) written as ONNX's pads (ops/pool_avg.py's rules share the padding
helpers). Written through the exporter's emitter ``e``, never importing ``onnx``."""

from __future__ import annotations

from ..symbolic import SymDim


def onnx_crop(e, x, padding):
    """``x`` cropped where a padding's "after" is negative; the padding left (all >= 0)."""
    if all(after >= 0 for _, after in padding):
        return x, padding
    axes = [2 + i for i, (_, after) in enumerate(padding) if after < 0]
    ends = [after for _, after in padding if after < 0]
    x = e.node("Slice", [x, e.ints([0] * len(axes)), e.ints(ends), e.ints(axes)])
    return x, tuple((before, max(after, 0)) for before, after in padding)


def onnx_pads(padding) -> list:
    return [b for b, _ in padding] + [a for _, a in padding]


def onnx_conv(e):
    x, w, *bias = e.inputs  # (a half-precision call's bias: Conv's B)
    a = e.attrs
    x, padding = onnx_crop(e, x, a["padding"])
    return e.node(
        "Conv",
        [x, w, *bias],
        strides=list(a["stride"]),
        pads=onnx_pads(padding),
        dilations=list(a["dilation"]),
        group=a["groups"],
    )


def onnx_transposed_pads(e, in_size, out, kernel, stride, dilation, befores):
    """ConvTranspose's pads for the adjoint of a strided window: its full output spans the
    padded input's first ``s (o - 1) + (k - 1) d + 1`` positions; the input starts ``before``
    into it. Crop what lies outside the input and give the rows no window reached zeros (a Pad
    after): ONNX's output_padding would compute them instead. Over a symbolic size whose
    difference from that span depends on its value (a stride-2 window over an odd or even
    size), nothing is cropped here and the zeros are the symbolic difference, which
    `onnx_pad_end` pads or crops when the model runs."""
    pads, zeros = [], []
    for n, o, k, s, d, before in zip(in_size, out, kernel, stride, dilation, befores):
        span = s * (o - 1) + (k - 1) * d + 1
        over = span - before - n
        if isinstance(over, int):
            pads.append((before, max(over, 0)))
            zeros.append(max(-over, 0))
        else:
            pads.append((before, 0))
            zeros.append(-over)  # (symbolic: rows to add, or to crop where negative)
    return pads, zeros


def onnx_pad_end(e, y, zeros, sizes=()):
    """``y`` with ``zeros`` rows of zeros after each spatial axis; a symbolic count is padded
    by its positive part and then cut to its axis's size in ``sizes`` (so a negative count
    crops), both at run time."""
    if not any(isinstance(z, SymDim) or z for z in zeros):
        return y
    if not any(isinstance(z, SymDim) for z in zeros):
        return e.node("Pad", [y, e.ints([0, 0] + [0] * len(zeros) + [0, 0] + list(zeros))])
    rank = 2 + len(zeros)
    adds = e.node("Max", [e.shape(tuple(zeros)), e.ints([0] * len(zeros))])
    y = e.node("Pad", [y, e.node("Concat", [e.ints([0] * (rank + 2)), adds], axis=0)])
    axes = [i for i, z in enumerate(zeros) if isinstance(z, SymDim)]
    ends = e.shape(tuple(sizes[i] for i in axes))
    return e.node("Slice", [y, e.ints([0] * len(axes)), ends, e.ints([2 + i for i in axes])])


def onnx_conv_input_grad(e):
    gy, w, *bias = e.inputs  # (a half-precision call's bias: ConvTranspose's B)
    a = e.attrs
    stride, dilation = a["stride"], a["dilation"]
    pads, zeros = onnx_transposed_pads(
        e,
        a["in_size"],
        e.in_types[0].shape[2:],
        e.in_types[1].shape[2:],
        stride,
        dilation,
        [before for before, _ in a["padding"]],
    )
    y = e.node(
        "ConvTranspose",
        [gy, w] + ([] if any(zeros) else bias),
        strides=list(stride),
        pads=onnx_pads(pads),
        dilations=list(dilation),
        group=a["groups"],
    )
    y = onnx_pad_end(e, y, zeros, a["in_size"])
    if bias and any(zeros):  # (the rows no window reached hold the bias too)
        shape = e.ints([1, -1] + [1] * len(zeros))
        y = e.node("Add", [y, e.node("Reshape", [bias[0], shape])])
    return y


def onnx_conv_weight_grad(e):
    x, gy = e.inputs
    a = e.attrs
    groups, kernel = a["groups"], a["kernel_size"]
    nd = len(kernel)
    x, padding = onnx_crop(e, x, a["padding"])
    swap = [1, 0] + list(range(2, 2 + nd))
    channels, out_channels = e.in_types[0].shape[1], e.in_types[1].shape[1]
    if groups == 1:
        xs, gs = [x], [gy]
    else:  # one product per group, the groups' weights stacked on the output channels
        xs = e.node("Split", [x, e.ints([channels // groups] * groups)], outputs=groups, axis=1)
        gs = e.node(
            "Split", [gy, e.ints([out_channels // groups] * groups)], outputs=groups, axis=1
        )
    parts = []
    for xg, gg in zip(xs, gs):
        # the weight's gradient is a correlation of x with gy over the batch: x's channels
        # as the batch, the batch as channels, the stride and dilation trading places
        r = e.node(
            "Conv",
            [e.node("Transpose", [xg], perm=swap), e.node("Transpose", [gg], perm=swap)],
            strides=list(a["dilation"]),
            dilations=list(a["stride"]),
            pads=onnx_pads(padding),
        )
        axes = list(range(2, 2 + nd))
        r = e.node("Slice", [r, e.ints([0] * nd), e.ints(kernel), e.ints(axes)])
        parts.append(e.node("Transpose", [r], perm=swap))
    return parts[0] if groups == 1 else e.node("Concat", parts, axis=0)
