"""Tensor methods of PyTorch's that are not ops: metadata (ndimension, nelement, stride,
storage_offset, data_ptr, is_shared, share_memory_, the DLPack protocol), the conjugate
transposes mH, H and adjoint() (mT and T conjugated for complex tensors), apply_, and the
in-place shape changes squeeze_, unsqueeze_, transpose_, swapdims_/swapaxes_, t_, resize_ and
resize_as_.

The shape-changing in-place methods re-view the tensor's own memory (NumPy views: other views
of it still alias the same elements) and move its history to the re-viewed result, as
PyTorch's do. While a graph is built (ember.function / trace) squeeze_, unsqueeze_,
transpose_, swapdims_/swapaxes_ and t_ rebind a value the graph computes to the view's value (a
view of a base stays one, its chain extended; eagerly too); as_strided_ and resize_, a tensor
from outside (an argument, whose caller's shape would change), and one that aliases another
without a view chain (``.data``, ``detach()``, a piece of a split) raise there, naming the
out-of-place form to use.
"""

from __future__ import annotations

import numpy as np

from . import _views
from ._storage import root_array, typed_storage, untyped_storage
from .errors import EmberError, ShapeError
from .ops._registry import PUBLIC
from .ops.interop import dlpack_of
from .tensor import Tensor


def _base(self):
    """The tensor this one is a view of (the first of a chain of views), None for a tensor
    that is not a view, as PyTorch's ``_base``."""
    view_of = self._view_of
    return None if view_of is None else view_of[0]


def _ndimension(self) -> int:
    """The number of dims (PyTorch's older name of dim())."""
    return self.ndim


def _nelement(self) -> int:
    """The number of elements (PyTorch's older name of numel())."""
    return self.numel()


