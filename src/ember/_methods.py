"""Attach the op registry's public functions to tensor classes as methods and operators.

Run once when ember is imported, after every op module has registered itself. The operator
table below is the only place that maps Python syntax to ops.
"""

from __future__ import annotations

import numpy as np

from . import _meta, _tensor_inplace
from .ops import _autocast
from .ops._node_names import rename_node
from .ops._overlap import refuse_partial_overlap
from .ops._registry import INPLACE, METHODS, PUBLIC, TensorBase
from .ops._registry import _state as _registry_state
from .ops._torch_keywords import with_torch_keywords
from .ops._util import fill_number
from .tensor import Tensor


def _reflected(name):
    def method(self, other):
        return PUBLIC[name](other, self)

    return method


def _rtruediv(self, other):
    """``2 / x``: PyTorch's ``x.reciprocal() * 2`` for a number (its rounding, MulBackward0's
    node), a division otherwise."""
    if type(other) in _NUMBERS:
        return PUBLIC["mul"](PUBLIC["reciprocal"](self), other)
    return PUBLIC["div"](other, self)


def _rsub(self, other):
    """``2 - x``: PyTorch's rsub of a scalar, whose node is RsubBackward1."""
    return rename_node(PUBLIC["sub"](other, self), "RsubBackward1", self)


def _forward(name):
    def method(self, *args, **kwargs):
        return PUBLIC[name](self, *args, **kwargs)

    return method


_NUMBERS = frozenset((float, int, bool, complex))
_NOT_OPERANDS = (str, bytes, list, tuple, dict, set)


def _binary(name):
    """A binary operator: defers (NotImplemented) to an operand that is a sparse tensor, so
    ``dense + sparse`` runs the sparse tensor's reflected operator, as in PyTorch."""

    def method(self, other, *args, **kwargs):
        if (
            not isinstance(other, TensorBase)
            and type(other) not in _NUMBERS  # (a number has no such flag: no lookup for it)
            and getattr(other, "ember_sparse", False) is True
        ):
            return NotImplemented
        if _meta.active[0] and name != "matmul":  # (PyTorch's matmul takes both devices)
            _meta.refuse_mixed(name, (self, other))
        if args or kwargs:
            return PUBLIC[name](self, other, *args, **kwargs)
        return PUBLIC[name](self, other)

    return method


def _compare(name):
    """A comparison operator. As in PyTorch, an operand its operators do not convert (None, a
    string, a Python list or tuple) gives NotImplemented, so ``t == None`` and ``t == [1, 2]``
    are False, ``t != None`` True (Python's identity fallback), ``t in (None, "x")`` False,
    and ``t < None`` a TypeError; ``torch.eq(t, [1, 2])`` still converts the list."""

    def method(self, other):
        if other is None or isinstance(other, _NOT_OPERANDS):
            return NotImplemented
        if _meta.active[0]:
            _meta.refuse_mixed(name, (self, other))
        return PUBLIC[name](self, other)

    return method


def _late(name):
    """A function that looks ``name`` up when called (the op may register after install)."""

    def call(*args, **kwargs):
        return PUBLIC[name](*args, **kwargs)

    return call


def _inplace(method_name, fn):
    def method(self, *args, **kwargs):
        if _registry_state.autocast is None:
            return self._inplace(method_name, fn, *args, **kwargs)
        with _autocast.suspended():  # (PyTorch's autocast lists hold no in-place op)
            return self._inplace(method_name, fn, *args, **kwargs)

    method.__name__ = method_name
    method.__doc__ = f"In-place version of ``{method_name[:-1]}``: writes the result into self."
    return method


def _is_bool(value) -> bool:
    dtype = getattr(value, "dtype", None)
    return dtype.is_bool if dtype is not None else isinstance(value, bool)


