"""Compiled depthwise convolutions: the forward, its input gradient and its weight gradient for
``groups == in_channels`` (each output channel reads one input channel; a channel multiplier
``out_channels / groups`` above 1 included), 1-d and 2-d, any stride, padding and dilation.

The grouped path of kernels/cconv.py runs a depthwise convolution as one tiny GEMM per channel
(one output row padded to a panel of eight): mostly padding. A depthwise convolution does a few
multiply-adds per element it moves, so it is bound by memory, and these kernels touch each
element once: per (sample, channel) plane, the plane is copied into a zero-framed scratch that
stays in the L1/L2 cache, and each output row is one loop over its width with the kernel's taps
unrolled (the geometry is compiled in: one small library per kernel size, stride and dilation,
cached on disk by kernels/ccompile.py), so no bounds are checked inside a row and the loop is
vectorized over the width.

* forward: ``y[oh, ow] = sum_k w[k] * framed_x[oh * s + kh * d, ow * s + kw * d]``; where
  strided along the width the frame's columns are stored phase by phase (column c at phase
  c % s), so each tap's inputs are read at unit stride;
* input gradient: stride 1 is the forward of the framed output gradient with the flipped
  kernel (a gather, vectorized; finite weights only); larger strides and non-finite weights
  add each gradient row into the framed input plane tap by tap (a strided scatter) and crop
  the frame;
* weight gradient: blocks of samples in parallel, each plane's taps as lane sums as wide as
  an output row (vectorized over the width, in the operands' dtype), summed per plane into
  the block's double partial sums, which are added at the end.

Sums run in another order than the NumPy kernels of ops/_conv_kernels.py (the specification),
so results equal them within rounding; the zero frame makes padding behave as theirs does (a
non-finite weight or gradient times a padded zero is NaN in both). Planes (forward, input
gradient) or blocks of samples (weight gradient) are shared over kernels/cpool.py's threads.
Half precision (bfloat16, float16) is read and written in 16 bits and computed in float32:
planes are widened as they are framed, weights as they are read, each result rounded once as
it is stored (the input gradient of a channel multiplier above 1 adds its channels into the
result: in 16 bits it would round each sum, so that one declines). The forward and the input
gradient take an optional bias per channel, added to the float sums before the store (in half
precision before its one rounding, as PyTorch's convolutions round). The forward also takes a
clamp epilogue (a graph's ReLU, ReLU6 or hardtanh after the convolution: kernels/cclamp.py),
applied to each plane (block of planes, in the channels-wide kernels) right after it is
stored, while it is in cache, with the unfused op's bits.

Planes too narrow for these row-wide loops (mostly remainder lanes: 7 or 14 wide) go to
kernels/cdepthwise_wide.py's channels-wide kernels (multiplier 1, float32 and float64), which
put a block of channels along the vectors; `_wide` asks its counted choice per geometry, the
same for the eager kernels and the graph runner's step, and these run where it declines.

Every entry returns None where it does not apply (not depthwise, 3-d, not a float dtype above,
no compiler, a negative low padding, an empty tensor) and the caller runs the grouped path.
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np

from . import cdepthwise_wide, chalf
from .cclamp import clamp_address
from .cdepthwise_source import SOURCE
from .cstep import data_address

__all__ = ["conv_forward", "conv_input_grad", "conv_weight_grad", "multiplier"]

_C = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}
# half precision: stored in 16 bits, computed in float (kernels/chalf.py's conversions)
_HALF = chalf.NAMES
_P, _L = ctypes.c_void_p, ctypes.c_long
# x, w, y, pool; N, Cin, M, H, W, OH, OW, PH, PW (lo padding), H-extent, W-extent of the frame;
# then the bias (or None), or the weight gradient's count of blocks
_ARGS = [_P, _P, _P, _P] + [_L] * 11
_WEIGHT_TAIL = {"dw_weight_grad": [_L], "dw_forward_clamp": [_P, _P]}
# work (multiply-adds) below which a call stays on the calling thread
_SERIAL_WORK = 1 << 15


def multiplier(x_channels: int, w_shape: tuple, groups: int) -> int | None:
    """The channel multiplier of a depthwise convolution (``groups`` equal to the input
    channels, more than one; one input channel per filter), or None for any other."""
    if groups <= 1 or groups != x_channels or w_shape[1] != 1 or w_shape[0] % groups:
        return None
    return w_shape[0] // groups


def _head(dtype: np.dtype, kernel: tuple, stride: tuple, dilation: tuple) -> str:
    """The defines that specialise the source to a dtype and a 2-d geometry."""
    (kh, kw), (sh, sw), (dh, dw) = kernel, stride, dilation
    return (
        f"#define KH {kh}\n#define KW {kw}\n#define SH {sh}\n"
        f"#define SW {sw}\n#define DH {dh}\n#define DW {dw}\n#define SERIAL_WORK {_SERIAL_WORK}L\n"
    ) + _types(dtype)


def _types(dtype: np.dtype) -> str:
    """The storage and compute types (half precision: 16 bits, computed in float)."""
    if dtype in _HALF:
        return chalf.storage_defines(dtype) + "#define T float\n"
    return f"#define T {_C[dtype]}\n"


@functools.cache
def _functions(dtype: np.dtype, kernel: tuple, stride: tuple, dilation: tuple):
    from . import ccompile, cpool

    if (dtype not in _C and dtype not in _HALF) or not ccompile.compiler_available():
        return None
    head = _head(dtype, kernel, stride, dilation)
    names = (
        "dw_forward",
        "dw_forward_clamp",
        "dw_input_grad_gather",
        "dw_input_grad_scatter",
        "dw_weight_grad",
    )
    try:
        found = {
            name: ccompile.load(head + SOURCE, name, _ARGS + _WEIGHT_TAIL.get(name, [_P]))
            for name in names
        }
    except ccompile.CompileError:
        return None
    return found, cpool.parallel_for()


def _geometry(a: np.ndarray, b: np.ndarray, p, groups: int, x_channels: int, w_shape: tuple):
    """(functions, pool, 2-d plan fields) or None where these kernels do not apply."""
    if a.dtype != b.dtype or (a.dtype not in _C and a.dtype not in _HALF):
        return None
    if a.ndim not in (3, 4) or not a.size:
        return None
    if multiplier(x_channels, w_shape, groups) is None or any(lo < 0 for lo in p.lo):
        return None
    if not b.size or any(k > 16 for k in p.kernel) or any(s > 8 for s in p.stride):
        return None  # (one library per geometry: keep the set of geometries small)
    two = (lambda t: tuple(t)) if a.ndim == 4 else (lambda t: (1,) + tuple(t))
    kernel, stride, dilation = two(p.kernel), two(p.stride), two(p.dilation)
    found = _functions(a.dtype, kernel, stride, dilation)
    if found is None:
        return None
    lo = two(p.lo) if a.ndim == 4 else (0,) + tuple(p.lo)
    return found, kernel, stride, dilation, two(p.in_size), two(p.out_size), lo


def _wide(op: str, m: int, geometry: tuple, n: int, c: int, in_size, out_size, frame, top):
    """Whether ``op`` runs kernels/cdepthwise_wide.py's channels-wide kernels (multiplier 1,
    float32 and float64, where they count fewer vector instructions than these); ``top``:
    the frame row of the source's first row."""
    from . import cpool

    dtype, kernel, stride, dilation = geometry
    if dtype in _HALF and op == "weight_grad":
        # (16-bit operands' weight gradient: the float32 one's choice, so the same sums)
        dtype = np.dtype(np.float32)
    if m != 1 or dtype not in _C:
        return False
    threads = cpool.get_num_threads()
    return cdepthwise_wide.wins(
        op, n, c, in_size, out_size, kernel, stride, dilation, frame, top, dtype, threads
    )


