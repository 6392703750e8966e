"""``cast``: converting a tensor's values to another dtype (C casting rules, as NumPy's
``astype``), and the tensor methods built on it (``x.to(dtype)``, ``x.float()``, ``x.long()``,
``x.type_as(y)``, ...)."""

from __future__ import annotations

import functools
import warnings

import numpy as np

from .. import _meta
from .. import dtypes as dt
from ..devices import check_device, check_memory_format, is_device_string
from ..devices import device as device_type
from ..errors import ArgumentTypeError, DTypeError, KernelDTypeError, MetaDataError, user_stacklevel
from ..types import TensorType
from . import _memory_format
from . import _onnx_complex as cx
from . import api as E
from ._limited import refuse_limited
from ._registry import OpDef, TensorBase, apply, export, is_grad_enabled, register
from ._rules import Complex
from ._util import memory_cost
from .promotion import to_tensor


@functools.cache
def _chalf():
    """kernels/chalf.py, imported at the first call (every eager cast between float32 and 16 bits:
    an import statement there costs each call half a microsecond)."""
    from ..kernels import chalf

    return chalf


def _cast_kernel(x, *, dtype):
    if x.dtype.kind == "c" and dtype.category != dt.complex64.category:
        x = x.real  # (PyTorch's complex-to-real cast: the real part, without NumPy's warning)
    return dt.astype(x, dtype)


def _cast_fast(x, *, dtype):
    """Casts between float32, bfloat16 and float16 in C (kernels/chalf.py: NumPy's float16
    conversion runs at a fraction of memory speed), for C-contiguous ``x`` (the reference's
    result then has its layout too)."""
    if not x.flags.c_contiguous:
        return None
    return _chalf().cast(x, dtype.np)


def _compose_casts(inner, outer, x):
    """cast(cast(x, a), b) is cast(x, b) when the cast to ``a`` loses nothing."""
    try:
        lossless = np.can_cast(x.dtype.np, inner["dtype"].np, "safe")
    except TypeError:
        lossless = False
    return dict(outer) if lossless else None


def _cast_vjp(c, g):
    src = c.in_types[0].dtype
    if not (src.is_floating_point or src.is_complex):
        return (None,)
    if g.dtype.is_complex and not src.is_complex:  # real -> complex: the real part's gradient
        return (cast(g, src, discard_imag=True),)
    return (cast(g, src),)


def _widening(x, *, dtype):
    """The wider float dtype a cast converts ``x`` to exactly, else None."""
    exact = x.dtype.is_floating_point and dtype.is_floating_point and x.dtype is not dtype
    if exact and not x.dtype.float8 and not dtype.float8:
        return dtype if np.can_cast(x.dtype.np, dtype.np, "safe") else None
    return None


def _onnx_cast(e):
    return e.cast(e.inputs[0], e.attrs["dtype"])


_CAST = register(
    OpDef(
        name="cast",
        grad_fn="ToCopyBackward0",
        float8=True,
        onnx=cx.pairs(_onnx_cast, cx.cast),
        kind="elementwise",
        infer=lambda x, *, dtype: TensorType(tuple(x.shape), dtype),
        cached_infer=True,
        kernel=_cast_kernel,
        fast=_cast_fast,
        vjp=_cast_vjp,
        cost=memory_cost,
        save_inputs=(),
        doc="cast(x, dtype): convert values to another dtype (C casting rules, like NumPy).",
        noop=lambda x, *, dtype: x.dtype is dtype,
        compose=_compose_casts,
        remat_free=True,  # one read and one write: recomputed rather than kept (_rules.py)
        keeps_order=True,  # (astype's order 'K'; the C cast takes C-contiguous operands only)
        widening=_widening,
        complex=Complex.GRADIENT,
        c="(({T})({0}))",  # fused only among float and bool types, where C agrees
    )
)


_DISCARDS = "Casting complex values to real discards the imaginary part"


@export
def cast(x, dtype, *, discard_imag: bool = False):
    """Convert ``x`` to ``dtype``; returns ``x`` itself when it already has that dtype.

    A complex ``x`` cast to a real dtype keeps its real part only where ``discard_imag`` says
    so (``x.to(dtype)``, ``x.float()``, ... pass it, with PyTorch's warning): elsewhere it is
    refused with a `DTypeError`, so no code that promotes integers to floats drops an
    imaginary part silently."""
    dtype = dt.as_dtype(dtype)
    x = to_tensor(x)
    if x.dtype is dtype:
        return x
    if x.dtype.is_complex and not dtype.is_complex and not discard_imag:
        raise DTypeError(
            f"an operand of {x.dtype} would be cast to {dtype}, discarding its imaginary part; "
            "this function takes no complex operands (x.real or x.to(dtype) cast explicitly)",
            op="cast",
        )
    return apply(_CAST, x, dtype=dtype)


def _user_cast(x, dtype):
    """A cast the user asked for (``x.to(dtype)``, ``x.float()``, the ``dtype=`` argument of
    sum, prod, mean, cumsum and cumprod): complex to real keeps the real part, with PyTorch's
    warning."""
    dtype = dt.as_dtype(dtype)
    if x.dtype.is_complex and not dtype.is_complex:
        warnings.warn(_DISCARDS, UserWarning, stacklevel=user_stacklevel())
        return cast(x, dtype, discard_imag=True)
    return cast(x, dtype)


