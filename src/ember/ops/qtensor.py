"""Quantized tensors, PyTorch's kind: ``quantize_per_tensor(x, scale, zero_point, ember.quint8)``
(or ``qint8``, ``qint32``) and ``quantize_per_channel`` give a tensor whose dtype is the
quantized dtype, with ``int_repr()``, ``dequantize()``, ``q_scale()``, ``q_zero_point()``,
``q_per_channel_scales()``/``_zero_points()``/``_axis()``, ``qscheme()`` and PyTorch's printing.

Representation. The tensor is an ordinary ember Tensor whose array holds the integers in a
one-field structured NumPy dtype carrying the quantization parameters as the dtype's metadata
(a `QParams`): NumPy keeps a dtype's metadata through views, copies, concatenation and
indexing, so ops that only move elements (reshape, permute, indexing, expand, flip, split,
cat, clone: the ops whose ``quantized`` rule says so) keep the parameters with no code of
their own, and the eager mode sees a dtype ember does not know and asks the tensor's
``dtype``, a `QuantizedDType`, which is special: any other op refuses the tensor
(ops/_registry.py `_refuse_special`), as PyTorch's QuantizedCPU backend refuses most ops; the
public functions it does run on one (relu, max, sort, mean, sigmoid, comparisons, ...) take
it where that refusal reaches them (ops/qtensor_ops.py).
Per-channel parameters follow an axis, so only ops that keep every element in place (clone,
contiguous) take a per-channel tensor (PyTorch refuses its transposes and reshapes too).
Quantized tensors are eager values: capturing one in a graph is refused.

Arithmetic, as PyTorch's CPU kernels (measured against PyTorch 2.13 bit for bit): a float32
input only; per tensor, 8-bit ``q = rint(fma(x, 1 / scale, zero_point))`` in float32 (a NaN
gives the largest value), 32-bit ``rint(x * (1 / scale) + zero_point)`` rounded step by step
(a NaN gives the smallest); per channel ``rint(x * (1 / scale) + zero_point)`` in float32
(a NaN gives 0 in 8 bits, the smallest in 32);
ties to even, then clamped. Dequantized per tensor ``(q - zero_point) * scale`` in float32, per
channel in float64, then rounded to float32 (a 32-bit ``q - zero_point`` wraps around).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import dtypes as dt
from ..errors import DTypeError, KernelDTypeError, QuantizationError, ShapeError
from ._registry import TensorBase, building_graph, eager_constant, export

_KEY = dt.QUANTIZED_KEY
_RANGES = {"quint8": (0, 255), "qint8": (-128, 127), "qint32": (-(2**31), 2**31 - 1)}


class QScheme:
    """PyTorch's quantization schemes (``torch.per_tensor_affine``, ...)."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"ember.{self.name}"

    def __reduce__(self):
        return (_scheme, (self.name,))


def _scheme(name: str) -> QScheme:
    return QSCHEMES[name]


QSCHEMES = {
    n: QScheme(n)
    for n in (
        "per_tensor_affine",
        "per_channel_affine",
        "per_tensor_symmetric",
        "per_channel_symmetric",
        "per_channel_affine_float_qparams",
    )
}


@dataclass(frozen=True, eq=False)
class QParams:
    """A quantized array's parameters: its quantized dtype's name, and either a per-tensor
    ``scale``/``zero_point`` or per-channel ``scales``/``zero_points`` along ``axis``."""

    dtype: str
    scale: float | None = None
    zero_point: int | None = None
    scales: np.ndarray | None = None  # float64
    zero_points: np.ndarray | None = None  # int64
    axis: int | None = None

    @property
    def per_channel(self) -> bool:
        return self.axis is not None


def params(array) -> QParams | None:
    """The parameters of a quantized array, None for any other array."""
    meta = getattr(getattr(array, "dtype", None), "metadata", None)
    return None if meta is None else meta.get(_KEY)


def qdtype_of(np_dtype):
    """The QuantizedDType a NumPy dtype stands for, or None."""
    meta = np_dtype.metadata
    p = None if meta is None else meta.get(_KEY)
    return None if p is None else dt.QUANTIZED_DTYPES[p.dtype]


def _storage(name: str) -> np.dtype:
    return dt.QUANTIZED_DTYPES[name].storage.np


