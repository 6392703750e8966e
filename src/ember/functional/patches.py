"""Patch rearrangements: ``unfold`` / ``fold`` (im2col and col2im) and ``pixel_shuffle`` /
``pixel_unshuffle``, with PyTorch's signatures.

``unfold`` is one ``index_select`` of the padded, flattened image with an index computed from
the sizes alone (so it is a constant of any captured graph), and ``fold`` is its adjoint, an
``index_add`` of the columns into a zero image with the same index; each one's gradient is the
other. The pixel shuffles are a reshape, a permutation and a reshape.
"""

from __future__ import annotations

import numpy as np

from ..errors import ArgumentError, ShapeError
from ..ops import api as E
from ..ops._node_names import renames
from ..ops._registry import export
from ..ops._util import fmt_shape, require_kernel_dtype
from ..ops.promotion import to_tensor
from ..symbolic import SymDim


def _pair(op: str, what: str, value, minimum: int) -> tuple[int, int]:
    values = tuple(value) if isinstance(value, (tuple, list)) else (value, value)
    if len(values) != 2:
        raise ArgumentError(f"{op}: {what} must be an int or a pair of ints, got {value!r}")
    values = tuple(int(v) for v in values)
    if any(v < minimum for v in values):
        raise ArgumentError(f"{op}: {what} must be at least {minimum}, got {value!r}")
    return values


def _geometry(op, kernel_size, dilation, padding, stride):
    return (
        _pair(op, "kernel_size", kernel_size, 1),
        _pair(op, "dilation", dilation, 1),
        _pair(op, "padding", padding, 0),
        _pair(op, "stride", stride, 1),
    )


