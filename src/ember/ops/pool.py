"""Max pooling (its geometry and checks shared with average and adaptive pooling in
pool_window.py, its gradient ops in pool_scatter.py).

``max_pool`` returns (values, indices): indices are PyTorch's, the flat position of the chosen
element inside each (n, c) plane of the input, or with ``codes=True`` (what pooling without
``return_indices`` uses) each window's own number of it, one byte where the window has at most
256 elements (ops/pool_codes.py); the gradient ops read codes when given their ``window``.
The gradient follows PyTorch's convention: all of it goes to that one element, the *first*
maximum of its window (row-major order), so ties behave as in torch. The VJP is
``pool_scatter`` (scatter-add of the output gradient through the indices, pool_scatter.py),
whose VJP is ``pool_gather`` and vice versa, so every order of gradient exists. Public:
max_pool1d/2d/3d (also in ember.nn.functional).

Window geometry (output size, ceil_mode, padding limits) follows torch's pooling_output_shape.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from .. import dtypes as dt
from ..errors import KernelDTypeError
from ..kernels.conv_plan import scratch
from ..kernels.pool_geometry import (
    first_inside_axis,
    pad_input,
    padded_extent,
    plane_strides,
    pool_out_size,
)
from ..types import TensorType
from . import _batching, qtensor_ops
from ._autocast import Autocast, autocasts
from ._half import c_runs
from ._node_names import pool_node_name
from ._registry import Cost, OpDef, apply, export, register
from ._rules import Layout, PickRule
from ._util import half_precision, io_bytes, numel, require_kernel_dtype, value_bytes
from .conv_functional import int_tuple
from .pool_codes import code_dtype, onnx_codes_from_flat, window_of
from .pool_scatter import POOL_GATHER, POOL_SCATTER
from .pool_window import check_dtype, check_pool_args, finish_pool, unbatch, window_slices
from .promotion import to_tensor


@functools.cache
def _cpooling():
    """kernels/cpooling.py, imported at the first call (every eager max pooling and its gradient:
    an import statement there costs each call half a microsecond)."""
    from ..kernels import cpooling

    return cpooling


# -------------------------------------------------------------------------- window maxima

_GATHER_LIMIT_BYTES = 64 * 2**20


def _running_max(windows, first, nan_aware):
    """Max over ``windows`` (arrays of one shape) and the index of the first maximum, as torch
    computes it: an element replaces the running max when it is greater (or, ``nan_aware``,
    NaN). The index lives in a scratch buffer; temporaries too (fresh arrays cost page
    faults)."""
    best = windows[0].copy()
    shape = best.shape
    code = scratch("pool_code", shape, np.min_scalar_type(len(windows) - 1))
    code[...] = 0 if first is None else first  # first: the first element that is not padding
    take = scratch("pool_take", shape, np.bool_)
    step = scratch("pool_step", shape, code.dtype)
    for k in range(1, len(windows)):
        w = windows[k]
        np.greater(w, best, out=take)
        if nan_aware:
            take |= np.isnan(w)
        # the value at the index, as torch keeps it (np.maximum may swap equal zeros' signs)
        np.copyto(best, w, where=take)
        # code = k where taken, as arithmetic (modular in the unsigned type): no masked writes
        np.subtract(code.dtype.type(k), code, out=step)
        step *= take
        code += step
    return best, code


def _pad_fill(dtype):
    return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min


def _first_inside(out, kernel, stride, padding, dilation, in_size):
    """For each window, the (row-major) number of its first element that is not padding.
    Validity is separable by dimension, so so is the first valid offset."""
    code = np.zeros(out, np.int64)
    for axis, (o, k, s, p, d, n) in enumerate(zip(out, kernel, stride, padding, dilation, in_size)):
        first = first_inside_axis(o, k, s, p, d, n)
        shape = [1] * len(out)
        shape[axis] = o
        code = code * k + first.reshape(shape)
    return code


def _max_pool_fast(x, *, kernel, stride, padding, dilation, ceil_mode, codes=False):
    """The C kernel (kernels/cpooling.py: 1-d and 2-d pooling; half precision read and written
    in 16 bits, compared in float32 as the NumPy kernel compares its float32 copy), or None."""
    cpooling = _cpooling()
    out = tuple(
        pool_out_size(n, k, s, p, d, ceil_mode)
        for n, k, s, p, d in zip(x.shape[2:], kernel, stride, padding, dilation)
    )
    code = code_dtype(kernel).np if codes else None
    return cpooling.max_pool_2d(x, kernel, stride, padding, dilation, out, code)


def _max_pool_kernel(x, *, kernel, stride, padding, dilation, ceil_mode, codes=False):
    half = x.dtype in (dt.float16.np, dt.bfloat16.np)
    values, indices = _max_pool_np(
        x.astype(np.float32) if half else x, kernel, stride, padding, dilation, ceil_mode, codes
    )
    return (values.astype(x.dtype) if half else values), indices


def _max_pool_c_step(node):
    from ..kernels import cpooling

    return cpooling.max_pool_c_step(node)


def _max_pool_np(x, kernel, stride, padding, dilation, ceil_mode, codes=False):
    in_size = x.shape[2:]
    out = tuple(
        pool_out_size(n, k, s, p, d, ceil_mode)
        for n, k, s, p, d in zip(in_size, kernel, stride, padding, dilation)
    )
    extent = padded_extent(in_size, kernel, stride, padding, dilation, out)
    xp = pad_input(x, padding, extent, _pad_fill(x.dtype), "maxpool")
    sf = plane_strides(in_size)
    # gathering each window offset into one contiguous block first makes the comparisons below
    # run on contiguous (vectorised) data instead of strided views: faster overall, as long as
    # the block (kernel size times the output) stays moderate
    shape = (math.prod(kernel),) + x.shape[:2] + out
    gather = math.prod(shape) * x.itemsize <= _GATHER_LIMIT_BYTES
    windows = scratch("pool_windows", shape, x.dtype) if gather else []
    offsets = []
    for k, (idx, sl) in enumerate(window_slices(kernel, stride, dilation, out)):
        if gather:
            np.copyto(windows[k], xp[(Ellipsis,) + sl])
        else:
            windows.append(xp[(Ellipsis,) + sl])
        offsets.append(sum(i * d * f for i, d, f in zip(idx, dilation, sf)))
    first = None
    if xp is not x:  # a window may start in the padding: its default is its first real element
        first = _first_inside(out, kernel, stride, padding, dilation, in_size)
    nan_aware = x.dtype.kind == "f" and bool(np.isnan(x).any())
    values, code = _running_max(windows, first, nan_aware)
    if codes:  # (the window numbers themselves, out of the scratch)
        return values, code.astype(code_dtype(kernel).np)
    # flat index = window origin + offset of the chosen element
    base = np.zeros(out, np.int64)
    for axis, (o, s, p, f) in enumerate(zip(out, stride, padding, sf)):
        shape = [1] * len(out)
        shape[axis] = o
        base = base + ((np.arange(o) * s - p) * f).reshape(shape)
    indices = np.asarray(offsets, np.int64).take(code)
    indices += base
    return values, indices


def _codes(attrs) -> dict:
    """pool_gather's attributes reading max_pool's input at its indices output."""
    return {"window": window_of(attrs)} if attrs.get("codes") else {}


def _gather_at_indices(attrs) -> tuple:
    """The op reading max_pool's input at its indices output (its PickRule)."""
    return POOL_GATHER, _codes(attrs)


