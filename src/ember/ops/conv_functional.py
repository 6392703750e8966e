"""The public convolutions (PyTorch's functional API, in ember.nn.functional): conv1d/2d/3d on
the ``conv`` primitive and conv_transpose1d/2d/3d on its adjoint ``conv_input_grad`` (see
conv.py). They normalise arguments (ints or tuples, padding 'same'/'valid', output_padding),
accept unbatched input, and add the bias: in half precision (bfloat16, float16) as the op's
bias operand, added to the float32 sums before the result's one rounding (PyTorch's
arithmetic: an add after the rounded convolution would round twice, a unit in the last place
off PyTorch in about 30% of the outputs); in float32 and float64 eagerly as the op's operand
too (one call; equal bit for bit to the add), and while a graph is built as a plain broadcast
add (what the graph passes fold and fuse).
"""

from __future__ import annotations

import operator

from ..errors import ShapeError
from ._autocast import Autocast, autocasts
from ._registry import apply, building_graph, export
from ._util import fmt_shape, half_precision
from .conv import CONV, CONV_INPUT_GRAD, label
from .promotion import to_tensor


def int_tuple(name: str, what: str, value, nd: int, positive: bool = True) -> tuple:
    """A per-spatial-dimension argument (an int, or one int per dimension) as a tuple."""
    kind = type(value)
    if kind is int and value >= positive:  # (every layer's call passes here: its common forms)
        return (value,) * nd
    if kind is tuple and len(value) == nd:
        for v in value:
            if type(v) is not int or v < positive:
                break
        else:
            return value
    if isinstance(value, (tuple, list)):
        if len(value) == 1:
            value = tuple(value) * nd
        if len(value) != nd:
            raise ShapeError(f"{what} must be an int or {nd} ints, got {value!r}", op=name)
        out = tuple(operator.index(v) for v in value)
    else:
        out = (operator.index(value),) * nd
    if any(v < (1 if positive else 0) for v in out):
        kind = "positive" if positive else "non-negative"
        raise ShapeError(f"{what} must be {kind}, got {out}", op=name)
    return out


