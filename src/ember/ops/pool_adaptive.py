"""Adaptive pooling (PyTorch's semantics): output position i of a dimension of size L pooled to
``out`` covers the window [floor(i * L / out), ceil((i + 1) * L / out)).

* ``adaptive_max_pool``: a primitive returning (values, indices) like max_pool, with the same
  gradient (pool_scatter through the indices, first maximum of each window).
* adaptive_avg_pool1d/2d/3d: composites. Where every size divides evenly (the common case: a
  global pool) one reshape and one mean over every window's axes; otherwise averaging over
  such windows is separable, one dimension at a time: a reshape and a mean where the size
  divides evenly, each window's elements gathered, summed and divided where not (so a
  non-finite input reaches only the windows that hold it, as in PyTorch).
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as dt
from ..errors import DTypeError, ShapeError
from ..kernels.pool_geometry import plane_strides
from ..symbolic import SymDim
from ..types import TensorType
from . import _memory_format
from . import api as E
from ._autocast import Autocast, autocasts
from ._node_names import rename_node
from ._registry import Cost, OpDef, apply, constant, export, register
from ._rules import Layout
from ._util import fmt_shape, io_bytes, require_kernel_dtype
from .pool import MAX_POOL, max_pool_vjp, onnx_max_pool
from .pool_window import check_dtype, finish_pool, unbatch
from .promotion import to_tensor


def adaptive_windows(n: int, o: int):
    """Start and end (exclusive) of each of the ``o`` adaptive windows over ``n`` positions."""
    i = np.arange(o)
    return (i * n) // o, ((i + 1) * n + o - 1) // o


def output_size_arg(name: str, output_size, in_size: tuple, nd: int) -> tuple:
    """An adaptive pool's output size: an int or a tuple whose None entries keep the input's."""
    if not isinstance(output_size, (tuple, list)):
        output_size = (output_size,) * nd
    if len(output_size) != nd:
        raise ShapeError(f"output_size must be an int or {nd} values, got {output_size}", op=name)
    return tuple(n if o is None else int(o) for o, n in zip(output_size, in_size))


def _check_input(name, x, out_size):
    if x.ndim != len(out_size) + 2 or any(n < 1 for n in x.shape[2:]) or min(out_size) < 1:
        raise ShapeError(
            f"expected a non-empty {len(out_size) + 2}-D input (N, C, spatial) and a positive "
            f"output size, got input {fmt_shape(x.shape)} and output size {out_size}",
            op=name,
        )


# ---------------------------------------------------------------------------- max pooling


def _adaptive_max_kernel(x, *, out_size):
    if x.dtype in (dt.float16.np, dt.bfloat16.np):  # NumPy compares these slowly, if at all
        values, indices = _adaptive_max_kernel(x.astype(np.float32), out_size=out_size)
        return values.astype(x.dtype), indices
    in_size = x.shape[2:]
    nd = len(in_size)
    kmax = []
    pos = np.zeros((), np.int64)  # flat position of every (window, element) pair
    for axis, (n, o, f) in enumerate(zip(in_size, out_size, plane_strides(in_size))):
        start, end = adaptive_windows(n, o)
        k = int((end - start).max())
        # short windows repeat their last element: a repeat is never the *first* maximum
        idx = np.minimum(start[:, None] + np.arange(k), end[:, None] - 1)
        # positions shaped (o1, o2, ..., k1, k2, ...): each window's elements last
        shape = [1] * (2 * nd)
        shape[axis], shape[nd + axis] = o, k
        pos = pos + idx.reshape(shape) * f
        kmax.append(k)
    count = math.prod(kmax)
    # one gather of each plane's window elements by flat position: (N, C, o1, o2, ..., count),
    # each window's elements contiguous (x[..., i1, i2] would lay them out transposed, and the
    # argmax over such rows ran three times slower)
    planes = x.reshape(x.shape[:2] + (math.prod(in_size),))
    if count == planes.shape[2] and all(o == 1 for o in out_size):  # (global: the planes)
        arr = planes.reshape(x.shape[:2] + tuple(out_size) + (count,))
    else:
        arr = np.take(planes, pos.reshape(-1), axis=2)
        arr = arr.reshape(x.shape[:2] + tuple(out_size) + (count,))
    pos = pos.reshape(tuple(out_size) + (count,))
    code = arr.argmax(axis=-1)
    if x.dtype.kind == "f":
        nan = np.isnan(arr)
        if nan.any():  # torch keeps the *last* NaN of a window
            last = count - 1 - np.argmax(nan[..., ::-1], axis=-1)
            code = np.where(nan.any(axis=-1), last, code)
    values = np.take_along_axis(arr, code[..., None], axis=-1)[..., 0]
    indices = np.take_along_axis(np.broadcast_to(pos, arr.shape), code[..., None], axis=-1)
    return np.ascontiguousarray(values), np.ascontiguousarray(indices[..., 0], dtype=np.int64)


def _adaptive_infer(x, *, out_size):
    name = f"adaptive_max_pool{len(out_size)}d"
    check_dtype(name, x)
    _check_input(name, x, out_size)
    shape = tuple(x.shape[:2]) + tuple(out_size)
    return TensorType(shape, x.dtype), TensorType(shape, dt.int64)


def _adaptive_cost(in_types, out_types, attrs) -> Cost:
    x = in_types[0]
    per_plane = 1  # one comparison per window element
    for n, o in zip(x.shape[2:], attrs["out_size"]):
        start, end = adaptive_windows(n, o)
        per_plane *= int((end - start).sum())
    return Cost(x.shape[0] * x.shape[1] * per_plane, io_bytes(in_types, out_types))


def _onnx_adaptive_max_pool(e):
    spatial, out = e.in_types[0].shape[2:], e.attrs["out_size"]
    if not all(isinstance(n, int) and n % o == 0 for n, o in zip(spatial, out)):
        e.unsupported("unless each input size is a multiple of its output size")
    kernel = [n // o for n, o in zip(spatial, out)]
    return onnx_max_pool(e, dict(kernel_shape=kernel, strides=kernel))


ADAPTIVE_MAX_POOL = register(
    OpDef(
        name="adaptive_max_pool",
        layout=Layout((0,)),  # (channels-last in, out: PyTorch's)
        onnx=_onnx_adaptive_max_pool,
        kind="nn",
        infer=_adaptive_infer,
        kernel=_adaptive_max_kernel,
        vjp=max_pool_vjp,
        cost=_adaptive_cost,
        save_inputs=(),
        save_outputs=(1,),
        num_outputs=2,
        doc="adaptive_max_pool(x; out_size) -> (values, indices): max over torch's adaptive "
        "windows; indices are flat positions in each plane",
    )
)


def _as_max_pool(spatial: tuple, size: tuple) -> bool:
    """Whether an adaptive max pool is max pooling with kernel = stride = n / o: every size
    known and a multiple of its output size, in 1-d or 2-d (max pooling's C kernel), not a
    global pool (the adaptive kernel reads each plane as one row)."""
    return (
        len(spatial) <= 2
        and all(type(n) is int and n % o == 0 for n, o in zip(spatial, size))
        and any(o > 1 for o in size)
    )


def _adaptive_max_pool_nd(nd: int):
    name = f"adaptive_max_pool{nd}d"

    def adaptive_max_pool(input, output_size, return_indices=False):
        x, unbatched = unbatch(name, to_tensor(input), nd)
        require_kernel_dtype(name, x)  # (floats only, as PyTorch's kernels)
        size = output_size_arg(name, output_size, tuple(x.shape[2:]), nd)
        spatial = tuple(x.shape[2:])
        if _as_max_pool(spatial, size):
            # equal, disjoint windows: max pooling's (its C kernel in 1-d and 2-d), the same
            # maxima, first maxima and last NaNs, and PyTorch's flat indices where returned
            kernel = tuple(n // o for n, o in zip(spatial, size))
            values, indices = apply(
                MAX_POOL,
                x,
                kernel=kernel,
                stride=kernel,
                padding=(0,) * nd,
                dilation=(1,) * nd,
                ceil_mode=False,
                codes=not return_indices,
            )
        else:
            values, indices = apply(ADAPTIVE_MAX_POOL, x, out_size=size)
        result = finish_pool(values, indices, unbatched, return_indices)
        node = "SqueezeBackward1" if nd == 1 else f"AdaptiveMaxPool{nd}DBackward0"
        if return_indices:
            return type(result)((rename_node(result[0], node), result[1]))
        return rename_node(result, node)

    adaptive_max_pool.__name__ = adaptive_max_pool.__qualname__ = name
    adaptive_max_pool.__doc__ = (
        f"{nd}-D adaptive max pooling like torch.nn.functional.{name}: output_size an int or a "
        "tuple (None keeps that input size)."
    )
    if nd == 3:  # on PyTorch's fp32 list (the 1-d and 2-d pools are not)
        adaptive_max_pool = autocasts(Autocast.FP32)(adaptive_max_pool)
    return export(adaptive_max_pool, name=name, functional=True)


# ------------------------------------------------------------------------ average pooling


def _divides(o: int, n) -> bool:
    """Whether ``o`` divides the size ``n`` for every value of its symbols (not only under
    the alignment equality assumes: a window's size must not depend on it)."""
    return o == 1 or isinstance(n, int) and n % o == 0


def _average_axis(x, axis: int, o: int):
    """Adaptive average of ``x`` along ``axis`` down to ``o`` positions."""
    shape = tuple(x.shape)
    n = shape[axis]
    if n == o:
        return x
    if _divides(o, n):  # equal, disjoint windows
        return E.mean(E.reshape(x, shape[:axis] + (o, n // o) + shape[axis + 1 :]), axis + 1)
    if isinstance(n, SymDim):
        raise ShapeError(
            f"adaptive average pooling of the symbolic size {n} to {o}: its windows depend on "
            "the size's value; pool to 1 or give that dimension a fixed size",
            op="adaptive_avg_pool",
        )
    # windows of unequal sizes: each window's elements gathered into k slots (k the longest
    # window; a shorter one repeats its last element), the repeats selected away, summed and
    # divided by the window's size. (A product by an averaging matrix multiplies every element
    # by the zeros of the windows it is not in: one nan or inf input made every output of its
    # row nan, where PyTorch's kernel sums each window alone.)
    start, end = adaptive_windows(n, o)
    k = int((end - start).max())
    slots = start[:, None] + np.arange(k)
    index = np.minimum(slots, end[:, None] - 1).reshape(-1)
    around = (1,) * axis, (1,) * (len(shape) - axis - 1)
    inside = (slots < end[:, None]).reshape(around[0] + (o, k) + around[1])
    sizes = (end - start).astype(x.dtype.np).reshape(around[0] + (o,) + around[1])
    taken = E.index_select(x, axis, constant(index))
    taken = E.reshape(taken, shape[:axis] + (o, k) + shape[axis + 1 :])
    summed = E.sum(E.where(constant(inside), taken, 0.0), axis + 1)
    return summed / constant(sizes)


def _adaptive_avg_pool_nd(nd: int):
    name = f"adaptive_avg_pool{nd}d"

    def adaptive_avg_pool(input, output_size):
        source = to_tensor(input)
        x, unbatched = unbatch(name, source, nd)
        size = output_size_arg(name, output_size, tuple(x.shape[2:]), nd)
        _check_input(name, x, size)
        if not x.dtype.is_floating_point:
            raise DTypeError(f"expected a floating-point input, got {x.dtype}", op=name)
        spatial = tuple(x.shape[2:])
        if spatial != size and all(_divides(o, n) for n, o in zip(spatial, size)):
            # equal, disjoint windows along every axis (a global pool, or halving): each window
            # summed at once and divided by its size, as PyTorch's kernel averages it
            split = tuple(x.shape[:2])
            for n, o in zip(spatial, size):
                split += (o, n // o)
            x = E.mean(E.reshape(x, split), tuple(range(3, 3 + 2 * nd, 2)))
        else:
            for axis, o in enumerate(size):
                x = _average_axis(x, axis + 2, o)
        x = E.reshape(x, tuple(x.shape[1:])) if unbatched else x
        if x is source:  # (the size kept: a new tensor, as PyTorch's, never the input)
            x = E.clone(x)
        x = _memory_format.keep_format(x, source)  # (PyTorch's kernel keeps the format)
        # PyTorch's nodes: its 1-d pool is the 2-d one squeezed, a pool to ones a mean
        if nd == 1:
            return rename_node(x, "SqueezeBackward1", source)
        if all(o == 1 for o in size):
            return rename_node(x, "MeanBackward1", source)
        return rename_node(x, f"AdaptiveAvgPool{nd}DBackward0", source)

    adaptive_avg_pool.__name__ = adaptive_avg_pool.__qualname__ = name
    adaptive_avg_pool.__doc__ = (
        f"{nd}-D adaptive average pooling like torch.nn.functional.{name}: output_size an int "
        "or a tuple (None keeps that input size)."
    )
    if nd == 3:  # on PyTorch's fp32 list (the 1-d and 2-d pools are not)
        adaptive_avg_pool = autocasts(Autocast.FP32)(adaptive_avg_pool)
    return export(adaptive_avg_pool, name=name, functional=True)


adaptive_max_pool1d = _adaptive_max_pool_nd(1)
adaptive_max_pool2d = _adaptive_max_pool_nd(2)
adaptive_max_pool3d = _adaptive_max_pool_nd(3)
adaptive_avg_pool1d = _adaptive_avg_pool_nd(1)
adaptive_avg_pool2d = _adaptive_avg_pool_nd(2)
adaptive_avg_pool3d = _adaptive_avg_pool_nd(3)