def max_pool_vjp(ctx, g, _g_indices):
    in_size = tuple(ctx.in_types[0].shape[2:])
    return (apply(POOL_SCATTER, g, ctx.outputs[1], in_size=in_size, **_codes(ctx.attrs)),)


def _max_pool_infer(x, *, kernel, stride, padding, dilation, ceil_mode, codes=False):
    name = f"max_pool{len(kernel)}d"
    check_dtype(name, x)
    out = check_pool_args(name, x, kernel, stride, padding, dilation, ceil_mode)
    shape = tuple(x.shape[:2]) + out
    return TensorType(shape, x.dtype), TensorType(shape, code_dtype(kernel) if codes else dt.int64)


def _max_pool_cost(in_types, out_types, attrs) -> Cost:
    return Cost(numel(out_types[0].shape) * numel(attrs["kernel"]), io_bytes(in_types, out_types))


def _max_pool_workspace(node, layouts) -> int:
    """The temporaries beyond the outputs: the C kernel's (kernels/cpooling.py) framed copy
    of large planes, else none; NumPy's `_max_pool_kernel`'s winning window codes (scratch)
    converted to intp by ``take``, 8 bytes an output (codes: copied into the result, none),
    and in half precision `_max_pool_np` on a float32 copy of the input returning float32
    maxima, both alive there too: twice the input's bytes and twice the values' (less the
    rounded values, not made yet)."""
    x, (values, indices) = node.inputs[0], node.outputs
    if c_runs():  # the C kernel (half precision read and written in 16 bits): a frame at most
        from ..kernels import cpooling

        attrs = {k: node.attrs[k] for k in ("kernel", "stride", "padding", "dilation")}
        framed = cpooling.max_pool_workspace(x.type, values.shape[2:], **attrs)
        if framed is not None:
            return framed
    taken = 0 if node.attrs.get("codes") else value_bytes(indices)
    if half_precision(x):
        return 2 * value_bytes(x) + value_bytes(values) + taken
    return taken


