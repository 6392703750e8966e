"""The in-place protocol of the eager Tensor (installed as its methods by ember/tensor.py):
``Tensor._inplace``, which every in-place method (``x.add_(y)``, ``x[i] = v``, ``copy_``,
``fill_``) runs: an op's result written into the tensor's memory, its history moved to the
result, its version counter bumped; and its direct routes, which write into the memory where
nothing is recorded (`_ufunc_inplace`: a one-ufunc op; the public function's own
``direct_inplace``: add_/sub_ with alpha=, addcmul_, addcdiv_, lerp_), and the meta tensors'
form (`_meta_inplace`).
"""

from __future__ import annotations

import numpy as np

from . import _meta, _views
from . import dtypes as _dt
from .errors import AutogradError
from .ops import _registry as _reg
from .ops import qtensor as _qtensor
from .ops._overlap import ANY as _ANY_OVERLAP
from .ops._overlap import refuse_partial_overlap as _refuse_partial_overlap
from .ops._util import fit_inplace_result

# ember.Tensor, bound by `install` (ember/tensor.py imports this module to define it): the
# in-place protocol wraps old values and results as plain Tensors, whatever the subclass
Tensor = None

# the recording ember.profiler.profile, set by it: direct in-place ufuncs then show as events
_profiler = None


def _repeats_memory(a) -> bool:
    """Whether some of ``a``'s elements certainly share memory: its extent is smaller than its
    elements (overlapping windows of `Tensor.unfold`)."""
    if a.size <= 1:
        return False
    extent = sum((n - 1) * abs(s) for n, s in zip(a.shape, a.strides)) + a.itemsize
    return extent < a.size * a.itemsize


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
    through_view = self._view_of is not None and _reg._state.grad_enabled and not _reg._state.modes
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
    if dtype.is_bool or dtype.is_complex or (fn.ufunc_float_only and not dtype.is_floating_point):
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


METHODS = ("_check_inplace", "_inplace", "_meta_inplace", "_ufunc_inplace")


def install(cls: type) -> None:
    """Give ``cls`` (ember.Tensor) the in-place protocol's methods."""
    global Tensor
    Tensor = cls
    for name in METHODS:
        setattr(cls, name, globals()[name])
