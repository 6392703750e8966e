"""ONNX Runtime's ``com.microsoft.nchwc`` nodes: what its ORT_ENABLE_ALL optimizer saves on x86.

onnxruntime's NCHWc transformer rewrites convolutions and the pooling around them to run on
*blocked* tensors: a value of declared shape (N, C, H, W), C a multiple of the block size B,
whose memory holds the layout (N, C/B, H, W, B). The file keeps the declared shapes, and the
plain nodes between the blocked ones (Add, Mul, the Reshapes it inserts so broadcasting works
on blocks) read that memory as it is. So ember holds a blocked value exactly as onnxruntime does:
a tensor of the declared shape whose elements are in blocked order, and every plain node sees the
same numbers it would. Each nchwc node unblocks its operand into ordinary NCHW (a reshape and a
permutation), runs the standard converter, and blocks its result again:

* ``ReorderInput`` blocks an NCHW (or, ``channels_last``, NHWC) tensor; ``ReorderOutput``
  unblocks one and keeps its first ``channels`` channels (the rest is padding);
* ``Conv`` takes its filter reordered too: OIHWBo (blocks of B output channels innermost) where
  the input is a plain NCHW tensor (fewer than B channels, ``group`` 1) or the convolution is
  depthwise, OIHWBiBo (B input by B output channels innermost) otherwise; an optional fourth
  input is added before the fused activation (FusedConv's activations);
* ``MaxPool``, ``AveragePool``, ``GlobalMaxPool``, ``GlobalAveragePool`` and ``Upsample``
  (integer scales, nearest or linear) are the standard operators on the unblocked value.

The block size (16 where the writing CPU has AVX-512, 8 with AVX2) is not written in the file.
It is read from the model: every reordered filter's output channels are a multiple of it, the
blocked input channels too, and a ``ReorderOutput`` of ``channels`` C reads a convolution with
C rounded up to it. Where every size fits both, the block size is this machine's, which is the
one onnxruntime would run the file with here.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path

import numpy as np

from .._convert import converter
from ._common import E, given
from .contrib import _activation, _text
from .nn import _conv
from .nn_pool import _average_pool, _global_average_pool, _global_max_pool, _max_pool
from .resize import _resize

_NCHWC = "com.microsoft.nchwc"
_BLOCKS = (16, 8)


@functools.cache
def _host_block() -> int:
    """onnxruntime's block size on this machine (MlasNchwcGetBlockSize on x86)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        text = ""
    return 16 if " avx512f" in text else 8


def _filter_dims(runner, node) -> tuple | None:
    if len(node.input) < 2:
        return None
    w = runner.initializers.get(node.input[1])
    return tuple(int(d) for d in w.shape) if w is not None and w.ndim >= 3 else None


