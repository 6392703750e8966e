"""ONNX's products and convolutions: MatMul, Gemm, Conv, ConvTranspose, and the window geometry
(strides, dilations, explicit or automatic padding, output sizes) the pooling converters of
nn_pool.py share.

Convolutions go straight to ember's ``conv`` primitive and its adjoint ``conv_input_grad``
(ops/conv.py), whose padding is a (before, after) pair per spatial dimension: ONNX's asymmetric
pads, auto_pad and ConvTranspose's output_padding / output_shape need no padded copy of the input,
and the C kernels, the epilogue fusion and the gradients apply as they do to ``F.conv2d``. A
ConvTranspose whose windows tile its output (strides equal to the kernel, no padding) is a
product and a copy instead (`_unshuffled_product`), which the C graph runner runs.
"""

from __future__ import annotations

import numpy as np

from ...ops._registry import apply
from ...ops._util import half_precision
from ...ops.conv import CONV, CONV_INPUT_GRAD
from .._convert import converter, supported_dtype
from ._common import E, F, dtype_np

# ---------------------------------------------------------------------------------------------
# window geometry


def per_dim(ctx, name: str, nd: int, default: int) -> tuple:
    """An ints attribute with one value per spatial dimension (``default`` when absent)."""
    values = ctx.attr(name, None)
    if values is None or len(values) == 0:
        return (default,) * nd
    if len(values) != nd:
        raise ctx.error(f"attribute {name!r} has {len(values)} values for {nd} spatial dimensions")
    return tuple(int(v) for v in values)


def auto_pad_mode(ctx) -> str:
    mode = ctx.attr("auto_pad", "NOTSET") or "NOTSET"
    if mode not in ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"):
        raise ctx.error(f"auto_pad {mode!r} is not NOTSET, SAME_UPPER, SAME_LOWER or VALID")
    return mode


def split_same(total: int, upper: bool) -> tuple[int, int]:
    """A total padding split into (before, after): the odd element goes after for SAME_UPPER,
    before for SAME_LOWER."""
    half = total // 2
    return (half, total - half) if upper else (total - half, half)


