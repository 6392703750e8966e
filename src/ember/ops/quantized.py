"""Integer compute on quantized values: ``quantized_linear`` and ``quantized_conv2d``.

Operands: ``x`` uint8 or int8 activations quantized per tensor (attributes ``x_scale``,
``x_zero_point``), ``w`` int8 weights quantized symmetrically per output channel (zero point 0)
with float32 ``w_scale`` (one per output channel) and a float32 ``bias``. The products
accumulate exactly in int32: ``acc = sum_k (x - x_zero_point) * w`` (K is refused above
`MAX_K`, where int32 could overflow). The epilogue then computes, per output channel ``c``,

    ``y = float32(double(acc) * double(s[c]) + double(bias[c]))``, ``s = float32(x_scale) *
    w_scale`` (float32 product), then ``max(y, 0)`` with ``relu``,

and returns ``y`` (``out_dtype`` float32), or ``acc`` itself (``out_dtype`` int32: the
scale, bias and ReLU are then ignored; dynamic quantization scales the sums with tensors of its
own), or requantizes it, ``clamp(rint(y / out_scale) +
out_zero_point)`` in float32, to uint8 or int8 (``out_dtype``). The NumPy kernels here are the
specification; kernels/cq8.py (AVX512-VNNI where present) equals them bit for bit.

These ops are inference-only (no gradient: their operands are integers). Their ONNX form is
QDQ: DequantizeLinear on the activation and on the weight (per axis 0), the float MatMul /
Conv, bias, Relu, and a QuantizeLinear for a requantized result; onnxruntime fuses such
patterns into its integer kernels where it can, and otherwise computes in float32 on the same
dequantized values (tests/quantization compare it with ember's integer result).
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..errors import DTypeError, ShapeError
from ..kernels import cq8
from ..kernels.conv_plan import conv_out_size
from ..types import TensorType
from . import _attr_rules as R
from ._registry import Cost, OpDef, register
from ._util import fmt_shape, io_bytes, numel
from .quantize import check_params, qrange

MAX_K = cq8.MAX_K
_OUT = ("float32", "uint8", "int8", "int32")


def _check_out(op, out):
    if out["out_dtype"] in ("uint8", "int8"):
        lo, hi = qrange(out["out_dtype"])
        scale = out["out_scale"]
        check_params(op, float("nan") if scale is None else scale, out["out_zero_point"], lo,
                     hi)  # fmt: skip


def _check_input(op, x, x_scale, x_zero_point):
    lo, hi = qrange(x.dtype)
    check_params(op, x_scale, x_zero_point, lo, hi)


def _check(op, x, w, w_scale, bias, out_dtype, k):
    if x.dtype.name not in ("uint8", "int8"):
        raise DTypeError(f"activations must be uint8 or int8, got {x.dtype}", op=op)
    if w.dtype is not dt.int8:
        raise DTypeError(f"weights must be int8, got {w.dtype}", op=op)
    for name, p in (("w_scale", w_scale), ("bias", bias)):
        if p.dtype is not dt.float32 or tuple(p.shape) != (w.shape[0],):
            raise ShapeError(
                f"{name} must be float32 of shape ({w.shape[0]},), got {p.dtype} "
                f"{fmt_shape(p.shape)}",
                op=op,
            )
    if out_dtype not in _OUT:
        raise DTypeError(f"out_dtype must be one of {_OUT}, got {out_dtype!r}", op=op)
    if isinstance(k, int) and k > MAX_K:
        raise ShapeError(f"K = {k} products could overflow int32 (at most {MAX_K})", op=op)


def _scales(x_scale, w_scale) -> np.ndarray:
    return np.float32(x_scale) * w_scale.astype(np.float32)


def epilogue(acc, scale, bias, *, relu, out_dtype, out_scale, out_zero_point, axis):
    """The ops' epilogue on int32 sums ``acc`` (channels along ``axis``), in NumPy."""
    if out_dtype == "int32":
        return acc
    shape = [1] * acc.ndim
    shape[axis] = -1
    s = scale.astype(np.float64).reshape(shape)
    b = bias.astype(np.float64).reshape(shape)
    y = (acc.astype(np.float64) * s + b).astype(np.float32)
    if relu:
        y = np.where(y > 0, y, np.float32(0))
    if out_dtype == "float32":
        return y
    lo, hi = qrange(out_dtype)
    q = np.rint(y / np.float32(out_scale)) + np.float32(out_zero_point)
    return np.clip(q, lo, hi).astype(out_dtype)


