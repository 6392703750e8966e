"""Whole-layer LSTM, GRU and Elman RNN (tanh or relu) in C: the time loop, forward and backward
through time, in one call.

``ember_rnn_layer`` (kernels/crnn_source.py) runs every step of one layer and direction: per
step, one product of h_{t-1} with W_hh (all gates at once, W_hh packed once per call by blocks
of hidden units, each block's panels holding all of its units' gates) and the cell's gate
routine on the product. Backward, per step, the cell's gradient routine and one product
``dgates @ W_hh``; the weight gradient is one product over all steps at the end. The input
projection of every step is computed before the loop by the caller (one large product). LSTM,
GRU and the Elman RNN share the loop and the product; a cell is its gate count and two gate
routines.

Threads. Where a step's product is worth sharing (`_parts`: the pool's measured wake cost
against the product's time, kernels/gemm_tune.py), each thread of ember's pool
(kernels/cpool.py) owns a contiguous range of unit blocks for the whole layer: its share of
W_hh stays in its core's cache from step to step, it applies the gates to its own units, and
the threads meet once per step. A thread that is late or never starts delays no one: a part
not claimed by its owner is run by whoever is waiting. Whether the shared loop is in fact
faster than one thread (the meeting per step, the caches, the other processes on the cores)
is then measured on the layer's own first calls (`_Split`): a few calls each way, per layer
shape, and the faster way kept. The results do not depend on it: each output is computed by
the same arithmetic in the same order whichever thread computes it.

The NumPy kernels of ops/recurrent.py are the specification; the gate routines follow their
arithmetic term for term (``-ffp-contract=off``), so results differ only by the products' order
of summation and the vector exp's and tanh's few ulps (glibc's libmvec; without it, the scalar
C library's functions).

Where ember's own micro-kernel does not run the products (``EMBER_GEMM=blas``, or a compiler
without 512-bit vectors: kernels/cgemm.py's `own_kernel`), the same loop runs one step per call
with each step's product on ember's GEMM in between. Every function returns None where it does
not apply (no compiler, a dtype other than float32/float64, an empty operand) and the caller
runs NumPy.
"""

from __future__ import annotations

import ctypes
import functools
import math
import time

import numpy as np

from .cpanels import aligned
from .crnn_source import LOOP, PRODUCT
from .cstep import data_address

__all__ = [
    "elman_backward",
    "elman_forward",
    "gru_backward",
    "gru_forward",
    "lstm_backward",
    "lstm_forward",
]

_TYPES = {
    np.dtype(np.float32): ("float", "expf", "tanhf"),
    np.dtype(np.float64): ("double", "exp", "tanh"),
}
_FLAGS = ("-O3", "-march=native", "-fPIC", "-shared", "-fopenmp-simd", "-fno-math-errno")
_FLAGS += ("-fno-trapping-math", "-ffp-contract=off", "-std=gnu11")
_LSTM, _GRU, _TANH, _RELU = 0, 1, 2, 3
# ember_rnn_layer's pointer arguments, in order (crnn_source.py's LOOP)
_POINTERS = ("xg", "h0", "c0", "bias", "gy", "ghn", "gcs", "gacts", "bp")
_POINTERS += ("y", "cs", "acts", "state", "dx", "dprod", "rec", "panels", "zero")


@functools.cache
def _loop(dtype: np.dtype):
    """``ember_rnn_layer`` for ``dtype``, or None (no compiler, or the build failed)."""
    from . import ccompile

    if dtype not in _TYPES or not ccompile.compiler_available():
        return None
    c_type, exp, tanh = _TYPES[dtype]
    header = f"#define T {c_type}\n#define EXP {exp}\n#define TANH {tanh}\n"
    for simd, libs in (('__attribute__((simd("notinbranch")))', ("-lmvec", "-lm")), ("", ("-lm",))):
        source = header + f"#define SIMD {simd}\n" + LOOP
        try:
            return ccompile.load(
                source, "ember_rnn_layer", [ctypes.c_void_p] * 3, flags=_FLAGS + libs
            )
        except ccompile.CompileError:
            continue  # no vector math library here: scalar exp and tanh, still one kernel
    return None


