"""Affine quantization as ops: ``quantize_per_tensor``, ``quantize_per_channel``,
``dequantize`` and PyTorch's ``fake_quantize_per_tensor_affine`` /
``fake_quantize_per_channel_affine`` (straight-through gradients).

Representation. Given ``ember.uint8`` or ``ember.int8``, a quantized value is a plain integer
tensor ``q`` plus its parameters, kept by whoever made it (ember.quantization's modules keep
them as attributes and buffers): a per-tensor ``scale`` (float) and ``zero_point`` (int), or
per-channel ``scales`` (float32 tensor) and ``zero_points`` (int tensor) along ``axis``. The
real value is ``(q - zero_point) * scale``. ``torch.quantize_per_tensor(x, s, z, torch.quint8)
.int_repr()`` is ``ember.quantize_per_tensor(x, s, z, ember.uint8)``, and ``x.dequantize()``
is ``ember.dequantize(q, s, z)``. Given PyTorch's quantized dtypes (``ember.quint8``,
``qint8``, ``qint32``), these functions make PyTorch's quantized tensors (ops/qtensor.py, with
PyTorch's own rounding).

Rounding. ``q = clamp(rint(x / scale) + zero_point, qmin, qmax)``, half to even, dividing (as
ONNX's QuantizeLinear and onnxruntime do, so an export reproduces ember bit for bit; PyTorch
multiplies by ``1 / scale`` in float32, which can round the other way when ``x / scale`` lies
within a rounding error of a half: one step apart, only there). A per-tensor scale is a
float32 (as in ONNX and in PyTorch's kernels). float16, bfloat16 and float32 inputs compute in
float32, float64 in float64. A NaN quantizes to the zero point (the value
0). The fake quantizers compute ``(q - zero_point) * scale`` in the input's dtype (per
tensor, in float32 and then cast, as PyTorch does for every dtype); their
gradient passes the incoming gradient where ``rint(x / scale) + zero_point`` lies in
``[quant_min, quant_max]`` and is zero elsewhere (PyTorch's straight-through estimator).
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as dt
from ..errors import DTypeError, QuantizationError, ShapeError
from ..kernels import cq8
from ..types import TensorType
from . import _attr_rules as R
from . import qtensor
from ._registry import OpDef, TensorBase, apply, export, register
from ._util import elementwise_cost, normalize_axis, require_float
from .promotion import to_tensor

_RANGES = {"uint8": (0, 255), "int8": (-128, 127)}


def qrange(dtype) -> tuple[int, int]:
    """(min, max) of a quantized dtype (uint8 or int8)."""
    return _RANGES[dt.as_dtype(dtype).name]


def check_params(op: str, scale: float, zero_point: int, lo: int, hi: int) -> None:
    """A per-tensor scale must be positive and finite, a zero point inside [lo, hi]."""
    if not (math.isfinite(scale) and scale > 0):
        raise QuantizationError(f"scale must be positive and finite, got {scale}", op=op)
    if not lo <= zero_point <= hi:
        raise QuantizationError(f"zero_point {zero_point} is outside [{lo}, {hi}]", op=op)


def _compute_dtype(dtype: np.dtype):
    return np.float64 if dtype == np.float64 else np.float32


def quantize_array(x: np.ndarray, scale, zero_point, lo: int, hi: int, out: np.dtype):
    """clamp(rint(x / scale) + zero_point) (scale and zero point broadcast against x)."""
    ct = _compute_dtype(x.dtype)
    zp = np.asarray(zero_point).astype(ct)
    # one temporary of x's shape in the compute dtype, updated in place (`quantize_workspace`)
    v = np.divide(x, np.asarray(scale).astype(ct), dtype=ct)
    np.rint(v, out=v)
    np.add(v, zp, out=v)
    # (a boolean mask, the size the result has later: nan_to_num would allocate more)
    np.copyto(v, np.broadcast_to(zp, v.shape), where=np.isnan(v))
    np.clip(v, lo, hi, out=v)
    return v.astype(out)


def quantize_workspace(node, layouts) -> int:
    """`quantize_array`'s temporary: the input's shape in its compute dtype."""
    x = node.inputs[0]
    if not all(isinstance(d, int) for d in x.shape):
        return 0
    return math.prod(x.shape) * np.dtype(_compute_dtype(x.dtype.np)).itemsize


def _channel_shape(ndim: int, axis: int, size: int) -> tuple:
    return tuple(size if i == axis else 1 for i in range(ndim))


# ------------------------------------------------------------------------- per tensor


def _q_infer(x, *, scale, zero_point, dtype):
    require_float("quantize_per_tensor", x)
    return TensorType(tuple(x.shape), dtype)


def _q_workspace(node, layouts) -> int:
    # the C kernel (kernels/cq8.py) writes the result directly; NumPy's needs a temporary
    if node.inputs[0].dtype is dt.float32 and _c_available():
        return 0
    return quantize_workspace(node, layouts)


def _c_available() -> bool:
    from ..kernels import ccompile

    return ccompile.compiler_available()


def _q_kernel(x, *, scale, zero_point, dtype):
    lo, hi = qrange(dtype)
    return quantize_array(x, np.float32(scale), zero_point, lo, hi, dtype.np)


def _q_fast(x, *, scale, zero_point, dtype):
    return cq8.quantize(x, scale, zero_point, dtype.name)


def _onnx_quantize(e):
    if e.in_types[0].dtype is not dt.float32:
        e.unsupported("ONNX quantizes float32 (ember also quantizes float64 and half types)")
    dtype = e.out_types[0].dtype
    scale = e.constant(np.asarray(e.attrs["scale"], np.float32))
    zp = e.constant(np.asarray(e.attrs["zero_point"], dtype.np))
    return e.node("QuantizeLinear", [e.inputs[0], scale, zp])


FAKE_QUANTIZE_BACKWARD_ATTRS = {  # (ops/_attr_rules.py: what a graph file may hold)
    "scale": R.Float(0, finite=True),
    "zero_point": R.Int(-(2**31), 2**31),
    "quant_min": R.Int(-(2**31), 2**31),
    "quant_max": R.Int(-(2**31), 2**31),
}


QUANTIZE_PER_TENSOR = register(
    OpDef(
        name="quantize_per_tensor",
        kind="elementwise",
        infer=_q_infer,
        kernel=_q_kernel,
        fast=_q_fast,
        cost=elementwise_cost(4),
        workspace=_q_workspace,
        onnx=_onnx_quantize,
        doc="quantize_per_tensor(x; scale, zero_point, dtype): clamp(rint(x / scale) + zp)",
    )
)


def _dq_infer(q, *, scale, zero_point):
    if q.dtype.name not in _RANGES:
        raise DTypeError(f"expected a uint8 or int8 tensor, got {q.dtype}", op="dequantize")
    return TensorType(tuple(q.shape), dt.float32)


def _dq_kernel(q, *, scale, zero_point):
    out = q.astype(np.float32)
    out -= np.float32(zero_point)
    out *= np.float32(scale)
    return out


def _onnx_dequantize(e):
    scale = e.constant(np.asarray(e.attrs["scale"], np.float32))
    zp = e.constant(np.asarray(e.attrs["zero_point"], e.in_types[0].dtype.np))
    return e.node("DequantizeLinear", [e.inputs[0], scale, zp])


DEQUANTIZE_PER_TENSOR = register(
    OpDef(
        name="dequantize_per_tensor",
        kind="elementwise",
        infer=_dq_infer,
        kernel=_dq_kernel,
        cost=elementwise_cost(2),
        onnx=_onnx_dequantize,
        doc="dequantize_per_tensor(q; scale, zero_point): (q - zero_point) * scale, float32",
    )
)


# ------------------------------------------------------------------------ per channel


def _check_channel(op, x, scales, zero_points, axis):
    a = normalize_axis(op, axis, len(x.shape))
    want = (x.shape[a],)
    for name, p in (("scales", scales), ("zero_points", zero_points)):
        if tuple(p.shape) != want:
            raise ShapeError(
                f"{name} must have shape {want} (x.shape[{a}]), got {tuple(p.shape)}", op=op
            )
    if not scales.dtype.is_floating_point:
        raise DTypeError(f"scales must be floating point, got {scales.dtype}", op=op)
    if zero_points.dtype.is_floating_point or zero_points.dtype is dt.bool_:
        raise DTypeError(f"zero_points must be integers, got {zero_points.dtype}", op=op)
    return a


def _qc_infer(x, scales, zero_points, *, axis, dtype):
    require_float("quantize_per_channel", x)
    _check_channel("quantize_per_channel", x, scales, zero_points, axis)
    return TensorType(tuple(x.shape), dtype)


def _qc_kernel(x, scales, zero_points, *, axis, dtype):
    lo, hi = qrange(dtype)
    shape = _channel_shape(x.ndim, axis % x.ndim, x.shape[axis])
    return quantize_array(x, scales.reshape(shape), zero_points.reshape(shape), lo, hi, dtype.np)


def _onnx_quantize_channel(e):
    if e.in_types[0].dtype is not dt.float32:
        e.unsupported("ONNX quantizes float32 (ember also quantizes float64 and half types)")
    dtype = e.out_types[0].dtype
    scale = e.cast(e.inputs[1], dt.float32)
    zp = e.cast(e.inputs[2], dtype)
    axis = e.attrs["axis"] % len(e.in_types[0].shape)
    return e.node("QuantizeLinear", [e.inputs[0], scale, zp], axis=axis)


QUANTIZE_PER_CHANNEL = register(
    OpDef(
        name="quantize_per_channel",
        kind="nn",
        infer=_qc_infer,
        kernel=_qc_kernel,
        cost=elementwise_cost(4),
        workspace=quantize_workspace,
        onnx=_onnx_quantize_channel,
        batch=None,
        doc="quantize_per_channel(x, scales, zero_points; axis, dtype): per-channel affine",
    )
)


def _dqc_infer(q, scales, zero_points, *, axis):
    if q.dtype.name not in _RANGES:
        raise DTypeError(f"expected a uint8 or int8 tensor, got {q.dtype}", op="dequantize")
    _check_channel("dequantize", q, scales, zero_points, axis)
    return TensorType(tuple(q.shape), dt.float32)


def _dqc_kernel(q, scales, zero_points, *, axis):
    shape = _channel_shape(q.ndim, axis % q.ndim, q.shape[axis])
    zp = zero_points.reshape(shape).astype(np.float32)
    return (q.astype(np.float32) - zp) * scales.reshape(shape).astype(np.float32)


def _onnx_dequantize_channel(e):
    scale = e.cast(e.inputs[1], dt.float32)
    zp = e.cast(e.inputs[2], e.in_types[0].dtype)
    axis = e.attrs["axis"] % len(e.in_types[0].shape)
    return e.node("DequantizeLinear", [e.inputs[0], scale, zp], axis=axis)


DEQUANTIZE_PER_CHANNEL = register(
    OpDef(
        name="dequantize_per_channel",
        kind="nn",
        infer=_dqc_infer,
        kernel=_dqc_kernel,
        cost=elementwise_cost(2),
        onnx=_onnx_dequantize_channel,
        batch=None,
        doc="dequantize_per_channel(q, scales, zero_points; axis): (q - zp[c]) * scales[c]",
    )
)


# ----------------------------------------------------------------------- fake quantize


def _fq_infer(x, *params, axis=None, scale=None, zero_point=None, quant_min, quant_max):
    require_float("fake_quantize", x)
    if params and axis is not None:
        _check_channel("fake_quantize_per_channel_affine", x, params[0], params[1], axis)
    elif params:  # per tensor, the scale and zero point as one-element tensors
        op = "fake_quantize_per_tensor_affine"
        for name, p in (("scale", params[0]), ("zero_point", params[1])):
            if math.prod(p.shape) != 1:
                raise ShapeError(f"{name} must have one element, got shape {tuple(p.shape)}",
                                 op=op)  # fmt: skip
            if p.dtype is dt.bool_ or p.dtype.is_complex:
                raise DTypeError(f"{name} must be real numbers, got {p.dtype}", op=op)
    return TensorType(tuple(x.shape), x.dtype)


def _fq_params(x, params, axis, scale, zero_point):
    if not params:
        return np.asarray(scale, np.float32), np.asarray(zero_point)
    if axis is None:  # (PyTorch reads the tensors as the float scale and the int zero point)
        return params[0].reshape(()).astype(np.float32), params[1].reshape(()).astype(np.int64)
    shape = _channel_shape(x.ndim, axis % x.ndim, x.shape[axis])
    return params[0].reshape(shape), params[1].reshape(shape)


def _fq_kernel(x, *params, axis=None, scale=None, zero_point=None, quant_min, quant_max):
    s, z = _fq_params(x, params, axis, scale, zero_point)
    ct = _compute_dtype(x.dtype)
    q = quantize_array(x, s, z, quant_min, quant_max, ct)
    # per tensor, PyTorch multiplies back in float32 whatever the input's dtype
    back = ct if axis is not None else np.float32
    return ((q - z.astype(ct)).astype(back) * s.astype(back)).astype(x.dtype)


def _fq_mask(x, *params, axis=None, scale=None, zero_point=None, quant_min, quant_max):
    s, z = _fq_params(x, params, axis, scale, zero_point)
    ct = _compute_dtype(x.dtype)
    v = np.rint(x.astype(ct) / s.astype(ct)) + z.astype(ct)
    return (v >= quant_min) & (v <= quant_max)


def _fq_grad_infer(g, x, *params, **attrs):
    return TensorType(tuple(x.shape), x.dtype)


def _fq_grad_kernel(g, x, *params, **attrs):
    return np.where(_fq_mask(x, *params, **attrs), g, np.zeros((), g.dtype))


def _fq_grad_vjp(c, a):
    # linear in g under the same mask; piecewise constant in x and the parameters
    return (apply(FAKE_QUANTIZE_BACKWARD, a, *c.inputs[1:], **c.attrs),) + (None,) * (
        len(c.inputs) - 1
    )


def _onnx_fq_grad(e):
    """Where(rint(x / s) + zp in [quant_min, quant_max], g, 0), in `_fq_mask`'s dtype."""
    g, x = e.inputs[0], e.inputs[1]
    xt = e.in_types[1].dtype
    ct = dt.float64 if xt is dt.float64 else dt.float32
    xc = x if xt is ct else e.cast(x, ct)
    a = e.attrs
    if len(e.inputs) == 2:
        s = e.constant(np.asarray(np.float32(a["scale"]), ct.np))
        z = e.constant(np.asarray(a["zero_point"], ct.np))
    elif a.get("axis") is None:  # per tensor, from one-element tensors
        scalar = e.ints([])
        s32 = e.cast(e.node("Reshape", [e.inputs[2], scalar]), dt.float32)
        s = s32 if ct is dt.float32 else e.cast(s32, ct)
        z = e.cast(e.node("Reshape", [e.inputs[3], scalar]), ct)
    else:
        rank = len(e.in_types[1].shape)
        axis = a["axis"] % rank
        shape = e.ints([-1 if i == axis else 1 for i in range(rank)])
        s = e.node("Reshape", [e.cast(e.inputs[2], ct), shape])
        z = e.node("Reshape", [e.cast(e.inputs[3], ct), shape])
    v = e.node("Add", [e.node("Round", [e.node("Div", [xc, s])]), z])
    inside = e.node(
        "And",
        [
            e.node("GreaterOrEqual", [v, e.constant(np.asarray(a["quant_min"], ct.np))]),
            e.node("LessOrEqual", [v, e.constant(np.asarray(a["quant_max"], ct.np))]),
        ],
    )
    zero = e.constant(np.zeros((), e.in_types[0].dtype.np))
    return e.node("Where", [inside, g, zero])


