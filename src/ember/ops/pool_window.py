"""The pooling geometry and argument checks shared by max pooling (pool.py), average pooling
(pool_avg.py) and adaptive pooling (pool_adaptive.py): each kernel offset's slices of the padded
input, PyTorch's checks of a pooling call and its output size (torch's pooling_output_shape, in
kernels/pool_geometry.py), and the unbatched (C, *spatial) form's batch dimension added and
removed."""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..errors import KernelDTypeError, ShapeError
from ..kernels.pool_geometry import pool_out_size
from ._util import fmt_shape


def window_slices(kernel, stride, dilation, out_size):
    """For each kernel offset (row-major), the slices of the padded input it reads."""
    for idx in np.ndindex(*kernel):
        yield (
            idx,
            tuple(
                slice(i * d, i * d + (o - 1) * s + 1, s)
                for i, d, o, s in zip(idx, dilation, out_size, stride)
            ),
        )


def check_pool_args(name, x, kernel, stride, padding, dilation, ceil_mode) -> tuple:
    """Validate a pooling call (torch's rules); returns the output spatial size."""
    nd = len(kernel)
    if x.ndim != nd + 2:
        raise ShapeError(
            f"expected a {nd + 2}-D input (N, C, {nd} spatial) or an unbatched "
            f"{nd + 1}-D one, got shape {fmt_shape(x.shape)}",
            op=name,
        )
    for p, k in zip(padding, kernel):
        if p > k // 2:
            raise ShapeError(
                f"padding {padding} must be at most half the kernel size {kernel}", op=name
            )
    out = tuple(
        pool_out_size(n, k, s, p, d, ceil_mode)
        for n, k, s, p, d in zip(x.shape[2:], kernel, stride, padding, dilation)
    )
    if any(o < 1 for o in out):
        raise ShapeError(
            f"input of shape {fmt_shape(x.shape)} is too small for kernel {kernel} "
            f"(dilation {dilation}, padding {padding}): the output size would be {out}",
            op=name,
        )
    return out


def unbatch(name, x, nd):
    """Pooling accepts an unbatched (C, *spatial) input like PyTorch: (x with a batch
    dimension, whether one was added)."""
    if x.ndim == nd + 1:
        return x.reshape((1,) + tuple(x.shape)), True
    return x, False


def check_dtype(name, x):
    if x.dtype is dt.bool_:
        raise KernelDTypeError("not defined for bool tensors; convert with .float()", op=name)


def finish_pool(values, indices, unbatched, return_indices):
    if unbatched:
        values = values.reshape(tuple(values.shape[1:]))
        indices = indices.reshape(tuple(indices.shape[1:]))
    return (values, indices) if return_indices else values