@functools.cache
def _packed_functions(dtype: np.dtype):
    """(ember_rnn_pack, the address of ember_rnn_panels) for ``dtype``, or None (no compiler,
    or the products run on the BLAS, which this micro-kernel does not replace)."""
    from . import ccompile, cgemm
    from .cmicro import MICRO

    if dtype not in _TYPES or not cgemm.own_kernel(dtype):
        return None
    source = f"#define T {_TYPES[dtype][0]}\n" + MICRO + PRODUCT
    try:
        pack = ccompile.load(
            source, "ember_rnn_pack", [ctypes.c_void_p] + [ctypes.c_long] * 6 + [ctypes.c_void_p]
        )
        panels = ccompile.load(
            source,
            "ember_rnn_panels",
            [ctypes.c_void_p, ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_long,
             ctypes.c_long, ctypes.c_void_p, ctypes.c_long],
        )  # fmt: skip
    except ccompile.CompileError:
        return None
    return pack, ctypes.cast(panels, ctypes.c_void_p).value


def _parts(rows: int, k: int, n: int, itemsize: int, blocks: int) -> int:
    """How many threads share a step's product ``rows x k @ k x n``: all of the pool's where
    sharing saves more than the pool's measured wake-and-join cost (the rule ember's GEMM
    shares its products by; a step's meeting of threads costs no more than a wake), else 1."""
    from . import cgemm, cpool

    threads = min(cpool.get_num_threads(), blocks)
    if threads <= 1:
        return 1
    if rows < 8:  # (the micro-kernel's MR) the few-rows kernel reads the panels as `skinny`
        shared = cgemm.skinny_shared(rows, n, k, itemsize)
    else:
        shared = 2 * rows * k * n >= cgemm.split_flops()
    return threads if shared else 1


class _Split:
    """Per layer shape (dtype, direction of the pass, gates, rows, hidden units, threads):
    whether sharing the steps over threads runs faster than one thread, measured on the
    layer's own calls. Where `_parts` says to share, the first calls alternate between the two
    ways (``TRIES`` each, seconds per step); after that the faster way's best time decides."""

    TRIES = 3
    MOST = 1024  # shapes remembered (a process meets few; bounded all the same)

    def __init__(self):
        self.choice: dict = {}  # shape -> parts, once decided
        self.times: dict = {}  # shape -> (seconds per step on one thread, shared)

    def parts(self, shape: tuple, shared: int) -> int:
        """The parts to run ``shape`` with, given that `_parts` says ``shared``."""
        if shared <= 1:
            return 1
        if shape in self.choice:
            return self.choice[shape]
        if shape not in self.times and len(self.times) >= self.MOST:
            return shared
        alone, together = self.times.setdefault(shape, ([], []))
        return 1 if len(alone) < len(together) else shared

    def record(self, shape: tuple, parts: int, shared: int, seconds: float) -> None:
        times = self.times.get(shape)
        if times is None or shape in self.choice:
            return
        times[parts > 1].append(seconds)
        alone, together = times
        if len(alone) >= self.TRIES and len(together) >= self.TRIES:
            if len(self.choice) < self.MOST:
                self.choice[shape] = shared if min(together) < min(alone) else 1
            del self.times[shape]


_split = _Split()