FAKE_QUANTIZE_BACKWARD = register(
    OpDef(
        name="fake_quantize_backward",
        attrs=FAKE_QUANTIZE_BACKWARD_ATTRS,
        kind="nn",
        infer=_fq_grad_infer,
        kernel=_fq_grad_kernel,
        vjp=_fq_grad_vjp,
        onnx=_onnx_fq_grad,
        cost=elementwise_cost(4),
        batch=None,
        doc="fake_quantize_backward(g, x, [scales, zero_points]): g where x quantizes in range",
    )
)


def _fq_vjp(c, g):
    grads = (apply(FAKE_QUANTIZE_BACKWARD, g, *c.inputs, **c.attrs),)
    return grads + (None,) * (len(c.inputs) - 1)


def _onnx_fake_quantize(e):
    # QuantizeLinear / DequantizeLinear: exact for the full 8-bit ranges ONNX has
    lo, hi = e.attrs["quant_min"], e.attrs["quant_max"]
    target = {(0, 255): dt.uint8, (-128, 127): dt.int8}.get((lo, hi))
    if target is None or e.in_types[0].dtype is not dt.float32:
        e.unsupported("ONNX fakes only float32 with the full uint8 or int8 range")
    if len(e.inputs) == 1:
        scale = e.constant(np.asarray(e.attrs["scale"], np.float32))
        zp = e.constant(np.asarray(e.attrs["zero_point"], target.np))
        q = e.node("QuantizeLinear", [e.inputs[0], scale, zp])
        return e.node("DequantizeLinear", [q, scale, zp])
    if e.attrs.get("axis") is None:  # per tensor, from one-element tensors
        scalar = e.ints([])
        scale = e.cast(e.node("Reshape", [e.inputs[1], scalar]), dt.float32)
        zp = e.cast(e.node("Reshape", [e.inputs[2], scalar]), target)
        q = e.node("QuantizeLinear", [e.inputs[0], scale, zp])
        return e.node("DequantizeLinear", [q, scale, zp])
    axis = e.attrs["axis"] % len(e.in_types[0].shape)
    scale = e.cast(e.inputs[1], dt.float32)
    zp = e.cast(e.inputs[2], target)
    q = e.node("QuantizeLinear", [e.inputs[0], scale, zp], axis=axis)
    return e.node("DequantizeLinear", [q, scale, zp], axis=axis)