def make_array(ints: np.ndarray, p: QParams, like: np.ndarray | None = None) -> np.ndarray:
    """``ints`` (of the storage dtype) viewed as a quantized array with parameters ``p``, or
    with ``like``'s very dtype (NumPy joins arrays keeping metadata only of one dtype)."""
    ints = np.ascontiguousarray(ints, dtype=_storage(p.dtype))
    return ints.view(like.dtype if like is not None else np.dtype([("q", ints.dtype)],
                                                                   metadata={_KEY: p}))  # fmt: skip


def ints_of(array: np.ndarray, p: QParams) -> np.ndarray:
    """The integers of a quantized array (a view)."""
    return array.view(_storage(p.dtype)) if array.ndim else array.reshape(1).view(
        _storage(p.dtype)).reshape(())  # fmt: skip


def _eager(op: str, x):
    if building_graph():
        raise QuantizationError(
            "quantized tensors are eager values: a captured function cannot make or read one "
            "(quantize outside the function, or use fake_quantize_per_tensor_affine inside)",
            op=op,
        )
    if not isinstance(x, TensorBase):
        raise DTypeError(f"expected a tensor, got {type(x).__name__}", op=op)
    return x


def _float32_input(op: str, x) -> np.ndarray:
    x = _eager(op, x)
    if x.dtype is not dt.float32:
        raise DTypeError(f"quantizes float32 tensors only (as PyTorch), got {x.dtype}", op=op)
    return x._data


def _check_zero_point(op: str, zp: int, lo: int, hi: int) -> None:
    if zp < lo:
        raise QuantizationError(f"zero_point {zp} is below the lower bound {lo}", op=op)
    if zp > hi:
        raise QuantizationError(f"zero_point {zp} is above the upper bound {hi}", op=op)


def _scalar(value, kind):
    if isinstance(value, TensorBase):
        if value.numel() != 1:
            raise ShapeError(f"expected one value, got shape {tuple(value.shape)}", op="quantize")
        value = value.item()
    return kind(value)


def quantize_per_tensor(input, scale, zero_point, qdtype) -> TensorBase:
    """PyTorch's quantize_per_tensor to a quantized dtype (see the module docstring)."""
    op = "quantize_per_tensor"
    x = _float32_input(op, input)
    scale, zero_point = _scalar(scale, float), _scalar(zero_point, int)
    lo, hi = _RANGES[qdtype.name]
    _check_zero_point(op, zero_point, lo, hi)
    # (any scale, as PyTorch: zero, negative, infinite or NaN ones quantize by the same steps)
    p = QParams(qdtype.name, scale, zero_point)
    return eager_constant(make_array(_quantize_ints(x, p), p))


def _quantize_ints(x: np.ndarray, p: QParams) -> np.ndarray:
    """float32 ``x`` quantized with ``p`` (int64), by PyTorch's arithmetic."""
    lo, hi = _RANGES[p.dtype]
    nan = lo if p.dtype == "qint32" else hi
    if p.per_channel:
        shape = [1] * x.ndim
        shape[p.axis] = -1
        inv = (np.float32(1.0) / p.scales.astype(np.float32)).reshape(shape)
        v = x * inv + p.zero_points.astype(np.float32).reshape(shape)
        # (a NaN: 0 in 8 bits, PyTorch's per-channel loop, whatever the zero point)
        return _round_clamp(v, lo, hi, lo if p.dtype == "qint32" else 0)
    inv = np.float32(1.0) / np.float32(p.scale)
    if p.dtype == "qint32":  # (two roundings, PyTorch's scalar loop)
        v = x * inv + np.float32(p.zero_point)
    else:  # (a fused multiply-add, PyTorch's vectorized loop: the product is exact in double)
        v = (x.astype(np.float64) * np.float64(inv) + p.zero_point).astype(np.float32)
    return _round_clamp(v, lo, hi, nan)


def _round_clamp(v: np.ndarray, lo: int, hi: int, nan: int) -> np.ndarray:
    v = np.array(np.rint(v), np.float64, ndmin=1).reshape(np.shape(v))  # (0-d: an array)
    v[np.isnan(v)] = nan
    return np.clip(v, lo, hi).astype(np.int64)