def _fits(block: int, runner) -> bool:
    """Whether every nchwc node of the graph is consistent with blocks of ``block``."""
    producers = {}
    for node, _label, attrs, _opset, _fn in runner.steps:
        for name in node.output:
            producers[name] = (node, attrs)
    for node, _label, attrs, _opset, _fn in runner.steps:
        if node.domain != _NCHWC:
            continue
        if node.op_type == "Conv":
            dims = _filter_dims(runner, node)
            if dims is None:
                continue
            out, inputs, group = dims[0], dims[1], int(attrs.get("group", 1))
            if out % block:
                return False
            if group > 1 and inputs != 1 and (inputs % block or (out // group) % block):
                return False
            if group == 1 and inputs >= block and inputs % block:
                return False
        elif node.op_type == "ReorderOutput":
            channels = int(attrs.get("channels", 0))
            source = producers.get(node.input[0]) if node.input else None
            while source is not None and source[0].domain == _NCHWC:
                if source[0].op_type == "Conv":
                    dims = _filter_dims(runner, source[0])
                    if dims is not None and dims[0] != -(-channels // block) * block:
                        return False
                    break
                source = producers.get(source[0].input[0]) if source[0].input else None
    return True


def _block(ctx) -> int:
    """The model's block size, worked out once per graph."""
    runner = ctx.runner
    found = getattr(runner, "_nchwc_block", None)
    if found is None:
        fitting = [b for b in _BLOCKS if _fits(b, runner)]
        if not fitting:
            raise ctx.error(
                "the nchwc nodes' filters fit no block size onnxruntime uses "
                f"({', '.join(map(str, _BLOCKS))})"
            )
        found = _host_block() if _host_block() in fitting else fitting[0]
        runner._nchwc_block = found
    return found


def _channels(ctx, t, block: int) -> int:
    if t.ndim < 3:
        raise ctx.error(f"a blocked value needs rank 3 or more, got shape {tuple(t.shape)}")
    c = int(t.shape[1])
    if c % block:
        raise ctx.error(f"a blocked value's {c} channels are not a multiple of the block {block}")
    return c


def unblock(ctx, t, block: int):
    """(N, C, *S) in blocked order (N, C/B, *S, B) -> the same shape in NCHW order."""
    t = ctx.tensor(t)
    c = _channels(ctx, t, block)
    n, spatial = int(t.shape[0]), tuple(t.shape[2:])
    r = E.reshape(t, (n, c // block, *spatial, block))
    r = E.permute(r, (0, 1, r.ndim - 1, *range(2, r.ndim - 1)))
    return E.reshape(r, (n, c, *spatial))


def block(ctx, t, size: int):
    """The inverse of `unblock`: NCHW order -> blocked order, channels padded with zeros to a
    multiple of the block."""
    c = int(t.shape[1])
    if c % size:
        pad = [0, 0] * (t.ndim - 2) + [0, -c % size]
        t = E.pad(t, tuple(pad))
        c = int(t.shape[1])
    n, spatial = int(t.shape[0]), tuple(t.shape[2:])
    r = E.reshape(t, (n, c // size, size, *spatial))
    r = E.permute(r, (0, 1, *range(3, r.ndim), 2))
    return E.reshape(r, (n, c, *spatial))


def _filter(ctx, w, size: int, inner_inputs: bool):
    """A reordered filter (declared (O, I, *K)) back in OIHW order: OIHWBo stores
    (O/B, I, *K, Bo), OIHWBiBo (O/B, I/B, *K, Bi, Bo)."""
    w = ctx.tensor(w)
    if w.ndim < 3:
        raise ctx.error(f"the filter needs rank 3 or more, got shape {tuple(w.shape)}")
    o, i, kernel = int(w.shape[0]), int(w.shape[1]), tuple(w.shape[2:])
    k = len(kernel)
    if o % size or (inner_inputs and i % size):
        raise ctx.error(f"the filter of shape {tuple(w.shape)} is not in blocks of {size}")
    if inner_inputs:
        r = E.reshape(w, (o // size, i // size, *kernel, size, size))
        r = E.permute(r, (0, 3 + k, 1, 2 + k, *range(2, 2 + k)))
    else:
        r = E.reshape(w, (o // size, i, *kernel, size))
        r = E.permute(r, (0, 2 + k, 1, *range(2, 2 + k)))
    return E.reshape(r, (o, i, *kernel))


@converter("ReorderInput", 1, domain=_NCHWC)
def _reorder_input(ctx, x):
    x = ctx.tensor(x)
    if ctx.attr("channels_last", 0):
        if x.ndim < 3:
            raise ctx.error(f"an NHWC input needs rank 3 or more, got shape {tuple(x.shape)}")
        x = E.permute(x, (0, x.ndim - 1, *range(1, x.ndim - 1)))
    return block(ctx, x, _block(ctx))


@converter("ReorderOutput", 1, domain=_NCHWC)
def _reorder_output(ctx, x):
    size = _block(ctx)
    y = unblock(ctx, x, size)
    channels = int(ctx.attr("channels", y.shape[1]))
    if not 0 < channels <= y.shape[1]:
        raise ctx.error(f"channels {channels} is not within the value's {y.shape[1]} channels")
    if channels < y.shape[1]:
        y = y[:, :channels]
    if ctx.attr("channels_last", 0):
        y = E.permute(y, (0, *range(2, y.ndim), 1))
    return y


@converter("Conv", 1, domain=_NCHWC)
def _conv_nchwc(ctx, x, w, bias=None, total=None):
    size = _block(ctx)
    x = ctx.tensor(x)
    group = int(ctx.attr("group", 1))
    dims = tuple(int(d) for d in ctx.tensor(w).shape)
    if len(dims) < 3:
        raise ctx.error(f"the filter needs rank 3 or more, got shape {dims}")
    plain_input = group == 1 and dims[1] < size  # an NCHW input, the filter OIHWBo
    depthwise = group > 1 and dims[1] == 1
    weight = _filter(ctx, w, size, inner_inputs=not (plain_input or depthwise))
    if not plain_input:
        x = unblock(ctx, x, size)
    y = _conv(ctx, x, weight, bias)
    if given(total):
        y = y + unblock(ctx, total, size)
    params = [float(p) for p in ctx.attr("activation_params", [])]
    y = _activation(ctx, y, _text(ctx.attr("activation", "")), params)
    return block(ctx, y, size)


def _standard(fn, opset: int):
    """A standard pooling converter on the unblocked value, its attributes read as the
    operator's version ``opset`` defines them (ceil_mode, dilations)."""

    def run(ctx, x):
        size = _block(ctx)
        plain = copy.copy(ctx)
        plain.opset = opset
        return block(ctx, fn(plain, unblock(ctx, x, size)), size)

    return run


converter("MaxPool", 1, domain=_NCHWC)(_standard(_max_pool, 12))
converter("AveragePool", 1, domain=_NCHWC)(_standard(_average_pool, 19))
converter("GlobalMaxPool", 1, domain=_NCHWC)(_standard(_global_max_pool, 1))
converter("GlobalAveragePool", 1, domain=_NCHWC)(_standard(_global_average_pool, 1))


@converter("Upsample", 1, domain=_NCHWC)
def _upsample(ctx, x):
    size = _block(ctx)
    y = unblock(ctx, x, size)
    scales = [float(s) for s in np.asarray(ctx.attr("scales"), np.float64).reshape(-1)]
    if len(scales) != y.ndim:
        raise ctx.error(f"scales has {len(scales)} entries for a rank {y.ndim} value")
    mode = _text(ctx.attr("mode", "nearest"))
    if mode not in ("nearest", "linear"):
        raise ctx.error(f"unknown mode {mode!r}")
    how = _text(ctx.attr("coordinate_transformation_mode", "asymmetric"))
    y = _resize(ctx, y, scales, None, None, mode=mode, how=how, nearest_mode="floor")
    return block(ctx, y, size)
