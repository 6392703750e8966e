"""The eager Tensor: a NumPy array plus the autograd bookkeeping (requires_grad, grad, grad_fn).

Everything a Tensor *computes* goes through the op registry: operator overloads and methods are
the public functions that op modules export (``ops._registry.METHODS``), attached to the class
when ember is imported. This module only owns the data holder and its autograd state; the
in-place protocol (ember/_tensor_inplace.py) and the Python protocols (repr, len, iteration,
conversion to NumPy: ember/_tensor_values.py) are installed as its methods from their own
modules.

Invariants:
* ``_data`` is a NumPy array (never a NumPy scalar) of one of ember's dtypes.
* ``_vc`` is a one-element list, the version counter, shared by a tensor and its views; every
  in-place write bumps it, and autograd compares it with the version a saved tensor had.
* ``grad_fn`` is set only on non-leaf tensors; ``_output_nr`` says which output of it this is.
"""

from __future__ import annotations

import weakref

import numpy as np

from . import _meta, _tensor_inplace, _tensor_values
from . import dtypes as _dt
from . import random as _random
from .devices import CPU, META
from .devices import device as _device
from .errors import ArgumentTypeError, AutogradError, DTypeError, MetaDataError, ShapeError
from .grad_mode import InferenceVersion, _inference
from .ops import _registry as _reg
from .ops._data import to_array
from .size import Size


def _construct(data: tuple, dtype, device) -> np.ndarray:
    """The array of ``Tensor(*data)``: an array or tensor keeps its dtype (ember's own code
    wraps arrays so); otherwise PyTorch's legacy constructor, ``torch.Tensor``, an alias of
    the default float type: ``Tensor(2, 3)`` / ``Tensor(size)`` uninitialized (zeros here)
    of those sizes (``nn.Parameter(torch.Tensor(out, in))`` then an init: custom layers'
    idiom), ``Tensor([1, 2])`` that data in the default float dtype, ``Tensor()`` empty."""
    if device is not None and str(device).split(":")[0] != "cpu":
        from .errors import DeviceError

        raise DeviceError(f"Tensor lives on the CPU; got device={device!r}")
    if not data:
        target = _dt.get_default_dtype() if dtype is None else _dt.as_dtype(dtype)
        return np.zeros((0,), target.np)
    if len(data) == 1:
        (value,) = data
        if isinstance(value, (np.ndarray, np.generic, _reg.TensorBase)):
            return to_array(value, dtype)
        if isinstance(value, Size):
            data = tuple(value)
        elif not isinstance(value, (int, np.integer)) or isinstance(value, bool):
            return to_array(value, _dt.get_default_dtype() if dtype is None else dtype)
    if all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) for d in data):
        if any(d < 0 for d in data):
            raise ShapeError(f"Tensor(): negative size in {tuple(int(d) for d in data)}")
        target = _dt.get_default_dtype() if dtype is None else _dt.as_dtype(dtype)
        return np.zeros(tuple(int(d) for d in data), target.np)
    raise TypeError(
        f"Tensor(): expected sizes (ints), one sequence of data or an array, got {data!r}"
    )


_BFLOAT16_NP = _dt.bfloat16.np

# called with each subclass of Tensor defined after ember's import (``__torch_function__``'s
# dispatch is switched on at the first: ember/_torch_function.py, installed by ember/__init__)
SUBCLASS_HOOKS: list = []


