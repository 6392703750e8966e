"""The layout plan of a convolution and the scratch arrays its kernels work in, shared by the
NumPy reference kernels (ops/_conv_kernels.py, whose docstring explains the three layouts) and
the C kernels (kernels/cconv.py).

`plan(...)` picks a layout ("dense", "flat" or "general") for a geometry and computes its
offsets; `scratch(...)` hands out reusable per-thread work arrays (allocating a fresh
multi-megabyte array per call costs page faults comparable to the product itself).

Those arrays outlive the calls that made them (bounded per thread: `_SCRATCH_LIMIT_BYTES`,
`_SCRATCH_LIMIT_ENTRIES`, least recently used first out), so they are memory ember holds for
the programs that use them. `charged_to(record)` makes a caller accountable for it: while the
block runs on this thread, every scratch array handed out (and every cache entry a kernel
marks with `charge`, the C convolution's per-thread steps) is noted in ``record`` (key ->
bytes), and at its end the entries no longer cached are dropped. `release()` frees this
thread's scratch. A compiled program charges
its calls (capture/graph_function.py) and its memory plan counts what it keeps
(plan/program.py); `held_bytes()` is what this thread's scratch holds in all.
"""

from __future__ import annotations

import functools
import math
import threading
from collections import OrderedDict
from contextlib import contextmanager
from typing import NamedTuple

import numpy as np

from .. import dtypes as dt

__all__ = [
    "ELEMENT_COST",
    "Plan",
    "RUN_COST",
    "charge",
    "charge_begin",
    "charge_end",
    "charged_to",
    "compute_dtype",
    "conv_geometry",
    "conv_out_size",
    "held_bytes",
    "interior",
    "on_release",
    "plan",
    "release",
    "scratch",
    "source_region",
]

# the dense and flat layouts are used when they add at most this much matmul work (garbage
# columns); dense is preferred, its copies and adds run over much longer rows
_DENSE_MAX_WASTE = 1.15
_FLAT_MAX_WASTE = 1.5

# the forward kernels' cost of packing, shared by the two layouts' choices (kernels/cconv.py,
# kernels/cconv_wide.py)
# what packing one run of columns costs where runs move a vector at a time (AVX-512 masks), in
# vector multiply-adds: a masked load and a masked store, the mask, the run's table entries
# (about eight instructions, four cycles at two a cycle: four multiply-adds at one a cycle)
RUN_COST = 4
# where they move an element at a time: a scalar copy per element, two multiply-adds (one on
# each of two pipes)
ELEMENT_COST = 2

# ------------------------------------------------------------------------------- scratch space

_SCRATCH_LIMIT_BYTES = 256 * 2**20
# the bytes bound the memory; the count only bounds the table: a step cycling through more
# geometries than it holds (a ResNet-18 step's NumPy kernels: 56 entries, 30 MiB at batch 8)
# would evict each entry just before its reuse, every call allocating all of them again
_SCRATCH_LIMIT_ENTRIES = 512


class _Local(threading.local):
    """This thread's scratch arrays and charge record, None until made: a class default, as
    ``getattr(local, name, None)`` of a missing attribute costs a kernel call a quarter of a
    microsecond per charge (every packed product and convolution charges)."""

    cache = None
    record = None


_local = _Local()


def _cache() -> OrderedDict:
    cache = getattr(_local, "cache", None)
    if cache is None:
        cache = _local.cache = OrderedDict()
    return cache


def scratch(tag: str, shape: tuple, dtype, fill=None, key=()) -> np.ndarray:
    """A reusable work array. With ``fill``, the array is created filled with that value and the
    caller promises to write only the region that ``key`` determines, so the rest keeps ``fill``
    (the zero border of a padded input, for example)."""
    cache = _cache()
    dtype = np.dtype(dtype)
    k = (tag, shape, dtype, fill, key)
    buf = cache.get(k)
    if buf is not None:
        cache.move_to_end(k)
        charge(("scratch", k), buf.nbytes)
        return buf
    buf = np.empty(shape, dtype) if fill is None else np.full(shape, fill, dtype)
    cache[k] = buf
    total = sum(b.nbytes for b in cache.values())
    while cache and (total > _SCRATCH_LIMIT_BYTES or len(cache) > _SCRATCH_LIMIT_ENTRIES):
        _, old = cache.popitem(last=False)
        total -= old.nbytes
    charge(("scratch", k), buf.nbytes)
    return buf


