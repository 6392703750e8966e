"""ONNX's pooling: MaxPool (with its Indices output), AveragePool, LpPool, the global pools and
MaxUnpool.

Where ember's pooling primitives make ONNX's windows (their padding is symmetric and at most
half the kernel, PyTorch's rule; a trailing padding that differs is often just ceil_mode's
overhang, which a maximum or an average of the real elements ignores alike), they run as they
are, C kernels included. Otherwise (larger leading pads, dilated average windows, an average
counting an asymmetric padding):

* max pooling pads the input explicitly with the lowest value of its dtype (so padding never
  wins) and pools without padding; the Indices are mapped back to the unpadded input;
* average and Lp pooling sum each window with a depthwise convolution by ones, whose padding is
  a (before, after) pair per dimension, and divide by the window's count, a constant computed
  from the shapes alone (ONNX counts the explicit padding with ``count_include_pad``, never the
  overhang ceil_mode adds).
"""

from __future__ import annotations

import math

import numpy as np

from ...kernels import pool_geometry as _geometry
from ...ops._registry import apply
from ...ops.conv import CONV
from ...ops.pool import MAX_POOL
from ...ops.pool_avg import AVG_POOL
from .._convert import converter, ember_dtype
from ._common import E, F, dtype_np
from .nn import auto_pad_mode, kernel_shape, per_dim, pool_out_size, spatial_input, window_pads


def _window(ctx, x, ceil_attr: bool = True, dilation_attr: bool = True):
    """(kernel, strides, dilations, pads, out) of a pooling node on ``x``."""
    nd = x.ndim - 2
    kernel = kernel_shape(ctx, nd)
    strides = per_dim(ctx, "strides", nd, 1)
    dilations = per_dim(ctx, "dilations", nd, 1) if dilation_attr else (1,) * nd
    pads = window_pads(ctx, x.shape[2:], kernel, strides, dilations)
    # with auto_pad the output size is fixed (ceil(in / stride) for SAME, the windows that fit
    # for VALID): ceil_mode changes nothing
    ceil_mode = bool(ctx.attr("ceil_mode", 0)) if ceil_attr else False
    ceil_mode = ceil_mode and auto_pad_mode(ctx) == "NOTSET"
    out = tuple(
        pool_out_size(ctx, n, k, s, d, p, ceil_mode)
        for n, k, s, d, p in zip(x.shape[2:], kernel, strides, dilations, pads)
    )
    return kernel, strides, dilations, pads, out, ceil_mode