def _stride(self, dim: int | None = None):
    """The step between neighbouring elements of each dim, in elements, of this tensor's
    memory (a tuple; one int with ``dim``). A graph value's are those its eager counterpart
    would have (``_views.layout``: a view's from its chain, any other value row-major)."""
    arr = getattr(self, "_data", None)
    if arr is None:
        steps = _views.layout(self)[0]
    else:
        steps = tuple(s // arr.itemsize for s in arr.strides)
    if dim is None:
        return steps
    ndim = len(steps)
    if not -ndim <= dim < max(ndim, 1):
        raise ShapeError(f"stride: dim {dim} out of range for {ndim} dims", op="stride")
    return steps[dim]


def _storage_offset(self) -> int:
    """How many elements into its memory block this tensor's first element lies (0 unless it is
    a view; a graph value's: its eager counterpart's, ``_views.layout``)."""
    arr = getattr(self, "_data", None)
    if arr is None:
        return _views.layout(self)[1]
    root = root_array(arr)
    start = arr.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    return start // arr.itemsize


def _data_ptr(self) -> int:
    """The address of the tensor's first element."""
    return int(self._data.__array_interface__["data"][0])


def _is_shared(self) -> bool:
    """False: ember tensors live in the process's own memory."""
    return False


def _share_memory_(self):
    """A no-op that returns self. ember's DataLoader workers hand batches back through their
    own transport, so tensors need no shared-memory segment (unlike PyTorch's)."""
    return self


def _apply_(self, callable):
    """Replace every element by ``callable(element)`` (a Python function, called once per
    element, as PyTorch does on CPU). Eager only; records no gradient, and refuses a tensor
    that requires grad, as PyTorch does."""
    if self.requires_grad:
        raise EmberError("apply_ cannot be used on a tensor that requires grad", op="apply_")
    flat = self._data.reshape(-1) if self._data.flags.c_contiguous else None
    values = [callable(v) for v in self._data.reshape(-1).tolist()]
    result = np.asarray(values).astype(self._data.dtype).reshape(self._data.shape)
    if flat is not None:
        flat[...] = result.reshape(-1)
    else:
        np.copyto(self._data, result)
    self._vc[0] += 1
    return self


def _map(name, self, others, callable):
    if self.requires_grad:
        raise EmberError(f"{name} cannot be used on a tensor that requires grad", op=name)
    arrays = []
    for other in others:
        data = other._data if isinstance(other, Tensor) else np.asarray(other)
        try:
            arrays.append(np.broadcast_to(data, self._data.shape))
        except ValueError:
            raise ShapeError(
                f"{name}: a tensor of shape {tuple(data.shape)} does not broadcast to "
                f"{tuple(self._data.shape)}",
                op=name,
            ) from None
    columns = [self._data.reshape(-1).tolist()] + [a.reshape(-1).tolist() for a in arrays]
    values = [callable(*items) for items in zip(*columns)]
    result = np.asarray(values).astype(self._data.dtype).reshape(self._data.shape)
    np.copyto(self._data, result)
    self._vc[0] += 1
    return self


def _map_(self, tensor, callable):
    """``x.map_(tensor, callable)``: each element replaced by ``callable(x_i, t_i)`` with
    ``tensor`` broadcast to x's shape (Python calls, once per element, as PyTorch's CPU
    version). Eager only; refuses a tensor that requires grad, as PyTorch does."""
    return _map("map_", self, (tensor,), callable)


def _map2_(self, x, y, callable):
    """``t.map2_(x, y, callable)``: each element replaced by ``callable(t_i, x_i, y_i)``, x and
    y broadcast to t's shape. Eager only, as `map_`."""
    return _map("map2_", self, (x, y), callable)


def _dim_order(self, *, ambiguity_check=False):
    """The dimensions from the outermost in memory to the innermost (by decreasing stride,
    ties in dimension order), as PyTorch's ``Tensor.dim_order()``. ``ambiguity_check=True``
    raises where a size-1 dimension or equal strides leave the order ambiguous."""
    strides = _stride(self)
    shape = tuple(self.shape)
    if ambiguity_check is not False:
        if not isinstance(ambiguity_check, bool):
            raise TypeError("dim_order: ambiguity_check must be a bool")
        if any(n == 1 for n in shape) or len(set(strides)) != len(strides):
            raise RuntimeError(
                "The tensor does not have unique dim order, or cannot map to "
                "exact one of the given memory formats."
            )
    return tuple(sorted(range(len(shape)), key=lambda d: -strides[d]))


def _as_subclass(self, cls):
    """``x.as_subclass(cls)``: the same tensor (sharing its data and history) as an instance
    of ``cls``, a subclass of ember.Tensor."""
    if not (isinstance(cls, type) and issubclass(cls, Tensor)):
        raise TypeError(f"as_subclass: cls must be a subclass of ember.Tensor, got {cls!r}")
    view = self.unsqueeze(0).squeeze(0)  # (a view with its own history node, as alias())
    out = cls.__new__(cls)
    for klass in type(view).__mro__:  # (Tensor's slots: the view's data, history, flags)
        for slot in getattr(klass, "__slots__", ()):
            if slot not in ("__weakref__", "__dict__") and hasattr(view, slot):
                object.__setattr__(out, slot, getattr(view, slot))
    return out


def _conj(t):
    return PUBLIC["conj"](t) if t.dtype.is_complex else t


def _mH(self):
    if self.ndim < 2:
        raise ShapeError(
            f"tensor.mH is only supported on matrices or batches of matrices. Got "
            f"{self.ndim}-D tensor.",
            op="mH",
        )
    return _conj(PUBLIC["transpose"](self, -2, -1))


def _H(self):
    if self.ndim > 2:
        raise ShapeError(
            f"H is defined for tensors of at most 2 dims, got {self.ndim}; use mH", op="H"
        )
    return _conj(PUBLIC["permute"](self, tuple(reversed(range(self.ndim)))))


def _adjoint(self):
    """``torch.adjoint``: the conjugate transpose of the last two dimensions (``mH``)."""
    return _mH(self)


# ------------------------------------------------------------------- in-place shape changes


def _normalize(dim, ndim, name):
    if not -ndim <= dim < max(ndim, 1):
        raise ShapeError(f"{name}: dim {dim} out of range for {ndim} dims", op=name)
    return dim % max(ndim, 1)


def _squeeze_view(arr, dim=None):
    if dim is None:
        return np.squeeze(arr)
    dims = dim if isinstance(dim, (tuple, list)) else (dim,)
    axes = tuple(
        d for d in (_normalize(d, arr.ndim, "squeeze_") for d in dims) if arr.shape[d] == 1
    )
    return np.squeeze(arr, axis=axes) if arr.ndim else arr


def _unsqueeze_view(arr, dim):
    return np.expand_dims(arr, _normalize(dim, arr.ndim + 1, "unsqueeze_"))


def _transpose_view(arr, dim0, dim1):
    if arr.ndim == 0:
        return arr
    return np.swapaxes(
        arr, _normalize(dim0, arr.ndim, "transpose_"), _normalize(dim1, arr.ndim, "transpose_")
    )


def _t_view(arr):
    if arr.ndim > 2:
        raise ShapeError(f"t_ is defined for tensors of at most 2 dims, got {arr.ndim}", op="t_")
    return arr.T


def _as_strided_view(arr, size, stride, storage_offset=None):
    """The window ``as_strided`` gathered (it checked the sizes, strides and offset against
    the contiguous array's own elements), as a view of the same memory; read-only where two
    of its elements are one element of the memory, whose writes PyTorch refuses."""
    size, stride = tuple(int(d) for d in size), tuple(int(s) for s in stride)
    root = root_array(arr)
    own = (arr.__array_interface__["data"][0] - root.__array_interface__["data"][0]) // (
        arr.itemsize or 1
    )
    start = 0 if storage_offset is None else int(storage_offset) - own
    flat = arr.reshape(-1)
    if not flat.size or not all(size):
        return flat[:0].reshape(size)
    # (an ndarray over the flat array's buffer: its base chain reaches the memory's owner, which
    # storage_offset() and data sharing read)
    window = np.ndarray(
        size, arr.dtype, buffer=flat, offset=start * arr.itemsize,
        strides=tuple(st * arr.itemsize for st in stride),
    )  # fmt: skip
    if _overlaps(size, stride):
        window.flags.writeable = False
    return window