class Tensor(_reg.TensorBase):
    __slots__ = (
        "_data",
        "_requires_grad",
        "_grad",  # behind the `grad` property, which checks what is assigned
        "grad_fn",
        "_output_nr",
        "_vc",
        "_is_view",
        "_view_of",
        "_view_src",
        "_retains_grad",
        "_hooks",
        "_post_hooks",
        "_accumulator",
        "__weakref__",
        # attributes of the user's own (``param.no_decay = True``), as PyTorch's tensors take
        # them: the dict is made at the first such assignment, never by ember itself
        "__dict__",
    )

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for hook in SUBCLASS_HOOKS:
            hook(cls)

    # NumPy must defer to Tensor's reflected operators (ndarray + Tensor -> Tensor.__radd__)

    def __init__(self, *data, dtype=None, requires_grad: bool = False, device=None):
        arr = _construct(data, dtype, device)
        self._data = arr
        self._requires_grad = False
        self._grad = None
        self.grad_fn = None
        self._output_nr = 0
        self._vc = [0] if not _inference[0] else InferenceVersion([0])
        self._is_view = False
        self._view_of = None  # (root base, view ops from it): see _views.py
        self._view_src = None
        self._retains_grad = False
        self._hooks = None
        self._post_hooks = None
        self._accumulator = None
        if requires_grad:
            self.requires_grad_(True)

    @classmethod
    def _wrap(cls, arr: np.ndarray) -> Tensor:
        """A new leaf around a NumPy array ember produced (no copies, no checks)."""
        t = object.__new__(cls)
        t._data = arr
        t._requires_grad = False
        t._grad = None
        t.grad_fn = None
        t._output_nr = 0
        t._vc = [0] if not _inference[0] else InferenceVersion([0])
        t._is_view = False
        t._view_of = None
        t._view_src = None
        t._retains_grad = False
        t._hooks = None
        t._post_hooks = None
        t._accumulator = None
        return t

    # ------------------------------------------------------------------------------ metadata
    @property
    def shape(self) -> Size:
        return Size(self._data.shape)

    @property
    def dtype(self) -> _dt.DType:
        try:
            return _dt._BY_NP[self._data.dtype]
        except KeyError:
            return _dt.from_numpy_dtype(self._data.dtype)

    @property
    def ndim(self) -> int:
        return self._data.ndim

    def dim(self) -> int:
        return self._data.ndim

    def numel(self) -> int:
        return self._data.size

    def size(self, dim: int | None = None):
        if dim is None:
            return Size(self._data.shape)
        return self._data.shape[dim]

    def element_size(self) -> int:
        return self._data.itemsize

    @property
    def nbytes(self) -> int:
        return self._data.nbytes

    @property
    def device(self) -> _device:
        return META if type(self._data) is _meta.MetaArray else CPU

    @property
    def is_meta(self) -> bool:
        return type(self._data) is _meta.MetaArray

    def _refuse_meta(self, what: str) -> None:
        if type(self._data) is _meta.MetaArray:
            raise MetaDataError(
                f"{what} cannot be called on meta tensors: a meta tensor has a shape and a "
                "dtype and no data (materialize it first: to_empty, or load_state_dict with "
                "assign=True)",
                op=what,
            )

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    @property
    def _version(self) -> int:
        if type(self._vc) is InferenceVersion:
            raise AutogradError("Inference tensors do not track version counter.", op="_version")
        return self._vc[0]

    def is_floating_point(self) -> bool:
        return self.dtype.is_floating_point

    # ------------------------------------------------------------------------------ autograd
    @property
    def requires_grad(self) -> bool:
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        self.requires_grad_(value)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        if self.grad_fn is not None:
            if not requires_grad:
                raise AutogradError(
                    "requires_grad can only be turned off on a leaf tensor; use .detach() "
                    "for a copy outside the graph",
                    op="requires_grad_",
                )
            return self
        if requires_grad and type(self._vc) is InferenceVersion and not _inference[0]:
            raise AutogradError(
                "Setting requires_grad=True on inference tensor outside InferenceMode is not "
                "allowed.",
                op="requires_grad_",
            )
        if requires_grad and not (self.dtype.is_floating_point or self.dtype.is_complex):
            raise DTypeError(
                f"only floating-point and complex tensors can require gradients, got {self.dtype}",
                op="requires_grad_",
            )
        self._requires_grad = bool(requires_grad)
        return self

    def retain_grad(self) -> None:
        """Keep this non-leaf tensor's gradient in ``.grad`` after backward (accumulating)."""
        if self.grad_fn is None or self._retains_grad:
            return
        self._retains_grad = True
        if self.grad_fn._retained is None:
            self.grad_fn._retained = {}
        self.grad_fn._retained[self._output_nr] = weakref.ref(self)

    @property
    def retains_grad(self) -> bool:
        return self._retains_grad

    def backward(
        self,
        gradient=None,
        retain_graph: bool | None = None,
        create_graph: bool = False,
        inputs=None,
    ) -> None:
        backward = _ENGINE_BACKWARD[0]
        if backward is None:  # (ember.autograd imports this module: bound at the first call)
            from .autograd import backward

            _ENGINE_BACKWARD[0] = backward
        backward(
            self, gradient, retain_graph=retain_graph, create_graph=create_graph, inputs=inputs
        )

    def register_hook(self, hook):
        """Call ``hook(grad)`` when this tensor's gradient is computed; a returned tensor replaces
        the gradient. Returns a handle whose ``remove()`` unregisters it."""
        if not self._requires_grad:
            raise AutogradError(
                "cannot register a hook on a tensor that does not require grad", op="register_hook"
            )
        if self.grad_fn is not None:
            from .autograd_node import register_tensor_hook

            return register_tensor_hook(self, hook)
        if self._hooks is None:
            self._hooks = {}
        key = object()
        self._hooks[key] = hook
        return _HookHandle(self._hooks, key)

    def register_post_accumulate_grad_hook(self, hook):
        """Call ``hook(self)`` after a backward pass has accumulated this leaf's ``.grad``
        (PyTorch's semantics: leaves only, the return value is ignored, ``autograd.grad`` does
        not call it).
        Returns a handle whose ``remove()`` unregisters it."""
        if not self._requires_grad:
            raise AutogradError(
                "cannot register a hook on a tensor that does not require grad",
                op="register_post_accumulate_grad_hook",
            )
        if self.grad_fn is not None:
            raise AutogradError(
                "post accumulate grad hooks cannot be registered on non-leaf tensors",
                op="register_post_accumulate_grad_hook",
            )
        if self._post_hooks is None:
            self._post_hooks = {}
        key = object()
        self._post_hooks[key] = hook
        return _HookHandle(self._post_hooks, key)

    def __getstate__(self):
        # a copy or a pickle has memory of its own: it is no longer a view of anything, and its
        # view record (which holds ops) stays behind
        state = super().__getstate__()
        slots = dict(state[1])
        slots["_view_of"] = slots["_view_src"] = None
        return state[0], slots

    def detach(self) -> Tensor:
        """A tensor sharing this one's data, outside the graph (writes to either are shared)."""
        t = Tensor._wrap(self._data)
        t._vc = self._vc
        t._is_view = True
        return t

    def detach_(self) -> Tensor:
        if self._view_of is not None:  # (PyTorch's rule: the base's history would disagree)
            raise AutogradError("can't detach a view in place; use detach() instead", op="detach_")
        self.grad_fn = None
        self._requires_grad = False
        return self

    @property
    def data(self) -> Tensor:
        return self.detach()

    @data.setter
    def data(self, value) -> None:
        if isinstance(value, _reg.TensorBase) and not isinstance(value, Tensor):
            if _reg._state.modes:  # a graph value, while that graph is built: ``p.data = v``
                # is the functionalized write ``p.copy_(v)`` without history (p stays a leaf)
                enabled, _reg._state.grad_enabled = _reg._state.grad_enabled, False
                try:
                    self.copy_(value)
                finally:
                    _reg._state.grad_enabled = enabled
                return
        self._data = to_array(value._data if isinstance(value, Tensor) else value, None)
        self._vc[0] += 1


