"""Fractional max pooling (Graham, 2014): ``F.fractional_max_pool2d`` and ``3d`` with PyTorch's
signatures (``output_size`` or ``output_ratio``, ``return_indices``, ``_random_samples``).

Each plane (batch element, channel) draws one sample ``u`` in [0, 1) per spatial dimension;
the windows of size ``k`` start at PyTorch's pseudo-random sequence (``generate_intervals`` in
ATen's FractionalMaxPool2d.cpp): with ``alpha = (in - k) / (out - 1)`` (in the input's dtype),
``start[i] = int((i + u) * alpha) - int(u * alpha)`` for ``i < out - 1`` and
``start[out - 1] = in - k``. The 2-d samples are (width, height), the 3-d ones (time, height,
width), as PyTorch reads them, so the same ``_random_samples`` give PyTorch's result.

The starts are computed in ember ops from the samples, so the whole function is ember ops
(a gather of every window's elements and a maximum over them) and runs eagerly, captured and
differentiated by the primitives' VJPs. The indices are flat positions in each input plane,
the first maximum of a window in row-major order, as PyTorch's.
"""

from __future__ import annotations

from .. import dtypes as dt
from ..errors import ArgumentError, ShapeError
from ..ops import api as E
from ..ops._registry import export
from ..ops._util import fmt_shape
from ._common import float_input


def _tuple(value, n: int, what: str, op: str) -> tuple:
    if isinstance(value, (int, float)):
        return (value,) * n
    value = tuple(value)
    if len(value) == 1:
        return value * n
    if len(value) != n:
        raise ArgumentError(f"{op} requires {what} to either be a single Int or tuple of Ints.")
    return value


def _starts(u, size: int, out: int, kernel: int):
    """(planes,) samples -> (planes, out) int64 window starts (PyTorch's generate_intervals)."""
    last = E.full((u.shape[0], 1), size - kernel, dtype=dt.int64)
    if out == 1:
        return last
    alpha = E.full((), float(size - kernel), dtype=u.dtype) / float(out - 1)
    i = E.arange(out - 1, dtype=u.dtype)
    first = E.trunc((E.unsqueeze(u, 1) + i) * alpha) - E.trunc(E.unsqueeze(u, 1) * alpha)
    return E.cat([E.cast(first, dt.int64), last], 1)


def _fractional(n: int, input, kernel_size, output_size, output_ratio, return_indices, samples):
    op = f"fractional_max_pool{n}d"
    x = float_input(op, input)
    if x.ndim not in (n + 1, n + 2):
        raise ShapeError(
            f"expected a {n + 1}-d (unbatched) or {n + 2}-d input, got {fmt_shape(x.shape)}",
            op=op,
        )
    unbatched = x.ndim == n + 1
    if unbatched:
        x = E.unsqueeze(x, 0)
    spatial = tuple(int(s) for s in x.shape[2:])
    kernel = tuple(int(k) for k in _tuple(kernel_size, n, "kernel_size", op))
    if output_size is None and output_ratio is None:
        raise ArgumentError(f"{op} requires specifying either an output_size or an output_ratio")
    if output_size is None:
        ratio = _tuple(output_ratio, n, "output_ratio", op)
        out = tuple(int(s * r) for s, r in zip(spatial, ratio))
    else:
        out = tuple(int(s) for s in _tuple(output_size, n, "output_size", op))
    for d in range(n):
        if out[d] + kernel[d] - 1 > spatial[d]:
            raise ShapeError(
                f"output size {out[d]} with pool size {kernel[d]} is too large for input size "
                f"{spatial[d]} in dimension {d} (output + pool - 1 must not exceed the input)",
                op=op,
            )
        if kernel[d] <= 0 or out[d] <= 0:
            raise ShapeError(f"kernel_size {kernel} and output size {out} must be positive", op=op)
    batch, channels = int(x.shape[0]), int(x.shape[1])
    if samples is None:
        samples = E.rand(batch, channels, n, dtype=x.dtype)
    samples = E.cast(samples, x.dtype)
    if tuple(samples.shape) != (batch, channels, n):
        raise ShapeError(
            f"_random_samples must have shape {(batch, channels, n)} (batch, channels, {n}) for "
            f"input {fmt_shape(input.shape)}, got {fmt_shape(samples.shape)}",
            op=op,
        )
    planes = batch * channels
    u = E.reshape(samples, (planes, n))
    # PyTorch reads the 2-d samples as (width, height) and the 3-d ones as (time, height, width)
    order = (1, 0) if n == 2 else (0, 1, 2)
    # flat index of each window's start in a plane: sum of start * stride over the dimensions
    strides = [1] * n
    for d in range(n - 2, -1, -1):
        strides[d] = strides[d + 1] * spatial[d + 1]
    flat = None
    for d in range(n):
        s = _starts(u[:, order[d]], spatial[d], out[d], kernel[d]) * strides[d]
        shape = (planes,) + tuple(out[e] if e == d else 1 for e in range(n))
        s = E.reshape(s, shape)
        flat = s if flat is None else flat + s
    # each window's offsets from its start, row-major over the kernel
    offsets = E.zeros((), dtype=dt.int64)
    for d in range(n):
        step = E.arange(kernel[d], dtype=dt.int64) * strides[d]
        offsets = E.unsqueeze(offsets, -1) + step
    window = 1
    for k in kernel:
        window *= k
    index = E.unsqueeze(flat, -1) + E.reshape(offsets, (window,))  # (planes, *out, window)
    values = E.gather(E.reshape(x, (planes, -1)), 1, E.reshape(index, (planes, -1)))
    values = E.reshape(values, (planes,) + out + (window,))
    best, arg = E.max(values, -1)
    positions = E.squeeze(E.gather(index, -1, E.unsqueeze(arg, -1)), -1)
    lead = (channels,) if unbatched else (batch, channels)
    best = E.reshape(best, lead + out)
    positions = E.reshape(positions, lead + out)
    return (best, positions) if return_indices else best


@export(functional=True, toplevel=False)
def fractional_max_pool2d(
    input,
    kernel_size,
    output_size=None,
    output_ratio=None,
    return_indices: bool = False,
    _random_samples=None,
):
    """Fractional max pooling over (H, W) windows of ``kernel_size`` at pseudo-random starts
    (module docstring); ``output_ratio`` gives ``int(size * ratio)`` outputs. With
    ``return_indices=True`` also the flat index of each maximum in its ``H * W`` plane."""
    return _fractional(
        2, input, kernel_size, output_size, output_ratio, return_indices, _random_samples
    )


@export(functional=True, toplevel=False)
def fractional_max_pool3d(
    input,
    kernel_size,
    output_size=None,
    output_ratio=None,
    return_indices: bool = False,
    _random_samples=None,
):
    """Fractional max pooling over (T, H, W) windows (see ``fractional_max_pool2d``)."""
    return _fractional(
        3, input, kernel_size, output_size, output_ratio, return_indices, _random_samples
    )
