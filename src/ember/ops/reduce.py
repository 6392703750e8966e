"""Reductions: sum, prod, max/min (amax/amin), argmax/argmin and all/any as primitives (mean,
var, std and logsumexp, composed from them, are in ops/moments.py; the running sum ``cumsum``
in ops/cumulative.py).

Every reduction takes ``dim`` (PyTorch) or ``axis`` (NumPy): an int, a tuple, or None for all
dimensions, and ``keepdim``/``keepdims``. The primitives' attributes are canonical: ``axes`` a
sorted tuple of non-negative ints and ``keepdims`` a bool.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from .. import dtypes as dt
from .. import return_types
from ..errors import AxisError, DTypeError, ShapeError
from ..types import TensorType
from . import _attr_rules as R
from . import _batching, qtensor_ops
from . import _onnx_complex as cx
from . import _onnx_reduce as oxr
from . import api as E
from ._autocast import Autocast, autocasts
from ._half import c_runs, loop_reduces, reduction_fast, via_float32
from ._node_names import rename_node
from ._registry import OpDef, TensorBase, apply, export, plain_eager_no_grad, register
from ._rules import Complex, ReductionRule
from ._unrecorded import direct
from ._util import (
    half_precision,
    normalize_axes,
    normalize_axis,
    pick_axis,
    reduction_cost,
    value_bytes,
)
from .cast import accumulated_as
from .gather import _GATHER
from .promotion import to_tensor
from .shape import _BROADCAST as BROADCAST
from .shape import RESHAPE


def reduced_shape(shape, axes, keepdims) -> tuple:
    if keepdims:
        return tuple(1 if i in axes else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in axes)


def _keepdim_shape(shape, axes) -> tuple:
    return tuple(1 if i in axes else s for i, s in enumerate(shape))


def _expand_back(g, c):
    """Broadcast a reduction's output gradient back over the reduced input (the two views
    without dispatches where the backward records nothing: ops/_unrecorded.py)."""
    axes, keepdims = c.attrs["axes"], c.attrs["keepdims"]
    in_shape = tuple(c.in_types[0].shape)
    data = getattr(g, "_data", None)
    if type(data) is np.ndarray and data.ndim == 0 and plain_eager_no_grad():
        # (a full reduction's 0-d gradient, nothing recorded: broadcast as it is, the one
        # element the reshape to ones would keep; a first call dispatches, which records
        # nothing and lets `direct` take the signature after)
        out = direct(BROADCAST, g, shape=in_shape)
        return apply(BROADCAST, g, shape=in_shape) if out is None else out
    if not keepdims:
        shape = _keepdim_shape(in_shape, axes)
        kept = direct(RESHAPE, g, shape=shape)
        g = E.reshape(g, shape) if kept is None else kept
    out = direct(BROADCAST, g, shape=in_shape)
    return E.broadcast_to(g, in_shape) if out is None else out


def _args(op_name, x, dim, axis, keepdim, keepdims, empty_is_all=True):
    """Canonical ``axes`` and ``keepdims``. ``dim=()`` (or ``[]``) reduces every dimension, as
    in PyTorch's sum, mean, amax, amin, var and std (``empty_is_all=False``: nothing, as in
    its all and any)."""
    dim = pick_axis(dim, axis)
    if empty_is_all and isinstance(dim, (tuple, list)) and not dim:
        dim = None
    axes = normalize_axes(op_name, dim, x.ndim)
    keep = bool(keepdim if keepdims is None else keepdims)
    return axes, keep


def _check_nonempty(name, x, axes):
    if any(x.shape[a] == 0 for a in axes):
        raise AxisError(
            f"cannot reduce over an empty dimension (shape {tuple(x.shape)}, "
            f"axes {axes}); the result has no identity",
            op=name,
        )


# --------------------------------------------------------------------------------------- sum


def _sum_dtype(d):
    return dt.int64 if d.is_bool or d.is_integer else d


_HALF = (dt.float16.np, dt.bfloat16.np)
_NARROW_FLOATS = (dt.float32.np, *_HALF)  # (bfloat16's NumPy kind is "V", not "f")


def _sum_infer(x, *, axes, keepdims):
    return TensorType(reduced_shape(x.shape, axes, keepdims), _sum_dtype(x.dtype))


# np.sum's own ufunc method: np.sum wraps it in Python (argument checks for other array types)
# that cost three times a small sum's reduction; positional (array, axis, dtype, out, keepdims)
_add_reduce = np.add.reduce
_SUM_DTYPES: dict = {}  # an operand's NumPy dtype -> its sum's (every eager sum asks)


def _sum_kernel(x, *, axes, keepdims):
    """NumPy's sum, with the accumulation PyTorch's accuracy needs for float32 and half
    precision (whose terms accumulate in float32, as in PyTorch):

    * the reduced axes trailing a C-contiguous array (size-1 axes aside): each row summed in
      NumPy's pairwise order, in float32 (error growing with log n);
    * any other reduced axis (a leading one, ``(N, C).sum(0)``; one in the middle): NumPy would
      add row after row in float32, an error growing with n (2.4e-6 relative over 100000 rows,
      where PyTorch's cascade has 6e-8); instead the trailing block's rows are summed
      pairwise as above, and those row sums accumulated over the other axes in float64 and
      rounded once. The fused column loops (kernels/creduce.py) accumulate in the same order,
      in double (the sum's `ReductionRule` says ``wide``).
    * a non-C-contiguous array: its terms accumulated in float64, rounded once.

    Float64 sums are NumPy's."""
    out_dtype = _SUM_DTYPES.get(x.dtype)
    if out_dtype is None:
        out_dtype = _SUM_DTYPES[x.dtype] = _sum_dtype(dt.from_numpy_dtype(x.dtype)).np
    if x.dtype not in _NARROW_FLOATS:
        return np.asarray(_add_reduce(x, axes, out_dtype, None, keepdims))
    if not x.flags.c_contiguous:
        return np.asarray(_add_reduce(x, axes, np.float64, None, keepdims)).astype(out_dtype)
    tail, rest = _sum_blocks(x.shape, axes)
    if not rest:  # rows only: pairwise, in float32
        return np.asarray(_add_reduce(x, axes, np.float32, None, keepdims)).astype(
            out_dtype, copy=False
        )
    rows = _add_reduce(x, tail, np.float32, None, True) if tail else x
    total = _add_reduce(rows, axes, np.float64, None, keepdims)
    return np.asarray(total).astype(out_dtype)


# Half precision: a one-reduction C loop (16-bit terms accumulated as the kernel accumulates
# float32, the kernel's bits), or, over axes no loop takes, the float32 kernel on a copy
# widened in C (kernels/chalf.py), rounded once; large float32 operands: the same loop, the
# kernel's bits, where measured faster; None (the kernel) for other dtypes.
_sum_fast = reduction_fast("sum", otherwise=via_float32(_sum_kernel), float32_bits=True)


@functools.lru_cache(maxsize=1024)  # (every eager float32 sum asks: shapes repeat)
def _sum_blocks(shape, axes) -> tuple[tuple, tuple]:
    """``(tail, rest)``: the reduced axes after the last kept axis whose size is not 1 (rows of
    a C-contiguous array), and the other reduced axes whose size is not 1."""
    kept = [a for a in range(len(shape)) if a not in axes and shape[a] != 1]
    last = kept[-1] if kept else -1
    tail = tuple(a for a in axes if a > last)
    rest = tuple(a for a in axes if a < last and shape[a] != 1)
    return tail, rest


def _sum_workspace(node, layouts) -> int:
    """`_sum_kernel`'s temporaries beyond the result. Float32 and half-precision rows
    (trailing axes): none in float32; half precision sums into a float32 result (then
    rounded), reading the input through NumPy's float32 cast buffer (``np.getbufsize()``
    elements, or the whole input if smaller). Other axes: the float64 result and NumPy's
    float64 cast buffer (after the rows' float32 sums, when there are rows)."""
    x, out = node.inputs[0], node.outputs[0]
    if x.dtype not in (dt.float32, dt.float16, dt.bfloat16):
        return 0
    elements = value_bytes(x) // x.dtype.itemsize
    out_elements = value_bytes(out) // out.dtype.itemsize
    shape = tuple(d if isinstance(d, int) else 2 for d in x.shape)
    tail, rest = _sum_blocks(shape, node.attrs["axes"])
    if half_precision(x) and c_runs() and loop_reduces(x.shape, node.attrs["axes"]):
        # (`_sum_fast`'s C loop: a copy of a strided operand; its per-thread rows are malloc'd)
        return 0 if layouts.contiguous(x) else value_bytes(x)
    if half_precision(x):  # (`_sum_fast`: the float32 kernel on a widened copy, its result)
        widened = (
            4 * elements
            + 4 * out_elements
            + _float32_sum_workspace(elements, out_elements, shape, tail, rest)
        )
    else:
        widened = 0
    if not rest:
        if not half_precision(x):
            return 0
        return max(widened, 2 * value_bytes(out) + 4 * min(elements, np.getbufsize()))
    return max(widened, _float32_sum_workspace(elements, out_elements, shape, tail, rest))


def _float32_sum_workspace(elements, out_elements, shape, tail, rest) -> int:
    """`_sum_kernel`'s temporaries on float32 terms (see `_sum_workspace`)."""
    if not rest:
        return 0
    rows = elements
    total = 0
    if tail:
        # (an empty row: no elements, no rows)
        rows = elements // max(1, math.prod(shape[a] for a in tail))
        total += 4 * rows  # the rows' float32 sums
    return total + 8 * out_elements + 8 * min(rows, np.getbufsize())


_SUM = register(
    OpDef(
        name="sum",
        # (PyTorch's overloads: every element, or over dims)
        grad_fn=lambda attrs, in_types: (
            "SumBackward0"
            if not attrs["keepdims"] and len(attrs["axes"]) == len(in_types[0].shape)
            else "SumBackward1"
        ),
        complex=Complex.GRADIENT,
        onnx=cx.pairs(oxr.onnx_sum, cx.reduce_sum),
        kind="reduce",
        infer=_sum_infer,
        cached_infer=True,
        kernel=_sum_kernel,
        fast=_sum_fast,
        vjp=lambda c, g: (_expand_back(g, c),),
        cost=reduction_cost,
        save_inputs=(),
        batch=_batching.reduce_rule(partial=True),
        workspace=_sum_workspace,
        # fused loops sum a row's terms in NumPy's pairwise order, and rows over leading axes
        # in double: the kernel's bits
        reduction=ReductionRule(
            identity=0.0,
            accumulate="{acc} + {x}",
            omp="+",
            combine="{a} + {b}",
            pairwise=True,
            wide=True,
            sequential=(dt.int64,),  # (integer sums wrap alike in any order)
        ),
        doc="sum(x, axes, keepdims)",
    )
)


@export(method=True)
def sum(x, dim=None, keepdim=False, *, axis=None, keepdims=None, dtype=None):
    """Sum over ``dim`` (all dimensions by default); ints and bools sum to int64."""
    x = to_tensor(x)
    axes, keep = _args("sum", x, dim, axis, keepdim, keepdims)
    out = accumulated_as("sum", x, dtype, lambda v: apply(_SUM, v, axes=axes, keepdims=keep))
    # (PyTorch's node of the overload over dims, even all of them: x.sum((0, 1)))
    return out if dim is None and axis is None else rename_node(out, "SumBackward1", x)


@export(method=True)
def sum_to(x, shape):
    """Sum ``x`` down to ``shape`` (the inverse of broadcasting ``shape`` up to ``x.shape``)."""
    shape = tuple(shape)
    if tuple(x.shape) == shape:
        return x
    lead = x.ndim - len(shape)
    if lead < 0:
        raise ShapeError(
            f"cannot sum shape {tuple(x.shape)} to a larger shape {shape}", op="sum_to"
        )
    axes = tuple(range(lead)) + tuple(
        i + lead for i, s in enumerate(shape) if s == 1 and x.shape[i + lead] != 1
    )
    out = x
    if lead and axes == tuple(range(lead)) and plain_eager_no_grad():
        # (only leading axes summed, nothing recorded: the sum without kept dimensions is the
        # shape, the same sums without the reshape; a first call dispatches, which records
        # nothing and lets `direct` take the signature after)
        out = direct(_SUM, x, axes=axes, keepdims=False)
        return apply(_SUM, x, axes=axes, keepdims=False) if out is None else out
    if axes:  # (without dispatches where nothing is recorded: ops/_unrecorded.py)
        out = direct(_SUM, x, axes=axes, keepdims=True)
        if out is None:
            out = apply(_SUM, x, axes=axes, keepdims=True)
    # (no leading dimensions: the kept ones are the shape, and the sum's node the last one,
    # PyTorch's SumBackward1)
    if not lead:
        return out
    kept = direct(RESHAPE, out, shape=shape)
    return E.reshape(out, shape) if kept is None else kept


# --------------------------------------------------------------------------------------- prod


def _prod_vjp(c, g):
    x = c.inputs[0]
    out = c.outputs[0]
    axes, keepdims = c.attrs["axes"], c.attrs["keepdims"]
    if not keepdims:
        out = E.reshape(out, _keepdim_shape(x.shape, axes))
    g = _expand_back(g, c)
    is_zero = x == 0
    safe = E.where(is_zero, 1, x)
    # with one zero in a slice, that element's gradient is the product of the others
    zeros = E.sum(is_zero, axes, keepdim=True)
    others = E.prod(safe, axes, keepdim=True)
    at_zero = E.where(zeros == 1, others, 0)
    return (g * E.conj(E.where(is_zero, at_zero, out / safe)),)


_PROD = register(
    OpDef(
        name="prod",
        complex=Complex.GRADIENT,
        autocast=Autocast.FP32,
        onnx=oxr.onnx_prod,
        kind="reduce",
        infer=_sum_infer,
        cached_infer=True,
        kernel=lambda x, *, axes, keepdims: np.asarray(
            np.prod(
                x, axis=axes, keepdims=keepdims, dtype=_sum_dtype(dt.from_numpy_dtype(x.dtype)).np
            )
        ),
        vjp=_prod_vjp,
        cost=reduction_cost,
        save_outputs=(0,),
        # fused loops multiply a row's terms in SIMD lanes (NumPy: one after the other), so a
        # fused product is within rounding of NumPy's, not its bits
        reduction=ReductionRule(
            identity=1.0,
            accumulate="{acc} * {x}",
            omp="*",
            combine="{a} * {b}",
            sequential=(dt.float32, dt.float64, dt.int64),
        ),
        doc="prod(x, axes, keepdims)",
    )
)


@export(method=True)
@autocasts(Autocast.FP32)
def prod(x, dim=None, keepdim=False, *, axis=None, keepdims=None, dtype=None):
    """Product over ``dim`` (all dimensions by default)."""
    x = to_tensor(x)
    axes, keep = _args("prod", x, dim, axis, keepdim, keepdims)
    out = accumulated_as("prod", x, dtype, lambda v: apply(_PROD, v, axes=axes, keepdims=keep))
    return out if dim is None and axis is None else rename_node(out, "ProdBackward1", x)


# ------------------------------------------------------------------------------- max and min


def _extreme_infer(name):
    def infer(x, *, axes, keepdims):  # (bool tensors too: any / all, as in PyTorch)
        _check_nonempty(name, x, axes)
        return TensorType(reduced_shape(x.shape, axes, keepdims), x.dtype)

    return infer


def _extreme_vjp(c, g):
    x, out = c.inputs[0], c.outputs[0]
    axes, keepdims = c.attrs["axes"], c.attrs["keepdims"]
    if not keepdims:
        out = E.reshape(out, _keepdim_shape(x.shape, axes))
    # ties share the gradient evenly (PyTorch's amax/amin convention)
    hit = E.cast(x == out, g.dtype)
    return (_expand_back(g, c) * hit / E.sum(hit, axes, keepdim=True),)


def _evenly_vjp(c, g):
    """max() and min() over every element: PyTorch's evenly_distribute_backward, the gradient
    shared among the elements equal to the result, or among the NaNs where the result is NaN
    (amax's `_extreme_vjp` gives NaN everywhere there: no element equals a NaN)."""
    x, out = c.inputs[0], c.outputs[0]
    if not c.attrs["keepdims"]:
        out = E.reshape(out, _keepdim_shape(x.shape, c.attrs["axes"]))
    hit = E.logical_or(x == out, E.logical_and(E.isnan(x), E.isnan(out)))
    hit = E.cast(hit, g.dtype)
    return (_expand_back(g, c) * hit / E.sum(hit, c.attrs["axes"], keepdim=True),)


def _extreme(name, kernel, better: str, vjp=_extreme_vjp, doc=""):
    """max (``better`` ">") or min ("<"); ``name`` may be another op of the same values (an
    other ``vjp``). Fused loops compare, which drops NaN: a flag keeps NumPy's NaN (and
    combining partial results lets a NaN win)."""
    omp = "max" if better == ">" else "min"
    reduction = ReductionRule(
        identity=-math.inf if better == ">" else math.inf,
        accumulate=f"{{x}} {better} {{acc}} ? {{x}} : {{acc}}",
        omp=omp,
        combine=f"({{b}} {better} {{a}} || {{b}} != {{b}}) ? {{b}} : {{a}}",
        nan_flag=True,
        exact=True,
        # (floats: NumPy's SIMD maximum picks among equal zeros by its lanes, not in order)
        sequential=(dt.int64,),
    )
    return register(
        OpDef(
            name=name,
            kind="reduce",
            infer=_extreme_infer(omp),
            cached_infer=True,
            kernel=lambda x, *, axes, keepdims: np.asarray(kernel(x, axis=axes, keepdims=keepdims)),
            vjp=vjp,
            cost=reduction_cost,
            save_outputs=(0,),
            reduction=reduction,
            fast=reduction_fast(name),  # (half precision: compared in float, in C)
            doc=doc or f"{name}(x, axes, keepdims): the {name}imum over axes",
            onnx=oxr.onnx_extreme("ReduceMax" if better == ">" else "ReduceMin"),
        )
    )


# (the ufuncs' own reductions: np.max and np.min wrap them in Python, see `_add_reduce`)
_MAX = _extreme("max", np.maximum.reduce, ">")
_MIN = _extreme("min", np.minimum.reduce, "<")
# max() and min() over all elements: the same values, PyTorch's gradient of them (MaxBackward1)
_MAX_ALL, _MIN_ALL = (
    _extreme(
        f"{name}_all",
        kernel,
        better,
        _evenly_vjp,
        f"{name}_all(x, axes, keepdims): {name} over axes, its gradient shared evenly by the "
        f"elements equal to the result, or by the NaNs where it is NaN (torch.{name}(x))",
    )
    for name, kernel, better in (("max", np.maximum.reduce, ">"), ("min", np.minimum.reduce, "<"))
)


def _amax_public(op, all_op, arg_op_name, result_type):
    # PyTorch's nodes: amax's AmaxBackward0; max(x, dim)'s values MaxBackward0 (a selection at
    # the indices); max(x)'s MaxBackward1 (every element)
    title = op.name.capitalize()

    def reduce_only(x, dim=None, keepdim=False, *, axis=None, keepdims=None):
        x = to_tensor(x)
        axes, keep = _args(op.name, x, dim, axis, keepdim, keepdims)
        return rename_node(apply(op, x, axes=axes, keepdims=keep), f"A{op.name}Backward0")

    def torch_style(x, dim=None, keepdim=False, *, axis=None, keepdims=None):
        """With a tensor second argument: elementwise maximum/minimum. With ``dim``: a
        (values, indices) pair like PyTorch. Otherwise: the reduction over all elements."""
        if isinstance(dim, TensorBase):
            return E.maximum(x, dim) if op.name == "max" else E.minimum(x, dim)
        if qtensor_ops.held(x):  # (on its integers, as PyTorch)
            if axis is not None or not isinstance(dim, (int, type(None))):
                raise DTypeError("a quantized tensor's max/min takes one int dim", op=op.name)
            return qtensor_ops.extreme(x, op.name == "max", dim, keepdim)
        if dim is not None and isinstance(dim, int) and axis is None:
            # the values are gathered at the indices, so the gradient goes to the returned
            # index alone, as in PyTorch (amax/amin share it among ties); the primitives
            # applied directly (the public functions' checks hold by construction)
            x = to_tensor(x)
            # (argmax refuses bool tensors, as PyTorch's does; max(x, dim) takes them)
            ranked = E.cast(x, dt.uint8) if x.dtype is dt.bool_ else x
            if not x.ndim:  # (a 0-d tensor's dim 0 or -1: itself, at index 0)
                indices = getattr(E, arg_op_name)(ranked, dim, True)
                return result_type(x, E.reshape(indices, ()))
            a = normalize_axis(op.name, dim, x.ndim)
            indices = apply(_ARG_OPS[arg_op_name], ranked, axis=a, keepdims=True)
            values = apply(_GATHER, x, indices, axis=a)
            if not keepdim:
                shape = tuple(x.shape)
                shape = shape[:a] + shape[a + 1 :]
                indices = apply(RESHAPE, indices, shape=shape)
                values = rename_node(apply(RESHAPE, values, shape=shape), "SqueezeBackward1")
            return result_type(rename_node(values, f"{title}Backward0", x), indices)
        if dim is None and axis is None:
            x = to_tensor(x)
            axes, keep = _args(op.name, x, None, None, keepdim, keepdims)
            return rename_node(apply(all_op, x, axes=axes, keepdims=keep), f"{title}Backward1")
        return reduce_only(x, dim, keepdim, axis=axis, keepdims=keepdims)

    return reduce_only, torch_style


_amax, _max_public = _amax_public(_MAX, _MAX_ALL, "argmax", return_types.max)
_amin, _min_public = _amax_public(_MIN, _MIN_ALL, "argmin", return_types.min)
export(_amax, name="amax", method=True)
export(_amin, name="amin", method=True)
export(_max_public, name="max", method=True)
export(_min_public, name="min", method=True)


# ---------------------------------------------------------------------------- argmax/argmin


def _arg_infer(name):
    def infer(x, *, axis, keepdims):
        if x.dtype is dt.bool_:
            raise DTypeError("not defined for bool tensors (as in PyTorch)", op=name)
        if axis is None:
            if x.ndim and 0 in x.shape:
                raise AxisError("cannot take the arg of an empty tensor", op=name)
            return TensorType((1,) * x.ndim if keepdims else (), dt.int64)
        _check_nonempty(name, x, (axis,))
        return TensorType(reduced_shape(x.shape, (axis,), keepdims), dt.int64)

    return infer


def _arg_kernel(fn):
    def kernel(x, *, axis, keepdims):
        out = fn(x, axis=axis, keepdims=keepdims)
        return np.asarray(out, dtype=np.int64)

    return kernel


_ARG_OPS: dict = {}  # argmax's and argmin's ops, for max(x, dim) and min(x, dim)


def _arg(name, fn):
    op = _ARG_OPS[name] = register(
        OpDef(
            name=name,
            attrs={"axis": R.Optional(R.Axis())},  # (None: the flattened tensor)
            kind="reduce",
            infer=_arg_infer(name),
            kernel=_arg_kernel(fn),
            cost=reduction_cost,
            doc=f"{name}(x, axis, keepdims): index of the first extreme value "
            "(over the flattened tensor when axis is None)",
            onnx=oxr.onnx_arg("ArgMax" if name == "argmax" else "ArgMin"),
        )
    )

    def public(x, dim=None, keepdim=False, *, axis=None, keepdims=None):
        x = to_tensor(x)
        a = pick_axis(dim, axis)
        a = None if a is None else normalize_axis(name, a, x.ndim)
        if not x.ndim:  # a 0-d tensor's dim 0 (or -1) is the tensor itself
            a = None
        return apply(op, x, axis=a, keepdims=bool(keepdim if keepdims is None else keepdims))

    public.__name__ = public.__qualname__ = name
    public.__doc__ = op.doc
    export(public, name=name, method=True)


_arg("argmax", np.argmax)
_arg("argmin", np.argmin)


# ---------------------------------------------------------------------------------- all/any


def _bool_reduce(name, fn):
    op = register(
        OpDef(
            name=name,
            kind="reduce",
            infer=lambda x, *, axes, keepdims: TensorType(
                reduced_shape(x.shape, axes, keepdims), dt.bool_
            ),
            kernel=lambda x, *, axes, keepdims: np.asarray(fn(x, axis=axes, keepdims=keepdims)),
            cost=reduction_cost,
            doc=f"{name}(x, axes, keepdims): logical {name} over axes",
            onnx=oxr.onnx_bool_reduce("ReduceMin" if name == "all" else "ReduceMax"),
        )
    )

    def public(x, dim=None, keepdim=False, *, axis=None, keepdims=None):
        x = to_tensor(x)
        if x.dtype.is_complex:  # (PyTorch's truth of a complex number: either part non-zero)
            x = E.ne(x, 0)
        axes, keep = _args(name, x, dim, axis, keepdim, keepdims, empty_is_all=False)
        out = apply(op, x, axes=axes, keepdims=keep)
        # PyTorch keeps uint8 for a uint8 tensor's all/any (its result type before bool)
        return E.cast(out, dt.uint8) if x.dtype is dt.uint8 else out

    public.__name__ = public.__qualname__ = name
    public.__doc__ = op.doc
    export(public, name=name, method=True)


_bool_reduce("all", np.all)
_bool_reduce("any", np.any)