def _measured_wide(key: tuple, m: int, geometry: tuple, counted: bool, wide, rows) -> bool:
    """Whether an eager forward or input gradient runs the channels-wide kernels: where they
    apply, the counted choice unless the other way measured clearly faster on this geometry's
    first call (kernels/cdepthwise_choice.py; the two give the same bits)."""
    from . import cdepthwise_choice, cpool

    if m != 1 or geometry[0] not in _C:
        return False
    threads = cpool.get_num_threads()
    return cdepthwise_choice.wide_runs(key + (threads,), counted, wide, rows, threads)


def _frame(out_size, kernel, stride, dilation) -> tuple:
    """The extent of the framed input that the output reads."""
    return tuple(
        (o - 1) * s + d * (k - 1) + 1 for o, k, s, d in zip(out_size, kernel, stride, dilation)
    )


def _bias(bias, dtype):
    """The bias as the kernels read it (contiguous, the operands' dtype), or None."""
    return None if bias is None else np.ascontiguousarray(bias, dtype)


def conv_forward(x: np.ndarray, w: np.ndarray, p, groups: int, bias=None, clamp=None):
    """The depthwise ``conv(x, w)`` (+ ``bias`` per output channel, added to the float sums
    before the one rounding of half precision) (then clamped: ``clamp`` as
    kernels/cclamp.py's `clamp_address` takes it, applied to each plane as it is stored) of
    plan ``p``, or None where it does not apply."""
    g = _geometry(x, w, p, groups, x.shape[1], w.shape)
    if g is None:
        return None
    bias = _bias(bias, x.dtype)
    (fns, pool), kernel, stride, dilation, in_size, out_size, lo = g
    x, w = np.ascontiguousarray(x), np.ascontiguousarray(w)
    n, cin = x.shape[:2]
    y = np.empty((n, w.shape[0]) + tuple(p.out_size), x.dtype)
    fh, fw = _frame(out_size, kernel, stride, dilation)
    m = w.shape[0] // cin
    geometry = (x.dtype, kernel, stride, dilation)
    counted = _wide("forward", m, geometry, n, cin, in_size, out_size, (fh, fw), lo[0])

    def wide():
        return cdepthwise_wide.forward(
            x, w, y, geometry, in_size, out_size, lo, (fh, fw), bias, clamp_address(clamp, x.dtype)
        )

    def rows():
        fns["dw_forward_clamp"](
            data_address(x),
            data_address(w),
            data_address(y),
            pool,
            n,
            cin,
            m,
            *in_size,
            *out_size,
            *lo,
            fh,
            fw,
            None if bias is None else data_address(bias),
            clamp_address(clamp, x.dtype) or None,
        )

    key = ("forward", x.shape, w.shape, geometry, lo, bias is None)
    if _measured_wide(key, m, geometry, counted, wide, rows) and wide():
        return y
    rows()
    return y


