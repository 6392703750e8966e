"""Window codes: the compact indices max pooling keeps for its own gradient.

PyTorch's max pooling returns, and saves for the backward, the flat position of each window's
maximum in its (n, c) plane as an int64: 8 bytes per output, often more than the pooled values
themselves (a CNN's pooling indices were a third of its bfloat16 training step's peak). The
backward needs only which element of its window won, a number below the window's size: a
``max_pool`` with ``codes=True`` returns that number (row-major over the kernel's offsets,
padding included) in the smallest dtype that holds it (`code_dtype`: uint8 up to 256-element
windows), and ``pool_scatter`` / ``pool_gather`` with ``window=`` read codes, the plane
position being the window's origin plus the code's offset (`plane_positions`).

``F.max_pool*d`` without ``return_indices`` (what ``nn.MaxPool2d`` calls) pools with codes;
asked for its indices, it returns PyTorch's flat int64 ones. This module owns the geometry
(the tables the NumPy and C kernels share) and the ONNX form of both conversions.
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as dt
from ..kernels.pool_geometry import plane_positions, plane_strides

__all__ = [
    "code_dtype",
    "flat_from_codes",
    "onnx_codes_from_flat",
    "onnx_flat_from_codes",
    "window_of",
]


def code_dtype(kernel) -> dt.DType:
    """The dtype of the codes of windows of ``kernel``: uint8 where every code fits, else
    int32."""
    return dt.uint8 if math.prod(kernel) <= 256 else dt.int32


def window_of(attrs) -> tuple:
    """The ``window`` attribute a max pooling's gradient ops take: (kernel, stride, padding,
    dilation)."""
    return tuple(tuple(attrs[k]) for k in ("kernel", "stride", "padding", "dilation"))


def flat_from_codes(codes: np.ndarray, window: tuple, in_size: tuple) -> np.ndarray:
    """The flat plane positions (int64, PyTorch's max-pooling indices) of ``codes`` (N, C,
    *out_size) of windows ``window`` over planes of ``in_size``."""
    out_size = tuple(codes.shape[2:])
    base, offsets = plane_positions(tuple(window), tuple(in_size), out_size)
    flat = offsets.take(codes.astype(np.intp, copy=False))
    flat += base.reshape(out_size)
    return flat


# ------------------------------------------------------------------------------------ ONNX


def _along(e, values, axis: int, nd: int):
    """A constant int64 tensor of ``values`` laid along spatial ``axis`` of an (N, C, *nd)
    tensor (size 1 on the other axes), for broadcasting."""
    shape = [1, 1] + [1] * nd
    shape[2 + axis] = len(values)
    return e.constant(np.asarray(values, np.int64).reshape(shape))


def _size(e, n) -> str:
    """A size as an int64 scalar (a symbolic one: a 1-D tensor of one, which broadcasts the
    same way against the (N, C, *spatial) positions)."""
    return e.scalar(n, dt.int64) if isinstance(n, int) else e.dim(n)


def _origins(e, n_out, stride: int, padding: int, axis: int, nd: int) -> str:
    """The first input position of each of ``n_out`` windows along ``axis``, laid along it."""
    if isinstance(n_out, int):
        return _along(e, np.arange(n_out) * stride - padding, axis, nd)
    limit = e.node("Squeeze", [e.dim(n_out), e.ints([0])])
    zero, one = e.scalar(0, dt.int64), e.scalar(1, dt.int64)
    first = e.node("Range", [zero, limit, one])
    first = e.node(
        "Sub", [e.node("Mul", [first, e.scalar(stride, dt.int64)]), e.scalar(padding, dt.int64)]
    )
    shape = [1, 1] + [1] * nd
    shape[2 + axis] = -1
    return e.node("Reshape", [first, e.ints(shape)])


def onnx_codes_from_flat(e, flat: str, window: tuple, in_size: tuple, out_size: tuple) -> str:
    """ONNX nodes turning flat plane positions (int64) into window codes (int64): per spatial
    axis, the position's coordinate less its window's origin, over the dilation, weighted by
    the kernel's row-major strides."""
    kernel, stride, padding, dilation = window
    nd = len(kernel)
    code = None
    steps = plane_strides(kernel)
    for axis, (f, n, s, p, d, ks) in enumerate(
        zip(plane_strides(in_size), in_size, stride, padding, dilation, steps)
    ):
        coord = e.node("Div", [flat, _size(e, f)])
        coord = e.node("Mod", [coord, _size(e, n)], fmod=0)
        origin = _origins(e, out_size[axis], s, p, axis, nd)
        step = e.node("Div", [e.node("Sub", [coord, origin]), e.scalar(d, dt.int64)])
        term = e.node("Mul", [step, e.scalar(ks, dt.int64)])
        code = term if code is None else e.node("Add", [code, term])
    return code


def onnx_flat_from_codes(e, codes: str, window: tuple, in_size: tuple, out_size: tuple) -> str:
    """ONNX nodes turning window codes into flat plane positions (int64): the window's origin
    plus the code's offset, both constant tables (`plane_positions`); over symbolic sizes,
    per axis the window's first position plus the code's kernel offset, times the plane's
    stride along that axis, computed in the graph."""
    if not all(isinstance(n, int) for n in (*in_size, *out_size)):
        return _flat_from_codes_computed(e, codes, window, in_size, out_size)
    base, offsets = plane_positions(tuple(window), tuple(in_size), tuple(out_size))
    index = e.cast(codes, dt.int64)
    picked = e.node("Gather", [e.constant(np.array(offsets)), index], axis=0)
    origin = e.constant(np.array(base).reshape((1, 1) + tuple(out_size)))
    return e.node("Add", [picked, origin])


def _flat_from_codes_computed(e, codes, window, in_size, out_size) -> str:
    kernel, stride, padding, dilation = window
    nd = len(kernel)
    code = e.cast(codes, dt.int64)
    flat = None
    for axis, (f, ks) in enumerate(zip(plane_strides(in_size), plane_strides(kernel))):
        offset = e.node("Div", [code, e.scalar(ks, dt.int64)])
        offset = e.node("Mod", [offset, e.scalar(kernel[axis], dt.int64)], fmod=0)
        offset = e.node("Mul", [offset, e.scalar(dilation[axis], dt.int64)])
        first = _origins(e, out_size[axis], stride[axis], padding[axis], axis, nd)
        term = e.node("Mul", [e.node("Add", [first, offset]), _size(e, f)])
        flat = term if flat is None else e.node("Add", [flat, term])
    return flat