def _onnx_max_pool(e):
    a = e.attrs
    spatial = e.in_types[0].shape[2:]
    window = dict(
        kernel_shape=list(a["kernel"]),
        strides=list(a["stride"]),
        pads=list(a["padding"]) * 2,
        dilations=list(a["dilation"]),
        ceil_mode=int(a["ceil_mode"]),
    )
    values, flat = onnx_max_pool(e, window)
    if not a.get("codes"):
        return values, flat
    in_size, out_size = tuple(spatial), tuple(e.out_types[0].shape[2:])
    codes = onnx_codes_from_flat(e, flat, window_of(a), in_size, out_size)
    return values, e.cast(codes, code_dtype(a["kernel"]))


def onnx_max_pool(e, window: dict):
    """MaxPool with ember's results: NaN wins its window (at its position), and indices count
    within each (n, c) plane (ONNX's run over the whole tensor)."""
    x, dtype = e.inputs[0], e.in_types[0].dtype
    values, indices = e.node("MaxPool", [x], outputs=2, **window)
    if dtype.is_floating_point:  # (MaxPool's comparisons skip NaN)
        nan = e.cast(e.node("IsNaN", [x]), dtype)
        hit, where = e.node("MaxPool", [nan], outputs=2, **window)
        hit = e.cast(hit, dt.bool_)
        values = e.node("Where", [hit, e.scalar(np.nan, dtype), values])
        indices = e.node("Where", [hit, where, indices])
    plane = 1
    for d in e.in_types[0].shape[2:]:
        plane = plane * d
    size = e.scalar(plane, dt.int64) if isinstance(plane, int) else e.dim(plane)
    return values, e.node("Mod", [indices, size], fmod=0)


MAX_POOL = register(
    OpDef(
        name="max_pool",
        layout=Layout((0,)),  # (channels-last in, out: PyTorch's)
        grad_fn=lambda attrs, in_types: pool_node_name("MaxPool{}DWithIndicesBackward0", in_types),
        onnx=_onnx_max_pool,
        kind="nn",
        infer=_max_pool_infer,
        kernel=_max_pool_kernel,
        fast=_max_pool_fast,
        vjp=max_pool_vjp,
        cost=_max_pool_cost,
        save_inputs=(),
        save_outputs=(1,),
        num_outputs=2,
        batch=_batching.per_sample(outputs=2),
        c_step=_max_pool_c_step,
        workspace=_max_pool_workspace,
        picks=PickRule(source=0, values=0, index=1, gather=_gather_at_indices),
        doc="max_pool(x; kernel, stride, padding, dilation, ceil_mode, codes=False) -> (values, "
        "indices): N-d max pooling with padding as -inf; indices are flat positions in each "
        "plane, or with codes the winner's number within its window (uint8 up to 256)",
    )
)


def _max_pool_nd(nd: int):
    name = f"max_pool{nd}d"

    def max_pool(
        input,
        kernel_size,
        stride=None,
        padding=0,
        dilation=1,
        ceil_mode=False,
        return_indices=False,
    ):
        try:
            x, unbatched = unbatch(name, to_tensor(input), nd)
            # (PyTorch's 2-d and 3-d kernels take integers, as does its 1-d one with indices;
            # the 1-d one without takes floats only)
            require_kernel_dtype(name, x, integers=nd > 1 or bool(return_indices))
        except KernelDTypeError:  # (a quantized tensor: pooled on its integers, as PyTorch)
            if not qtensor_ops.quantized_form((input,)):
                raise
            args = (kernel_size, stride, padding, dilation, ceil_mode, return_indices)
            return qtensor_ops.max_pool(max_pool, input, *args)
        kernel = int_tuple(name, "kernel_size", kernel_size, nd)
        empty = stride is None or (isinstance(stride, (tuple, list)) and not stride)
        stride = kernel if empty else int_tuple(name, "stride", stride, nd)
        values, indices = apply(
            MAX_POOL,
            x,
            kernel=kernel,
            stride=stride,
            padding=int_tuple(name, "padding", padding, nd, positive=False),
            dilation=int_tuple(name, "dilation", dilation, nd),
            ceil_mode=bool(ceil_mode),
            # (the indices only the gradient reads: window codes, a byte each, not int64)
            codes=not return_indices,
        )
        return finish_pool(values, indices, unbatched, return_indices)

    max_pool.__name__ = max_pool.__qualname__ = name
    max_pool.__doc__ = (
        f"{nd}-D max pooling like torch.nn.functional.{name} (stride defaults to kernel_size; "
        "padding counts as -inf; return_indices gives flat indices within each plane)."
    )
    if nd == 3:  # on PyTorch's fp32 list (the 1-d and 2-d pools are not)
        max_pool = autocasts(Autocast.FP32)(max_pool)
    return export(max_pool, name=name, functional=True)


max_pool1d = _max_pool_nd(1)
max_pool2d = _max_pool_nd(2)
max_pool3d = _max_pool_nd(3)