def quantize_per_channel(input, scales, zero_points, axis, qdtype) -> TensorBase:
    """PyTorch's quantize_per_channel to a quantized dtype (see the module docstring)."""
    op = "quantize_per_channel"
    x = _float32_input(op, input)
    s = np.asarray(_eager(op, scales)._data, np.float64).reshape(-1)
    z = _eager(op, zero_points)._data.reshape(-1)
    axis = int(axis)
    if not 0 <= axis < x.ndim:  # (PyTorch takes no negative axis here)
        raise ShapeError(f"axis {axis} is out of range [0, {x.ndim})", op=op)
    for name, p in (("scales", s), ("zero_points", z)):
        if p.shape != (x.shape[axis],):
            raise ShapeError(
                f"{name} must have one value per channel: expected {x.shape[axis]}, got "
                f"{p.shape[0]}",
                op=op,
            )
    lo, hi = _RANGES[qdtype.name]
    for zp in z.tolist():
        _check_zero_point(op, int(zp), lo, hi)
    # (PyTorch keeps float zero points as given, float32; integer ones as int64)
    zps = z.astype(np.float32 if z.dtype.kind == "f" else np.int64)
    p = QParams(qdtype.name, scales=s.copy(), zero_points=zps, axis=axis)
    return eager_constant(make_array(_quantize_ints(x, p), p))


def _quantized(op: str, t) -> tuple[np.ndarray, QParams]:
    data = getattr(t, "_data", None)
    p = params(data)
    if p is None:
        raise DTypeError(f"expected a quantized tensor, got {getattr(t, 'dtype', t)}", op=op)
    return data, p


def dequantize(t) -> TensorBase:
    """The float32 values of a quantized tensor."""
    data, p = _quantized("dequantize", t)
    q = ints_of(data, p)
    if not p.per_channel:
        # q - zero_point in the storage's integers (a qint32 difference wraps, as PyTorch's)
        diff = (q.astype(np.int64) - p.zero_point).astype(q.dtype if q.itemsize == 4 else np.int64)
        out = diff.astype(np.float32) * np.float32(p.scale)
    else:
        shape = [1] * q.ndim
        shape[p.axis] = -1
        zp = p.zero_points.reshape(shape)
        out = ((q - zp) * p.scales.reshape(shape)).astype(np.float32)
    return eager_constant(np.asarray(out, np.float32))


def int_repr(t) -> TensorBase:
    data, p = _quantized("int_repr", t)
    return eager_constant(ints_of(data, p).copy())


def q_scale(t) -> float:
    _, p = _quantized("q_scale", t)
    if p.per_channel:
        raise QuantizationError("q_scale() needs a per-tensor quantized tensor", op="q_scale")
    return p.scale


def q_zero_point(t) -> int:
    _, p = _quantized("q_zero_point", t)
    if p.per_channel:
        raise QuantizationError(
            "q_zero_point() needs a per-tensor quantized tensor", op="q_zero_point"
        )
    return p.zero_point


def _channel(op: str, t) -> QParams:
    _, p = _quantized(op, t)
    if not p.per_channel:
        raise QuantizationError(f"{op}() needs a per-channel quantized tensor", op=op)
    return p


def q_per_channel_scales(t) -> TensorBase:
    return eager_constant(_channel("q_per_channel_scales", t).scales.copy())


def q_per_channel_zero_points(t) -> TensorBase:
    return eager_constant(_channel("q_per_channel_zero_points", t).zero_points.copy())


def q_per_channel_axis(t) -> int:
    return _channel("q_per_channel_axis", t).axis


def qscheme(t) -> QScheme:
    _, p = _quantized("qscheme", t)
    return QSCHEMES["per_channel_affine" if p.per_channel else "per_tensor_affine"]


def is_quantized(t) -> bool:
    return params(getattr(t, "_data", None)) is not None


def aligned(op: str, tensors) -> list:
    """Quantized tensors to join: each with the first one's parameters, requantized from its
    values where its own differ (PyTorch's cat); a tensor of another dtype is refused."""
    first = tensors[0]
    data0, p0 = _quantized(op, first)
    out = [first]
    for t in tensors[1:]:
        p = params(getattr(t, "_data", None))
        if p is None or p.dtype != p0.dtype:
            raise DTypeError(
                f"all tensors must have one dtype: {first.dtype} and {getattr(t, 'dtype', t)}",
                op=op,
            )
        if p.per_channel or p0.per_channel or (p.scale, p.zero_point) != (p0.scale, p0.zero_point):
            ints = _quantize_ints(dequantize(t)._data, p0)
            t = eager_constant(make_array(ints, p0, like=data0))
        elif t._data.dtype is not data0.dtype:  # (equal parameters, another dtype object)
            t = eager_constant(make_array(ints_of(t._data, p), p0, like=data0))
        out.append(t)
    return out


# the in-place writes PyTorch's quantized tensors take: the values written are quantized
WRITES = ("copy_", "fill_", "masked_fill_", "__setitem__", "index_put_")
# the in-place ops whose out-of-place form keeps the tensor's parameters (ops/qtensor_ops.py)
KEEPING = ("relu_",)


