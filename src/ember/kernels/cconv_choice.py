"""Which layout an eager forward convolution runs, measured: the column panels' (over the
input as it is padded, or relaid: a strided convolution's split by stride phases,
kernels/cconv_split.py, a stride-1 batch side by side, kernels/cconv_side.py) or the
channels-wide one (kernels/cconv_wide.py; over blocks of samples, skipping the padding's taps,
kernels/cconv_taps.py: the way whose (wide, split) are both True), timed on the first call of
each geometry.

`cconv_wide.wins` counts the two layouts' multiply-adds (padding included); on a 1x1 layer at
batch one (MobileNet's expansions: 256 positions, 32 rows, 192 channels) the count favours the
channels-wide layout, which runs there at less than half the column layout's speed: what a
count of multiply-adds does not see (stores, packing, the memory traffic of short rows) decides
it; nor does it see what a strided 3x3 layer's split copy gains or loses against packing its
strided runs (on the layers measured, either way by a few percent), nor what the side-by-side
batch's wasted gap columns cost against packing short rows. So the eager forward
(kernels/cconv.py's per-thread steps) times the steps on the first call's own operands,
alternating, and keeps the fastest one for the geometry for the rest of the process (a cached
calibration: per geometry, dtype, epilogue, thread count and whether the weight's panels are
kept packed between calls, in which case both are timed with their packing skipped, as they
then run). Each is timed five times, the minimum kept (on one thread the calling thread's CPU
time, which other processes' load inflates less than wall time). The layouts sum every output
in the same order (bit-identical results, tested), so the choice changes the time only.
``EMBER_CONV_LAYOUT=count`` keeps the counted choice (a built step, the graph runner's, has
no operands yet: kernels/cconv_step_choice.py times its layouts on random ones).
"""

from __future__ import annotations

import functools
import time

import numpy as np

from .._env import setting
from . import cconv_side, cconv_split, cconv_taps
from .cstep import STEP_CALL, data_address, function_address
from .timing import interleaved

__all__ = ["chosen", "layout", "measure"]

_ROUNDS = 5
# (x shape, w shape, plan, dtype, relu, threads, packed) -> the way that runs: (whether the
# channels-wide layout, whether the column panels over the relaid input)
_CHOSEN: dict = {}
# each step's flag that its packed weight is current, then the slot of the weight it packed
_PACKED_FLAGS = {False: (33, 34), True: (29, 30)}


def chosen(key: tuple) -> tuple | None:
    """The measured choice for ``key`` ((wide, split), as `layout` returns it), or None: not
    measured yet (or ``EMBER_CONV_LAYOUT=count``: never)."""
    return _CHOSEN.get(key)


def counted_only() -> bool:
    return setting("EMBER_CONV_LAYOUT") == "count"


def measure(key: tuple, steps: dict, x: np.ndarray, w: np.ndarray, out_shape: tuple) -> tuple:
    """Time ``steps`` ({(wide, split): (callable, argument block)}: the layouts' fresh steps for
    ``key``) on ``x`` and ``w`` (contiguous) into a scratch result of ``out_shape``, keep and
    return the fastest one's (wide, split). ``key[-1]``: the weight's panels are kept between
    calls, so every step runs with its packing skipped after a first packing call."""
    packed = key[-1]
    out = np.empty(out_shape, x.dtype)
    blocks = {}
    for way, (call, args) in steps.items():
        a = args.copy()  # (the kept block stays as made)
        a[0], a[1], a[3], a[2], a[4] = data_address(x), data_address(w), data_address(out), 0, 0
        flag, last = _PACKED_FLAGS[way[0]]
        a[flag], a[last] = int(packed), 0
        call(data_address(a))  # (a first call: it packs the weight where it is kept)
        blocks[way] = (call, a, data_address(a))  # (a kept: its address is read)
    # (one thread: the calling thread's CPU time, which a loaded machine's other processes do
    # not inflate; more threads: wall time)
    clock = time.thread_time if key[5] == 1 else time.perf_counter
    order = list(blocks)
    times = interleaved(
        [functools.partial(blocks[w][0], blocks[w][2]) for w in order], _ROUNDS, clock=clock
    )
    best = {way: min(t) for way, t in zip(order, times)}
    choice = _CHOSEN[key] = min(order, key=best.__getitem__)
    return choice


def layout(x_shape, w_shape, p, dtype, relu, operands, make) -> tuple | None:
    """(wide, split): the way that runs fastest on ``operands`` (x, w: contiguous) of the
    channels-wide layout and the column panels over the padded or the relaid input (split by
    stride phases, or the batch side by side: kernels/cconv.py's `_relayout`), measured once
    per geometry with ``make`` (kernels/cconv.py's `forward_step`), or None (the counted
    choice: ``EMBER_CONV_LAYOUT=count``, or a layout that does not apply)."""
    from . import cconv_packs, cpool

    if counted_only():
        return None
    x, w = operands
    dtype = np.dtype(dtype)
    key = (x_shape, w_shape, p, dtype, relu, cpool.get_num_threads(), cconv_packs.kept(w))
    found = _CHOSEN.get(key)
    if found is None:
        steps = {}
        ways = [(False, False), (True, False)]
        if cconv_split.split_of(p) is not None or cconv_side.side_of(p, x_shape[0]):
            ways.append((False, True))
        if cconv_taps.applies(x_shape, w_shape, p, dtype):
            ways.append((True, True))
        for wide, split in ways:
            made = make(x_shape, w_shape, p, dtype, relu, wide=wide, split=split)
            if made is None:
                return None
            steps[wide, split] = (STEP_CALL(function_address(made[0])), made[1], made[2])
        out_shape = (x_shape[0], w_shape[0]) + tuple(p.out_size)
        found = measure(key, {k: v[:2] for k, v in steps.items()}, x, w, out_shape)
    return found
