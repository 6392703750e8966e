"""Pooling's long tail as composites: ``max_unpool1d/2d/3d`` (the partial inverse of max
pooling, from the flat per-plane indices ``max_pool*d(return_indices=True)`` returns, which are
PyTorch's) and ``lp_pool1d/2d/3d`` (power-average pooling), with PyTorch's signatures, default
output sizes and formulas.

``max_unpool`` scatters each value to its index in a zero plane, so its gradient gathers the
output's gradient back at the same indices; indices that repeat (overlapping windows) keep one
of the values, as in PyTorch, where which one is unspecified.
"""

from __future__ import annotations

import math

from .. import dtypes as dt
from ..errors import ArgumentError, EmberError, ShapeError
from ..ops import api as E
from ..ops._autocast import Autocast, autocasts
from ..ops._node_names import renames
from ..ops._registry import export
from ..ops._util import fmt_shape
from ..ops.promotion import to_tensor
from ._common import concrete, float_input


def _tuple(value, n: int, what: str) -> tuple:
    if isinstance(value, int):
        return (value,) * n
    value = tuple(int(v) for v in value)
    if len(value) == 1:
        return value * n
    if len(value) != n:
        raise ArgumentError(f"{what} must be an int or {n} ints, got {value}")
    return value


def _unpool_size(op, spatial, kernel, stride, padding, output_size) -> tuple:
    """PyTorch's ``_unpool_output_size``: ``(in - 1) * stride + kernel - 2 * padding`` per
    dimension, or ``output_size`` (its last n entries) within one stride of that."""
    n = len(kernel)
    default = tuple((spatial[d] - 1) * stride[d] + kernel[d] - 2 * padding[d] for d in range(n))
    if output_size is None:
        result = default
    else:
        output_size = tuple(int(s) for s in output_size)
        if len(output_size) == n + 2:
            output_size = output_size[2:]
        if len(output_size) != n:
            raise ArgumentError(
                f"{op}: output_size should be a sequence containing {n} or {n + 2} elements, "
                f"but it has a length of '{len(output_size)}'"
            )
        for d in range(n):
            lo, hi = default[d] - stride[d], default[d] + stride[d]
            if not lo < output_size[d] < hi:
                raise ArgumentError(
                    f'{op}: invalid output_size "{output_size}" (dim {d} must be between {lo} '
                    f"and {hi})"
                )
        result = output_size
    if any(s < 0 for s in result):
        raise ArgumentError(f"{op}: output_size must be non-negative, got {result}")
    return result


def _max_unpool(n: int, input, indices, kernel_size, stride, padding, output_size):
    op = f"max_unpool{n}d"
    x = float_input(op, input)
    idx = to_tensor(indices)
    if idx.dtype.is_floating_point or idx.dtype.name == "bool":
        raise EmberError(f"indices must be integers, got {idx.dtype}", op=op)
    if x.ndim not in (n + 1, n + 2) or tuple(idx.shape) != tuple(x.shape):
        raise ShapeError(
            f"expected a {n + 1}-D or {n + 2}-D input and indices of its shape, got input "
            f"{fmt_shape(x.shape)} and indices {fmt_shape(idx.shape)}",
            op=op,
        )
    kernel = _tuple(kernel_size, n, "kernel_size")
    stride = kernel if stride is None else _tuple(stride, n, "stride")
    padding = _tuple(padding, n, "padding")
    lead = tuple(x.shape[:-n])
    out = _unpool_size(op, tuple(x.shape[-n:]), kernel, stride, padding, output_size)
    plane = math.prod(out)
    data = concrete(idx)
    if data is not None and data.size and (data.min() < 0 or data.max() >= plane):
        bad = int(data.max() if data.max() >= plane else data.min())
        raise EmberError(
            f"Found an invalid max index: {bad} (output volumes are of size "
            f"{'x'.join(map(str, out))})",
            op=op,
        )
    flat_lead = (math.prod(lead), -1)
    zeros = E.zeros((math.prod(lead), plane), dtype=x.dtype)
    y = E.scatter(zeros, 1, E.reshape(idx, flat_lead), E.reshape(x, flat_lead))
    return E.reshape(y, lead + out)