def _blocks(op, size, kernel, dilation, padding, stride) -> tuple[int, int]:
    """The number of sliding-block positions along each spatial dimension."""
    out = []
    for s, k, d, p, st in zip(size, kernel, dilation, padding, stride):
        span = s + 2 * p - d * (k - 1) - 1
        if span < 0:
            raise ShapeError(
                f"a kernel of size {kernel} with dilation {dilation} does not fit the padded "
                f"spatial size {tuple(x + 2 * q for x, q in zip(size, padding))}",
                op=op,
            )
        out.append(span // st + 1)
    return out[0], out[1]


def _column_index(padded, kernel, dilation, stride, blocks) -> np.ndarray:
    """For each (kernel row, kernel column, block row, block column), in that order, the flat
    position in the padded image the column entry reads."""
    (kh, kw), (dh, dw), (sh, sw), (oh, ow) = kernel, dilation, stride, blocks
    rows = (np.arange(kh)[:, None] * dh + np.arange(oh)[None, :] * sh)[:, None, :, None]
    cols = (np.arange(kw)[:, None] * dw + np.arange(ow)[None, :] * sw)[None, :, None, :]
    return (rows * padded[1] + cols).reshape(-1).astype(np.int64)


def _unfold_by_slices(x, kernel, dilation, stride, blocks):
    """`unfold` of a padded input with a symbolic size, where no table of positions can be
    made: each kernel offset's strided slice of the blocks, stacked (the channel slowest, then
    the kernel row, then its column, as the table orders them)."""
    n, c = x.shape[:2]
    (kh, kw), (dh, dw), (sh, sw), (oh, ow) = kernel, dilation, stride, blocks
    taps = []
    for i in range(kh):
        for j in range(kw):
            rows = slice(i * dh, i * dh + (oh - 1) * sh + 1, sh)
            cols = slice(j * dw, j * dw + (ow - 1) * sw + 1, sw)
            taps.append(x[:, :, rows, cols])
    stacked = E.stack(taps, 2)  # (n, c, kh * kw, oh, ow)
    return E.reshape(stacked, (n, c * kh * kw, oh * ow))


@export(functional=True, toplevel=False)
@renames("Im2ColBackward0")
def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """Extract sliding local blocks: a (N, C, H, W) input (or an unbatched (C, H, W) one)
    becomes (N, C * kh * kw, L), L the number of block positions; the channel varies slowest
    and the kernel column fastest, as in PyTorch."""
    x = to_tensor(input)
    require_kernel_dtype("unfold", x, bool_ok=True)  # (im2col: floats and bool)
    if x.ndim not in (3, 4):
        raise ShapeError(
            f"expected a 3-D (unbatched) or 4-D (batched) input, got shape {fmt_shape(x.shape)}",
            op="unfold",
        )
    if x.ndim == 3:
        return E.squeeze(unfold(E.unsqueeze(x, 0), kernel_size, dilation, padding, stride), 0)
    kernel, dil, pad, st = _geometry("unfold", kernel_size, dilation, padding, stride)
    n, c, h, w = x.shape
    blocks = _blocks("unfold", (h, w), kernel, dil, pad, st)
    if pad != (0, 0):
        x = E.pad(x, (pad[1], pad[1], pad[0], pad[0]))
    if isinstance(h, SymDim) or isinstance(w, SymDim):
        return _unfold_by_slices(x, kernel, dil, st, blocks)
    padded = (h + 2 * pad[0], w + 2 * pad[1])
    index = to_tensor(_column_index(padded, kernel, dil, st, blocks))
    flat = E.reshape(x, (n, c, padded[0] * padded[1]))
    cols = E.index_select(flat, 2, index)
    return E.reshape(cols, (n, c * kernel[0] * kernel[1], blocks[0] * blocks[1]))


@export(functional=True, toplevel=False)
@renames("Col2ImBackward0")
def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """Combine sliding local blocks into an image (the adjoint of `unfold`): a
    (N, C * kh * kw, L) input (or unbatched (C * kh * kw, L)) becomes (N, C, *output_size),
    overlapping entries summed."""
    x = to_tensor(input)
    require_kernel_dtype("fold", x, bool_ok=True)  # (col2im: floats and bool)
    if x.ndim not in (2, 3):
        raise ShapeError(
            f"expected a 2-D (unbatched) or 3-D (batched) input, got shape {fmt_shape(x.shape)}",
            op="fold",
        )
    if x.ndim == 2:
        out = fold(E.unsqueeze(x, 0), output_size, kernel_size, dilation, padding, stride)
        return E.squeeze(out, 0)
    size = _pair("fold", "output_size", output_size, 1)
    kernel, dil, pad, st = _geometry("fold", kernel_size, dilation, padding, stride)
    n, ck, length = x.shape
    per_block = kernel[0] * kernel[1]
    blocks = _blocks("fold", size, kernel, dil, pad, st)
    if ck % per_block:
        raise ShapeError(
            f"dimension 1 of the input ({ck}) must be divisible by the product of kernel_size "
            f"({per_block}); input shape {fmt_shape(x.shape)}",
            op="fold",
        )
    if length != blocks[0] * blocks[1]:
        raise ShapeError(
            f"dimension 2 of the input ({length}) must equal the number of sliding blocks "
            f"{blocks[0]} * {blocks[1]} = {blocks[0] * blocks[1]} for output_size {size}, "
            f"kernel_size {kernel}, dilation {dil}, padding {pad}, stride {st}",
            op="fold",
        )
    c = ck // per_block
    padded = (size[0] + 2 * pad[0], size[1] + 2 * pad[1])
    index = to_tensor(_column_index(padded, kernel, dil, st, blocks))
    image = E.zeros((n, c, padded[0] * padded[1]), dtype=x.dtype)
    image = E.index_add(image, 2, index, E.reshape(x, (n, c, per_block * length)))
    image = E.reshape(image, (n, c) + padded)
    if pad != (0, 0):
        image = E.narrow(E.narrow(image, 2, pad[0], size[0]), 3, pad[1], size[1])
    return image


def _factor(op: str, value) -> int:
    r = int(value)
    if r <= 0:
        raise ArgumentError(f"{op}: the factor must be positive, got {value!r}")
    return r


@export(functional=True, toplevel=False)
@renames("PixelShuffleBackward0")
def pixel_shuffle(input, upscale_factor: int):
    """(*, C * r * r, H, W) to (*, C, H * r, W * r), r the ``upscale_factor``."""
    x = to_tensor(input)
    r = _factor("pixel_shuffle", upscale_factor)
    if x.ndim < 3 or x.shape[-3] % (r * r):
        raise ShapeError(
            f"expected an input of at least 3 dimensions whose channels (dimension -3) are "
            f"divisible by upscale_factor squared ({r * r}), got shape {fmt_shape(x.shape)}",
            op="pixel_shuffle",
        )
    lead = tuple(x.shape[:-3])
    c, h, w = x.shape[-3] // (r * r), x.shape[-2], x.shape[-1]
    k = len(lead)
    y = E.reshape(x, lead + (c, r, r, h, w))
    y = E.permute(y, tuple(range(k)) + (k, k + 3, k + 1, k + 4, k + 2))
    return E.reshape(y, lead + (c, h * r, w * r))


@export(functional=True, toplevel=False)
@renames("PixelUnshuffleBackward0")
def pixel_unshuffle(input, downscale_factor: int):
    """(*, C, H * r, W * r) to (*, C * r * r, H, W), r the ``downscale_factor`` (the inverse of
    `pixel_shuffle`)."""
    x = to_tensor(input)
    r = _factor("pixel_unshuffle", downscale_factor)
    if x.ndim < 3 or x.shape[-2] % r or x.shape[-1] % r:
        raise ShapeError(
            f"expected an input of at least 3 dimensions whose height and width are divisible "
            f"by downscale_factor ({r}), got shape {fmt_shape(x.shape)}",
            op="pixel_unshuffle",
        )
    lead = tuple(x.shape[:-3])
    c, h, w = x.shape[-3], x.shape[-2] // r, x.shape[-1] // r
    k = len(lead)
    y = E.reshape(x, lead + (c, h, r, w, r))
    y = E.permute(y, tuple(range(k)) + (k, k + 2, k + 4, k + 1, k + 3))
    return E.reshape(y, lead + (c * r * r, h, w))