FAKE_QUANTIZE = register(
    OpDef(
        name="fake_quantize",
        kind="nn",
        infer=_fq_infer,
        kernel=_fq_kernel,
        vjp=_fq_vjp,
        cost=elementwise_cost(6),
        onnx=_onnx_fake_quantize,
        batch=None,
        doc="fake_quantize(x, [scales, zero_points]; scale, zero_point, axis, quant_min, "
        "quant_max): quantize then dequantize, straight-through gradient",
    )
)


# ----------------------------------------------------------------------- public functions


def _quant_dtype(op: str, dtype):
    d = dt.as_dtype(dtype)
    if d.name not in _RANGES:
        raise DTypeError(f"quantizes to uint8 or int8, got {d}", op=op)
    return d


@export
def quantize_per_tensor(input, scale, zero_point, dtype):
    """``clamp(rint(input / scale) + zero_point)`` as a ``dtype`` (ember.uint8 or ember.int8)
    tensor: PyTorch's ``quantize_per_tensor(...).int_repr()`` (see ops/quantize.py for the
    rounding). Given a quantized dtype (``ember.quint8``, ``qint8``, ``qint32``), PyTorch's
    quantized tensor (ops/qtensor.py)."""
    if isinstance(dtype, dt.QuantizedDType):
        return qtensor.quantize_per_tensor(input, scale, zero_point, dtype)
    dtype = _quant_dtype("quantize_per_tensor", dtype)
    lo, hi = qrange(dtype)
    scale, zero_point = float(scale), int(zero_point)
    check_params("quantize_per_tensor", scale, zero_point, lo, hi)
    return apply(QUANTIZE_PER_TENSOR, to_tensor(input), scale=scale, zero_point=zero_point,
                 dtype=dtype)  # fmt: skip