def window_pads(ctx, in_size, kernel, strides, dilations) -> list[tuple[int, int]]:
    """Per spatial dimension, the (before, after) padding of a convolution or pooling window:
    from ``pads`` ([x1_begin, x2_begin, ..., x1_end, ...]) or from ``auto_pad``, where SAME makes
    the output ceil(in / stride) long."""
    nd = len(kernel)
    mode = auto_pad_mode(ctx)
    if mode in ("SAME_UPPER", "SAME_LOWER"):
        pairs = []
        for n, k, s, d in zip(in_size, kernel, strides, dilations):
            out = -(-n // s)
            total = max(0, (out - 1) * s + d * (k - 1) + 1 - n)
            pairs.append(split_same(total, mode == "SAME_UPPER"))
        return pairs
    if mode == "VALID":
        return [(0, 0)] * nd
    pads = ctx.attr("pads", None) or [0] * (2 * nd)
    if len(pads) != 2 * nd:
        raise ctx.error(f"pads has {len(pads)} values for {nd} spatial dimensions")
    if any(p < 0 for p in pads):
        raise ctx.error(f"pads {list(pads)} must be non-negative")
    return [(int(pads[i]), int(pads[i + nd])) for i in range(nd)]


def pool_out_size(ctx, n, k, s, d, pads, ceil_mode: bool) -> int:
    """ONNX's pooling output length: floor (or ceil) of the padded length over the stride, a
    window that would start in the trailing padding dropped (as PyTorch does)."""
    before, after = pads
    span = n + before + after - d * (k - 1) - 1
    if span < 0:
        raise ctx.error(
            f"the input ({n} long, padding {pads}) is shorter than the dilated window "
            f"({d * (k - 1) + 1})"
        )
    out = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= n + before:
        out -= 1
    return out


def kernel_shape(ctx, nd: int, weight_shape=None) -> tuple:
    ks = ctx.attr("kernel_shape", None)
    if ks is None or len(ks) == 0:
        if weight_shape is None:
            raise ctx.error("attribute 'kernel_shape' is required")
        return tuple(int(k) for k in weight_shape)
    ks = tuple(int(k) for k in ks)
    if len(ks) != nd or any(k < 1 for k in ks):
        raise ctx.error(f"kernel_shape {list(ks)} does not fit {nd} spatial dimensions")
    if weight_shape is not None and ks != tuple(weight_shape):
        raise ctx.error(
            f"kernel_shape {list(ks)} disagrees with the weight's {tuple(weight_shape)}"
        )
    return ks


def spatial_input(ctx, x, what: str = "X"):
    x = ctx.tensor(x)
    if x.ndim < 3:
        raise ctx.error(
            f"{what} of shape {tuple(x.shape)} needs a batch, a channel and a spatial dim"
        )
    return x


def channel_view(t, ndim: int):
    """A per-channel vector shaped (1, C, 1, ...) to broadcast over an (N, C, *spatial) tensor."""
    return E.reshape(t, (1, -1) + (1,) * (ndim - 2))


# ---------------------------------------------------------------------------------------------
# products


def _numpy_fallback(ctx, *values) -> bool:
    """Integer types ember has no tensors for (uint32, uint64): computed in NumPy on static
    values."""
    return any(v is not None and not supported_dtype(dtype_np(v)) for v in values)


@converter("MatMul", 1)
def _matmul(ctx, a, b):
    if _numpy_fallback(ctx, a, b):
        return np.matmul(ctx.static(a, "A"), ctx.static(b, "B"))
    return E.matmul(ctx.tensor(a), ctx.tensor(b))


@converter("Gemm", 1)
def _gemm(ctx, a, b, c=None):
    alpha, beta = float(ctx.attr("alpha", 1.0)), float(ctx.attr("beta", 1.0))
    trans_a, trans_b = bool(ctx.attr("transA", 0)), bool(ctx.attr("transB", 0))
    if _numpy_fallback(ctx, a, b, c):
        return _gemm_numpy(ctx, a, b, c, alpha, beta, trans_a, trans_b)
    a, b = ctx.tensor(a), ctx.tensor(b)
    if a.ndim != 2 or b.ndim != 2:
        raise ctx.error(f"A {tuple(a.shape)} and B {tuple(b.shape)} must be matrices")
    a = E.transpose(a, 0, 1) if trans_a else a
    c = None if c is None else ctx.tensor(c)
    if beta == 0.0:
        c = None
    floating = a.dtype.is_floating_point
    if c is not None and beta != 1.0:
        c = c * beta if floating else E.cast(c * beta, c.dtype)
    n = b.shape[0] if trans_b else b.shape[1]
    if trans_b and alpha == 1.0 and (c is None or tuple(c.shape) in ((n,), (1, n))):
        # a fully connected layer: F.linear takes the weight as stored (prepacked once)
        return F.linear(a, b, None if c is None else E.reshape(c, (n,)))
    y = E.matmul(a, E.transpose(b, 0, 1) if trans_b else b)
    if alpha != 1.0:
        y = y * alpha if floating else E.cast(y * alpha, y.dtype)
    return y if c is None else y + c


def _gemm_numpy(ctx, a, b, c, alpha, beta, trans_a, trans_b):
    a, b = ctx.static(a, "A"), ctx.static(b, "B")
    y = (a.T if trans_a else a) @ (b.T if trans_b else b)
    if alpha != 1.0:
        y = (y * alpha).astype(y.dtype)
    if c is not None and beta != 0.0:
        c = ctx.static(c, "C")
        y = y + ((c * beta).astype(c.dtype) if beta != 1.0 else c)
    return y.astype(a.dtype)


# ---------------------------------------------------------------------------------------------
# convolutions

# the dtypes whose tiled transposed convolutions run as a product (`_unshuffled_product`):
# half precision stays on conv_input_grad, which rounds its float32 sums once
_TILED_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _bias(ctx, y, bias):
    if bias is None:
        return y
    return y + channel_view(ctx.tensor(bias, y.dtype), y.ndim)


def _bias_operand(ctx, x, bias) -> tuple:
    """``(bias,)`` for a half-precision convolution (its bias operand: added to the float32
    sums before the one rounding, as F.conv2d does), else ``()`` (`_bias` adds it after)."""
    if bias is None or not half_precision(x):
        return ()
    return (ctx.tensor(bias, x.dtype),)


@converter("Conv", 1)
def _conv(ctx, x, w, bias=None):
    x, w = spatial_input(ctx, x), ctx.tensor(w)
    nd = x.ndim - 2
    if w.ndim != x.ndim:
        raise ctx.error(f"W of shape {tuple(w.shape)} does not fit X of shape {tuple(x.shape)}")
    kernel = kernel_shape(ctx, nd, w.shape[2:])
    strides = per_dim(ctx, "strides", nd, 1)
    dilations = per_dim(ctx, "dilations", nd, 1)
    pads = window_pads(ctx, x.shape[2:], kernel, strides, dilations)
    operand = _bias_operand(ctx, x, bias)
    y = apply(
        CONV,
        x,
        w if w.dtype == x.dtype else E.cast(w, x.dtype),
        *operand,
        stride=strides,
        padding=tuple(pads),
        dilation=dilations,
        groups=int(ctx.attr("group", 1)),
    )
    return _bias(ctx, y, None if operand else bias)


@converter("ConvTranspose", 1)
def _conv_transpose(ctx, x, w, bias=None):
    x, w = spatial_input(ctx, x), ctx.tensor(w)
    nd = x.ndim - 2
    if w.ndim != x.ndim:
        raise ctx.error(f"W of shape {tuple(w.shape)} does not fit X of shape {tuple(x.shape)}")
    kernel = kernel_shape(ctx, nd, w.shape[2:])
    strides = per_dim(ctx, "strides", nd, 1)
    dilations = per_dim(ctx, "dilations", nd, 1)
    extra = per_dim(ctx, "output_padding", nd, 0)
    groups = int(ctx.attr("group", 1))
    in_size = tuple(x.shape[2:])
    # the full (unpadded) output length of each dimension
    full = [
        s * (n - 1) + e + d * (k - 1) + 1
        for n, s, e, d, k in zip(in_size, strides, extra, dilations, kernel)
    ]
    mode = auto_pad_mode(ctx)
    wanted = ctx.attr("output_shape", None)
    if wanted:
        wanted = [int(v) for v in wanted][-nd:]  # some exporters include N and C
        if len(wanted) != nd:
            raise ctx.error(f"output_shape {wanted} does not fit {nd} spatial dimensions")
    elif mode in ("SAME_UPPER", "SAME_LOWER"):
        wanted = [n * s for n, s in zip(in_size, strides)]
    lead = [0] * nd  # zeros before the output (a negative leading padding)
    if wanted:
        pads = []
        for i, (f, o) in enumerate(zip(full, wanted)):
            before, after = split_same(f - o, mode == "SAME_UPPER")
            # an output longer than the full one: the split may pad before, with zeros
            lead[i], before = max(0, -before), max(0, before)
            pads.append((before, after))
    elif mode == "VALID":
        pads = [(0, 0)] * nd
    else:
        pads = window_pads(ctx, in_size, kernel, strides, dilations)
    out = tuple(f - b - a for f, (b, a) in zip(full, pads))
    if any(o < 1 for o in out):
        raise ctx.error(f"pads {pads} leave an empty output {out}")
    plain = not any(lead) and all(b == a == 0 for b, a in pads) and not any(extra)
    tiled = plain and groups == 1 and tuple(strides) == tuple(kernel) and set(dilations) == {1}
    if tiled and all(isinstance(n, int) for n in in_size) and dtype_np(x) in _TILED_DTYPES:
        return _bias(ctx, _unshuffled_product(x, w, kernel), bias)
    # the adjoint of a convolution of an `out`-sized input whose trailing padding loses the
    # output_padding elements: that convolution maps `out` back to exactly `in_size`
    # (leading zeros padded after: the bias added after, to them too)
    operand = () if any(lead) else _bias_operand(ctx, x, bias)
    y = apply(
        CONV_INPUT_GRAD,
        x,
        w if w.dtype == x.dtype else E.cast(w, x.dtype),
        *operand,
        stride=strides,
        padding=tuple((b, a - e) for (b, a), e in zip(pads, extra)),
        dilation=dilations,
        groups=groups,
        in_size=out,
    )
    if any(lead):
        flat = []
        for zeros in reversed(lead):
            flat += [zeros, 0]
        y = F.pad(y, tuple(flat))
    return _bias(ctx, y, None if operand else bias)


def _unshuffled_product(x, w, kernel: tuple):
    """A transposed convolution whose windows tile the output (strides equal to the kernel, no
    padding or dilation, one group: a U-Net's upsampling): each input position writes its own
    kernel-sized block, ``x W`` over the channels, so it is one product, the weight's
    transpose (Cout * K, Cin) times the positions as columns (Cin, N * S: the input as stored
    for one sample), and one copy that moves each block into place: steps of the C graph
    runner (conv_input_grad has none) and ember's GEMM, rather than phase by phase through the
    strided convolution kernels. (The copy interleaves whole runs of the product's rows, the
    kernel's last size of them at a time, which the runner's strided copy zips.)"""
    n, cin, *size = x.shape
    nd = len(size)
    cout = w.shape[1]
    w = E.reshape(w if w.dtype == x.dtype else E.cast(w, x.dtype), (cin, -1))
    positions = int(np.prod(size))
    columns = E.reshape(x, (n, cin, positions))
    if n > 1:  # (the samples' positions side by side: runs of S copied)
        columns = E.permute(columns, (1, 0, 2))
    y = E.matmul(E.transpose(w, 0, 1), E.reshape(columns, (cin, n * positions)))
    y = E.reshape(y, (cout, *kernel, n, *size))  # (Cout, K1, K2, ..., N, S1, S2, ...)
    # (N, Cout, S1, K1, S2, K2, ...): each spatial size followed by its kernel size
    order = [1 + nd, 0] + [a for d in range(nd) for a in (2 + nd + d, 1 + d)]
    y = E.permute(y, order)
    return E.reshape(y, (n, cout, *(s * k for s, k in zip(size, kernel))))
