"""Depthwise convolutions with the channels along the vectors ("channels wide"), for planes
too narrow for kernels/cdepthwise.py's row-wide loops: a 7x7 or 14x14 plane leaves most of
a 16-lane row vector empty (or to a scalar remainder), where a block of V channels fills
every lane of every tap. Forward, input gradient and weight gradient, multiplier 1, float32
and float64; kernels/cdepthwise.py calls these where `wins` counts fewer vector instructions
for them, and runs its own kernels otherwise (and where these decline: they return False).

The source (kernels/cdepthwise_wide_source.py) transposes each block of V channels into a
zero-framed scratch of vectors, runs the taps register-blocked along output rows, and
transposes the result back; its sums run in the row-wide kernels' order, so the forward and
the input gradient equal theirs bit for bit, and the choice between the two changes only the
time. Scratch is allocated in C per task (a frame, a block of results, the block's weights),
never as NumPy arrays, so the ops' workspace rules (nothing beyond the result in float32 and
float64) hold either way.
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np

from . import chalf
from .cdepthwise_wide_source import SOURCE

__all__ = ["forward", "input_grad", "lanes", "weight_grad", "wins"]

_C = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}
_P, _L = ctypes.c_void_p, ctypes.c_long
# a, w, out, pool; n, c, ih, iw, oh, ow, r0, c0, fh, fw; bias, flip
_ARGS = [_P, _P, _P, _P] + [_L] * 10 + [_P, _L]
_ENTRIES = (
    "dw_wide_forward",
    "dw_wide_forward_clamp",
    "dw_wide_input_scatter",
    "dw_wide_weight_grad",
)
# work (multiply-adds) below which a call stays on the calling thread (kernels/cdepthwise.py's)
_SERIAL_WORK = 1 << 15


def _head(dtype: np.dtype, kernel: tuple, stride: tuple, dilation: tuple) -> str:
    (kh, kw), (sh, sw), (dh, dw) = kernel, stride, dilation
    if dtype in chalf.NAMES:  # (16 bits stored, float computed: the weight gradient only)
        types = chalf.storage_defines(dtype) + "#define T float\n#define TBYTES 4\n"
    else:
        types = f"#define T {_C[dtype]}\n#define TBYTES {dtype.itemsize}\n"
    return (
        f"#define KH {kh}\n#define KW {kw}\n#define SH {sh}\n#define SW {sw}\n"
        f"#define DH {dh}\n#define DW {dw}\n#define SERIAL_WORK {_SERIAL_WORK}L\n" + types
    )


def source(dtype, kernel: tuple, stride: tuple, dilation: tuple) -> str:
    """The C of one specialisation (2-d geometry)."""
    return _head(np.dtype(dtype), kernel, stride, dilation) + SOURCE


@functools.cache
def _functions(dtype: np.dtype, kernel: tuple, stride: tuple, dilation: tuple):
    """({entry: function}, vector bytes), or None (no compiler, a dtype these do not take, a
    failed build). Half precision (bfloat16, float16) has the weight gradient only: its
    forward and input gradient in kernels/cdepthwise.py have the float32 kernels' bits
    already, and its weight gradient must too, so it sums as the float32 one does here."""
    from . import ccompile

    half = dtype in chalf.NAMES
    if (dtype not in _C and not half) or not ccompile.compiler_available():
        return None
    text = source(dtype, kernel, stride, dilation)
    names = ("dw_wide_weight_grad",) if half else _ENTRIES
    try:
        found = {name: ccompile.load(text, name, _ARGS) for name in names}
        vector = ccompile.load(text, "dw_wide_vector_bytes", [])
    except ccompile.CompileError:
        return None
    for fn in (*found.values(), vector):
        fn.restype = ctypes.c_int
    return found, int(vector())


def lanes(dtype, kernel: tuple, stride: tuple, dilation: tuple) -> int | None:
    """The channels of one block (one vector register of ``dtype``'s compute type, as
    compiled), or None."""
    dtype = np.dtype(dtype)
    found = _functions(dtype, kernel, stride, dilation)
    return None if found is None else found[1] // (4 if dtype in chalf.NAMES else dtype.itemsize)


# ------------------------------------------------------------------------ the counted choice
#
# Both ways are counted in vector loads, stores and multiply-adds per (sample, channel) plane,
# as their loops run them: the row-wide kernels run an output row as its whole vectors plus
# one scalar iteration per output left over (or, at stride 1, a flat loop over the framed rows
# where that runs fewer), each iteration a load and a multiply-add per tap; the channels-wide
# ones a multiply-add per tap and output over V channels (the kernel rows that read only the
# frame's zero rows skipped), an input vector loaded once per block of RB outputs that read
# it, and each element transposed in and out through VxV tiles (V loads and V stores a tile;
# the tile's shuffles issue on other ports than loads, stores and multiply-adds, beside them,
# and are not counted). Counting a load beside the multiply-add it feeds as one instruction
# (two ports) instead was wrong more often, and by more (a 32x32 plane at stride 2 with 96
# channels: the row-wide kernels counted faster, measured twice as slow).


def _row_iterations(cols: int, fw: int, lanes: int, stride_one: bool) -> float:
    """Vector iterations of a row-wide loop over ``cols`` outputs of a frame ``fw`` wide
    (kernels/cdepthwise.py's `FLAT` choice)."""
    per_row = cols // lanes + cols % lanes
    if stride_one and fw < lanes * per_row:
        return fw / lanes
    return per_row


def _transposed(elements: int, lanes: int) -> float:
    """A VxV tile transposed: V loads and V stores for V * V elements."""
    return 2 * elements / lanes


def _taps(row_outputs: int, kw: int, stride: int, dilation: int, rb: int, lanes: int) -> float:
    """The channels-wide taps' instructions per channel plane over ``row_outputs`` (output,
    kernel row) pairs: a kernel row's multiply-adds, its inputs loaded once per block of
    ``rb`` outputs."""
    span = (rb - 1) * stride + (kw - 1) * dilation + 1
    return row_outputs * (kw + span / rb) / lanes


def _block_outputs(lanes: int, itemsize: int, kw: int) -> int:
    """RB of the source: the outputs a block holds in registers (32 vector registers with
    64-byte vectors, else 16), beside a kernel row and an input."""
    registers = 32 if lanes * itemsize == 64 else 16
    return max(1, min(16, registers - kw - 3))


def _kernel_rows(rows: int, kh: int, stride: int, dilation: int, top: int, height: int) -> int:
    """The kernel rows the channels-wide forward runs over ``rows`` output rows: those that
    read a frame row of the source (``height`` rows from frame row ``top``)."""
    return sum(
        sum(top <= r * stride + k * dilation < top + height for k in range(kh)) for r in range(rows)
    )


@functools.lru_cache(maxsize=1024)
def wins(
    op: str,
    n: int,
    c: int,
    in_size,
    out_size,
    kernel,
    stride,
    dilation,
    frame,
    top: int,
    dtype,
    threads: int,
) -> bool:
    """Whether the channels-wide kernels count fewer vector instructions than the row-wide
    ones for ``op`` ("forward", "gather" (the stride-1 input gradient), "scatter",
    "weight_grad") of this 2-d geometry; ``frame``: the row-wide kernel's frame (fh, fw),
    ``top``: the frame row of the source's first (the forward's, the gather's)."""
    dtype = np.dtype(dtype)
    v = lanes(dtype, tuple(kernel), tuple(stride), tuple(dilation))
    if v is None or v < 2:
        return False
    (h, w), (oh, ow), (fh, fw) = in_size, out_size, frame
    kk = kernel[0] * kernel[1]
    stride_one = tuple(stride) == (1, 1)
    rb = _block_outputs(v, dtype.itemsize, kernel[1])
    blocks = -(-c // v)  # (a last block of fewer channels runs whole vectors)
    moved = _transposed(h * w + oh * ow, v)
    if op in ("forward", "gather"):
        # the gather is the forward of the framed gradient (oh x ow) into the input's plane
        src, dst = ((h, w), (oh, ow)) if op == "forward" else ((oh, ow), (h, w))
        rows = dst[0] * _row_iterations(dst[1], fw, v, stride_one) * 2 * kk + 2 * fh * fw / v
        run = _kernel_rows(dst[0], kernel[0], stride[0], dilation[0], top, src[0])
        wide = _taps(run * dst[1], kernel[1], stride[1], dilation[1], rb, v) + moved
        per_task_row, per_task_wide = rows, wide * v
        tasks_row, tasks_wide = n * c, n * blocks
    elif op == "scatter":  # (a tap: a load, a multiply-add and a store)
        rows = oh * kk * _row_iterations(ow, 0, v, False) * 3 + 2 * fh * fw + 2 * h * w
        wide = (3 * oh * ow * kk + fh * fw + 2 * h * w) / v + moved
        per_task_row, per_task_wide = rows, wide * v
        tasks_row, tasks_wide = n * c, n * blocks
    else:  # (row-wide: a load, a multiply-add and a select per tap and lane block)
        padded = -(-ow // v) * v
        rows = oh * padded / v * kk * 3 + 2 * (fh * fw + oh * padded) / v
        wide = _taps(oh * kernel[0] * ow, kernel[1], stride[1], dilation[1], rb, v) + moved
        wide += oh * ow * kernel[0] / v  # (the gradient's vectors, loaded per kernel row)
        sample_blocks = max(1, min(n, 4 * threads))
        per_task_row, tasks_row = rows * c * n / sample_blocks, sample_blocks
        per_task_wide, tasks_wide = wide * v * n, blocks
    slowest_row = -(-tasks_row // threads) * per_task_row
    slowest_wide = -(-tasks_wide // threads) * per_task_wide
    return slowest_wide < slowest_row


# ---------------------------------------------------------------------------------- entries


def _call(name, a, w, out, geometry, sizes, bias=None, flip=0) -> bool:
    """Run entry ``name`` of the specialisation ``geometry`` (dtype, kernel, stride,
    dilation); False where it could not (no library, a scratch it could not allocate)."""
    from . import cpool
    from .cstep import data_address

    found = _functions(*geometry)
    if found is None:
        return False
    failed = found[0][name](
        data_address(a),
        data_address(w),
        data_address(out),
        cpool.parallel_for(),
        *sizes,
        None if bias is None else data_address(bias),
        flip,
    )
    return not failed


def forward(x, w, y, geometry, in_size, out_size, lo, frame, bias=None, clamp: int = 0) -> bool:
    """y = the depthwise forward of x (n, c, *in_size) by w (c, 1, *kernel), multiplier 1,
    the input framed at ``lo`` in ``frame``, then clamped where ``clamp`` (the address of
    kernels/cclamp.py's block) is not 0; False where it did not run."""
    n, c = x.shape[:2]
    sizes = (n, c, *in_size, *out_size, *lo, *frame)
    return _call("dw_wide_forward_clamp", x, w, y, geometry, sizes, bias, flip=clamp)


def input_grad(gy, w, gx, geometry, in_size, out_size, lo, frame, gather: bool, bias=None):
    """gx = the input gradient of gy by w: ``gather`` (stride 1, finite weights) the forward
    of gy framed at ``lo`` (the kernel's reach less the low padding) in ``frame`` with the
    flipped kernel, else gy scattered into ``frame`` cropped at ``lo`` (the low padding);
    False where it did not run."""
    n, c = gy.shape[:2]
    if gather:
        sizes = (n, c, *out_size, *in_size, *lo, *frame)
        return _call("dw_wide_forward", gy, w, gx, geometry, sizes, bias, flip=1)
    sizes = (n, c, *in_size, *out_size, *lo, *frame)
    return _call("dw_wide_input_scatter", gy, w, gx, geometry, sizes, bias)


def weight_grad(x, gy, gw, geometry, in_size, out_size, lo, frame) -> bool:
    """gw (c, 1, *kernel) = the weight gradient of x by gy (gw float32 for 16-bit operands,
    which are widened as read); False where it did not run."""
    n, c = x.shape[:2]
    sizes = (n, c, *in_size, *out_size, *lo, *frame)
    return _call("dw_wide_weight_grad", x, gy, gw, geometry, sizes)
