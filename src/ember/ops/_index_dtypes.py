"""PyTorch's index dtype rules, op by op: the integer dtypes each indexed op takes for its index
tensor and the words it refuses the others with (ATen's checks, as PyTorch 2.13 words them).

PyTorch is not uniform here: gather, scatter*, index_select, index_add and index_reduce take
int32 or int64; take, take_along_dim, put, index_copy and index_fill take int64 only; advanced
indexing (``x[i]``, index_put) takes int64, int32, and uint8/bool as masks. No op takes int8,
int16 or the unsigned uint16/uint32/uint64 (ember's `limited` dtypes), which ember's NumPy
kernels would otherwise index with silently. tests/test_sem59_index_dtypes.py compares every
op's acceptance and message with PyTorch's.
"""

from __future__ import annotations

from .. import dtypes as dt
from ..errors import DTypeError, IndexTypeError

_INT32_OR_64 = frozenset({"int32", "int64"})
_LONG = frozenset({"int64"})

# PyTorch's ScalarType names, which its messages print (c10's toString)
_SCALAR_NAMES = {
    "bool": "Bool",
    "uint8": "Byte",
    "int8": "Char",
    "int16": "Short",
    "int32": "Int",
    "int64": "Long",
    "uint16": "UInt16",
    "uint32": "UInt32",
    "uint64": "UInt64",
    "float16": "Half",
    "bfloat16": "BFloat16",
    "float32": "Float",
    "float64": "Double",
    "complex64": "ComplexFloat",
    "complex128": "ComplexDouble",
}

# op -> (dtypes taken, message ({got}: the index's ScalarType name), error class)
_RULES = {
    "gather": (_INT32_OR_64, "gather(): Expected dtype int32/int64 for index", DTypeError),
    "scatter": (_INT32_OR_64, "scatter(): Expected dtype int32/int64 for index", DTypeError),
    "index_select": (
        _INT32_OR_64,
        "index_select(): Expected dtype int32 or int64 for index",
        DTypeError,
    ),
    "index_add": (
        _INT32_OR_64,
        "index_add_(): Expected dtype int32/int64 for index but got: {got}",
        DTypeError,
    ),
    "index_reduce": (
        _INT32_OR_64,
        "index_reduce_(): Expected dtype int32/int64 for index but got: {got}",
        DTypeError,
    ),
    "index_copy": (
        _LONG,
        "index_copy_(): Expected a long tensor for index, but got {got}",
        DTypeError,
    ),
    "index_fill": (_LONG, "index_fill_(): Expected dtype int64 for index.", IndexTypeError),
    "take": (_LONG, "take(): Expected a long tensor for index, but got {got}", DTypeError),
    "take_along_dim": (
        _LONG,
        "torch.take_along_dim(): dtype of indices should be Long but got {got}",
        DTypeError,
    ),
    "put": (_LONG, "put_(): Expected a long tensor for index, but got {got}", IndexTypeError),
}

# (scatter_add and scatter_reduce are checked by scatter's words, as in PyTorch)
_CHECKED_AS = {"scatter_add": "scatter", "scatter_reduce": "scatter"}


def scalar_name(dtype) -> str:
    """PyTorch's ScalarType name of an ember dtype ('Short' for int16)."""
    return _SCALAR_NAMES.get(dtype.name, dtype.name)


def check_index_dtype(op: str, index) -> None:
    """Refuse ``index`` (a tensor) where PyTorch's ``op`` refuses its dtype, in its words (the
    ember dtype added, and the op naming the error as ember's do)."""
    taken, message, error = _RULES[_CHECKED_AS.get(op, op)]
    dtype = index.dtype
    if dtype.name not in taken:
        raise error(f"{message.format(got=scalar_name(dtype))} (got {dtype})", op=op)


def advanced_index_kind(op: str, dtype) -> str:
    """What a tensor of ``dtype`` is inside ``x[...]`` / index_put: "tensor" (int64, int32),
    "mask" (bool; uint8, PyTorch's deprecated byte mask, which it warns about), else refused
    with PyTorch's IndexError."""
    if dtype is dt.int64 or dtype is dt.int32:
        return "tensor"
    if dtype is dt.bool_:
        return "mask"
    if dtype is dt.uint8:
        return "byte_mask"
    raise IndexTypeError(
        f"tensors used as indices must be long, int, byte or bool tensors (got {dtype})", op=op
    )
