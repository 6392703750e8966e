"""The eager Tensor: a NumPy array plus the autograd bookkeeping (requires_grad, grad, grad_fn).

Everything a Tensor *computes* goes through the op registry: operator overloads and methods are
the public functions that op modules export (``ops._registry.METHODS``), attached to the class
when ember is imported. This module only owns the data holder, the in-place protocol and the
Python protocols (repr, len, iteration, conversion to NumPy).

Invariants:
* ``_data`` is a NumPy array (never a NumPy scalar) of one of ember's dtypes.
* ``_vc`` is a one-element list, the version counter, shared by a tensor and its views; every
  in-place write bumps it, and autograd compares it with the version a saved tensor had.
* ``grad_fn`` is set only on non-leaf tensors; ``_output_nr`` says which output of it this is.
"""

from __future__ import annotations

import weakref

import numpy as np

from . import _meta, _views
from . import dtypes as _dt
from . import printing as _printing
from . import random as _random
from .devices import CPU, META
from .devices import device as _device
from .errors import ArgumentTypeError, AutogradError, DTypeError, MetaDataError, ShapeError
from .grad_mode import InferenceVersion, _inference
from .kernels.cprepack import exposed as _exposed
from .ops import _registry as _reg
from .ops import qtensor as _qtensor
from .ops._data import to_array
from .ops._overlap import ANY as _ANY_OVERLAP
from .ops._overlap import refuse_partial_overlap as _refuse_partial_overlap
from .ops._util import fit_inplace_result
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

# the recording ember.profiler.profile, set by it: direct in-place ufuncs then show as events
_profiler = None


def _repeats_memory(a) -> bool:
    """Whether some of ``a``'s elements certainly share memory: its extent is smaller than its
    elements (overlapping windows of `Tensor.unfold`)."""
    if a.size <= 1:
        return False
    extent = sum((n - 1) * abs(s) for n, s in zip(a.shape, a.strides)) + a.itemsize
    return extent < a.size * a.itemsize


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

    # ------------------------------------------------------------------------------ in-place
    def _check_inplace(self, what: str) -> None:
        if not _reg.is_grad_enabled():
            return
        if self.grad_fn is None and self._requires_grad:
            raise AutogradError(
                "a leaf tensor that requires grad is being used in an in-place operation; "
                "wrap the update in `with ember.no_grad():` or use the out-of-place form",
                op=what,
            )

    def _inplace(self, name: str, fn, *args, **kwargs) -> Tensor:
        """Run ``fn(self, *args)`` out of place and write the result into this tensor's memory.

        The tensor's history moves to the new result, and the version counter is bumped so that
        any backward that saved the old value reports the overwrite instead of using wrong data.
        While gradients are recorded the op reads a copy of the old value, which it may save
        (PyTorch saves the original self too). A value an op saved of its own result is that
        result's array, not this tensor's memory, so ``b.exp_().sqrt_()`` differentiates
        (PyTorch, whose exp_ saves b's memory, refuses that chain).
        """
        if _meta.active[0] and type(self._data) is _meta.MetaArray:
            return self._meta_inplace(name, fn, args, kwargs)
        if self._data.dtype.metadata is not None and _qtensor.is_quantized(self):
            _qtensor.write_inplace(self, name, fn, args, kwargs)
            self._vc[0] += 1
            return self
        if not (getattr(fn, "one_value", False) or getattr(fn, "overlap_ok", False)):
            full = getattr(fn, "overlap_refused", None) is _ANY_OVERLAP  # (indexed writes)
            _refuse_partial_overlap(name, self._data, _operand_arrays(args, kwargs), full)
        if getattr(fn, "ufunc", None) is not None and not kwargs and self._ufunc_inplace(fn, args):
            return self
        direct = getattr(fn, "direct_inplace", None)
        if (  # (add_/sub_ with alpha=, addcmul_, addcdiv_, lerp_: the op's own direct route,
            # ops/binary_alpha.py, ops/_pointwise_inplace.py: written into the memory, no copy)
            direct is not None
            and not _reg._state.modes
            and _profiler is None
            and (self._view_of is None or not _repeats_memory(self._data))
            and direct(self, args, kwargs)
        ):
            self._vc[0] += 1
            return self
        self._check_inplace(name)
        # a write through a view is also one into its base (_views.py); a graph being built
        # follows the views of its own values only
        through_view = (
            self._view_of is not None and _reg._state.grad_enabled and not _reg._state.modes
        )
        if through_view:  # (a fill writes one value wherever shared memory repeats: allowed)
            positions = _views.prepare(self, name, getattr(fn, "one_value", False))
        if _reg._state.modes:  # a graph is being built: it functionalizes the update
            inplace = getattr(_reg._state.modes[-1], "inplace", None)
            if inplace is not None:
                return inplace(self, name, fn, args, kwargs)
        old = Tensor._wrap(self._data)
        old._requires_grad = self._requires_grad
        old.grad_fn = self.grad_fn
        old._output_nr = self._output_nr
        old._vc = self._vc
        if _reg._state.grad_enabled and (self._requires_grad or _any_requires_grad(args, kwargs)):
            # the op may save its operand for backward (pow_, sin_, mul_ by a tensor that
            # requires grad): it gets the value before the write, as PyTorch saves the original
            # self, instead of memory the write is about to change
            old._data = self._data.copy()
            old._vc = [0]
        result = fn(old, *args, **kwargs)
        if not isinstance(result, Tensor):
            result = Tensor(result)
        result = fit_inplace_result(name, result, self)
        if through_view:
            _views.refuse_multi_output(self, result, name)
        if not self._data.flags.writeable:
            _views.refuse_read_only(self, name)
        np.copyto(self._data, result._data, casting="unsafe")
        self._vc[0] += 1
        if _reg.is_grad_enabled():
            if result.grad_fn is not None:
                self.grad_fn = result.grad_fn
                self._output_nr = result._output_nr
                self._requires_grad = True
            elif self.grad_fn is not None:
                # overwritten by values that do not depend on it (fill_, zero_, copy_ of a
                # constant): as in PyTorch it stays in the graph, passing a zero gradient to
                # its old value (a select, so no NaN or inf of the old value leaks)
                everywhere = _reg.PUBLIC["full"](self.shape, True, dtype=_dt.bool_)
                kept = _reg.PUBLIC["where"](everywhere, result, old)
                self.grad_fn = kept.grad_fn
                self._output_nr = kept._output_nr
            if through_view and self._requires_grad:
                _views.write_through(self, name, positions)
            elif through_view:  # nothing to differentiate: the shared data is all there is
                self._view_src = _views.stamp(self._view_of[0])
        return self

    def _meta_inplace(self, name: str, fn, args, kwargs) -> Tensor:
        """An in-place op on a meta tensor: the op runs on stand-ins (a random fill draws
        nothing: `_meta.creating`), its result's shape and dtype are checked to fit, and the
        history moves to it; there is nothing to write."""
        self._check_inplace(name)
        old = Tensor._wrap(self._data)
        old._requires_grad, old.grad_fn, old._output_nr = (
            self._requires_grad,
            self.grad_fn,
            self._output_nr,
        )
        with _meta.creating():
            result = fn(old, *args, **kwargs)
        if not isinstance(result, Tensor):
            result = Tensor(result)
        fit_inplace_result(name, result, self)
        self._vc[0] += 1
        if _reg.is_grad_enabled() and result.grad_fn is not None:
            self.grad_fn = result.grad_fn
            self._output_nr = result._output_nr
            self._requires_grad = True
        return self

    def _ufunc_inplace(self, fn, args) -> bool:
        """The direct route of `_inplace` for a one-ufunc op (``fn.ufunc``): when nothing is
        recorded and the operands need no promotion or broadcasting of x, compute into x's own
        memory, as PyTorch's in-place kernels do. Returns False to take the general route."""
        ufunc = fn.ufunc
        if len(args) != ufunc.nin - 1 or _reg._state.modes:  # only eager, never while capturing
            return False
        a = self._data
        dtype = _dt._BY_NP.get(a.dtype) or self.dtype
        if (
            dtype.is_bool
            or dtype.is_complex
            or (fn.ufunc_float_only and not dtype.is_floating_point)
        ):
            return False  # (complex: the op's complex rule decides, in the general route)
        recording = _reg._state.grad_enabled and self._requires_grad
        operands = []
        for arg in args:
            if isinstance(arg, Tensor):
                recording = recording or (_reg._state.grad_enabled and arg._requires_grad)
                b = arg._data
                if b.dtype != a.dtype or (b.shape != a.shape and not _fits(b.shape, a.shape)):
                    return False
                operands.append(b)
            elif type(arg) in (int, float) and _dt.result_type(dtype, arg) is dtype:
                if type(arg) is int and not _fits_integer(arg, a.dtype):
                    return False  # (NumPy refuses it; the general route wraps it, as PyTorch)
                if (
                    dtype.itemsize == 2
                    and dtype.is_floating_point
                    and not _dt.holds_exactly(dtype, arg)
                ):
                    return False  # (half by a number it cannot hold: PyTorch's float32 math)
                operands.append(arg)  # a weak scalar: NumPy keeps x's dtype, as ember does
            else:
                return False
        if recording or not a.flags.writeable:
            return False  # (read-only: the general route says why)
        if self._view_of is not None and _repeats_memory(a):
            return False  # (a ufunc reads each location once: the general route refuses it)
        if _profiler is None:
            ufunc(a, *operands, out=a)
        else:
            _profiler.inplace_ufunc(ufunc, self, operands)
        self._vc[0] += 1
        return True

    # ------------------------------------------------------------------------------ conversion
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
                "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() "
                "instead.",
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


