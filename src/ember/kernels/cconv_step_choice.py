"""Which layout a built forward-convolution step runs (the C graph runner's steps, a graph
constant's, an epilogue's: kernels/cconv.py's `forward_step` left to choose), measured once per
machine and geometry when the step is built, and cached on disk.

The counted choice (`cconv_wide.wins`, kernels/cconv.py's `_relayout`) counts multiply-adds and
packed runs (never picking kernels/cconv_taps.py's layout, the (True, True) way, which is only
measured); it misses stores, the relaid copy and how short rows stream (a 256 -> 1024 1x1 layer
on 14x14 planes at batch 8: counted channels-wide at 0.62 ms, the column panels ran it in 0.51
ms). The eager forward times the layouts on its first call's operands
(kernels/cconv_choice.py), but a step is built before any operand exists and runs for the
program's life, so here the candidate steps run on random operands of the step's shapes when
it is built: the counted choice is held unless another layout is `clearly_faster` (kernels/
timing.py's rule, robust to a loaded machine), this thread's CPU time on one thread, wall time
on more, each timing repeating the step to about `_SAMPLE_S`. A step's store is part of the
key (`store_kind`: none, a clamp, an activation), as the layouts store differently. The
layouts sum every output in the same order (bit-identical, tested), so the choice changes the
time only.

The choices are kept by kernels/choice_cache.py in ember's cache directory, keyed by the machine
(CPU model, core count, the kernels' C source): a geometry is measured once per machine and
kind of store, about a millisecond per layout, and a program's later builds read the file (one
not trusted is ignored and replaced).
``EMBER_CONV_LAYOUT=count`` keeps the counted choice.
"""

from __future__ import annotations

import functools
import hashlib
import time

import numpy as np

from .choice_cache import ChoiceCache
from .cstep import STEP_CALL, data_address, function_address
from .timing import choose, interleaved

__all__ = ["built_layout", "choices_path", "machine_key", "store_kind"]

# (2: timings repeated to `_SAMPLE_S`; the choices of single-call timings are measured again)
FORMAT_VERSION = 2
_SAMPLES = 7  # (timings of each layout, once per machine and geometry: quartiles of seven)
# (each timing repeats a step to last about this long, as kernels/gemm_tune.py's: single calls
# of a step of tens of microseconds measured a layout's cold first calls and the load's
# bursts, and held a counted choice that ran 1.8x slower)
_SAMPLE_S = 3e-4


_source = ""  # the kernels' C source (kernels/cconv.py hands it over as it loads)


def use_source(text: str) -> None:
    """The kernels' C source, part of the machine key: a changed kernel is measured again."""
    global _source
    _source = hashlib.sha256(text.encode()).hexdigest()[:16]
    machine_key.cache_clear()


@functools.cache
def machine_key() -> str:
    from .cpool import cpu_count, cpu_model

    return f"{cpu_model()}|{cpu_count()}|{_source}|v{FORMAT_VERSION}"


def _decode_way(stored) -> tuple:
    """A stored (wide, split) pair of 0 and 1; anything else is refused."""
    if not (isinstance(stored, list) and len(stored) == 2):
        raise ValueError("not a pair")
    if not all(type(flag) is int and flag in (0, 1) for flag in stored):
        raise ValueError("not flags")
    return (bool(stored[0]), bool(stored[1]))


_choices = ChoiceCache(
    "conv-layouts",
    lambda: machine_key(),
    FORMAT_VERSION,
    decode=_decode_way,
    encode=lambda way: [int(way[0]), int(way[1])],
)


def choices_path():
    return _choices.path()


def store_kind(clamp) -> str:
    """What a step's store does besides adding the bias (kernels/cclamp.py's ``clamp``): ``""``
    nothing, ``"clamp"`` bounds, ``"activation"`` bounds then an elementwise function. It keys
    the choice, as the layouts store differently: the channels-wide layout stores a position's
    channels a plane apart, a cost an activation's arithmetic hides (a 1x1 80 -> 320
    convolution on 6x6 planes: the two layouts alike with SiLU, the column panels 1.8x faster
    without it)."""
    if clamp is None or clamp is False:
        return ""
    if clamp is not True and len(tuple(clamp)) > 5 and tuple(clamp)[5] is not None:
        return "activation"
    return "clamp"


def _key(x_shape, w_shape, p, dtype, threads: int, constant: bool, store: str) -> str:
    geometry = (p.in_size, p.kernel, p.stride, p.lo, p.dilation, p.padded)
    shapes = (tuple(x_shape), tuple(w_shape), geometry, np.dtype(dtype).name, threads)
    return repr(shapes + (bool(constant),) + ((store,) if store else ()))


def _measure(candidates: dict, x_shape, w_shape, out_shape, dtype, threads: int, default):
    """The (wide, split) of ``candidates`` ({way: (step, argument block, what it keeps)}) to
    run: each timed on random operands, ``default`` held unless another is clearly faster."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)
    out = np.empty(out_shape, dtype)
    ways, calls = list(candidates), []
    for way in ways:
        step, args, _ = candidates[way]
        block = args.copy()  # (the step's own block stays as made)
        block[0], block[1], block[3] = data_address(x), data_address(w), data_address(out)
        calls.append(functools.partial(STEP_CALL(function_address(step)), data_address(block)))
        calls[-1].block = block  # (kept alive: the call reads it by address)
    clock = time.thread_time if threads == 1 else time.perf_counter
    times = interleaved(calls, _SAMPLES, clock=clock, sample_s=_SAMPLE_S)
    return ways[choose(times, ways.index(default))]


def built_layout(x_shape, w_shape, p, dtype, constant: bool, make, counted, store="") -> tuple:
    """(wide, split) for a step of this geometry: the cached measured choice, else measured
    now with ``make(wide=..., split=...)`` (kernels/cconv.py's `forward_step` for the
    geometry: (step, argument block, kept) or None) and cached; ``counted`` is the counted
    choice, the one held unless another layout is clearly faster; ``store`` the step's
    `store_kind`."""
    from . import cconv_side, cconv_split, cconv_taps, cpool

    threads = cpool.get_num_threads()
    key = _key(x_shape, w_shape, p, dtype, threads, constant, store)
    found = _choices.get(key)
    if found is not None:
        return found
    ways = [(False, False), (True, False)]
    if cconv_split.split_of(p) is not None or cconv_side.side_of(p, x_shape[0]) is not None:
        ways.append((False, True))
    if cconv_taps.applies(x_shape, w_shape, p, dtype):
        ways.append((True, True))
    candidates = {}
    for way in ways:
        made = make(wide=way[0], split=way[1])
        if made is not None:
            candidates[way] = made  # (its scratch and tables, kept: the step writes them)
    if counted not in candidates or len(candidates) < 2:
        return counted
    out_shape = (x_shape[0], w_shape[0]) + tuple(p.out_size)
    found = _measure(candidates, x_shape, w_shape, out_shape, dtype, threads, counted)
    _choices.put(key, found)
    return found