# (the in-place protocol, and the values handed to Python and NumPy, in modules of their own)
_tensor_inplace.install(Tensor)
_tensor_values.install(Tensor)


class _HookHandle:
    def __init__(self, table: dict, key):
        self._table, self._key = table, key

    def remove(self) -> None:
        self._table.pop(self._key, None)


# the engine's ``backward`` (autograd.py), bound at the first ``Tensor.backward`` call
_ENGINE_BACKWARD: list = [None]

# The ``grad`` slot itself: code that must read a gradient without being seen by
# ``watching_grad_reads`` (capture/state.py) reads it through this descriptor.
GRAD_SLOT = Tensor.__dict__["_grad"]


def _check_assigned_grad(t: Tensor, grad) -> None:
    """PyTorch's checks of ``t.grad = grad``: a tensor (dense or sparse) of t's dtype and
    size, never t itself, so a wrong gradient fails where it is assigned rather than in the
    optimizer's step."""
    if grad is t:
        raise AutogradError("can't assign Variable as its own grad", op="grad")
    if not isinstance(grad, _reg.TensorBase):
        from .ops.sparse_tensor import SparseTensor

        if not isinstance(grad, SparseTensor):
            raise ArgumentTypeError(
                "assigned grad expected to be a Tensor or None but got grad of type "
                f"{type(grad).__name__}"
            )
    if grad.dtype is not t.dtype:
        raise DTypeError(
            f"attempting to assign a gradient with dtype {grad.dtype} to a tensor with "
            f"dtype {t.dtype}; the gradient must have the tensor's dtype",
            op="grad",
        )
    shape, target = tuple(grad.shape), tuple(t.shape)
    concrete = all(isinstance(d, int) for d in shape + target)  # (captured sizes may be symbols)
    if concrete and shape != target:
        raise ShapeError(
            f"attempting to assign a gradient of size {list(shape)} to a tensor of size "
            f"{list(target)}; the gradient must have the tensor's size",
            op="grad",
        )


def _set_grad(t: Tensor, grad) -> None:
    if grad is not None:
        _check_assigned_grad(t, grad)
    GRAD_SLOT.__set__(t, grad)


# ``t.grad``: read as the slot, assigned through the checks
GRAD_PROPERTY = property(GRAD_SLOT.__get__, _set_grad, doc="The gradient accumulated into t.")
Tensor.grad = GRAD_PROPERTY

# A generator's `get_state` returns PyTorch's state bytes as a tensor (random.py, below this
# layer, holds the hook).
_random._as_tensor = Tensor._wrap