def write_inplace(t, name: str, fn, args, kwargs) -> None:
    """``t.<name>(*args)`` on a quantized tensor (Tensor._inplace): the write computed on its
    dequantized values, the result quantized back with its parameters, as PyTorch quantizes
    the values written (``q.fill_(1.0)``, ``q[0] = 2.0``, ``q.copy_(x)``); any other in-place
    op is refused, as PyTorch's QuantizedCPU backend has none."""
    data, p = _quantized(name, t)
    if name in KEEPING:
        result = fn(t, *args, **kwargs)
        ints_of(data, p)[...] = ints_of(result._data, p)
        return
    if name not in WRITES:
        raise KernelDTypeError(
            f"Could not run '{name}' with arguments from the 'QuantizedCPU' backend: a "
            "quantized tensor takes copy_, fill_, masked_fill_, index_put_, relu_ and item "
            "assignment",
            op=name,
        )
    result = fn(dequantize(t), *args, **kwargs)
    values = np.broadcast_to(np.asarray(result._data, np.float32), data.shape)
    ints_of(data, p)[...] = _quantize_ints(values, p)


def refuse_values(op: str) -> QuantizationError:
    """The error for reading a quantized tensor's elements as numbers (numpy, tolist)."""
    return QuantizationError(
        "a quantized tensor's elements are not numbers: take int_repr() or dequantize() first",
        op=op,
    )


def suffixes(t) -> list[str]:
    """PyTorch's printed suffixes of a quantized tensor after its dequantized values."""
    data, p = _quantized("repr", t)
    out = [f"size={tuple(data.shape)}", f"dtype=ember.{p.dtype}"]
    if not p.per_channel:
        out += ["quantization_scheme=ember.per_tensor_affine", f"scale={p.scale}",
                f"zero_point={p.zero_point}"]  # fmt: skip
    else:
        scales, zps = q_per_channel_scales(t), q_per_channel_zero_points(t)
        out += ["quantization_scheme=ember.per_channel_affine", f"scale={scales!r}",
                f"zero_point={zps!r}", f"axis={p.axis}"]  # fmt: skip
    return out


# Tensor methods (PyTorch's names; ``dequantize`` is also ``ember.dequantize``'s quantized form)
for _fn in (dequantize, int_repr, q_scale, q_zero_point, q_per_channel_scales,
            q_per_channel_zero_points, q_per_channel_axis, qscheme):  # fmt: skip
    export(_fn, method=True, toplevel=False)


@export
def _make_per_tensor_quantized_tensor(input, scale, zero_point):
    """PyTorch's: the integer tensor ``input`` (uint8, int8 or int32) as a quantized tensor of
    the matching quantized dtype with these parameters, its values kept."""
    op = "_make_per_tensor_quantized_tensor"
    qdtype = _quantized_dtype_of(op, _eager(op, input))
    lo, hi = _RANGES[qdtype.name]
    zero_point = _scalar(zero_point, int)
    _check_zero_point(op, zero_point, lo, hi)
    p = QParams(qdtype.name, _scalar(scale, float), zero_point)
    return eager_constant(make_array(input._data.copy(), p))


@export
def _make_per_channel_quantized_tensor(input, scale, zero_point, axis):
    """PyTorch's: the integer tensor ``input`` as a per-channel quantized tensor."""
    op = "_make_per_channel_quantized_tensor"
    qdtype = _quantized_dtype_of(op, _eager(op, input))
    s = np.asarray(_eager(op, scale)._data, np.float64).reshape(-1)
    z = _eager(op, zero_point)._data.reshape(-1)
    axis = int(axis) % max(input.ndim, 1)
    if s.shape != (input.shape[axis],) or z.shape != s.shape:
        raise ShapeError(
            f"scales and zero points must have {input.shape[axis]} values (the axis' size), "
            f"got {s.shape[0]} and {z.shape[0]}",
            op=op,
        )
    zps = z.astype(np.float32 if z.dtype.kind == "f" else np.int64)
    p = QParams(qdtype.name, scales=s.copy(), zero_points=zps, axis=axis)
    return eager_constant(make_array(input._data.copy(), p))


def _quantized_dtype_of(op: str, t):
    for q in dt.QUANTIZED_DTYPES.values():
        if q.storage is t.dtype:
            return q
    raise DTypeError(f"expected a uint8, int8 or int32 tensor, got {t.dtype}", op=op)