@export
def quantize_per_channel(input, scales, zero_points, axis, dtype):
    """Per-channel ``clamp(rint(input / scales[c]) + zero_points[c])`` along ``axis`` as a
    ``dtype`` tensor: PyTorch's ``quantize_per_channel(...).int_repr()``; given a quantized
    dtype, PyTorch's quantized tensor (ops/qtensor.py)."""
    if isinstance(dtype, dt.QuantizedDType):
        return qtensor.quantize_per_channel(input, scales, zero_points, axis, dtype)
    dtype = _quant_dtype("quantize_per_channel", dtype)
    scales, zero_points = to_tensor(scales), to_tensor(zero_points)
    return apply(QUANTIZE_PER_CHANNEL, to_tensor(input), scales, zero_points, axis=int(axis),
                 dtype=dtype)  # fmt: skip


@export
def dequantize(input, scale=None, zero_point=None, axis=None):
    """The float32 values ``(input - zero_point) * scale`` of a uint8/int8 tensor: per tensor
    (Python numbers), or per channel along ``axis`` (tensors of scales and zero points). A
    quantized tensor (or a list of them: a tuple back) carries its own parameters, as in
    PyTorch's ``torch.dequantize(q)``."""
    if isinstance(input, (list, tuple)) and scale is None:
        return tuple(qtensor.dequantize(t) for t in input)
    if scale is None and zero_point is None and axis is None:
        return qtensor.dequantize(input)
    if axis is None and not isinstance(scale, TensorBase):
        q = to_tensor(input)
        if q.dtype.name in _RANGES:
            lo, hi = qrange(q.dtype)
            check_params("dequantize", float(scale), int(zero_point), lo, hi)
        return apply(DEQUANTIZE_PER_TENSOR, q, scale=float(scale), zero_point=int(zero_point))
    if axis is None:
        raise QuantizationError("per-channel scales need the axis they run along", op="dequantize")
    return apply(DEQUANTIZE_PER_CHANNEL, to_tensor(input), to_tensor(scale),
                 to_tensor(zero_point), axis=int(axis))  # fmt: skip


