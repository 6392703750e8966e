"""Whether a convolution's input gradient runs kernels/cconv_col2im.py's product and col2im or
kernels/cconv.py's padded forward (phase by phase where strided, kernels/cconv_phases.py),
measured once per machine and geometry where the counted work leaves it open, and cached on
disk.

`cconv_col2im.wins` (and `cconv.taps_win` at stride 1) count multiply-adds, a col2im addition
priced as a fixed number of them; neither count sees how fast each way's kernels run on this
CPU: the product's large result (ResNet's 128 -> 256 stride-2 layer on 16x16 planes writes a
column of 1,152 values per gradient position) runs below the GEMM's square-product rate, and
the phases' small padded planes below the forward's, by amounts that differ between CPUs (the
count's verdict was the slower way there, one thread, Zen 4). So where the two counts are within
a factor `_OPEN` of each other, both ways run on random operands of the geometry, interleaved
(kernels/timing.py), the counted choice held unless the other is `clearly_faster`; the answer is
kept by kernels/choice_cache.py, keyed by the machine (CPU model, core count, the kernels' C
source) and read by every later process, so the eager call, a built program's planner
(kernels/cconv_workspace.py) and its run agree. Both ways compute the same sums in other
orders (each within float tolerance of the NumPy kernel, tested), so the choice changes the
time only. ``EMBER_CONV_LAYOUT=count`` keeps the counted choice.
"""

from __future__ import annotations

import functools
import hashlib
import time

import numpy as np

from .choice_cache import ChoiceCache
from .timing import choose, interleaved

__all__ = ["col2im_runs"]

FORMAT_VERSION = 1
_SAMPLES = 3  # (timings of each way: a geometry costs about eight calls, once per machine)
# counts nearer than this factor are measured; further apart, the count decides
_OPEN = 2.0


_forward_source = ""  # the padded forward's C source (kernels/cconv.py hands it over as it loads)


def use_source(text: str) -> None:
    """The padded forward's C source, part of the machine key with the col2im's: a changed
    kernel is measured again (handed over by kernels/cconv.py, which imports this module, so
    that this one never imports it back)."""
    global _forward_source
    _forward_source = text
    _machine_key.cache_clear()


@functools.cache
def _machine_key() -> str:
    from . import cconv_col2im
    from .cpool import cpu_count, cpu_model

    text = _forward_source + cconv_col2im.SOURCE
    source = hashlib.sha256(text.encode()).hexdigest()[:16]
    return f"{cpu_model()}|{cpu_count()}|{source}|v{FORMAT_VERSION}"


def _decode(stored) -> bool:
    if type(stored) is not bool:
        raise ValueError("not a flag")
    return stored


_choices = ChoiceCache("conv-input-grad-ways", lambda: _machine_key(), FORMAT_VERSION, _decode)


def choices_path():
    return _choices.path()


def _counts(gy_shape, w_shape, p, groups: int, itemsize: int) -> tuple[float, float]:
    """(the padded forward's counted multiply-adds, the product's and col2im's), over the
    batch: `cconv_col2im.wins`' terms."""
    from . import cconv_col2im

    return cconv_col2im.counts(gy_shape, w_shape, p, groups, itemsize)


def _measure(gy_shape, w_shape, p, groups: int, dtype, counted: bool, padded_way) -> bool:
    from . import cconv_col2im, cpool

    rng = np.random.default_rng(0)
    gy = rng.standard_normal(gy_shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)
    ways = [
        functools.partial(cconv_col2im.input_grad, gy, w, p, groups),
        functools.partial(padded_way, gy, w, p, groups),
    ]
    if any(way() is None for way in ways):  # (either declines: the count decides)
        return counted
    clock = time.thread_time if cpool.get_num_threads() == 1 else time.perf_counter
    times = interleaved(ways, _SAMPLES, clock=clock)
    return choose(times, 0 if counted else 1) == 0


def col2im_runs(gy_shape, w_shape, p, groups: int, dtype, counted: bool, padded_way) -> bool:
    """Whether the float32/float64 input gradient of this geometry runs the product and col2im
    (``counted``: the counted verdict, returned where the counts are far apart, the operands'
    dtype is another, no compiler, or ``EMBER_CONV_LAYOUT=count``); measured once per machine
    and geometry otherwise, against ``padded_way`` (kernels/cconv.py's padded forward)."""
    from .._env import setting
    from . import ccompile, cpool

    dtype = np.dtype(dtype)
    if dtype not in (np.dtype(np.float32), np.dtype(np.float64)) or len(p.kernel) != 2:
        return counted
    if setting("EMBER_CONV_LAYOUT") == "count" or not ccompile.compiler_available():
        return counted
    padded, col2im = _counts(gy_shape, w_shape, p, groups, dtype.itemsize)
    if not (0 < padded < _OPEN * col2im and 0 < col2im < _OPEN * padded):
        return counted
    geometry = (p.in_size, p.kernel, p.stride, p.lo, p.dilation, p.out_size)
    key = repr((tuple(gy_shape), tuple(w_shape), geometry, groups, dtype.name))
    key += f"|{cpool.get_num_threads()}|{int(counted)}"
    found = _choices.get(key)
    if found is None:
        found = _measure(tuple(gy_shape), tuple(w_shape), p, groups, dtype, counted, padded_way)
        _choices.put(key, found)
    return found
