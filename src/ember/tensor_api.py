"""The parts of PyTorch's Tensor interface about placement and types, and the ``new_*``
factories: ``x.cpu()``, ``x.cuda()``, ``x.is_cuda``, ``x.type()``, ``x.is_contiguous()``,
``x.contiguous(memory_format=)``, ``x.new_zeros(...)`` and friends, and ``__getattr__`` for the
names PyTorch has and ember lacks (ember._missing).

`install` attaches them to a tensor class (the eager Tensor and the symbolic tensor of graph
capture) when ember is imported, after the op methods. The module-level functions
(`is_tensor`, `numel`) become ``ember.is_tensor`` / ``ember.numel``.

``x.type()`` returns PyTorch's spelling (``"torch.FloatTensor"``): programs compare it with
those strings, and an ember-specific spelling would make every such comparison false.
``x.type("ember.FloatTensor")`` and ``"torch.FloatTensor"`` are both accepted.
"""

from __future__ import annotations

import numpy as np

from . import _views
from . import dtypes as dt
from ._missing import tensor_getattr
from .devices import CPU, channels_last, channels_last_3d, check_memory_format, contiguous_format
from .errors import DeviceError, MetaDataError
from .ops import qtensor as _qtensor
from .ops._factory_kwargs import placement, strided
from .ops._registry import METHODS, PUBLIC, TensorBase

__all__ = ["LEGACY_TYPES", "install", "is_tensor", "numel"]

_TYPE_NAMES = {
    dt.float32: "FloatTensor",
    dt.float64: "DoubleTensor",
    dt.float16: "HalfTensor",
    dt.bfloat16: "BFloat16Tensor",
    dt.int8: "CharTensor",
    dt.uint8: "ByteTensor",
    dt.int16: "ShortTensor",
    dt.int32: "IntTensor",
    dt.int64: "LongTensor",
    dt.bool_: "BoolTensor",
}
_BY_TYPE_NAME = {name: d for d, name in _TYPE_NAMES.items()}


class _LegacyType(type):
    """The metaclass of PyTorch's legacy tensor types (``torch.FloatTensor``, ...): an instance
    check asks for a tensor of that dtype, and calling one builds such a tensor."""

    dtype: dt.DType

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, TensorBase) and obj.dtype == cls.dtype

    def __call__(cls, *args, device=None):
        """``FloatTensor(2, 3)`` / ``FloatTensor(size)``: uninitialized (as PyTorch's);
        ``FloatTensor([1, 2])`` / ``FloatTensor(array)``: that data; ``FloatTensor()``: empty."""
        if device is not None and str(device).split(":")[0] != "cpu":
            raise DeviceError(f"{cls.__name__} lives on the CPU; got device={device!r}")
        if not args:
            return PUBLIC["empty"](0, dtype=cls.dtype)
        if all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in args):
            return PUBLIC["empty"](*args, dtype=cls.dtype)
        if len(args) == 1:
            (data,) = args
            if isinstance(data, TensorBase):
                return data.to(cls.dtype)
            if isinstance(data, tuple) and type(data) is not tuple:  # ember.Size
                return PUBLIC["empty"](*data, dtype=cls.dtype)
            return PUBLIC["tensor"](data, dtype=cls.dtype)
        raise TypeError(f"{cls.__name__}(): expected sizes or one sequence of data, got {args!r}")

    def __repr__(cls) -> str:
        return f"<class 'ember.{cls.__name__}'>"


LEGACY_TYPES = {
    name: _LegacyType(name, (), {"dtype": d, "__module__": "ember"})
    for d, name in _TYPE_NAMES.items()
}


class _VariableType(type):
    """``torch.autograd.Variable``'s metaclass: every tensor is a Variable (PyTorch merged the
    two), and calling it gives a tensor."""

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, TensorBase)

    def __call__(cls, data=None, requires_grad: bool = False, volatile: bool = False):
        """``Variable(t, requires_grad=True)``: a leaf sharing ``t``'s values (``t.detach()``),
        requiring grad as asked; other data becomes a tensor first."""
        if data is None:
            return PUBLIC["empty"](0)
        t = data.detach() if isinstance(data, TensorBase) else PUBLIC["tensor"](data)
        return t.requires_grad_(bool(requires_grad)) if requires_grad else t

    def __repr__(cls) -> str:
        return "<class 'ember.autograd.Variable'>"


Variable = _VariableType("Variable", (), {"__module__": "ember.autograd"})


def is_tensor(obj) -> bool:
    """Whether ``obj`` is an ember tensor (eager, or symbolic while a graph is captured)."""
    return isinstance(obj, TensorBase)


def numel(x) -> int:
    """The number of elements of ``x``."""
    return x.numel()


def _assert(condition, message) -> None:
    """PyTorch's ``torch._assert``: Python's assert as a function (model code, torchvision's
    included, checks input shapes with it). A one-element tensor condition is its truth value
    (a traced one raises the TraceError of ``bool()``)."""
    assert condition, message