def held_bytes() -> int:
    """Bytes of this thread's scratch arrays (kept between calls)."""
    return sum(b.nbytes for b in _cache().values())


def release() -> None:
    """Free this thread's scratch: the arrays `scratch` keeps and the other kernel caches
    registered with `on_release` (the C convolution's steps). Later calls allocate again."""
    _cache().clear()
    for clear in _releasers:
        clear()


def on_release(clear) -> None:
    """Register ``clear()``, which frees this thread's entries of another scratch cache."""
    _releasers.append(clear)


# ------------------------------------------------------------------------- accounting
_cached: dict = {}  # kind -> function(key) -> whether this thread's cache of that kind holds key
_releasers: list = []


def charge(key: tuple, nbytes: int, cached=None) -> None:
    """Note that the running caller keeps ``nbytes`` under ``key`` (see `charged_to`);
    ``cached``: for a cache other than `scratch`'s, a function telling whether this thread's
    cache still holds ``key`` (registered once per kind, ``key[0]``)."""
    if cached is not None:
        _cached.setdefault(key[0], cached)
    record = getattr(_local, "record", None)
    if record is not None:
        record[key] = nbytes


@contextmanager
def charged_to(record: dict):
    """Within the block, note in ``record`` (key -> bytes) the scratch this thread hands out
    and keeps; at its end, drop what is no longer kept (see the module docstring). ``record``
    is cleared first: it holds what the latest block keeps."""
    outer = charge_begin(record)
    try:
        yield record
    finally:
        charge_end(record, outer)


def charge_begin(record: dict):
    """`charged_to`'s start, for a caller on a hot path (a generator's context manager costs
    microseconds): returns what `charge_end` takes, which the caller must call (``finally``)."""
    outer = getattr(_local, "record", None)
    record.clear()
    _local.record = record
    return outer


def charge_end(record: dict, outer) -> None:
    """`charged_to`'s end: ``outer`` as `charge_begin` returned it."""
    _local.record = outer
    if record:
        cache = _cache()
        for key in list(record):
            kept = key[1] in cache if key[0] == "scratch" else _cached[key[0]](key)
            if not kept:
                del record[key]
        if outer is not None:
            outer.update(record)


def compute_dtype(dtype: np.dtype) -> np.dtype:
    """Half-precision types are computed in float32 (NumPy has no fast half matmul)."""
    if dtype in (dt.float16.np, dt.bfloat16.np):
        return np.dtype(np.float32)
    return dtype


# ------------------------------------------------------------------------------------ geometry


