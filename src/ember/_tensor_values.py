"""The eager Tensor's values handed to Python and NumPy (installed as its methods by
ember/tensor.py): ``numpy()``, ``__array__``, ``item()``, ``tolist()``, the number
conversions, ``len``, iteration, ``in``, hashing, the repr and ``format``. Each refuses a meta
tensor (no data) and, while a graph is built, a value the graph has changed
(``_check_read``).
"""

from __future__ import annotations

import numpy as np

from . import _meta
from . import dtypes as _dt
from . import printing as _printing
from .errors import AutogradError, DTypeError, ShapeError
from .kernels.cprepack import exposed as _exposed
from .ops import _registry as _reg
from .ops import qtensor as _qtensor

_BFLOAT16_NP = _dt.bfloat16.np

# ember.Tensor, bound by `install`: a 0-d plain Tensor formats as its number
Tensor = None


def numpy(self, *, force: bool = False) -> np.ndarray:
    """The underlying array, shared (not copied); it carries no autograd history. Writes
    through it bypass the version counter, so a parameter's packed weights are no longer
    trusted once it has been handed out (kernels/cprepack.py). A tensor that requires grad
    is refused while gradients are recorded, as PyTorch refuses it (the array would escape
    its history): detach it first, or pass ``force=True`` (the detached tensor's array, as
    PyTorch's on the CPU); under ``no_grad`` (an autograd Function's forward included) it is
    given, as PyTorch gives it."""
    self._refuse_meta("Tensor.numpy()")
    if self._requires_grad and not force and _reg._state.grad_enabled:
        raise AutogradError(
            "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.",
            op="numpy",
        )
    if self._data.dtype.metadata is not None and _qtensor.is_quantized(self):
        raise _qtensor.refuse_values("numpy")
    _exposed(self._data)
    return self._data


def __array__(self, dtype=None, copy=None):
    self._refuse_meta("Tensor.__array__()")
    if self._data.dtype.metadata is not None and _qtensor.is_quantized(self):
        raise _qtensor.refuse_values("__array__")
    if dtype is not None and np.dtype(dtype) != self._data.dtype:
        return self._data.astype(dtype)
    if copy:
        return self._data.copy()
    _exposed(self._data)
    return self._data


def _check_read(self, what: str) -> None:
    """While a graph is built, refuse reading a value that the graph has changed."""
    check = getattr(_reg._state.modes[-1], "check_read", None) if _reg._state.modes else None
    if check is not None:
        check(self, what)


def item(self):
    data = self._data
    if type(data) is not np.ndarray:  # (the common array asked first: a loss logged per step)
        self._refuse_meta("Tensor.item()")
    if _reg._state.modes:
        self._check_read(".item()")
    if data.size != 1:
        raise ShapeError(  # (a RuntimeError too, as PyTorch raises)
            f"only one-element tensors can be converted to a Python scalar, "
            f"got shape {tuple(self.shape)}",
            op="item",
        )
    dtype = data.dtype
    if dtype.metadata is not None and _qtensor.is_quantized(self):
        return _qtensor.dequantize(self).item()  # (PyTorch's: the dequantized value)
    value = data.item()
    if dtype == _BFLOAT16_NP:  # (ml_dtypes' scalar: PyTorch gives a Python float)
        value = float(value)
    return value


def tolist(self):
    self._refuse_meta("Tensor.tolist()")
    self._check_read(".tolist()")
    if self._data.dtype.metadata is not None and _qtensor.is_quantized(self):
        raise _qtensor.refuse_values("tolist")
    if self.dtype is _dt.bfloat16:
        return self._data.astype(np.float32).tolist()
    return self._data.tolist()


def __bool__(self) -> bool:
    self._refuse_meta("Tensor.item()")
    self._check_read("bool()")
    if self._data.size != 1:
        raise ShapeError(
            f"the truth value of a tensor with {self._data.size} elements is ambiguous; "
            "use .any() or .all()",
            op="bool",
        )
    return bool(self._data.reshape(()))