def _overlaps(size, stride) -> bool:
    """Whether two indices of ``size`` reach one element by ``stride``."""
    offsets = np.zeros((), np.int64)
    for d, s in zip(size, stride):
        offsets = (offsets[..., None] + np.arange(d, dtype=np.int64) * s).reshape(-1)
    return np.unique(offsets).size != offsets.size


def _reviewing(name, view, op_name, capturable=True):
    def method(self, *args, **kwargs):
        if not isinstance(self, Tensor):
            view_of = getattr(self, "_view_of", None)
            if (
                not capturable
                or (view_of is not None and type(view_of[1]) is not tuple)
                or self.value.node.kind != "call"  # (an argument, or state: the caller's shape)
            ):
                raise EmberError(
                    f"{name} changes the shape of this tensor in place, which a captured graph "
                    f"cannot express here; write x = x.{op_name}(...) instead",
                    op=name,
                )
            # a graph value: this tensor becomes the view's value (and a view of a base its
            # longer chain), as eagerly it re-views its memory
            result = PUBLIC[op_name](self, *args, **kwargs)
            self.value = result.value
            if view_of is not None:
                self._view_of, self._view_src = result._view_of, result._view_src
            return self
        self._check_inplace(name)
        result = PUBLIC[op_name](self, *args, **kwargs)
        self._data = view(self._data, *args, **kwargs)
        if result.grad_fn is not None:
            self.grad_fn = result.grad_fn
            self._output_nr = result._output_nr
        view_of = self._view_of
        if view_of is not None and type(view_of[1]) is tuple and result._view_of is not None:
            # a view of a base stays one, its chain extended: a later write through it scatters
            # into the base at the re-viewed positions
            self._view_of, self._view_src = result._view_of, result._view_src
        return self

    method.__name__ = name
    method.__doc__ = (
        f"In-place {op_name}: this tensor becomes its {op_name}, viewing the same memory."
    )
    return method


