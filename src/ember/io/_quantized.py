"""Quantized tensors (ops/qtensor.py) in ember's checkpoints: the integers stored as an
ordinary array, the parameters in the tensor's node (``"quantized"``), floats written as
``float.hex`` strings so zero, negative, infinite and NaN scales survive JSON exactly. Read
back through ``_make_per_tensor_quantized_tensor`` / ``_make_per_channel_quantized_tensor``,
whose checks a damaged node's parameters meet."""

from __future__ import annotations

import numpy as np

from ..errors import EmberError
from ..ops import qtensor
from ..tensor import Tensor

_PER_TENSOR = {"dtype", "scale", "zero_point"}
_PER_CHANNEL = {"dtype", "scales", "zero_points", "axis"}
_STORAGES = {"quint8": np.uint8, "qint8": np.int8, "qint32": np.int32}
_INT64 = (-(2**63), 2**63)  # the range of a stored integer zero point (an int64 tensor)


def integers(arr: np.ndarray) -> np.ndarray:
    """A quantized array's integers as a plain array (a copy, C-ordered)."""
    return np.ascontiguousarray(qtensor.ints_of(arr, qtensor.params(arr)))


def encode(arr: np.ndarray) -> dict:
    p = qtensor.params(arr)
    if not p.per_channel:
        return {"dtype": p.dtype, "scale": float(p.scale).hex(), "zero_point": int(p.zero_point)}
    zps = p.zero_points
    return {
        "dtype": p.dtype,
        "scales": [float(s).hex() for s in p.scales],
        # (float zero points stay floats, as PyTorch keeps them)
        "zero_points": [float(z).hex() if zps.dtype.kind == "f" else int(z) for z in zps],
        "axis": int(p.axis),
    }


def _float(text, bad) -> float:
    try:
        return float.fromhex(text)
    except (TypeError, ValueError, OverflowError):  # (OverflowError: "0x1p99999")
        raise bad(f"a quantization scale should be a hex float, got {str(text)[:40]!r}") from None


def decode(ints: np.ndarray, node, bad) -> Tensor:
    if not isinstance(node, dict) or set(node) not in (_PER_TENSOR, _PER_CHANNEL):
        raise bad(f"quantization parameters {str(node)[:80]!r} have unknown fields")
    name = node["dtype"]
    if not isinstance(name, str) or name not in _STORAGES or ints.dtype != _STORAGES[name]:
        raise bad(f"a {str(name)[:20]} tensor stored as {ints.dtype}")
    data = Tensor(ints)
    try:
        if set(node) == _PER_TENSOR:
            zero_point = node["zero_point"]
            if type(zero_point) is not int:
                raise bad(f"a zero point should be an int, got {str(zero_point)[:40]!r}")
            scale = _float(node["scale"], bad)
            return qtensor._make_per_tensor_quantized_tensor(data, scale, zero_point)
        scales, zero_points, axis = node["scales"], node["zero_points"], node["axis"]
        if (
            not (isinstance(scales, list) and isinstance(zero_points, list))
            or type(axis) is not int
        ):
            raise bad("per-channel parameters should be two lists and an int axis")
        if not 0 <= axis < max(ints.ndim, 1):
            raise bad(f"axis {axis} is out of range for a {ints.ndim}-d tensor")
        if not all(type(z) is str or (type(z) is int and _INT64[0] <= z < _INT64[1])
                   for z in zero_points):  # fmt: skip
            raise bad("zero points should be int64 integers or hex floats")
        s = Tensor(np.array([_float(v, bad) for v in scales], np.float64))
        floats = any(type(z) is str for z in zero_points)
        z = np.array([_float(v, bad) if floats else v for v in zero_points],
                     np.float32 if floats else np.int64)  # fmt: skip
        return qtensor._make_per_channel_quantized_tensor(data, s, Tensor(z), axis)
    except EmberError as exc:
        if "corrupt checkpoint" in str(exc):
            raise
        raise bad(f"quantization parameters: {str(exc).splitlines()[0]}") from None