def _padding_pairs(name, padding, nd, w, dilation, stride) -> tuple:
    """``padding`` as (before, after) pairs per spatial dimension of weight ``w`` (whose
    kernel sizes only 'same' reads)."""
    if isinstance(padding, str):
        kernel = tuple(w.shape)[2:]
        if padding == "valid":
            return ((0, 0),) * nd
        if padding == "same":
            if any(s != 1 for s in stride):
                raise ShapeError(f"padding='same' requires stride 1, got stride {stride}", op=name)
            # like PyTorch: the extra element of an odd total goes after
            totals = [d * (k - 1) for d, k in zip(dilation, kernel)]
            return tuple((t // 2, t - t // 2) for t in totals)
        raise ShapeError(
            f"padding must be an int, a tuple, 'same' or 'valid'; got {padding!r}", op=name
        )
    pads = int_tuple(name, "padding", padding, nd, positive=False)
    if nd == 2:  # (the common case, spelled out)
        return ((pads[0], pads[0]), (pads[1], pads[1]))
    return tuple((p, p) for p in pads)


def _batched(x, w_ndim):
    """Accept unbatched input (C, *S) like PyTorch; returns (x, was_unbatched)."""
    if x.ndim == w_ndim - 1:
        return x.reshape((1,) + tuple(x.shape)), True
    return x, False


def _bias_operand(x, bias, eager: bool = True) -> tuple:
    """``(bias,)`` where the op takes the bias itself, else ``()`` (`_add_bias` adds it after).
    The op takes it in half precision (of the input's dtype: its one rounding) and, eagerly,
    in every dtype where it is one value per channel of the input's dtype: the kernels add it
    to the sums as the separate add would (the same bits, and one call instead of a reshape and
    an add). While a graph is built a float32/float64 bias stays a separate add, which the
    passes fold and fuse. ``eager=False``: only in half precision (a grouped transposed
    convolution, whose depthwise kernel adds the bias into its running sums: ulps off the
    separate add's)."""
    if bias is None:
        return ()
    bias = to_tensor(bias)
    if bias.dtype is not x.dtype:
        return ()
    if half_precision(x):
        return (bias,)
    return (bias,) if eager and not building_graph() and bias.ndim == 1 else ()


def _add_bias(name, y, bias, operand: tuple):
    if bias is None or operand:
        return y
    bias = to_tensor(bias)
    if tuple(bias.shape) != (y.shape[1],):
        raise ShapeError(
            f"bias of shape {fmt_shape(bias.shape)} must have shape ({y.shape[1]},) "
            f"(one value per output channel)",
            op=name,
        )
    return y + bias.reshape((1, y.shape[1]) + (1,) * (y.ndim - 2))


def _conv_nd(nd: int):
    name = label("conv", nd)

    def conv(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        x, w = to_tensor(input), to_tensor(weight)
        if w.ndim != nd + 2:
            raise ShapeError(
                f"weight of shape {fmt_shape(w.shape)} must have {nd + 2} dimensions "
                f"(out_channels, in_channels/groups, {nd} kernel sizes)",
                op=name,
            )
        x, unbatched = _batched(x, w.ndim)
        stride = int_tuple(name, "stride", stride, nd)
        dilation = int_tuple(name, "dilation", dilation, nd)
        pads = _padding_pairs(name, padding, nd, w, dilation, stride)
        operand = _bias_operand(x, bias)
        y = apply(
            CONV,
            x,
            w,
            *operand,
            stride=stride,
            padding=pads,
            dilation=dilation,
            groups=operator.index(groups),
        )
        y = _add_bias(name, y, bias, operand)
        return y.reshape(tuple(y.shape[1:])) if unbatched else y

    conv.__name__ = conv.__qualname__ = name
    conv.__doc__ = (
        f"{nd}-D convolution (cross-correlation) like torch.nn.functional.{name}: input "
        f"(N, C_in, *{nd} spatial) or unbatched, weight (C_out, C_in/groups, *{nd} kernel), "
        "padding an int, a tuple, 'valid' or 'same' (stride 1)."
    )
    return export(autocasts(Autocast.LOWER)(conv), name=name, functional=True)


def _conv_transpose_nd(nd: int):
    name = label("conv_transpose", nd)

    def conv_transpose(
        input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1
    ):
        x, w = to_tensor(input), to_tensor(weight)
        if w.ndim != nd + 2:
            raise ShapeError(
                f"weight of shape {fmt_shape(w.shape)} must have {nd + 2} dimensions "
                f"(in_channels, out_channels/groups, {nd} kernel sizes)",
                op=name,
            )
        x, unbatched = _batched(x, w.ndim)
        groups = operator.index(groups)
        stride = int_tuple(name, "stride", stride, nd)
        dilation = int_tuple(name, "dilation", dilation, nd)
        pads = int_tuple(name, "padding", padding, nd, positive=False)
        extra = int_tuple(name, "output_padding", output_padding, nd, positive=False)
        for e, s, d in zip(extra, stride, dilation):
            if e >= max(s, d):
                raise ShapeError(
                    f"output_padding {extra} must be smaller than stride {stride} or "
                    f"dilation {dilation} in every dimension",
                    op=name,
                )
        if x.ndim == w.ndim and x.shape[1] != w.shape[0]:
            raise ShapeError(
                f"input of shape {fmt_shape(x.shape)} has {x.shape[1]} channels, but weight of "
                f"shape {fmt_shape(w.shape)} expects {w.shape[0]} (weight.shape[0])",
                op=name,
            )
        k = tuple(w.shape[2:])
        size = tuple(
            (n - 1) * s - 2 * p + d * (kk - 1) + e + 1
            for n, s, p, d, kk, e in zip(x.shape[2:], stride, pads, dilation, k, extra)
        )
        if any(s < 1 for s in size):
            raise ShapeError(
                f"input of shape {fmt_shape(x.shape)} with padding {pads} gives an empty output "
                f"{size}",
                op=name,
            )
        # the adjoint of a convolution of an input of `size`; output_padding becomes a smaller
        # (possibly negative) padding after, so that this convolution yields exactly x's size
        pairs = tuple((p, p - e) for p, e in zip(pads, extra))
        operand = _bias_operand(x, bias, groups == 1)
        y = apply(
            CONV_INPUT_GRAD,
            x,
            w,
            *operand,
            stride=stride,
            padding=pairs,
            dilation=dilation,
            groups=groups,
            in_size=size,
        )
        y = _add_bias(name, y, bias, operand)
        return y.reshape(tuple(y.shape[1:])) if unbatched else y

    conv_transpose.__name__ = conv_transpose.__qualname__ = name
    conv_transpose.__doc__ = (
        f"{nd}-D transposed convolution like torch.nn.functional.{name}: input "
        f"(N, C_in, *{nd} spatial) or unbatched, weight (C_in, C_out/groups, *{nd} kernel)."
    )
    return export(autocasts(Autocast.LOWER)(conv_transpose), name=name, functional=True)


conv1d = _conv_nd(1)
conv2d = _conv_nd(2)
conv3d = _conv_nd(3)
conv_transpose1d = _conv_transpose_nd(1)
conv_transpose2d = _conv_transpose_nd(2)
conv_transpose3d = _conv_transpose_nd(3)