@export(functional=True, toplevel=False)
def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """Place each value of an (N, C, L) or (C, L) input at its index in a zero output."""
    return _max_unpool(1, input, indices, kernel_size, stride, padding, output_size)


@export(functional=True, toplevel=False)
@autocasts(Autocast.FP32)
@renames("MaxUnpool2DBackward0")
def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """Place each value of an (N, C, H, W) or (C, H, W) input at its index in a zero output."""
    return _max_unpool(2, input, indices, kernel_size, stride, padding, output_size)


@export(functional=True, toplevel=False)
@autocasts(Autocast.FP32)
@renames("MaxUnpool3DBackward0")
def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """Place each value of an (N, C, D, H, W) or (C, D, H, W) input at its index in a zero
    output."""
    return _max_unpool(3, input, indices, kernel_size, stride, padding, output_size)


def _lp(n: int, input, norm_type, kernel_size, stride, ceil_mode):
    op = f"lp_pool{n}d"
    x = to_tensor(input)
    if not (x.dtype in (dt.int64, dt.bool_) and isinstance(norm_type, int)):
        # (an int64 (or bool) input and an integer p stay int64 until the root, PyTorch's: x^p
        # and its truncating integer average)
        x = float_input(op, x)
    max_pool = getattr(E, f"max_pool{n}d")
    avg_pool = getattr(E, f"avg_pool{n}d")
    p = float(norm_type)
    if p == math.inf:
        return max_pool(E.abs(x), kernel_size, stride, 0, 1, ceil_mode)
    if p == -math.inf:
        return -max_pool(-E.abs(x), kernel_size, stride, 0, 1, ceil_mode)
    out = avg_pool(E.pow(x, norm_type), kernel_size, stride, 0, ceil_mode)
    count = math.prod(_tuple(kernel_size, n, "kernel_size"))
    return E.pow(E.sign(out) * E.relu(E.abs(out)) * count, 1.0 / p)


@export(functional=True, toplevel=False)
def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode: bool = False):
    """``(sum over each window of x^p)^(1/p)`` (PyTorch's formula: the average pool times the
    window size; p = inf is max pooling of ``|x|``)."""
    return _lp(1, input, norm_type, kernel_size, stride, ceil_mode)


@export(functional=True, toplevel=False)
def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode: bool = False):
    """Two-dimensional power-average pooling (see ``lp_pool1d``)."""
    return _lp(2, input, norm_type, kernel_size, stride, ceil_mode)


@export(functional=True, toplevel=False)
def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode: bool = False):
    """Three-dimensional power-average pooling (see ``lp_pool1d``)."""
    return _lp(3, input, norm_type, kernel_size, stride, ceil_mode)


def _with_indices(n: int, adaptive: bool):
    if adaptive:

        def fn(input, output_size, return_indices: bool = False):
            return getattr(E, f"adaptive_max_pool{n}d")(input, output_size, return_indices=True)

        fn.__doc__ = f"``adaptive_max_pool{n}d`` returning (values, indices) always."
        fn.__name__ = fn.__qualname__ = f"adaptive_max_pool{n}d_with_indices"
    else:

        def fn(
            input,
            kernel_size,
            stride=None,
            padding=0,
            dilation=1,
            ceil_mode: bool = False,
            return_indices: bool = False,
        ):
            pool = getattr(E, f"max_pool{n}d")
            return pool(input, kernel_size, stride, padding, dilation, ceil_mode, True)

        fn.__doc__ = f"``max_pool{n}d`` returning (values, indices) always."
        fn.__name__ = fn.__qualname__ = f"max_pool{n}d_with_indices"
    return fn


for _n in (1, 2, 3):
    for _adaptive in (False, True):
        export(_with_indices(_n, _adaptive), functional=True, toplevel=False)