def _check_range(op, quant_min, quant_max):
    quant_min, quant_max = int(quant_min), int(quant_max)
    if quant_min > quant_max:
        raise QuantizationError(f"quant_min {quant_min} exceeds quant_max {quant_max}", op=op)
    return quant_min, quant_max


@export
def fake_quantize_per_tensor_affine(input, scale, zero_point, quant_min, quant_max):
    """Quantize and dequantize in ``input``'s dtype (PyTorch's function, straight-through
    gradient): ``(clamp(rint(x / scale) + zp, quant_min, quant_max) - zp) * scale``."""
    op = "fake_quantize_per_tensor_affine"
    lo, hi = _check_range(op, quant_min, quant_max)
    if isinstance(scale, TensorBase) or isinstance(zero_point, TensorBase):
        # PyTorch's tensor-qparams form (scale and zero point computed by the program, an
        # observer's running range): the one-element tensors are operands, read at run time,
        # so a captured graph computes them; no gradient flows to them (as PyTorch's)
        params = [to_tensor(p) for p in (scale, zero_point)]
        return apply(FAKE_QUANTIZE, to_tensor(input), *params, quant_min=lo, quant_max=hi)
    check_params(op, float(scale), int(zero_point), lo, hi)
    return apply(FAKE_QUANTIZE, to_tensor(input), scale=float(scale),
                 zero_point=int(zero_point), quant_min=lo, quant_max=hi)  # fmt: skip


@export
def fake_quantize_per_channel_affine(input, scale, zero_point, axis, quant_min, quant_max):
    """Per-channel fake quantization along ``axis`` (PyTorch's function, straight-through
    gradient); ``scale`` and ``zero_point`` are 1-D tensors."""
    lo, hi = _check_range("fake_quantize_per_channel_affine", quant_min, quant_max)
    return apply(FAKE_QUANTIZE, to_tensor(input), to_tensor(scale), to_tensor(zero_point),
                 axis=int(axis), quant_min=lo, quant_max=hi)  # fmt: skip