def _cpu(self, memory_format=None):
    """The tensor itself: it is already on the CPU (a meta tensor, which has no data to copy,
    is refused)."""
    check_memory_format(memory_format, "cpu(memory_format)")
    if self.is_meta:
        raise MetaDataError("Cannot copy out of meta tensor; no data!", op="cpu")
    return self


def _cuda(self, device=None, non_blocking=False, memory_format=None):
    raise DeviceError(
        "ember runs on the CPU only, so a tensor cannot move to a GPU; use x.cpu() or "
        "x.to('cpu') (both return x), and pick the device with ember.cuda.is_available()",
        op="Tensor.cuda",
    )


def _part_setter(name):
    def assign(self, value):
        part = PUBLIC[name](self)
        if part is self:  # (a real tensor's real part: the whole tensor)
            self.copy_(value)
        else:
            part.copy_(value)

    return assign


def _pin_memory(self, device=None):
    raise DeviceError(
        "pin_memory() pins memory for copies to a GPU; ember runs on the CPU only",
        op="Tensor.pin_memory",
    )


def _type(self, dtype=None, non_blocking=False, **kwargs):
    """``x.type()``: PyTorch's name of the tensor type (``"torch.FloatTensor"``, see the module
    docstring); ``x.type(dtype)`` or ``x.type("torch.DoubleTensor")``: ``x`` cast to it."""
    if dtype is None:
        try:
            return "torch." + _TYPE_NAMES[self.dtype]
        except KeyError:  # a dtype PyTorch has no legacy tensor type for
            return f"torch.{self.dtype}"
    if isinstance(dtype, _LegacyType):
        dtype = dtype.dtype
    if isinstance(dtype, str):
        prefix, _, name = dtype.rpartition(".")
        if prefix in ("torch", "ember") and name in _BY_TYPE_NAME:
            dtype = _BY_TYPE_NAME[name]
        elif not prefix or prefix not in ("torch", "ember"):
            dtype = dt.as_dtype(dtype)
        else:
            raise TypeError(f"invalid tensor type {dtype!r}")
    return self.to(dtype)


def _is_contiguous(self, memory_format=None):
    """Whether the values lie in row-major order (``memory_format=ember.channels_last``: in
    NHWC order). A tensor in a captured graph is contiguous, graph values being dense, but for
    a view of one whose eager counterpart would not be (``_views.dense``: ``x.t()``)."""
    check_memory_format(memory_format, "is_contiguous(memory_format)")
    data = getattr(self, "_data", None)
    if data is None:
        return memory_format not in (channels_last, channels_last_3d) and _views.dense(self)
    if memory_format in (channels_last, channels_last_3d):
        rank = 4 if memory_format is channels_last else 5
        if data.ndim != rank:
            return False
        order = (0, *range(2, rank), 1)
        return bool(np.transpose(data, order).flags.c_contiguous)
    return bool(data.flags.c_contiguous)


def _contiguous_method(original):
    def contiguous(self, memory_format=None):
        """A row-major tensor with the values of ``x`` (``x`` itself when it is one), or one
        laid out in ``memory_format``'s order (ops/_memory_format.py)."""
        check_memory_format(memory_format, "contiguous(memory_format)")
        if memory_format is None or memory_format is contiguous_format:
            if getattr(self, "_data", None) is None and not _views.dense(self):
                return self.clone()  # (a graph value's strided view: a copy, as eagerly)
            return original(self)
        return self.to(memory_format=memory_format)

    return contiguous


def _new_shape(size: tuple):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        return tuple(size[0])
    return size


def _new_device(self, device):
    """The device of ``x.new_*(...)``: the one given, else x's own (a meta tensor's new tensors
    are meta, as PyTorch's)."""
    return device if device is not None else self.device


def _new_factory(name: str, fill):
    def method(self, *size, dtype=None, device=None, requires_grad=False, **kwargs):
        placement(f"Tensor.{name}", dict(kwargs, device=device))
        shape = _new_shape(size)
        where = _new_device(self, device)
        out = PUBLIC["full"](shape, fill_value=fill, dtype=dtype or self.dtype, device=where)
        return out.requires_grad_() if requires_grad else out

    method.__name__ = name
    method.__doc__ = (
        f"A tensor of the given size filled with {fill}, with ``x``'s dtype unless ``dtype=`` "
        "is given (``device=``: the CPU)."
    )
    return method


def _new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False, **kwargs):
    """A tensor of ``size`` filled with ``fill_value``, ``x``'s dtype unless ``dtype=``."""
    placement("Tensor.new_full", dict(kwargs, device=device))
    where = _new_device(self, device)
    out = PUBLIC["full"](
        tuple(size), fill_value=fill_value, dtype=dtype or self.dtype, device=where
    )
    return out.requires_grad_() if requires_grad else out


def _new_tensor(self, data, *, dtype=None, device=None, requires_grad=False, **kwargs):
    """A new tensor holding a copy of ``data``, ``x``'s dtype unless ``dtype=`` (PyTorch's
    rule: the dtype does not come from ``data``)."""
    placement("Tensor.new_tensor", dict(kwargs, device=device))
    if isinstance(data, TensorBase):
        data = data.detach()
    where = _new_device(self, device)
    return PUBLIC["tensor"](
        data, dtype=dtype or self.dtype, requires_grad=requires_grad, device=where
    )