def _resize_(self, *sizes, memory_format=None):
    """PyTorch's ``resize_``: this tensor takes the shape ``sizes``, its elements in row-major
    order kept as far as both sizes reach; elements beyond the old ones are zeros (PyTorch's
    are uninitialised; ember never hands out uninitialised memory). Growing it moves it to
    new memory, which its views no longer share. Refused for a tensor that requires grad, as
    in PyTorch; eager only."""
    import math

    if not isinstance(self, Tensor):
        raise EmberError(
            "resize_ changes a tensor's shape in place, which a captured graph cannot express; "
            "make a new tensor instead",
            op="resize_",
        )
    if self.requires_grad:
        raise EmberError("cannot resize variables that require grad", op="resize_")
    shape = tuple(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) else sizes
    if any(not isinstance(d, int) or d < 0 for d in shape):
        raise ShapeError(f"resize_: sizes must be non-negative ints, got {shape}", op="resize_")
    arr = self._data
    n = math.prod(shape)
    if n == arr.size and arr.flags.c_contiguous:
        self._data = arr.reshape(shape)  # (the same memory, read with the new shape)
    else:
        new = np.zeros(shape, arr.dtype)
        kept = min(n, arr.size)
        new.reshape(-1)[:kept] = arr.reshape(-1)[:kept]
        self._data = new
    self._vc[0] += 1
    return self


def _resize_as_(self, other, memory_format=None):
    """``resize_`` to ``other``'s shape."""
    return _resize_(self, tuple(other.shape))


def _dlpack(self, *, stream=None, max_version=None, dl_device=None, copy=None):
    """The DLPack protocol (``torch.from_dlpack(x)``, ``np.from_dlpack(x)``): a capsule over
    this tensor's memory; refused for a tensor that requires grad, as PyTorch's."""
    kwargs = {k: v for k, v in (("max_version", max_version), ("dl_device", dl_device),
                                ("copy", copy)) if v is not None}  # fmt: skip
    return dlpack_of(self, **kwargs)


def _dlpack_device(self):
    """(kDLCPU, 0): ember's tensors live in CPU memory."""
    return (1, 0)


def install(cls: type) -> None:
    """Give ``cls`` the methods above (the eager Tensor, the symbolic tensor of capture: the
    memory ones raise there, as its numpy() does)."""
    cls.ndimension = _ndimension
    cls.stride = _stride
    cls.storage_offset = _storage_offset
    cls.nelement = _nelement
    cls.mH = property(_mH)
    cls.H = property(_H)
    cls.adjoint = _adjoint
    cls.squeeze_ = _reviewing("squeeze_", _squeeze_view, "squeeze")
    cls.unsqueeze_ = _reviewing("unsqueeze_", _unsqueeze_view, "unsqueeze")
    cls.transpose_ = _reviewing("transpose_", _transpose_view, "transpose")
    cls.swapdims_ = _reviewing("swapdims_", _transpose_view, "transpose")
    cls.swapaxes_ = _reviewing("swapaxes_", _transpose_view, "transpose")
    cls.t_ = _reviewing("t_", _t_view, "t")
    # (a graph value has no storage whose strides as_strided_ could read)
    cls.as_strided_ = _reviewing("as_strided_", _as_strided_view, "as_strided", capturable=False)
    if cls is Tensor:
        cls._base = property(_base)
        cls.data_ptr = _data_ptr
        cls.untyped_storage = untyped_storage
        cls.storage = typed_storage
        cls.is_shared = _is_shared
        cls.share_memory_ = _share_memory_
        cls.apply_ = _apply_
        cls.map_ = _map_
        cls.map2_ = _map2_
        cls.dim_order = _dim_order
        cls.as_subclass = _as_subclass
        cls.resize_ = _resize_
        cls.resize_as_ = _resize_as_
        cls.__dlpack__ = _dlpack
        cls.__dlpack_device__ = _dlpack_device