def _out_attrs(attrs):
    keys = ("relu", "out_dtype", "out_scale", "out_zero_point")
    return {k: attrs[k] for k in keys}


# ------------------------------------------------------------------------------- linear


def _linear_infer(x, w, w_scale, bias, *, x_scale, x_zero_point, **out):
    if len(x.shape) < 1 or len(w.shape) != 2 or x.shape[-1] != w.shape[1]:
        raise ShapeError(
            f"x {fmt_shape(x.shape)} and w {fmt_shape(w.shape)}: need x (..., K), w (N, K)",
            op="quantized_linear",
        )
    _check("quantized_linear", x, w, w_scale, bias, out["out_dtype"], w.shape[1])
    _check_out("quantized_linear", out)
    _check_input("quantized_linear", x, x_scale, x_zero_point)
    return TensorType(tuple(x.shape[:-1]) + (w.shape[0],), dt.as_dtype(out["out_dtype"]))


def linear_acc(x, w, x_zero_point) -> np.ndarray:
    """int32 sums ``(x - zp) @ w.T``: float64 products and sums are exact here (|terms| below
    2**15, at most MAX_K of them)."""
    a = x.astype(np.float64) - float(x_zero_point)
    return (a @ w.astype(np.float64).T).astype(np.int32)


def _linear_kernel(x, w, w_scale, bias, *, x_scale, x_zero_point, **out):
    acc = linear_acc(x.reshape(-1, x.shape[-1]), w, x_zero_point)
    y = epilogue(acc, _scales(x_scale, w_scale), bias, axis=1, **_out_attrs(out))
    return y.reshape(x.shape[:-1] + (w.shape[0],))


def _linear_fast(x, w, w_scale, bias, *, x_scale, x_zero_point, **out):
    flat = x.reshape(-1, x.shape[-1])
    y = cq8.linear(flat, w, _scales(x_scale, w_scale), bias, x_zero_point=x_zero_point,
                   **_c_out(out))  # fmt: skip
    return None if y is None else y.reshape(x.shape[:-1] + (w.shape[0],))


def _c_out(out):
    return {
        "out_dtype": out["out_dtype"],
        "relu": out["relu"],
        "out_scale": 1.0 if out["out_scale"] is None else out["out_scale"],
        "out_zero_point": out["out_zero_point"],
    }


def _linear_cost(in_types, out_types, attrs) -> Cost:
    x, w = in_types[0], in_types[1]
    return Cost(2 * numel(x.shape) * w.shape[0], io_bytes(in_types, out_types))