def _new(self, *args, device=None, **kwargs):
    """PyTorch's legacy constructor ``x.new(...)``, in ``x``'s dtype: no argument, an empty
    tensor; integers or an ``ember.Size``, a tensor of that shape (zeros: ember never hands out
    uninitialised memory); any other sequence, array or tensor of ``x``'s dtype, a tensor
    holding a copy of it. A tensor of another dtype is refused, as in PyTorch."""
    placement("Tensor.new", dict(kwargs, device=device))
    from .size import Size

    where = _new_device(self, device)
    if not args:
        return PUBLIC["empty"](0, dtype=self.dtype, device=where)
    sizes = args[0] if len(args) == 1 and isinstance(args[0], Size) else args
    if all(isinstance(d, int) and not isinstance(d, bool) for d in sizes):
        return PUBLIC["zeros"](*sizes, dtype=self.dtype, device=where)
    if len(args) != 1:
        raise TypeError(f"Tensor.new: expected sizes (ints) or one sequence of data, got {args}")
    data = args[0]
    if isinstance(data, TensorBase):
        if data.dtype is not self.dtype:
            raise TypeError(
                f"Tensor.new: a {data.dtype} tensor given to a {self.dtype} tensor's new "
                f"(use x.new_tensor(data), which converts)"
            )
        data = data.detach()
    return PUBLIC["tensor"](data, dtype=self.dtype)


def _new_empty_strided(
    self, size, stride, *, dtype=None, device=None, requires_grad=False, **kwargs
):
    """A tensor of ``size`` with ``stride`` (``ember.empty_strided``: zeros, as ember never
    hands out uninitialised memory), ``x``'s dtype unless ``dtype=``."""
    placement("Tensor.new_empty_strided", dict(kwargs, device=device))
    out = PUBLIC["empty_strided"](tuple(size), tuple(stride), dtype=dtype or self.dtype)
    return out.requires_grad_() if requires_grad else out


# flags of PyTorch's other backends and layouts, all False here
_OTHER_BACKENDS = ("is_nested", "is_mkldnn", "is_xpu", "is_ipu", "is_mtia", "is_maia")
_OTHER_BACKENDS += ("is_vulkan", "is_xla", "is_sparse_csr")


def install(cls: type) -> None:
    """Give ``cls`` the methods and properties of the module docstring."""
    cls.cpu = _cpu
    cls.cuda = _cuda
    cls.pin_memory = _pin_memory
    cls.is_pinned = lambda self: False
    cls.is_cuda = property(lambda self: False)
    cls.is_cpu = property(lambda self: not self.is_meta)
    if "is_meta" not in cls.__dict__:  # (the eager Tensor's answers by its data)
        cls.is_meta = property(lambda self: False)
    cls.is_mps = property(lambda self: False)
    cls.is_sparse = property(lambda self: False)
    cls.layout = property(lambda self: strided)
    cls.is_quantized = property(_qtensor.is_quantized)
    # the other backends and layouts PyTorch's tensors report (library code checks them)
    for flag in _OTHER_BACKENDS:
        setattr(cls, flag, property(lambda self: False))
    # a complex tensor's parts are views of it (a real tensor's real part is itself, its
    # imaginary part PyTorch's error); assigning to one writes into the tensor, as PyTorch's
    cls.real = property(lambda self: PUBLIC["real"](self), _part_setter("real"))
    cls.imag = property(lambda self: PUBLIC["imag"](self), _part_setter("imag"))
    cls.get_device = lambda self: -1  # PyTorch's answer for a CPU tensor
    if not isinstance(cls.__dict__.get("device"), property):
        cls.device = property(lambda self: CPU)
    cls.type = _type
    cls.is_contiguous = _is_contiguous
    if "contiguous" in METHODS:
        cls.contiguous = _contiguous_method(METHODS["contiguous"])
    cls.new_zeros = _new_factory("new_zeros", 0)
    cls.new_ones = _new_factory("new_ones", 1)
    cls.new_empty = _new_factory("new_empty", 0)  # ember never hands out uninitialised memory
    cls.new_full = _new_full
    cls.new_empty_strided = _new_empty_strided
    cls.itemsize = property(lambda self: self.dtype.itemsize)
    # facts of the dtype and shape, so a traced tensor has them too (the eager Tensor's own
    # methods read its array)
    if "is_floating_point" not in cls.__dict__:
        cls.is_floating_point = lambda self: self.dtype.is_floating_point
    if "element_size" not in cls.__dict__:
        cls.element_size = lambda self: self.dtype.itemsize
    if "nbytes" not in cls.__dict__:
        cls.nbytes = property(lambda self: self.numel() * self.dtype.itemsize)
    # which output of its grad_fn this tensor is (0 for a leaf), as PyTorch's
    cls.output_nr = property(lambda self: getattr(self, "_output_nr", 0))
    cls.new_tensor = _new_tensor
    cls.new = _new
    cls.__getattr__ = tensor_getattr
