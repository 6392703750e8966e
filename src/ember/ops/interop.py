"""Tensors over other libraries' memory: PyTorch's ``torch.frombuffer`` (a Python buffer:
bytes, bytearray, memoryview, array.array, mmap) and ``torch.from_dlpack`` / ``to_dlpack``
(the DLPack protocol, through NumPy's implementation: any object with ``__dlpack__`` on the
CPU, such as a NumPy array or a PyTorch CPU tensor, or a legacy DLPack capsule).

Memory is shared, as in PyTorch: writes through either side are visible in both. A read-only
buffer (``bytes``) is copied instead, with a warning: ember's kernels write in place, and
PyTorch's "undefined behaviour" on writing a read-only buffer is not a contract to keep.
Element types DLPack and NumPy share only: bfloat16 and float8 do not cross (a clear error)."""

from __future__ import annotations

import warnings

import numpy as np

from .. import dtypes as dt
from ..errors import ArgumentError, ArgumentTypeError, DTypeError, user_stacklevel
from ..kernels.cprepack import exposed
from ._registry import TensorBase, constant, export


@export
def frombuffer(buffer, *, dtype, count: int = -1, offset: int = 0, requires_grad: bool = False):
    """``torch.frombuffer``: a 1-D tensor of ``dtype`` over the bytes of ``buffer`` from byte
    ``offset``, ``count`` elements (-1: all that remain), sharing its memory."""
    d = dt.as_dtype(dtype)
    view = memoryview(buffer).cast("B")
    length = view.nbytes
    if length == 0 or count == 0:
        raise ArgumentError(
            f"both buffer length ({length}) and count ({count}) must not be 0", op="frombuffer"
        )
    if not 0 <= offset < length:
        raise ArgumentError(
            f"offset ({offset} bytes) must be non-negative and no greater than buffer length "
            f"({length} bytes) minus 1",
            op="frombuffer",
        )
    size = d.itemsize
    if count < 0:
        if (length - offset) % size:
            raise ArgumentError(
                f"buffer length ({length - offset} bytes) after offset ({offset} bytes) must be "
                f"a multiple of element size ({size})",
                op="frombuffer",
            )
        count = (length - offset) // size
    elif offset + count * size > length:
        raise ArgumentError(
            f"requested buffer length ({count} * {size} bytes) after offset ({offset} bytes) "
            f"must not be greater than actual buffer length ({length} bytes)",
            op="frombuffer",
        )
    array = np.frombuffer(view, dtype=d.np, count=count, offset=offset)
    if not array.flags.writeable:
        warnings.warn(
            "frombuffer: the given buffer is not writable; ember copied it (PyTorch would share "
            "it and leave writes undefined)",
            UserWarning,
            stacklevel=user_stacklevel(),
        )
        array = array.copy()
    exposed(array, early=True)
    out = constant(array)
    return out.requires_grad_() if requires_grad else out


class _Capsule:
    """A legacy DLPack capsule seen through the ``__dlpack__`` protocol NumPy reads."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, **_):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU, device 0: a capsule's device is not readable from Python


def array_from_dlpack(ext) -> np.ndarray:
    """The NumPy array over a DLPack producer's memory (the shared step of from_dlpack)."""
    source = ext if hasattr(ext, "__dlpack__") else _Capsule(ext)
    if type(ext).__name__ == "PyCapsule" or hasattr(ext, "__dlpack__"):
        try:
            array = np.from_dlpack(source)
        except (BufferError, TypeError, RuntimeError) as exc:
            raise DTypeError(
                f"cannot import this {type(ext).__name__} through DLPack: {exc} (ember reads "
                "CPU memory of the element types NumPy has: bool, integers, float16/32/64, "
                "complex)",
                op="from_dlpack",
            ) from exc
        dt.from_numpy_dtype(array.dtype)  # validates the dtype
        return array
    raise ArgumentTypeError(
        f"from_dlpack expects an object with __dlpack__ or a DLPack capsule, got "
        f"{type(ext).__name__}"
    )


@export
def from_dlpack(ext_tensor):
    """``torch.from_dlpack``: a tensor sharing the memory of ``ext_tensor``, an object with
    ``__dlpack__`` (a NumPy array, a PyTorch CPU tensor, an ember tensor) or a DLPack capsule
    (`to_dlpack`'s)."""
    if isinstance(ext_tensor, TensorBase) and hasattr(ext_tensor, "_data"):
        ext_tensor = ext_tensor._data
    array = array_from_dlpack(ext_tensor)
    exposed(array, early=True)
    return constant(array)


def to_dlpack(tensor):
    """``torch.utils.dlpack.to_dlpack``: a DLPack capsule over ``tensor``'s memory (refused
    for a tensor that requires grad, as PyTorch's)."""
    return dlpack_of(tensor)


def dlpack_of(tensor, **kwargs):
    """``tensor.__dlpack__(...)``: NumPy's capsule over the tensor's array."""
    if tensor.requires_grad:
        raise BufferError("Can't export tensors that require gradient, use tensor.detach()")
    data = getattr(tensor, "_data", None)
    if data is None:
        raise BufferError("a tensor of a graph being built has no memory to export (eager only)")
    try:
        return data.__dlpack__(**kwargs)
    except (BufferError, TypeError) as exc:
        raise BufferError(
            f"cannot export a {tensor.dtype} tensor through DLPack ({exc}); cast it first"
        ) from exc