def _linear_workspace(node, layouts) -> int:
    """kernels/cq8's NumPy temporaries: the weights padded to whole groups of 4 (int8), their
    row corrections (int32), the per-channel scales and bias (float32)."""
    w = node.inputs[1]
    if not all(isinstance(d, int) for d in w.shape):
        return 0
    o, k = w.shape
    return o * (-(-k // 4) * 4) + 4 * o + 2 * 4 * o


def _onnx_qdq(e, compute, integer):
    """DQ(x), DQ(w) per output channel, ``compute(x_f, w_f) -> name``, bias, Relu, Q; the
    int32 sums alone through ``integer(x_zero_point) -> name`` (MatMulInteger, ConvInteger)."""
    a = e.attrs
    if a["out_dtype"] == "int32":
        zp = e.constant(np.asarray(a["x_zero_point"], e.in_types[0].dtype.np))
        return integer(zp)
    xt = e.in_types[0].dtype
    x_s = e.constant(np.asarray(a["x_scale"], np.float32))
    x_zp = e.constant(np.asarray(a["x_zero_point"], xt.np))
    xf = e.node("DequantizeLinear", [e.inputs[0], x_s, x_zp])
    w_zp = e.constant(np.zeros(e.in_types[1].shape[0], np.int8))
    wf = e.node("DequantizeLinear", [e.inputs[1], e.inputs[2], w_zp], axis=0)
    y = compute(xf, wf)
    if a["relu"]:
        y = e.node("Relu", [y])
    if a["out_dtype"] == "float32":
        return y
    o_s = e.constant(np.asarray(a["out_scale"], np.float32))
    o_zp = e.constant(np.asarray(a["out_zero_point"], np.dtype(a["out_dtype"])))
    return e.node("QuantizeLinear", [y, o_s, o_zp])


def _onnx_linear(e):
    def compute(xf, wf):
        y = e.node("MatMul", [xf, e.node("Transpose", [wf], perm=[1, 0])])
        return e.node("Add", [y, e.inputs[3]])

    def integer(zp):
        wt = e.node("Transpose", [e.inputs[1]], perm=[1, 0])
        return e.node("MatMulInteger", [e.inputs[0], wt, zp])

    return _onnx_qdq(e, compute, integer)


# attribute rules (ops/_attr_rules.py): what a graph file may hold
QUANTIZED_LINEAR_ATTRS = {
    "x_scale": R.Float(0, finite=True),
    "x_zero_point": R.Int(-128, 256),  # (uint8's or int8's range)
    "out_scale": R.Optional(R.Float(0, finite=True)),
    "out_zero_point": R.Int(-128, 256),
    "out_dtype": R.Choice(*_OUT),
    "relu": R.Bool(),
}
QUANTIZED_CONV_ATTRS = {
    **QUANTIZED_LINEAR_ATTRS,
    "stride": R.Ints(1, arity=2),
    "padding": R.Ints(0, arity=2),
    "dilation": R.Ints(1, arity=2),
    "groups": R.Int(1),
}


QUANTIZED_LINEAR = register(
    OpDef(
        name="quantized_linear",
        attrs=QUANTIZED_LINEAR_ATTRS,
        kind="linalg",
        infer=_linear_infer,
        kernel=_linear_kernel,
        fast=_linear_fast,
        cost=_linear_cost,
        workspace=_linear_workspace,
        onnx=_onnx_linear,
        doc="quantized_linear(x u8/s8, w s8, w_scale, bias; x_scale, x_zero_point, relu, "
        "out_dtype, out_scale, out_zero_point): int32-accumulated x @ w.T, dequantized",
    )
)


# --------------------------------------------------------------------------- convolution


def _conv_infer(x, w, w_scale, bias, *, x_scale, x_zero_point, stride, padding, dilation,
                groups, **out):  # fmt: skip
    op = "quantized_conv2d"
    if len(x.shape) != 4 or len(w.shape) != 4:
        raise ShapeError(
            f"x {fmt_shape(x.shape)}, w {fmt_shape(w.shape)}: need (N, C, H, W) and "
            "(O, C / groups, kh, kw)",
            op=op,
        )
    if x.shape[1] != w.shape[1] * groups or w.shape[0] % groups:
        raise ShapeError(
            f"x has {x.shape[1]} channels, w {fmt_shape(w.shape)} with groups={groups}", op=op
        )
    _check(op, x, w, w_scale, bias, out["out_dtype"], w.shape[1] * w.shape[2] * w.shape[3])
    _check_out(op, out)
    _check_input(op, x, x_scale, x_zero_point)
    pads = tuple((p, p) for p in padding)
    spatial = conv_out_size(tuple(x.shape[2:]), tuple(w.shape[2:]), stride, pads, dilation)
    if any(isinstance(s, int) and s < 1 for s in spatial):
        raise ShapeError(f"the window {fmt_shape(w.shape[2:])} leaves no output", op=op)
    return TensorType((x.shape[0], w.shape[0]) + spatial, dt.as_dtype(out["out_dtype"]))


def conv_acc(x, w, x_zero_point, stride, padding, dilation, groups) -> np.ndarray:
    """int32 sums of ``(x - zp) * w`` over each window (padding holds the zero point, the
    value 0), in float64 (exact, as `linear_acc`)."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    a = x.astype(np.float64) - float(x_zero_point)
    a = np.pad(a, ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2))
    oh = (h + 2 * padding[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + 2 * padding[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    cols = np.empty((n, c, kh, kw, oh, ow))
    for i in range(kh):
        for j in range(kw):
            y0, x0 = i * dilation[0], j * dilation[1]
            cols[:, :, i, j] = a[:, :, y0 : y0 + stride[0] * oh : stride[0],
                                 x0 : x0 + stride[1] * ow : stride[1]]  # fmt: skip
    og = o // groups
    out = np.empty((n, o, oh, ow))
    for g in range(groups):
        part = cols[:, g * cg : (g + 1) * cg].reshape(n, cg * kh * kw, oh * ow)
        wg = w[g * og : (g + 1) * og].reshape(og, -1).astype(np.float64)
        out[:, g * og : (g + 1) * og] = np.matmul(wg, part).reshape(n, og, oh, ow)
    return out.astype(np.int32)


def _conv_kernel(x, w, w_scale, bias, *, x_scale, x_zero_point, stride, padding, dilation,
                 groups, **out):  # fmt: skip
    acc = conv_acc(x, w, x_zero_point, stride, padding, dilation, groups)
    return epilogue(acc, _scales(x_scale, w_scale), bias, axis=1, **_out_attrs(out))


def _conv_fast(x, w, w_scale, bias, *, x_scale, x_zero_point, stride, padding, dilation,
               groups, **out):  # fmt: skip
    return cq8.conv2d(x, w, _scales(x_scale, w_scale), bias, x_zero_point=x_zero_point,
                      stride=stride, padding=padding, dilation=dilation, groups=groups,
                      **_c_out(out))  # fmt: skip


def _conv_workspace(node, layouts) -> int:
    """kernels/cq8's NumPy temporaries beyond the result: the input padded with its zero point
    (where there is padding) and `_linear_workspace`'s. (The C kernel's packed panels, K * 256
    bytes per thread, are malloc'ed in C, outside what the plan counts.)"""
    x, w = node.inputs[0], node.inputs[1]
    shape = tuple(x.shape) + tuple(w.shape)
    if not all(isinstance(d, int) for d in shape):
        return 0
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    ph, pw = node.attrs["padding"]
    padded = n * c * (h + 2 * ph) * (wd + 2 * pw) if ph or pw else 0
    k4 = -(-(cg * kh * kw) // 4) * 4
    return padded + o * k4 + 4 * o + 2 * 4 * o


def _conv_cost(in_types, out_types, attrs) -> Cost:
    w = in_types[1]
    k = w.shape[1] * w.shape[2] * w.shape[3]
    return Cost(2 * numel(out_types[0].shape) * k, io_bytes(in_types, out_types))


def _onnx_conv(e):
    a = e.attrs
    kh, kw = e.in_types[1].shape[2:]

    geometry = {
        "strides": list(a["stride"]),
        "pads": [a["padding"][0], a["padding"][1], a["padding"][0], a["padding"][1]],
        "dilations": list(a["dilation"]),
        "group": a["groups"],
        "kernel_shape": [kh, kw],
    }

    def compute(xf, wf):
        return e.node("Conv", [xf, wf, e.inputs[3]], **geometry)

    def integer(zp):
        return e.node("ConvInteger", [e.inputs[0], e.inputs[1], zp], **geometry)

    return _onnx_qdq(e, compute, integer)


QUANTIZED_CONV2D = register(
    OpDef(
        name="quantized_conv2d",
        attrs=QUANTIZED_CONV_ATTRS,
        kind="nn",
        infer=_conv_infer,
        kernel=_conv_kernel,
        fast=_conv_fast,
        cost=_conv_cost,
        workspace=_conv_workspace,
        onnx=_onnx_conv,
        flop_family="conv",
        doc="quantized_conv2d(x u8/s8, w s8, w_scale, bias; x_scale, x_zero_point, stride, "
        "padding, dilation, groups, relu, out_dtype, out_scale, out_zero_point)",
    )
)
