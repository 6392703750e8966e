"""The ops PyTorch's QuantizedCPU backend runs on quantized tensors (ops/qtensor.py), with its
semantics (checked against PyTorch 2.13 bit for bit): each public function whose plain path
refuses a quantized operand hands it here (`quantized_form`), so the plain path pays nothing.

What each keeps, as PyTorch's kernels:
* order only (relu, max/min, sort, argsort, topk, max pooling): computed on the integers, which
  a positive scale orders as the values; the result keeps the input's parameters (relu clamps
  at the zero point, the integer of 0.0);
* values (mean): the dequantized values' mean, quantized back with the input's parameters;
* sigmoid: the dequantized values' sigmoid quantized with PyTorch's fixed output parameters
  (scale 2**-8, zero point 0 for quint8 and -128 for qint8; 2**-32 and 0 for qint32);
* comparisons: on dequantized values (a per-channel tensor too); ``equal``: the same dtype,
  scheme, parameters, shape and integers.
Per-channel tensors are refused where PyTorch refuses them (all but comparisons and equal).
"""

from __future__ import annotations

import numpy as np

from ..errors import QuantizationError
from . import api as E
from . import qtensor as Q
from ._registry import TensorBase, eager_constant


def quantized_form(args) -> bool:
    """Whether a call whose plain path refused its operands ``args`` holds a quantized tensor
    (the caller then runs the quantized form; otherwise it re-raises the refusal)."""
    return any(Q.is_quantized(a) for a in args)


def held(x) -> bool:
    """Whether ``x`` is a quantized tensor, cheaply for any other value: only a quantized
    array's dtype carries metadata (a traced value has no array: it is not one)."""
    data = getattr(x, "_data", None)
    return data is not None and data.dtype.metadata is not None and Q.params(data) is not None


def _per_tensor(op: str, t):
    data, p = Q._quantized(op, t)
    if p.per_channel:
        raise QuantizationError(
            f"{op} takes per-tensor quantized tensors only (as PyTorch's "
            "'qscheme() == kPerTensorAffine'): dequantize() first",
            op=op,
        )
    return data, p


def _ints(op: str, t):
    """The integers of per-tensor quantized ``t`` as an int64 tensor, and its parameters."""
    data, p = _per_tensor(op, t)
    return eager_constant(Q.ints_of(data, p).astype(np.int64)), p


def _wrap(ints: TensorBase, p: Q.QParams) -> TensorBase:
    """Integers as a quantized tensor with parameters ``p``."""
    ints = np.asarray(ints._data)
    return eager_constant(Q.make_array(ints.reshape(-1), p).reshape(ints.shape))


def relu(x) -> TensorBase:
    ints, p = _ints("relu", x)
    return _wrap(E.clamp(ints, min=p.zero_point), p)


_SIGMOID_PARAMS = {"quint8": (2.0**-8, 0), "qint8": (2.0**-8, -128), "qint32": (2.0**-32, 0)}


def sigmoid(x) -> TensorBase:
    _, p = _per_tensor("sigmoid", x)
    values = np.asarray(E.sigmoid(Q.dequantize(x))._data, np.float32)
    scale, zero_point = _SIGMOID_PARAMS[p.dtype]
    out = Q.QParams(p.dtype, scale, zero_point)
    return _wrap(eager_constant(Q._quantize_ints(values, out)), out)


def mean(x, *args, **kwargs) -> TensorBase:
    _, p = _per_tensor("mean", x)
    values = np.asarray(E.mean(Q.dequantize(x), *args, **kwargs)._data, np.float32)
    return _wrap(eager_constant(Q._quantize_ints(values, p)), p)


def extreme(x, largest: bool, dim=None, keepdim=False):
    """max/min: of every element (a 0-d quantized tensor), or along ``dim`` with indices."""
    op = "max" if largest else "min"
    ints, p = _ints(op, x)
    fn = E.max if largest else E.min
    if dim is None:
        return _wrap(fn(ints), p)
    values, indices = fn(ints, dim, keepdim)
    return type(fn(E.zeros(1), 0))(_wrap(values, p), indices)


def sort(x, *args, **kwargs):
    ints, p = _ints("sort", x)
    values, indices = E.sort(ints, *args, **kwargs)
    return type(E.sort(E.zeros(1)))(_wrap(values, p), indices)


def argsort(x, *args, **kwargs) -> TensorBase:
    return E.argsort(_ints("argsort", x)[0], *args, **kwargs)


def topk(x, *args, **kwargs):
    if Q.params(getattr(x, "_data", None)) is not None and Q.params(x._data).per_channel:
        raise QuantizationError("Top-K is only supported on per-tensor quantization", op="topk")
    ints, p = _ints("topk", x)
    values, indices = E.topk(ints, *args, **kwargs)
    return type(E.topk(E.zeros(1), 1))(_wrap(values, p), indices)


def max_pool(fn, x, *args, **kwargs):
    """``fn`` (a max pooling) on the integers, exact in float64, the parameters kept."""
    data, p = _per_tensor(getattr(fn, "__name__", "max_pool"), x)
    if kwargs.get("return_indices") or (len(args) > 5 and args[5]):
        raise QuantizationError(
            "quantized max pooling returns no indices (as PyTorch's)", op=fn.__name__
        )
    wide = eager_constant(Q.ints_of(data, p).astype(np.float64))
    pooled = fn(wide, *args, **kwargs)
    return _wrap(eager_constant(np.asarray(pooled._data).astype(np.int64)), p)


def _values(t):
    return Q.dequantize(t) if Q.is_quantized(t) else t


def compare(fn, x, y) -> TensorBase:
    """A comparison ``fn`` on the dequantized values of whichever operands are quantized."""
    return fn(_values(x), _values(y))


def equal(a, b) -> bool:
    """PyTorch's quantized ``equal``: one dtype, scheme and parameters, one shape, one set of
    integers; a quantized tensor never equals a plain one."""
    pa, pb = Q.params(getattr(a, "_data", None)), Q.params(getattr(b, "_data", None))
    if pa is None or pb is None or pa.dtype != pb.dtype or pa.per_channel != pb.per_channel:
        return False
    if pa.per_channel:
        same = (
            pa.axis == pb.axis
            and np.array_equal(pa.scales, pb.scales)
            and np.array_equal(pa.zero_points, pb.zero_points)
        )
    else:
        same = (pa.scale, pa.zero_point) == (pb.scale, pb.zero_point)
    if not same or tuple(a.shape) != tuple(b.shape):
        return False
    return bool(np.array_equal(Q.ints_of(a._data, pa), Q.ints_of(b._data, pb)))