def _to(self, *args, **kwargs):
    """``x.to(dtype)``, ``x.to(device)``, ``x.to(device, dtype)``, ``x.to(other)`` (its dtype),
    with ``non_blocking=``, ``copy=`` and ``memory_format=``, as PyTorch's.

    The device must be the CPU (``"cpu"``, ``ember.device("cpu")``): another raises
    `DeviceError`. ``non_blocking`` changes nothing (there is no device copy to overlap) and
    ``memory_format`` lays the values out in that order (ops/_memory_format.py). Returns ``x``
    itself when nothing changes and ``copy`` is false, else a new tensor (differentiable, as a
    cast or clone)."""
    dtype = kwargs.pop("dtype", None)
    device = kwargs.pop("device", None)
    kwargs.pop("non_blocking", None)
    copy = bool(kwargs.pop("copy", False))
    fmt = kwargs.pop("memory_format", None)
    check_memory_format(fmt, "to(memory_format)")
    if fmt is not None:
        _memory_format.check_rank(fmt, self.ndim, "to")
    if kwargs:
        raise ArgumentTypeError(f"to(): unexpected arguments {sorted(kwargs)}")
    positional = list(args)
    # after the device/dtype/tensor, PyTorch takes non_blocking and copy positionally
    flags = []
    while positional and isinstance(positional[-1], bool):
        flags.insert(0, positional.pop())
    if len(flags) > 1:
        copy = copy or flags[1]
    for a in positional:
        if isinstance(a, TensorBase):
            dtype = a.dtype
        elif isinstance(a, device_type) or (isinstance(a, str) and is_device_string(a)):
            device = a
        elif isinstance(a, int) and not isinstance(a, bool):
            device = a  # to(0) names cuda:0 in PyTorch: refused below
        elif a is not None:
            dtype = a
    out = self
    if device is not None:
        out = moved(self, check_device(device, "to(device)"), "to")
    if dtype is not None:
        dtype = dt.as_dtype(dtype)
        if dtype is not out.dtype:
            out = _user_cast(out, dtype)  # (NumPy's astype keeps the order of the elements)
    if _memory_format.wants_copy(getattr(out, "_data", None), fmt):
        from .copies import COPY  # (a row-major copy, then laid out in the format)

        return _memory_format.relayout(apply(COPY, out) if out is self else out, fmt)
    return E.clone(self) if copy and out is self else out


def moved(x, target, op: str):
    """``x`` on the device ``target``: a meta copy of it (a stand-in, differentiable as a copy)
    for the meta device; refused from the meta device to the CPU, as PyTorch's, since a meta
    tensor has no data to copy; else x itself."""
    on_meta = _meta.is_meta(getattr(x, "_data", None))
    if target.type == "meta" and not on_meta:
        from .copies import COPY

        with _meta.creating():
            return apply(COPY, x)
    if target.type == "cpu" and on_meta:
        raise MetaDataError("Cannot copy out of meta tensor; no data!", op=op)
    return x


export(_to, name="to", method=True, toplevel=False)


def _conversion(dtype):
    """The method ``x.float()`` (``double``, ``long``, ...): ``x.to(dtype)``, taking PyTorch's
    keyword ``memory_format`` as ``to`` does."""

    def convert(self, memory_format=None):
        if memory_format is None:
            return _user_cast(self, dtype)
        return _to(self, dtype, memory_format=memory_format)

    return convert


for _name, _dtype in [
    ("float", dt.float32),
    ("double", dt.float64),
    ("half", dt.float16),
    ("bfloat16", dt.bfloat16),
    ("int", dt.int32),
    ("long", dt.int64),
    ("short", dt.int16),
    ("byte", dt.uint8),
    ("char", dt.int8),
    ("bool", dt.bool_),
]:
    export(_conversion(_dtype), name=_name, method=True, toplevel=False)
export(
    lambda self, other: _user_cast(self, other.dtype), name="type_as", method=True, toplevel=False
)
export(_conversion(dt.complex64), name="cfloat", method=True, toplevel=False)
export(_conversion(dt.complex128), name="cdouble", method=True, toplevel=False)


requested_cast = _user_cast  # (for the reductions' dtype= argument, ops/reduce.py, cumulative.py)


def accumulated_as(name: str, x, dtype, reduce, *, scan: bool = False):
    """``reduce(x)`` with PyTorch's ``dtype=`` argument of sum, prod, nansum, cumsum and
    cumprod: x cast to ``dtype`` first, and the result of that dtype too. Integer sums and
    products accumulate in int64 and are wrapped to a narrower requested integer type after
    (the residues are the same), and a requested bool is the int64 result's truth (a sum of
    bools is their OR, a product their AND, as PyTorch's bool arithmetic). PyTorch has no bool
    scan kernel (a 0-d or empty tensor needs none), and refuses an integer or bool result of
    a tensor that requires grad."""
    if dtype is None:
        return reduce(x)
    target = dt.as_dtype(dtype)
    refuse_limited(name, target)  # (PyTorch has no sum, prod or scan kernel producing them)
    if not (target.is_floating_point or target.is_complex):
        if scan and target is dt.bool_ and x.ndim and 0 not in tuple(x.shape):
            raise KernelDTypeError("not implemented for dtype=bool (as in PyTorch)", op=name)
        if x.requires_grad and is_grad_enabled():
            raise DTypeError(
                f"autograd does not support a {target.name} result of a tensor that "
                f"requires grad (shape {tuple(x.shape)}, {x.dtype.name})",
                op=name,
            )
    out = reduce(_user_cast(x, target))
    return out if out.dtype is target else cast(out, target)