def conv_out_size(in_size, kernel, stride, padding, dilation) -> tuple:
    """Output size of a convolution per spatial dimension (may be < 1 for invalid inputs). The
    padding and kernel terms are summed first, so a symbolic size (a sequence length traced with
    ``TensorSpec((None, "T"))``) under a stride-1 "same" convolution stays itself."""
    out = []
    for s, k, st, (lo, hi), d in zip(in_size, kernel, stride, padding, dilation):
        delta = lo + hi - d * (k - 1) - 1
        out.append(s + (delta + 1) if st == 1 else (s + delta) // st + 1)
    return tuple(out)


class Plan(NamedTuple):
    in_size: tuple
    kernel: tuple
    stride: tuple
    lo: tuple  # padding before each spatial dimension
    dilation: tuple
    out_size: tuple
    padded: tuple  # spatial size of the padded input (only the padding that is read)
    layout: str  # "dense", "flat" or "general" (see the module docstring)
    grid: tuple  # the per-sample grid of matmul columns (spatial shape)
    m: int  # matmul columns per sample: prod(grid)
    flat_len: int  # flat layout: length of one padded plane plus read-ahead slack
    offsets: tuple  # dense and flat layouts: offset of each kernel position in the flat plane
    margin: tuple  # dense layout: room before and after the input for the offsets' reads
    valid: tuple  # dense layout: per kernel offset, per dimension, the grid range it may read


@functools.lru_cache(maxsize=512)
def plan(in_size, kernel, stride, padding, dilation, rows: int = 1, out_rows: int = 1) -> Plan:
    """The layout for a convolution; ``rows`` = (input channels per group) * prod(kernel), the
    height of the column matrix, and ``out_rows`` = output channels per group."""
    out = conv_out_size(in_size, kernel, stride, padding, dilation)
    lo = tuple(p[0] for p in padding)
    # a negative high padding crops: nothing past the last window is ever read
    padded = tuple(
        min(s + lo_ + max(hi, 0), (o - 1) * st + d * (k - 1) + 1)
        for s, lo_, (_, hi), o, st, d, k in zip(in_size, lo, padding, out, stride, dilation, kernel)
    )
    unit = all(s == 1 for s in stride)
    geometry = (in_size, kernel, stride, lo, dilation, out, padded)
    if unit and all(o <= s for o, s in zip(out, in_size)):
        if math.prod(in_size) <= _DENSE_MAX_WASTE * math.prod(out):
            return _dense_plan(*geometry)
    strides = tuple(math.prod(padded[i + 1 :]) for i in range(len(padded)))
    waste = math.prod(padded[1:]) / max(math.prod(out[1:]), 1)
    # the flat layout saves on im2col (cost ~ rows) but its output and gradient copies crop
    # short rows (cost ~ out_rows): with few column rows (a first layer) the general one wins
    if unit and waste <= _FLAT_MAX_WASTE and rows >= out_rows:
        grid = (out[0],) + padded[1:]
        offsets = tuple(
            sum(i * d * f for i, d, f in zip(idx, dilation, strides)) for idx in np.ndindex(*kernel)
        )
        slack = sum(d * (k - 1) * f for d, k, f in zip(dilation[1:], kernel[1:], strides[1:]))
        flat_len = math.prod(padded) + slack
        return Plan(*geometry, "flat", grid, math.prod(grid), flat_len, offsets, (), ())
    return Plan(*geometry, "general", out, math.prod(out), 0, (), (), ())


def conv_geometry(attrs, in_size, w_shape) -> Plan:
    """The plan of a convolution op's call (ops/conv.py): its attributes (``stride``,
    ``padding``, ``dilation``, ``groups``), the input's spatial size and the weight's shape
    (Cout, Cin/groups, *kernel)."""
    kernel = tuple(w_shape[2:])
    return plan(
        tuple(in_size),
        kernel,
        attrs["stride"],
        attrs["padding"],
        attrs["dilation"],
        w_shape[1] * math.prod(kernel),
        w_shape[0] // attrs["groups"],
    )


def _dense_plan(in_size, kernel, stride, lo, dilation, out, padded) -> Plan:
    strides = tuple(math.prod(in_size[i + 1 :]) for i in range(len(in_size)))
    offsets, valid = [], []
    for idx in np.ndindex(*kernel):
        # kernel offset idx reads grid position i + shift (per dimension); it may read where
        # that stays inside the input, and only for real output positions (i < out)
        shift = tuple(i * d - p for i, d, p in zip(idx, dilation, lo))
        offsets.append(sum(s * f for s, f in zip(shift, strides)))
        valid.append(
            tuple(
                (min(max(0, -s), o), max(min(n - s, o), 0)) for s, n, o in zip(shift, in_size, out)
            )
        )
    margin = (max(0, -min(offsets)), max(0, max(offsets)))
    m = math.prod(in_size)
    return Plan(
        in_size, kernel, stride, lo, dilation, out, padded, "dense", in_size, m, 0,
        tuple(offsets), margin, tuple(valid),
    )  # fmt: skip


def interior(p: Plan) -> tuple:
    """Index of the unpadded input inside the padded one (spatial dimensions)."""
    return tuple(slice(lo, min(lo + s, n)) for lo, s, n in zip(p.lo, p.in_size, p.padded))


def source_region(p: Plan) -> tuple:
    """The part of the input that lands inside the padded buffer (all of it unless the padded
    extent stops early: trailing rows no window reads, or a negative high padding)."""
    return (slice(None), slice(None)) + tuple(
        slice(0, max(0, min(s, n - lo))) for lo, s, n in zip(p.lo, p.in_size, p.padded)
    )