def _logical(name):
    """``&``, ``|``, ``^``, ``~``: as in PyTorch, the logical op on bools and the bitwise op on
    integers (which refuses floating point)."""
    bitwise = "bitwise_" + name.split("_")[1]

    def method(self, other=None):
        operands = (self,) if other is None else (self, other)
        if all(_is_bool(t) for t in operands):
            return PUBLIC[name](*operands)
        return PUBLIC[bitwise](*operands)

    return method


def _reflected_logical(name):
    forward = _logical(name)

    def method(self, other):
        return forward(self, other)  # and, or, xor commute

    return method


def _shift(name, reflected=False):
    def method(self, other):
        return PUBLIC[name](other, self) if reflected else PUBLIC[name](self, other)

    return method


_BINARY = {
    "add": "add",
    "sub": "sub",
    "mul": "mul",
    "truediv": "div",
    "floordiv": "floor_div",
    "mod": "mod",
    "pow": "pow",
    "matmul": "matmul",
}
_COMPARE = {"eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge"}


def _setitem(self, index, value) -> None:
    # ``x[index] = value``: index_put out of place, written into x by the in-place protocol
    if isinstance(value, TensorBase):
        # basic indexing is a copy_ (a 0-d value a fill, unchecked), advanced indexing
        # PyTorch's index_put_, which refuses a full overlap too, a 0-d value's included
        basic = _is_basic(index)
        if value.ndim or not basic:
            _refuse_overlap("__setitem__", _region(self, index), value, not basic)
    self._inplace("__setitem__", _index_put, index, value)


def _index_put(old, index, value):
    return PUBLIC["index_put"](old, index, value)


# (the region ``x[index] = value`` writes is checked against value by _setitem, not all of x)
_index_put.overlap_ok = True


def _is_basic(index) -> bool:
    parts = index if isinstance(index, tuple) else (index,)
    return all(p is None or p is Ellipsis or type(p) in (int, slice) for p in parts)


def _region(self, index):
    """The array ``x[index] = value`` writes, as PyTorch's overlap check sees it: the view for
    basic indexing (ints, slices: a ``copy_`` into it), all of x for advanced indexing (an
    ``index_put_``)."""
    data = getattr(self, "_data", None)
    if not isinstance(data, np.ndarray):
        return None
    if not _is_basic(index):
        return data
    try:
        return data[index]
    except (IndexError, TypeError):  # (the op itself refuses the index, in its words)
        return None


def _refuse_overlap(what: str, written, src, full: bool = False) -> None:
    data = getattr(src, "_data", None)
    if isinstance(written, np.ndarray) and isinstance(data, np.ndarray):
        refuse_partial_overlap(what, written, (data,), full)


def _copy_(self, src):
    """Copy ``src`` (broadcast, cast to self's dtype) into self, in place."""
    if not isinstance(src, TensorBase):
        src = PUBLIC["tensor"](src)
    if (
        _meta.active[0]
        and _meta.is_meta(getattr(src, "_data", None))  # (a traced tensor has no data)
        and not _meta.is_meta(getattr(self, "_data", None))
    ):
        from .errors import MetaDataError  # (a meta tensor has no values to copy: PyTorch's)

        raise MetaDataError("Cannot copy out of meta tensor; no data!", op="copy_")
    _refuse_overlap("copy_", getattr(self, "_data", None), src)
    return self._inplace("copy_", lambda old: src.to(old.dtype).expand(old.shape))


def _fill_(self, value):
    """Set every element to ``value`` (a number or a one-element tensor), in place."""
    kind = type(value)
    if (kind is float or kind is int or kind is bool) and _fills_directly(self):
        # (nothing recorded: the number written into the memory as `full` would make it,
        # checked and converted as `full` does, without a new tensor and a copy)
        dtype = self.dtype
        number = fill_number("full", value, dtype)
        number = (
            bool(number) if dtype.is_bool else int(number) if dtype.is_integer else float(number)
        )
        np.copyto(self._data, number, casting="unsafe")  # (np.full's own write)
        self._vc[0] += 1
        return self
    if isinstance(value, TensorBase):

        def fill(old):
            return value.to(old.dtype).expand(old.shape)
    else:

        def fill(old):
            return PUBLIC["full"](old.shape, value, dtype=old.dtype)

    fill.one_value = True  # (so a fill through overlapping elements is allowed, as PyTorch's)
    return self._inplace("fill_", fill)


