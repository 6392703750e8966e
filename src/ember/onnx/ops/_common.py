"""What the converter families share: ember's public functions by name, dtype codes, axes."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ... import functional as _functional  # noqa: F401  (registers the composites)
from ...nn import functional as F  # noqa: F401  (re-exported for the families)
from ...ops._registry import PUBLIC
from .._model import require_onnx

# ember's public functions (ember.add, ember.reshape, ...) without importing the top-level
# package, which is a higher layer
E = SimpleNamespace(**PUBLIC)


def np_dtype(code: int, where: str = "") -> np.dtype:
    """The NumPy dtype of an ONNX TensorProto element type code."""
    onnx = require_onnx()
    try:
        return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(int(code)))
    except (KeyError, ValueError, TypeError):
        from ...errors import OnnxError

        raise OnnxError(f"{where}: unknown ONNX element type {code}") from None


def axis(value: int, rank: int, ctx=None) -> int:
    a = int(value)
    if not -max(rank, 1) <= a < max(rank, 1):
        message = f"axis {a} is out of range for rank {rank}"
        raise (ctx.error(message) if ctx is not None else IndexError(message))
    return a + rank if a < 0 else a


def rank_of(value) -> int:
    return len(value.shape)


def dtype_np(value) -> np.dtype:
    """A value's NumPy dtype (tensor or array)."""
    d = value.dtype
    return d.np if hasattr(d, "np") else np.dtype(d)


def is_float(value) -> bool:
    return dtype_np(value).kind == "f" or dtype_np(value).name == "bfloat16"


def given(value) -> bool:
    """Whether an optional input holds a value (not left out, not an empty optional)."""
    from .._convert import EMPTY

    return value is not None and value is not EMPTY


def constant(array, like=None):
    """A constant tensor of ``array`` (in ``like``'s dtype when given); 0-d stays 0-d."""
    from .._convert import to_tensor

    array = np.asarray(array)
    if like is not None:
        array = array.astype(dtype_np(like))
    return to_tensor(np.require(array, requirements="C"), "a constant")