def _units(hidden: int, gates: int, nr: int, parts: int) -> int:
    """The hidden units of a block of the packed W_hh, one block a part: its gates' columns a
    whole number of panels of ``nr``, the fewest that cover H in ``parts`` blocks (one call of
    the gate routine per row and part: a call per panel's units costs more than the zero
    padding it saves). Shared by threads, a block is also a whole number of 64-byte lines of
    every output row (``nr`` is three of them), so no line is written by two threads."""
    smallest = nr // math.gcd(nr, gates)
    if parts > 1:
        smallest = math.lcm(smallest, nr // 3)
    share = -(-hidden // parts)
    return -(-share // smallest) * smallest


class _Product:
    """A layer's recurrent product ``rows x k @ b`` (b: k x G*H, G gates of H units), where
    ember's own kernel runs: ``b`` packed once by blocks of units (crnn_source.py), the result
    ``rec`` laid out by block (``ldr`` values a row); elsewhere ``b`` as a row-major matrix for
    ember's GEMM and ``rec`` as the plain (rows, G*H) product. ``packs``: where ``b`` is a
    frozen graph constant (ops/recurrent.py's `kept_pack_compile`), a dict keeping its packs
    by layout between calls (a 256-unit LSTM's W_hh took a sixth of a batch-1 model's time
    to pack at every call)."""

    def __init__(
        self, b: np.ndarray, rows: int, hidden: int, gates: int, steps: int = 2, packs=None
    ):
        k, n = b.shape
        packed = _packed_functions(b.dtype)
        # one step (an LSTMCell's call, a GRUCell's): packing b, or copying it row-major,
        # costs more than the one product that would read it (b is as large as its pack)
        self.packed = packed is not None and steps > 1
        if not self.packed:
            # (copied once for several steps: the GEMM reads a row-major operand with unit
            # stride; one step reads b as it lies)
            self.b = np.ascontiguousarray(b) if steps > 1 else b
            self.rec = np.empty((rows, n), b.dtype)
            return
        from . import cpool

        pack, self.panels = packed
        nr = 3 * (64 // b.itemsize)  # cmicro.py's NR: three vectors of 64 bytes
        self.shared = _parts(rows, k, n, b.itemsize, -(-hidden // (nr // math.gcd(nr, gates))))
        self.shape = (b.dtype.char, gates, k, rows, hidden, cpool.get_num_threads())
        self.parts = _split.parts(self.shape, self.shared)
        self.units = _units(hidden, gates, nr, self.parts)
        self.ldr = -(-hidden // self.units) * self.units * gates
        # (the layout's every choice: the threads' split may change between calls)
        key = (b.dtype.str, k, hidden, gates, self.units, self.ldr)
        self.bp = None if packs is None else packs.get(key)
        if self.bp is None:
            self.bp = aligned(k * self.ldr, b.dtype)
            if any(s % b.itemsize for s in b.strides):
                b = np.ascontiguousarray(b)
            sp, sj = (s // b.itemsize for s in b.strides)
            pack(data_address(b), k, hidden, gates, self.units, sp, sj, data_address(self.bp))
            if packs is not None:
                packs[key] = self.bp
        self.rec = np.empty((rows, self.ldr), b.dtype)
        self.pool = cpool.parallel_for() if self.parts > 1 else None


_GATES = {"lstm": 4, "gru": 3, "rnn": 1}


def temporaries(
    cell: str, backward: bool, steps: int, rows: int, hidden: int, dtype, kept: bool = False
) -> int | None:
    """Bytes the compiled layer (``cell`` "lstm", "gru" or "rnn"; its gradient where
    ``backward``) allocates beyond its results at its peak, or None where it does not run (the
    NumPy kernels do). Mirrors the allocations above: `_Product`'s packed W_hh (none where
    ``kept``: a frozen graph constant's pack, kept between calls; one step: none, b read as it
    lies; on the BLAS, W_hh.T's row-major copy) and its per-step product rows; backward,
    beside them, the GRU's gradient of the recurrent gates, and `_weight_grad`'s transposed
    sum with the product being added to it.
    The blocks of units follow the threads' split `_Product` takes."""
    dtype = np.dtype(dtype)
    if _loop(dtype) is None or not steps * rows * hidden:
        return None
    gates, item = _GATES[cell], dtype.itemsize
    # (the product's b: W_hh transposed forward, G*H x H W_hh itself backward)
    k, n, g = (gates * hidden, hidden, 1) if backward else (hidden, gates * hidden, gates)
    if steps == 1 or _packed_functions(dtype) is None:
        # the plain product's rows; several steps read b row-major: forward, W_hh.T copied
        product = rows * n + (k * n if steps > 1 and not backward else 0)
    else:
        from . import cpool

        nr = 3 * (64 // item)
        shared = _parts(rows, k, n, item, -(-hidden // (nr // math.gcd(nr, g))))
        # (the split measured faster, else the shared one the measurement starts from)
        shape = (dtype.char, g, k, rows, hidden, cpool.get_num_threads())
        parts = 1 if shared <= 1 else _split.choice.get(shape, shared)
        units = _units(hidden, g, nr, parts)
        ldr = -(-hidden // units) * units * g
        product = (0 if kept else k * ldr) + rows * ldr
    if not backward:
        return product * item
    extra = product + (steps * rows * 3 * hidden if cell == "gru" else 0)
    if steps > 1:
        extra += gates * hidden * hidden  # (dW^T beside the product added to it)
    return extra * item


def _run(cell: int, backward: bool, shape, reverse: bool, product: _Product, arrays: dict):
    """Every stage of a layer (each step, and backward a last product for dh0): in one call
    where the product is packed, else a call per stage with the product in between. Returns
    the product of the last stage (backward: the gradient reaching h0 through W_hh; its first
    H columns)."""
    steps, rows, hidden = shape
    dtype = product.rec.dtype
    loop = _loop(dtype)
    stages = steps + backward
    ptrs = np.zeros(len(_POINTERS), np.uintp)
    for i, name in enumerate(_POINTERS[:-3]):
        if arrays.get(name) is not None:
            ptrs[i] = arrays[name].ctypes.data
    zero = np.zeros(4 * hidden, dtype)  # (what the gradients not given read)
    ptrs[_POINTERS.index("zero")] = data_address(zero)
    ptrs[_POINTERS.index("rec")] = data_address(product.rec)
    dims = np.array([cell, backward, steps, rows, hidden, reverse, 1, 0, 0, stages, 0], np.int64)
    if product.packed:
        ptrs[_POINTERS.index("bp")] = data_address(product.bp)
        ptrs[_POINTERS.index("panels")] = product.panels
        dims[6], dims[7], dims[10] = product.parts, product.ldr, product.units
        start = time.perf_counter()
        loop(data_address(dims), data_address(ptrs), product.pool)
        seconds = (time.perf_counter() - start) / stages
        _split.record(product.shape, product.parts, product.shared, seconds)
        return product.rec[:, :hidden]
    from .cgemm import gemm

    order = list(range(steps - 1, -1, -1) if reverse else range(steps))
    for s in range(stages):
        if not backward:
            gemm(arrays["h0"] if s == 0 else arrays["y"][order[s - 1]], product.b, product.rec)
        elif s > 0:
            gemm(arrays["dprod"][order[steps - s]], product.b, product.rec)
        if s < steps:
            dims[8], dims[9] = s, s + 1
            loop(data_address(dims), data_address(ptrs), None)
    return product.rec


def _ready(dtype, *arrays) -> bool:
    return all(a.dtype == dtype and a.size for a in arrays) and _loop(np.dtype(dtype)) is not None


def _contiguous(*arrays):
    return [np.ascontiguousarray(a) for a in arrays]


def _gradient(a: np.ndarray) -> np.ndarray | None:
    """A gradient as the loop reads it: C-contiguous, or None where it is a zero broadcast (a
    captured graph's gradient of an output no one read), which the loop reads as zeros without
    the array being made."""
    if not any(a.strides) and a.flat[0] == 0:
        return None
    return np.ascontiguousarray(a)


def _weight_grad(dg, y, h0, reverse: bool):
    """sum over t of dg[t]^T @ h_{t-1}: the step after the first reads y of the step before."""
    from .cgemm import gemm

    gates, hidden = dg.shape[2], y.shape[2]
    first, rest = (dg[-1], dg[:-1]) if reverse else (dg[0], dg[1:])
    if not len(rest):  # (one step: dW itself, no transposed copy of the whole gradient)
        return gemm(first.T, h0)
    before = y[1:] if reverse else y[:-1]
    # dW^T = h^T @ dg, transposed once at the end: the operand read transposed is then the
    # narrower one (H columns, not 4H or 3H)
    dw_t = gemm(h0.T, first)
    if len(rest):
        dw_t += gemm(before.reshape(-1, hidden).T, rest.reshape(-1, gates))
    return np.ascontiguousarray(dw_t.T)


def lstm_forward(xg, h0, c0, w_hh, reverse: bool, packs=None):
    """(y, h_n, c_n, cs, acts) as ops/recurrent.py's ``lstm_layer`` kernel, or None.
    ``packs``: see `_Product`."""
    if not _ready(xg.dtype, xg, h0, c0, w_hh):
        return None
    steps, rows, gates = xg.shape
    hidden = gates // 4
    xg, h0, c0 = _contiguous(xg, h0, c0)
    y = np.empty((steps, rows, hidden), xg.dtype)
    cs = np.empty_like(y)
    acts = np.empty((steps, rows, gates), xg.dtype)
    product = _Product(w_hh.T, rows, hidden, 4, steps, packs)
    arrays = dict(xg=xg, h0=h0, c0=c0, y=y, cs=cs, acts=acts)
    _run(_LSTM, False, y.shape, reverse, product, arrays)
    last = 0 if reverse else steps - 1
    return y, y[last].copy(), cs[last].copy(), cs, acts


def lstm_backward(gy, ghn, gcn, gcs, gacts, y, acts, cs, h0, c0, w_hh, reverse: bool):
    """(dxg, dh0, dc0, dw_hh) as ops/recurrent.py's ``lstm_layer_grad`` kernel, or None."""
    if not _ready(y.dtype, gy, ghn, gcn, gcs, gacts, y, acts, cs, h0, c0, w_hh):
        return None
    gy, y, acts, cs, h0, c0 = _contiguous(gy, y, acts, cs, h0, c0)
    ghn, gcs, gacts = (_gradient(a) for a in (ghn, gcs, gacts))
    steps, rows, hidden = y.shape
    dg = np.empty_like(acts)
    dc = np.array(gcn, order="C", copy=True)
    product = _Product(w_hh, rows, hidden, 1, steps)
    arrays = dict(gy=gy, ghn=ghn, gcs=gcs, gacts=gacts, y=y, acts=acts, cs=cs, h0=h0, c0=c0)
    arrays.update(state=dc, dx=dg, dprod=dg)
    dh0 = _run(_LSTM, True, y.shape, reverse, product, arrays).copy()
    return dg, dh0, dc, _weight_grad(dg, y, h0, reverse)


def gru_forward(xg, h0, w_hh, b_hh, reverse: bool, packs=None):
    """(y, h_n, acts) as ops/recurrent.py's ``gru_layer`` kernel, or None. ``packs``: see
    `_Product`."""
    if not _ready(xg.dtype, xg, h0, w_hh, b_hh):
        return None
    steps, rows, gates = xg.shape
    hidden = gates // 3
    xg, h0, b_hh = _contiguous(xg, h0, b_hh)
    y = np.empty((steps, rows, hidden), xg.dtype)
    acts = np.empty((steps, rows, 4 * hidden), xg.dtype)
    product = _Product(w_hh.T, rows, hidden, 3, steps, packs)
    _run(_GRU, False, y.shape, reverse, product, dict(xg=xg, h0=h0, bias=b_hh, y=y, acts=acts))
    return y, y[0 if reverse else steps - 1].copy(), acts


def gru_backward(gy, ghn, gacts, y, acts, h0, w_hh, reverse: bool):
    """(dxg, dh0, dw_hh, db_hh) as ops/recurrent.py's ``gru_layer_grad`` kernel, or None."""
    if not _ready(y.dtype, gy, ghn, gacts, y, acts, h0, w_hh):
        return None
    gy, y, acts, h0 = _contiguous(gy, y, acts, h0)
    ghn, gacts = _gradient(ghn), _gradient(gacts)
    steps, rows, hidden = y.shape
    dgx = np.empty((steps, rows, 3 * hidden), y.dtype)
    dgh = np.empty_like(dgx)
    carry = np.zeros_like(h0)
    product = _Product(w_hh, rows, hidden, 1, steps)
    arrays = dict(gy=gy, ghn=ghn, gacts=gacts, y=y, acts=acts, h0=h0)
    arrays.update(state=carry, dx=dgx, dprod=dgh)
    dh0 = _run(_GRU, True, y.shape, reverse, product, arrays) + carry
    return dgx, dh0, _weight_grad(dgh, y, h0, reverse), dgh.sum(axis=(0, 1))


def elman_forward(xg, h0, w_hh, relu: bool, reverse: bool, packs=None):
    """(y, h_n) as ops/recurrent_elman.py's ``rnn_layer`` kernel, or None. ``packs``: see
    `_Product`."""
    if not _ready(xg.dtype, xg, h0, w_hh):
        return None
    steps, rows, hidden = xg.shape
    xg, h0 = _contiguous(xg, h0)
    y = np.empty((steps, rows, hidden), xg.dtype)
    product = _Product(w_hh.T, rows, hidden, 1, steps, packs)
    _run(_RELU if relu else _TANH, False, y.shape, reverse, product, dict(xg=xg, h0=h0, y=y))
    return y, y[0 if reverse else steps - 1].copy()


def elman_backward(gy, ghn, y, h0, w_hh, relu: bool, reverse: bool):
    """(dxg, dh0, dw_hh) as ops/recurrent_elman.py's ``rnn_layer_grad`` kernel, or None."""
    if not _ready(y.dtype, gy, ghn, y, h0, w_hh):
        return None
    gy, y, h0 = _contiguous(gy, y, h0)
    ghn = _gradient(ghn)
    dg = np.empty_like(y)
    product = _Product(w_hh, y.shape[1], y.shape[2], 1, y.shape[0])
    arrays = dict(gy=gy, ghn=ghn, y=y, h0=h0, dx=dg, dprod=dg)
    dh0 = _run(_RELU if relu else _TANH, True, y.shape, reverse, product, arrays).copy()
    return dg, dh0, _weight_grad(dg, y, h0, reverse)
