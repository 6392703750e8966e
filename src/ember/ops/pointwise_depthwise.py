"""``pointwise_depthwise``: an inverted-residual block's expansion 1x1 convolution with its bias
and clamp, and the depthwise convolution after it with its own, as one op, so its C kernel
(kernels/cinverted_residual.py) makes the expanded tensor band by band in cache instead of
writing it whole to memory and reading it back (MobileNet's 112x112 planes at batch 8: 51 MB).

Made by the patterns pass from two ``fused_epilogue`` nodes of ``conv`` (transforms/epilogue.py
makes them, and the pipeline's next round asks this op's `PatternRule` at each one): the
depthwise one (2-d, multiplier 1, float32/float64, a bias, optionally a clamp, one float output)
reading the expansion's (1x1, stride 1, unpadded, one group, a bias, optionally a clamp, one
float output read by nothing else). The rule matches only where the fused kernel runs this
geometry clearly faster than the two nodes' kernels on this machine (`cinverted_residual.pays`:
measured once per machine and geometry); the op is internal, never a public function.

The NumPy kernel is the specification: the convolutions' NumPy kernels (ops/_conv_kernels.py),
each bias added to the sums, each clamp as ops/_rules.py's `Clamp` bounds (NaN kept).
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..errors import DTypeError, ShapeError
from ..kernels.conv_plan import conv_geometry
from ..types import TensorType
from ._conv_dispatch import _compiled
from ._conv_kernels import conv_forward
from ._registry import Cost, OpDef, register
from ._rules import PatternRule
from ._util import fmt_shape, io_bytes, numel
from .conv import CONV, _conv_infer
from .conv_epilogue import epilogue_plan
from .fused import FUSED_EPILOGUE

__all__ = ["POINTWISE_DEPTHWISE"]

_NAME = "pointwise_depthwise"
_POINTWISE = {"stride": (1, 1), "padding": ((0, 0), (0, 0)), "dilation": (1, 1), "groups": 1}


def _depthwise_attrs(channels: int, stride, padding, dilation) -> dict:
    return {"stride": stride, "padding": padding, "dilation": dilation, "groups": channels}


def _infer(x, w1, b1, w2, b2, *, stride, padding, dilation, clamp1, clamp2):
    if x.dtype not in (dt.float32, dt.float64) or any(
        t.dtype is not x.dtype for t in (w1, b1, w2, b2)
    ):
        names = ", ".join(t.dtype.name for t in (x, w1, b1, w2, b2))
        raise DTypeError(f"operands of dtypes {names}: one float32 or float64 dtype", op=_NAME)
    if len(x.shape) != 4 or len(w1.shape) != 4 or len(w2.shape) != 4:
        raise ShapeError(
            f"x {fmt_shape(x.shape)}, w1 {fmt_shape(w1.shape)}, w2 {fmt_shape(w2.shape)}: "
            "2-d convolutions (4-d operands)",
            op=_NAME,
        )
    cmid = w1.shape[0]
    if tuple(w1.shape[1:]) != (x.shape[1], 1, 1) or tuple(w2.shape[:2]) != (cmid, 1):
        raise ShapeError(
            f"w1 {fmt_shape(w1.shape)} must be (C, {x.shape[1]}, 1, 1) and w2 "
            f"{fmt_shape(w2.shape)} (C, 1, kh, kw) for x {fmt_shape(x.shape)}",
            op=_NAME,
        )
    if numel(b1.shape) != cmid or numel(b2.shape) != cmid:
        raise ShapeError(
            f"biases {fmt_shape(b1.shape)}, {fmt_shape(b2.shape)}: {cmid} values each", op=_NAME
        )
    p = conv_geometry(
        _depthwise_attrs(cmid, stride, padding, dilation), x.shape[2:], tuple(w2.shape)
    )
    return TensorType((x.shape[0], cmid, *p.out_size), x.dtype)


def _clamped(v: np.ndarray, clamp) -> np.ndarray:
    """``v`` bounded as a `Clamp` (lo, hi, lo takes ties, hi takes ties): NaN stays."""
    if clamp is None:
        return v
    lo, hi, lo_ties, hi_ties = clamp
    lo, hi = np.asarray(lo, v.dtype), np.asarray(hi, v.dtype)
    v = np.where((v <= lo) if lo_ties else (v < lo), lo, v)
    return np.where((v >= hi) if hi_ties else (v > hi), hi, v)


def _kernel(x, w1, b1, w2, b2, *, stride, padding, dilation, clamp1, clamp2):
    cmid = w1.shape[0]
    p1 = conv_geometry(_POINTWISE, x.shape[2:], w1.shape)
    e = _clamped(conv_forward(x, w1, p1, 1) + b1.reshape(1, cmid, 1, 1), clamp1)
    attrs = _depthwise_attrs(cmid, stride, padding, dilation)
    p2 = conv_geometry(attrs, x.shape[2:], w2.shape)
    y = conv_forward(e.astype(x.dtype, copy=False), w2, p2, cmid)
    return _clamped(y + b2.reshape(1, cmid, 1, 1), clamp2).astype(x.dtype, copy=False)


def _cost(in_types, out_types, attrs) -> Cost:
    x, w1, _, w2, _ = in_types
    y = out_types[0]
    expansion = 2 * x.shape[0] * numel(x.shape[2:]) * w1.shape[0] * x.shape[1]
    depthwise = 2 * numel(y.shape) * numel(w2.shape[2:])
    return Cost(expansion + depthwise, io_bytes(in_types, out_types))


def _plan(node):
    x, _, _, w2, _ = (v.type for v in node.inputs)
    a = node.attrs
    attrs = _depthwise_attrs(w2.shape[0], a["stride"], a["padding"], a["dilation"])
    return conv_geometry(attrs, x.shape[2:], tuple(w2.shape))


def _c_step(node):
    from ..kernels import cinverted_residual

    x, w1, _, w2, _ = (v.type for v in node.inputs)
    clamps = (node.attrs["clamp1"], node.attrs["clamp2"])
    return cinverted_residual.step(x.shape, w1.shape, w2.shape, _plan(node), x.dtype.np, clamps)


def _fast(x, w1, b1, w2, b2, *, stride, padding, dilation, clamp1, clamp2):
    """The C kernel (kernels/cinverted_residual.py), or None where it does not run (eager
    calls and generated code run `OpDef.run`, which tries it first)."""
    from ..kernels import cinverted_residual

    if x.dtype.kind != "f":
        return None
    attrs = _depthwise_attrs(w1.shape[0], stride, padding, dilation)
    p = conv_geometry(attrs, x.shape[2:], w2.shape)
    return cinverted_residual.forward(x, w1, b1, w2, b2, p, (clamp1, clamp2))


# ------------------------------------------------------------------------------ the pattern


def _sole_reader(value, node) -> bool:
    """Whether ``node`` reads ``value`` and nothing else does (and the graph returns none)."""
    if len(value.users) != 1 or value.users[0] is not node:
        return False
    return not any(v is value for v in node.graph.outputs)


def _stage(node, depthwise: bool):
    """(x, w, bias value, clamp, attrs) of a ``fused_epilogue`` node of ``conv`` whose C store
    adds a bias, optionally clamps and gives one float output; None otherwise."""
    if node.kind != "call" or node.op is not FUSED_EPILOGUE:
        return None
    if node.attrs["producer"] is not CONV or len(node.outputs) != 1:
        return None
    found = epilogue_plan(node, _conv_infer, _compiled)
    if found is None:
        return None
    spec, attrs, _ = found
    if spec.value != 0 or spec.mask is not None or spec.residual is not None:
        return None
    if spec.activation is not None:  # (kernels/cinverted_residual.py's stores clamp only)
        return None
    n, slot = node.attrs["n_producer"], node.attrs["slot"]
    if spec.own_bias:
        bias = node.inputs[2]
    elif spec.bias is not None:
        bias = node.inputs[n + spec.bias - (spec.bias > slot)]
    else:
        return None
    x, w = node.inputs[:2]
    channels = w.shape[0]
    if numel(bias.shape) != channels or bias.type.dtype is not x.type.dtype:
        return None
    if depthwise and not (attrs["groups"] == channels == x.shape[1] and w.shape[1] == 1):
        return None
    if not depthwise and any(attrs[k] != v for k, v in _POINTWISE.items()):
        return None
    return x, w, bias, spec.clamp, attrs


def _match(op, node, constant):
    from ..kernels import cinverted_residual

    second = _stage(node, depthwise=True)
    if second is None or len(node.inputs[0].shape) != 4:
        return None
    mid, w2, b2, clamp2, attrs = second
    first = _stage(mid.node, depthwise=False)
    if first is None or not _sole_reader(mid, node):
        return None
    x, w1, b1, clamp1, _ = first
    if x.type.dtype not in (dt.float32, dt.float64) or tuple(w1.shape[2:]) != (1, 1):
        return None
    p = conv_geometry(attrs, tuple(mid.shape[2:]), tuple(w2.shape))
    shapes = (tuple(x.shape), tuple(w1.shape), tuple(w2.shape))
    if not cinverted_residual.pays(*shapes, p, x.type.dtype.np, (clamp1, clamp2)):
        return None
    new_attrs = {
        "stride": attrs["stride"],
        "padding": attrs["padding"],
        "dilation": attrs["dilation"],
        "clamp1": clamp1,
        "clamp2": clamp2,
    }

    def build(graph):
        return graph.add_call(op, [x, w1, b1, w2, b2], new_attrs).outputs[0]

    return build


def _onnx_clip(e, value: str, clamp) -> str:
    if clamp is None:
        return value
    dtype = e.in_types[0].dtype
    return e.node("Clip", [value, e.scalar(clamp[0], dtype), e.scalar(clamp[1], dtype)])


def _onnx(e):
    """Its members as ONNX writes them: Conv (1x1), Clip, Conv (one group per channel),
    Clip (a clamp's ties only choose between equal values; NaN as Clip does)."""
    from ._onnx_conv import onnx_conv

    x, w1, b1, w2, b2 = e.inputs
    a = e.attrs
    # (a bias of any shape with one value per channel, (1, C, 1, 1) from an epilogue: Conv's B
    # is 1-D)
    b1, b2 = (e.node("Reshape", [b, e.ints([-1])]) for b in (b1, b2))
    mid = e.node("Conv", [x, w1, b1], strides=[1, 1], pads=[0, 0, 0, 0], dilations=[1, 1])
    mid = _onnx_clip(e, mid, a["clamp1"])
    attrs = _depthwise_attrs(e.in_types[1].shape[0], a["stride"], a["padding"], a["dilation"])
    y = onnx_conv(_Members(e, [mid, w2, b2], attrs))
    return _onnx_clip(e, y, a["clamp2"])


class _Members:
    """The export context ``e`` seen by a member op's rule: its own inputs and attributes."""

    def __init__(self, e, inputs, attrs):
        self._e, self.inputs, self.attrs = e, inputs, attrs

    def __getattr__(self, name):
        return getattr(self._e, name)


POINTWISE_DEPTHWISE = register(
    OpDef(
        name=_NAME,
        kind="nn",
        infer=_infer,
        kernel=_kernel,
        vjp=None,
        cost=_cost,
        fast=_fast,
        c_step=_c_step,
        onnx=_onnx,
        flop_family="conv",
        batch=None,
        pattern=PatternRule(roots=(FUSED_EPILOGUE,), match=_match),
        doc="pointwise_depthwise(x, w1, b1, w2, b2; stride, padding, dilation, clamp1, clamp2): "
        "clamp2(depthwise conv(clamp1(conv1x1(x, w1) + b1), w2) + b2), an inverted residual "
        "block's expansion and depthwise convolution in one kernel",
    )
)