def _fills_directly(self) -> bool:
    """Whether `_fill_` of a number may write it straight into the tensor's memory: what the
    general in-place route (Tensor._inplace) would do then is that write and the version bump
    alone: an eager, writable, real, unquantized array, not a view (whose base's record the
    route keeps), no graph built, no profiler, nothing recorded for it."""
    state = _registry_state
    if state.modes:  # (a graph is built: its own in-place route, on its symbolic tensors)
        return False
    data = getattr(self, "_data", None)
    return (
        type(data) is np.ndarray
        and data.dtype.metadata is None
        and data.dtype.kind in "biuf"
        and data.flags.writeable
        and self._view_of is None
        and not (state.grad_enabled and self._requires_grad)
        and _tensor_inplace._profiler is None
    )


def _zero_(self):
    return self.fill_(0)


def install(cls: type = Tensor) -> None:
    """Give ``cls`` (the eager Tensor, the symbolic tensor of graph capture) every op method."""
    # PyTorch's keywords too: x.add(other=y), x.mm(mat2=m), x.pow_(exponent=2)
    for name, fn in with_torch_keywords(METHODS).items():
        setattr(cls, name, fn)
    inplace = with_torch_keywords({name[:-1]: fn for name, fn in INPLACE.items()})
    for name, fn in inplace.items():
        setattr(cls, name + "_", _inplace(name + "_", fn))
    for dunder, op in _BINARY.items():
        setattr(cls, f"__{dunder}__", _binary(op))
        setattr(cls, f"__r{dunder}__", _reflected(op))
        fn = PUBLIC.get(op) or _late(op)
        setattr(cls, f"__i{dunder}__", _inplace(f"__i{dunder}__", fn))
    for dunder, op in _COMPARE.items():
        setattr(cls, f"__{dunder}__", _compare(op))
    for dunder, op in {"and": "logical_and", "or": "logical_or", "xor": "logical_xor"}.items():
        setattr(cls, f"__{dunder}__", _logical(op))
        setattr(cls, f"__r{dunder}__", _reflected_logical(op))
        setattr(cls, f"__i{dunder}__", _inplace(f"__i{dunder}__", _logical(op)))
    for dunder, op in {"lshift": "bitwise_left_shift", "rshift": "bitwise_right_shift"}.items():
        setattr(cls, f"__{dunder}__", _shift(op))
        setattr(cls, f"__r{dunder}__", _shift(op, reflected=True))
        setattr(cls, f"__i{dunder}__", _inplace(f"__i{dunder}__", _shift(op)))
    cls.__rsub__ = _rsub
    cls.__rtruediv__ = _rtruediv
    # Python 2's names of true division, which PyTorch's Tensor still has
    cls.__div__, cls.__rdiv__, cls.__idiv__ = cls.__truediv__, cls.__rtruediv__, cls.__itruediv__
    cls.__invert__ = _logical("logical_not")
    cls.__neg__ = _forward("neg")
    cls.__pos__ = _forward("positive")
    cls.__abs__ = _forward("abs")
    cls.__getitem__ = _forward("getitem")
    cls.__setitem__ = _setitem
    cls.copy_ = _copy_
    cls.fill_ = _fill_
    cls.zero_ = _zero_
    # NumPy defers ``ndarray @ tensor`` (and the other operators) to the tensor's reflected
    # method instead of converting the tensor (which a symbolic tensor refuses)
    cls.__array_priority__ = 1000
    cls.T = property(lambda self: PUBLIC["permute"](self, tuple(reversed(range(self.ndim)))))
    cls.mT = property(lambda self: PUBLIC["transpose"](self, -2, -1))