def _primitive_geometry(x, kernel, strides, dilations, pads, out, exact: bool):
    """(padding, ceil_mode) with which ember's pooling primitive (PyTorch's rules: symmetric
    padding of at most half the kernel) makes ONNX's windows, or None.

    Each window starts at ``i * stride - before`` in both; what lies past the input's end is
    either padding or ceil_mode's overhang, and neither counts for a maximum or for an average
    of the real elements. ``exact`` (an average counting the padding) needs the trailing
    padding to be the leading one as well."""
    padding = tuple(b for b, _ in pads)
    if any(b > k // 2 for b, k in zip(padding, kernel)):
        return None
    if exact and any(b != a for b, a in pads):
        return None
    for ceil_mode in (False, True):
        sizes = tuple(
            _geometry.pool_out_size(n, k, s, b, d, ceil_mode)
            for n, k, s, b, d in zip(x.shape[2:], kernel, strides, padding, dilations)
        )
        if sizes == tuple(out):
            return padding, ceil_mode
    return None


def _trailing(n, k, s, d, before, out) -> int:
    """The padding after a dimension that makes exactly ``out`` windows (negative: crop)."""
    return (out - 1) * s + d * (k - 1) + 1 - n - before


def _pad_spatial(x, pairs, value):
    """``x`` padded (or cropped, for negative amounts) on its spatial dims; ``pairs`` in order."""
    flat = []
    for before, after in reversed(pairs):
        flat += [before, after]
    if not any(flat):
        return x
    return F.pad(x, tuple(flat), value=value)


# ---------------------------------------------------------------------------------------------
# max pooling


def _lowest(dtype: np.dtype):
    return -math.inf if dtype.kind == "f" or dtype.name == "bfloat16" else np.iinfo(dtype).min


@converter("MaxPool", 1)
def _max_pool(ctx, x):
    x = spatial_input(ctx, x)
    kernel, strides, dilations, pads, out, _ = _window(
        ctx, x, ceil_attr=ctx.opset >= 10, dilation_attr=ctx.opset >= 10
    )
    geometry = _primitive_geometry(x, kernel, strides, dilations, pads, out, exact=False)
    if geometry is not None:
        padded, shift = x, (0,) * len(kernel)
        padding, ceil_mode = geometry
    else:
        pairs = [
            (b, _trailing(n, k, s, d, b, o))
            for n, k, s, d, (b, _), o in zip(x.shape[2:], kernel, strides, dilations, pads, out)
        ]
        padded = _pad_spatial(x, pairs, _lowest(dtype_np(x)))
        shift, padding, ceil_mode = tuple(b for b, _ in pairs), (0,) * len(kernel), False
    values, indices = apply(
        MAX_POOL,
        padded,
        kernel=kernel,
        stride=strides,
        padding=padding,
        dilation=dilations,
        ceil_mode=ceil_mode,
    )
    if tuple(values.shape[2:]) != out:  # the geometry above is ONNX's; this is a guard
        raise ctx.error(f"pooled to {tuple(values.shape[2:])}, ONNX's output is {out}")
    if not ctx.output_used(1):
        return values
    order = int(ctx.attr("storage_order", 0))
    return values, _onnx_indices(indices, tuple(padded.shape[2:]), shift, x, order)


def _onnx_indices(indices, plane, shift, x, storage_order: int):
    """ember's indices (flat within each (n, c) plane of the pooled, maybe padded, input) as
    ONNX's: flat over the whole unpadded input (N, C, *spatial), the spatial part row-major, or
    column-major for storage_order 1."""
    size = tuple(x.shape[2:])
    flat = indices
    if any(shift) or storage_order or plane != size:
        coords, rest = [], indices
        for extent in reversed(plane):
            coords.append(E.remainder(rest, extent))
            rest = E.floor_divide(rest, extent)
        coords.reverse()
        flat = None
        for axis, (c, s) in enumerate(zip(coords, shift)):
            c = c - s if s else c
            stride = math.prod(size[:axis]) if storage_order else math.prod(size[axis + 1 :])
            term = c * stride if stride != 1 else c
            flat = term if flat is None else flat + term
    n, channels = x.shape[0], x.shape[1]
    base = E.arange(n * channels, dtype=flat.dtype) * math.prod(size)
    return flat + E.reshape(base, (n, channels) + (1,) * len(size))


@converter("GlobalMaxPool", 1)
def _global_max_pool(ctx, x):
    x = spatial_input(ctx, x)
    return E.amax(x, tuple(range(2, x.ndim)), keepdim=True)


@converter("GlobalAveragePool", 1)
def _global_average_pool(ctx, x):
    x = spatial_input(ctx, x)
    return E.mean(x, tuple(range(2, x.ndim)), keepdim=True)


# ---------------------------------------------------------------------------------------------
# average and Lp pooling


def _window_sums(ctx, x, kernel, strides, dilations, pads, out):
    """The sum of each window (padding adds zeros): a depthwise convolution by ones."""
    channels = x.shape[1]
    ones = ctx.tensor(np.ones((channels, 1) + tuple(kernel), dtype_np(x)))
    pairs = tuple(
        (b, _trailing(n, k, s, d, b, o))
        for n, k, s, d, (b, _), o in zip(x.shape[2:], kernel, strides, dilations, pads, out)
    )
    return apply(CONV, x, ones, stride=strides, padding=pairs, dilation=dilations, groups=channels)


def _window_counts(in_size, kernel, strides, dilations, pads, out, include_pad: bool):
    """How many elements each window averages, shaped (1, 1, *out): the input's own elements,
    plus the explicit padding where ``include_pad`` (never the ceil_mode overhang)."""
    counts = np.ones((), np.int64)
    for axis, (n, k, s, d, (b, a), o) in enumerate(
        zip(in_size, kernel, strides, dilations, pads, out)
    ):
        pos = np.arange(o)[:, None] * s - b + np.arange(k)[None, :] * d
        low, high = (-b, n + a) if include_pad else (0, n)
        length = ((pos >= low) & (pos < high)).sum(axis=1)
        shape = [1] * len(out)
        shape[axis] = o
        counts = counts * length.reshape(shape)
    return counts.reshape((1, 1) + tuple(out))


@converter("AveragePool", 1)
def _average_pool(ctx, x):
    x = spatial_input(ctx, x)
    kernel, strides, dilations, pads, out, _ = _window(
        ctx, x, ceil_attr=ctx.opset >= 10, dilation_attr=ctx.opset >= 19
    )
    include_pad = bool(ctx.attr("count_include_pad", 0))
    geometry = _primitive_geometry(x, kernel, strides, dilations, pads, out, exact=include_pad)
    if geometry is not None and all(d == 1 for d in dilations):
        y = apply(
            AVG_POOL,
            x,
            kernel=kernel,
            stride=strides,
            padding=geometry[0],
            ceil_mode=geometry[1],
            count_include_pad=include_pad,
            divisor_override=None,
        )
        if tuple(y.shape[2:]) == out:
            return y
    sums = _window_sums(ctx, x, kernel, strides, dilations, pads, out)
    counts = _window_counts(x.shape[2:], kernel, strides, dilations, pads, out, include_pad)
    return sums / ctx.tensor(counts.astype(dtype_np(x)))


def _p(ctx) -> float:
    p = ctx.attr("p", 2)
    if p <= 0:
        raise ctx.error(f"p must be positive, got {p}")
    return float(p)


def _powered(x, p: float):
    return x * x if p == 2.0 else E.pow(E.abs(x), p)


def _root(y, p: float):
    return E.sqrt(y) if p == 2.0 else E.pow(y, 1.0 / p)


@converter("LpPool", 1)
def _lp_pool(ctx, x):
    x = spatial_input(ctx, x)
    p = _p(ctx)
    if ctx.opset < 2 and not ctx.attr("kernel_shape", None):
        return _root(E.sum(_powered(x, p), tuple(range(2, x.ndim)), keepdim=True), p)
    kernel, strides, dilations, pads, out, _ = _window(
        ctx, x, ceil_attr=ctx.opset >= 18, dilation_attr=ctx.opset >= 18
    )
    return _root(_window_sums(ctx, _powered(x, p), kernel, strides, dilations, pads, out), p)


@converter("GlobalLpPool", 1)
def _global_lp_pool(ctx, x):
    x = spatial_input(ctx, x)
    p = _p(ctx)
    return _root(E.sum(_powered(x, p), tuple(range(2, x.ndim)), keepdim=True), p)


# ---------------------------------------------------------------------------------------------
# unpooling


@converter("MaxUnpool", 9)
def _max_unpool(ctx, x, indices, output_shape=None):
    x = spatial_input(ctx, x)
    nd = x.ndim - 2
    kernel = kernel_shape(ctx, nd)
    strides = per_dim(ctx, "strides", nd, 1)
    pads = window_pads(ctx, x.shape[2:], kernel, strides, (1,) * nd)
    size = tuple(
        (n - 1) * s - b - a + k for n, s, (b, a), k in zip(x.shape[2:], strides, pads, kernel)
    )
    if any(s < 1 for s in size):
        raise ctx.error(f"the unpooled size {size} is empty")
    shape = tuple(x.shape[:2]) + size
    indices = ctx.tensor(indices, ember_dtype(np.int64, ctx.label))
    if tuple(indices.shape) != tuple(x.shape):
        raise ctx.error(f"I of shape {tuple(indices.shape)} must have X's shape {tuple(x.shape)}")
    # the indices are flat over the whole unpooled tensor (MaxPool's Indices convention)
    flat = E.zeros(math.prod(shape), dtype=x.dtype)
    y = E.reshape(E.scatter(flat, 0, E.reshape(indices, (-1,)), E.reshape(x, (-1,))), shape)
    if output_shape is None:
        return y
    wanted = ctx.ints(output_shape, "output_shape")
    if len(wanted) != x.ndim or tuple(wanted[:2]) != tuple(x.shape[:2]):
        raise ctx.error(f"output_shape {wanted} does not fit X of shape {tuple(x.shape)}")
    # a larger output keeps the unpooled values at its start (zeros after), as onnx's reference
    return _pad_spatial(y, [(0, w - s) for w, s in zip(wanted[2:], size)], 0.0)