class _HookHandle:
    def __init__(self, table: dict, key):
        self._table, self._key = table, key

    def remove(self) -> None:
        self._table.pop(self._key, None)


def _operand_arrays(args, kwargs) -> list:
    """The arrays of the tensors among an in-place op's arguments (or in lists or tuples of
    them, index_put_'s indices): what it reads while it writes."""
    arrays = []
    for arg in (*args, *kwargs.values()) if kwargs else args:
        if isinstance(arg, Tensor):  # (asked first: the common operand)
            if isinstance(arg._data, np.ndarray):
                arrays.append(arg._data)
        elif isinstance(arg, (list, tuple)):
            arrays.extend(_operand_arrays(arg, {}))
    return arrays


def _any_requires_grad(args, kwargs) -> bool:
    """Whether a tensor among the arguments (or in a list or tuple of them) requires grad."""
    for arg in (*args, *kwargs.values()):
        if isinstance(arg, (list, tuple)):
            if _any_requires_grad(arg, {}):
                return True
        elif isinstance(arg, Tensor) and arg._requires_grad:
            return True
    return False


def _fits_integer(value: int, dtype: np.dtype) -> bool:
    """Whether a Python int is a value of an integer (or any non-integer) NumPy dtype."""
    if dtype.kind not in "iu":
        return True
    info = np.iinfo(dtype)
    return info.min <= value <= info.max


def _fits(shape: tuple, target: tuple) -> bool:
    """Whether ``shape`` broadcasts to ``target`` without enlarging it."""
    if len(shape) > len(target):
        return False
    return all(s == t or s == 1 for s, t in zip(shape[::-1], target[::-1]))


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