def __float__(self) -> float:
    return float(self.item())


def __int__(self) -> int:
    return int(self.item())


def __index__(self) -> int:
    if not (self.dtype.is_integer or self.dtype.is_bool) or self._data.size != 1:
        raise TypeError("only integer tensors of a single element can be used as an index")
    return int(self.item())


def __len__(self) -> int:
    if self._data.ndim == 0:
        raise TypeError("len() of a 0-d tensor")
    return self._data.shape[0]


def __iter__(self):
    if self._data.ndim == 0:
        raise TypeError("iteration over a 0-d tensor")
    for i in range(self._data.shape[0]):
        yield self[i]


def __contains__(self, element) -> bool:
    """``element in t``: whether any element equals it (a broadcast comparison), as
    PyTorch's ``(element == t).any()``."""
    if not isinstance(element, (Tensor, bool, int, float, complex)):
        raise DTypeError(
            "Tensor.__contains__ only supports Tensor or scalar, but you passed in a "
            f"{type(element)}",
            op="contains",
        )
    return bool((self == element).any())


def __hash__(self) -> int:
    return id(self)


def __repr__(self) -> str:
    if type(self._data) is _meta.MetaArray:
        return self._meta_repr()
    data = self._data
    if data.dtype.metadata is not None and _qtensor.is_quantized(self):
        # PyTorch's text: the dequantized values, then the size, dtype and parameters
        values = _qtensor.dequantize(self)._data
        return _printing.tensor_text(values, _qtensor.suffixes(self), shown_dtype=None)
    if data.dtype.kind == "V" or data.dtype.itemsize < 4 and data.dtype.kind == "f":
        data = data.astype(np.float32)  # (bfloat16, float16, float8: printed from float32)
    default_float = _dt.get_default_dtype()
    if data.size == 0:
        shows_dtype = self.dtype is not default_float
    else:
        default_complex = _dt.get_default_complex_dtype()
        shows_dtype = self.dtype not in (default_float, default_complex, _dt.int64, _dt.bool_)
    suffixes = []
    if self.grad_fn is not None:
        suffixes.append(f"grad_fn=<{self.grad_fn.name()}>")
    elif self._requires_grad:
        suffixes.append("requires_grad=True")
    return _printing.tensor_text(
        data, suffixes, shown_dtype=repr(self.dtype) if shows_dtype else None
    )


def _meta_repr(self) -> str:
    """PyTorch's text of a meta tensor: its size, and its dtype where not the default."""
    parts = [f"size={tuple(self.shape)}"]
    if self.dtype is not _dt.get_default_dtype():
        parts.append(f"dtype={self.dtype!r}")
    if self.grad_fn is not None:
        parts.append(f"grad_fn=<{self.grad_fn.name()}>")
    elif self._requires_grad:
        parts.append("requires_grad=True")
    return "tensor(..., device='meta', " + ", ".join(parts) + ")"


def __format__(self, spec: str) -> str:
    # PyTorch's rule: a 0-d plain Tensor formats as its number under any spec, the empty
    # one too (f"loss {loss}" shows 0.6931471824645996, not tensor(0.6931)); a Parameter,
    # a subclass or a tensor of more dimensions shows its text
    if self._data.ndim == 0 and type(self) is Tensor:
        return format(self.detach().item(), spec)
    return str(self)


METHODS = (
    "numpy",
    "__array__",
    "_check_read",
    "item",
    "tolist",
    "__bool__",
    "__float__",
    "__int__",
    "__index__",
    "__len__",
    "__iter__",
    "__contains__",
    "__hash__",
    "__repr__",
    "_meta_repr",
    "__format__",
)


def install(cls: type) -> None:
    """Give ``cls`` (ember.Tensor) these methods."""
    global Tensor
    Tensor = cls
    for name in METHODS:
        setattr(cls, name, globals()[name])
