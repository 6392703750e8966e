"""`Parameter` (a Tensor a Module registers as learnable) and `Buffer` (registered state that is
not learned).

A Parameter is a leaf Tensor subclass with ``requires_grad=True`` by default. Built from a Tensor
it shares that tensor's memory and version counter, as ``torch.nn.Parameter`` shares storage.
Every op returns a plain `Tensor` (eager mode wraps kernel outputs with ``Tensor._wrap``), so only
objects created here are Parameters.

A Parameter's array is watched with its version counter (kernels/cprepack.py), so products by it
may reuse its packed panels until an update through ember bumps the counter.
"""

from __future__ import annotations

import copy

import numpy as np

from .. import _meta
from ..devices import check_device, is_meta
from ..dtypes import DType, as_dtype, get_default_dtype
from ..errors import ShapeError
from ..io._tree import TENSOR_KINDS
from ..kernels import cprepack
from ..ops._data import to_array
from ..tensor import Tensor


def _array_and_counter(data) -> tuple[np.ndarray, list | None]:
    if data is None:
        return np.empty((0,), dtype=get_default_dtype().np), None
    if isinstance(data, Tensor):
        return data._data, data._vc
    array = to_array(data, None)
    if array is data:  # a NumPy array its caller may still write (kernels/cprepack.py)
        cprepack.exposed(array, early=True)
    return array, None


class Parameter(Tensor):
    """A tensor that is a module parameter: assigning one to a Module attribute registers it."""

    __slots__ = ()
    _checkpoint_kind = "parameter"  # (a checkpoint loads it as a Parameter: io/_tree.py)

    def __init__(self, data=None, requires_grad: bool = True):
        arr, counter = _array_and_counter(data)
        super().__init__(arr)
        if counter is not None:
            self._vc = counter
        cprepack.watch(self._data, self._vc)
        if requires_grad:
            self.requires_grad_(True)

    @Tensor.data.setter
    def data(self, value) -> None:
        Tensor.data.fset(self, value)
        if self._data is value:  # the caller's NumPy array, which it may still write
            cprepack.exposed(value, early=True)
        # (memory another tensor writes with its own counter is not watched: its writes would
        # leave this one's standing)
        if not isinstance(value, Tensor) or value._vc is self._vc:
            cprepack.watch(self._data, self._vc)

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    def __deepcopy__(self, memo: dict) -> Parameter:
        if id(self) in memo:
            return memo[id(self)]
        # (the gradient stays behind, as PyTorch's Parameter.__deepcopy__ leaves it: a copied
        # model, an EMA or a twin trained on, starts without the original's .grad, where a
        # plain tensor's deepcopy keeps it)
        result = Parameter(Tensor(self._data.copy()), requires_grad=self._requires_grad)
        memo[id(self)] = result
        own = getattr(self, "__dict__", None)
        if own:  # (the user's attributes, copied as PyTorch copies them)
            result.__dict__.update(copy.deepcopy(own, memo))
        return result

    def __reduce_ex__(self, protocol):
        own = getattr(self, "__dict__", None)
        if own:
            return (_rebuild_parameter, (self._data, self._requires_grad, dict(own)))
        return (_rebuild_parameter, (self._data, self._requires_grad))


TENSOR_KINDS["parameter"] = lambda t, requires_grad: Parameter(t, requires_grad=requires_grad)


def _rebuild_parameter(data: np.ndarray, requires_grad: bool, attributes=None) -> Parameter:
    result = Parameter(Tensor(data), requires_grad=requires_grad)
    if attributes:
        result.__dict__.update(attributes)
    return result


class Buffer(Tensor):
    """Marks a tensor to be registered as a buffer when assigned to a Module attribute
    (``self.running_mean = nn.Buffer(...)``), like ``torch.nn.Buffer``. The module stores the
    plain tensor; ``persistent=False`` keeps it out of ``state_dict``."""

    __slots__ = ("persistent",)

    def __init__(self, data=None, *, persistent: bool = True):
        arr, counter = _array_and_counter(data)
        super().__init__(arr)
        if counter is not None:
            self._vc = counter
        self.persistent = persistent


def factory_dtype(device=None, dtype=None) -> DType:
    """The dtype of a layer's new tensors from PyTorch-style ``device=`` / ``dtype=``
    arguments; a device other than the CPU or the meta device is refused."""
    check_device(device, "nn(device)")
    return get_default_dtype() if dtype is None else as_dtype(dtype)


def _array(shape: tuple, fill, device, dtype) -> np.ndarray:
    """A new layer tensor's array: ``fill`` everywhere, or a meta stand-in on the meta device
    (``device="meta"``, or the default device inside ``with ember.device("meta"):``)."""
    np_dtype = factory_dtype(device, dtype).np
    if is_meta(device):
        return _meta.stand_in(shape, np_dtype)
    return np.full(shape, fill, dtype=np_dtype)


def check_sizes(layer: str, **sizes) -> None:
    """Refuse a layer's size arguments that are not whole numbers from 0 (``nn.Linear(-1, 3)``)
    with a `ShapeError` naming the layer and the argument, as PyTorch refuses them."""
    for name, value in sizes.items():
        if not isinstance(value, (int, np.integer)) or isinstance(value, (bool, np.bool_)):
            raise ShapeError(
                f"{name} must be a whole number, got {value!r} ({type(value).__name__})", op=layer
            )
        if value < 0:
            raise ShapeError(f"{name} must be 0 or more, got {value}", op=layer)


def _checked_shape(shape) -> tuple:
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    check_sizes("Parameter", **{f"size {i}": d for i, d in enumerate(shape)})
    return shape


def new_parameter(shape, device=None, dtype=None) -> Parameter:
    """A parameter of ``shape`` (zeros, to be filled by the layer's ``reset_parameters``)."""
    shape = _checked_shape(shape)
    return Parameter(Tensor(_array(shape, 0, device, dtype)))


def new_tensor(shape, fill: float, device=None, dtype=None) -> Tensor:
    """A buffer of ``shape`` filled with ``fill``."""
    shape = _checked_shape(shape)
    return Tensor(_array(shape, fill, device, dtype))