def forward_step(
    x_shape: tuple, w_shape: tuple, p, groups: int, dtype, bias: bool = False, clamp=None
):  # fmt: skip
    """The graph runner's step of a 2-d depthwise forward convolution (slots: x 0, w 1, the
    result 2, and the node's operand 2, its bias, where ``bias``; then clamped, ``clamp`` as
    for `conv_forward`), or None where `conv_forward` would not run."""
    from . import ccompile
    from .cstep import CStep, function_address

    dtype = np.dtype(dtype)
    if len(x_shape) != 4 or (dtype not in _C and dtype not in _HALF):
        return None
    # (arrays of the shapes, for the geometry's checks: no memory behind them)
    x, w = (np.broadcast_to(np.zeros((), dtype), s) for s in (x_shape, w_shape))
    g = _geometry(x, w, p, groups, x_shape[1], w_shape)
    if g is None:
        return None
    (_, pool), kernel, stride, dilation, in_size, out_size, lo = g
    n, cin = x_shape[:2]
    m = w_shape[0] // cin
    fh, fw = _frame(out_size, kernel, stride, dilation)
    geometry = (dtype, kernel, stride, dilation)
    if _wide("forward", m, geometry, n, cin, in_size, out_size, (fh, fw), lo[0]):
        # (the channels-wide kernels: the same choice as `conv_forward`'s, the same bits)
        source = cdepthwise_wide.source(*geometry)
        sizes = [n, cin, *in_size, *out_size, *lo, fh, fw]
        args, bias_slot = [0, 0, 0, pool or 0, *sizes, 0, 0], 14
        name = "dw_wide_forward_step"
    else:
        source = _head(dtype, kernel, stride, dilation) + SOURCE
        args = [0, 0, 0, pool or 0, n, cin, m, *in_size, *out_size, *lo, fh, fw, 0]
        bias_slot, name = 15, "dw_forward_step"
    try:
        step = ccompile.load(source, name, [_P])
    except ccompile.CompileError:
        return None
    args.append(clamp_address(clamp, dtype))  # (the last slot of both steps)
    slots = [(0, "in", 0), (1, "in", 1), (2, "out", 0)] + [(bias_slot, "in", 2)] * bias
    return CStep(function_address(step), np.array(args, np.int64), slots, (step,))


