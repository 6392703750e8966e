"""The memory block under a tensor, as PyTorch's ``UntypedStorage`` and ``TypedStorage``.

A tensor's storage is the NumPy array at the root of its array's chain of bases: views, slices,
``detach()`` and ``.data`` of one tensor share it, a ``clone()`` has its own. Programs use it to
ask whether two tensors share memory (``a.untyped_storage().data_ptr() ==
b.untyped_storage().data_ptr()``) and how large the block is; the storage object reads the
root array, never copies it.
"""

from __future__ import annotations

import warnings

import numpy as np

from .devices import device as _device
from .errors import AxisError, user_stacklevel


def root_array(arr: np.ndarray) -> np.ndarray:
    """The array owning ``arr``'s memory (the last ndarray in its chain of bases)."""
    while isinstance(arr.base, np.ndarray):
        arr = arr.base
    return arr


def _address(arr: np.ndarray) -> int:
    return int(arr.__array_interface__["data"][0])


class UntypedStorage:
    """The bytes of a tensor's memory block (PyTorch's ``torch.UntypedStorage``)."""

    def __init__(self, root: np.ndarray):
        self._root = root

    def data_ptr(self) -> int:
        """The address of the block's first byte."""
        return _address(self._root)

    def nbytes(self) -> int:
        return int(self._root.nbytes)

    def size(self) -> int:
        return self.nbytes()

    def __len__(self) -> int:
        return self.nbytes()

    def element_size(self) -> int:
        return 1

    @property
    def device(self):
        return _device("cpu")

    def _bytes(self) -> np.ndarray:
        return np.frombuffer(self._root.reshape(-1).view(np.uint8), dtype=np.uint8)

    def tolist(self) -> list:
        return self._bytes().tolist()

    def __getitem__(self, index):
        return self._bytes()[index].tolist()

    def __eq__(self, other) -> bool:
        return isinstance(other, UntypedStorage) and (
            self.data_ptr() == other.data_ptr() and self.nbytes() == other.nbytes()
        )

    def __hash__(self) -> int:
        return hash((self.data_ptr(), self.nbytes()))

    def __repr__(self) -> str:
        return f"ember.UntypedStorage(nbytes={self.nbytes()}, data_ptr={self.data_ptr():#x})"


class TypedStorage(UntypedStorage):
    """The block as elements of the tensor's dtype (PyTorch's deprecated ``torch.TypedStorage``,
    which ``tensor.storage()`` returns)."""

    def __init__(self, root: np.ndarray, dtype):
        super().__init__(root)
        self.dtype = dtype

    def _elements(self) -> np.ndarray:
        flat = self._root.reshape(-1).view(np.uint8)
        return flat[: len(flat) // self.dtype.itemsize * self.dtype.itemsize].view(self.dtype.np)

    def size(self) -> int:
        return self.nbytes() // self.dtype.itemsize

    def __len__(self) -> int:
        return self.size()

    def element_size(self) -> int:
        return self.dtype.itemsize

    def untyped(self) -> UntypedStorage:
        return UntypedStorage(self._root)

    def tolist(self) -> list:
        return self._elements().tolist()

    def __getitem__(self, index):
        n = self.size()
        if isinstance(index, int) and not -n <= index < n:
            raise AxisError(f"index {index} out of range for storage of size {n}", op="storage")
        return self._elements()[index].tolist()

    def __repr__(self) -> str:
        return f"ember.TypedStorage(dtype={self.dtype}, size={self.size()})"


def untyped_storage(tensor) -> UntypedStorage:
    """``tensor.untyped_storage()``: the memory block the tensor's elements lie in."""
    return UntypedStorage(root_array(tensor._data))


def typed_storage(tensor) -> TypedStorage:
    """``tensor.storage()``: the block as elements of the tensor's dtype (warned as PyTorch
    warns: TypedStorage is deprecated there)."""
    warnings.warn(
        "TypedStorage is deprecated. It will be removed in the future and UntypedStorage will be "
        "the only storage class. To access UntypedStorage directly, use "
        "tensor.untyped_storage() instead of tensor.storage()",
        UserWarning,
        stacklevel=user_stacklevel(),
    )
    return TypedStorage(root_array(tensor._data), tensor.dtype)