def conv_input_grad(gy: np.ndarray, w: np.ndarray, p, groups: int, bias=None):
    """The depthwise ``conv_input_grad(gy, w)`` (+ ``bias`` per channel of the result, as
    `conv_forward` adds it) of plan ``p``, or None."""
    g = _geometry(gy, w, p, groups, groups, w.shape)
    if g is None:
        return None
    bias = _bias(bias, gy.dtype)
    (fns, pool), kernel, stride, dilation, in_size, out_size, lo = g
    gy, w = np.ascontiguousarray(gy), np.ascontiguousarray(w)
    n, cin = gy.shape[0], groups
    m = w.shape[0] // cin
    if m > 1 and gy.dtype in _HALF:  # (its channels' sums would be rounded one by one)
        return None
    gx = np.empty((n, cin) + tuple(p.in_size), gy.dtype)
    reach = tuple(d * (k - 1) for k, d in zip(kernel, dilation))
    shift = tuple(r - low for r, low in zip(reach, lo))
    # (the gather multiplies the frame's zeros by the weights: a non-finite weight would make
    # NaN where the adjoint adds nothing)
    gather = stride == (1, 1) and all(s >= 0 for s in shift) and np.isfinite(w).all()
    if gather:
        # the framed gradient: offset ``shift``, extent the input plus the kernel's reach
        fh, fw = (i + r for i, r in zip(in_size, reach))
        fn = fns["dw_input_grad_gather"]
    else:
        fh, fw = (
            max(f, low + i)
            for f, low, i in zip(_frame(out_size, kernel, stride, dilation), lo, in_size)
        )
        fn = fns["dw_input_grad_scatter"]
    geometry = (gy.dtype, kernel, stride, dilation)
    op = "gather" if gather else "scatter"
    top = shift[0] if gather else lo[0]
    counted = _wide(op, m, geometry, n, cin, in_size, out_size, (fh, fw), top)

    def wide():
        return cdepthwise_wide.input_grad(
            gy, w, gx, geometry, in_size, out_size, shift if gather else lo, (fh, fw), gather, bias
        )

    def rows():
        fn(
            data_address(gy),
            data_address(w),
            data_address(gx),
            pool,
            n,
            cin,
            m,
            *in_size,
            *out_size,
            *lo,
            fh,
            fw,
            None if bias is None else data_address(bias),
        )

    key = (op, gy.shape, w.shape, tuple(p.in_size), geometry, lo, bias is None)
    if _measured_wide(key, m, geometry, counted, wide, rows) and wide():
        return gx
    rows()
    return gx


def _weight_grad_wide(g: tuple, dtype, x_shape: tuple, cout: int) -> bool:
    """Whether the weight gradient of geometry ``g`` (`_geometry`'s) runs the channels-wide
    kernels (the count: both ways round differently, so no timing picks between them)."""
    _, kernel, stride, dilation, in_size, out_size, lo = g
    n, cin = x_shape[:2]
    frame = _frame(out_size, kernel, stride, dilation)
    geometry = (np.dtype(dtype), kernel, stride, dilation)
    return _wide("weight_grad", cout // cin, geometry, n, cin, in_size, out_size, frame, lo[0])


def weight_grad_wide(x_shape: tuple, gy_shape: tuple, p, groups: int, dtype) -> bool:
    """Whether `conv_weight_grad` of operands of these shapes and ``dtype`` runs the
    channels-wide kernels, which allocate only a float32 gradient for 16-bit operands (the
    workspace rule's question: ops/conv.py)."""
    dtype = np.dtype(dtype)
    x, gy = (np.broadcast_to(np.zeros((), dtype), s) for s in (x_shape, gy_shape))
    w_shape = (gy_shape[1], x_shape[1] // groups) + tuple(p.kernel)
    g = _geometry(x, gy, p, groups, x_shape[1], w_shape)
    return g is not None and _weight_grad_wide(g, dtype, x_shape, gy_shape[1])


def conv_weight_grad(x: np.ndarray, gy: np.ndarray, p, groups: int):
    """The depthwise ``conv_weight_grad(x, gy)`` of plan ``p``, or None."""
    cout = gy.shape[1]
    w_shape = (cout, 1) + tuple(p.kernel)
    g = _geometry(x, gy, p, groups, x.shape[1], w_shape)
    if g is None:
        return None
    (fns, pool), kernel, stride, dilation, in_size, out_size, lo = g
    x, gy = np.ascontiguousarray(x), np.ascontiguousarray(gy)
    n, cin = x.shape[:2]
    fh, fw = _frame(out_size, kernel, stride, dilation)
    geometry = (x.dtype, kernel, stride, dilation)
    if _weight_grad_wide(g, x.dtype, x.shape, cout):
        gw = np.empty(w_shape, np.float32 if x.dtype in _HALF else x.dtype)
        if cdepthwise_wide.weight_grad(x, gy, gw, geometry, in_size, out_size, lo, (fh, fw)):
            return gw.astype(x.dtype, copy=False)  # (16 bits: rounded once from float32's)
    # blocks of samples summed in parallel (a few per thread, so a thread whose core is busy
    # delays the call by one block), then their double partial sums added here
    from . import cpool

    blocks = max(1, min(n, 4 * cpool.get_num_threads()))
    partial = np.empty((blocks, cout) + tuple(p.kernel), np.float64)
    fns["dw_weight_grad"](
        data_address(x),
        data_address(gy),
        data_address(partial),
        pool,
        n,
        cin,
        cout // cin,
        *in_size,
        *out_size,
        *lo,
        fh,
        fw,
        blocks,
    )
    total = partial.sum(axis=0)
    if x.dtype in _HALF:  # (through float32, as the widened operands' kernel rounds it)
        total = total.astype(np.float32)
    return total.astype(x.dtype).reshape(w_shape)
