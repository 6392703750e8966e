"""The one-group 2-d forward convolution's steps (kernels/cconv.py): `forward_step`, the
graph runner's step of a geometry in the layout measured or counted fastest (column panels,
relaid or not; channels-wide; channels-wide over blocks of samples), and the steps eager calls
keep per thread (their padded-input and packed-weight scratch, charged to the running caller
like the scratch arrays, the oldest geometries dropped past a count or a byte bound)."""

from __future__ import annotations

import functools
import threading

import numpy as np

from . import cconv_choice, cconv_step_choice, cconv_taps, cconv_wide, conv_plan
from .cclamp import clamp_address
from .cconv_layout import _forward_layout, _relayout
from .cconv_library import (
    _MR,
    _RESIDUAL_SLOT,
    _WIDE,
    _compute_dtype,
    _functions,
    _panel_group,
    _step_function,
    compute_itemsize,
    pairs,
)
from .cconv_tables import _forward_tables
from .conv_plan import Plan, charge
from .cstep import STEP_CALL, data_address, function_address


def residual_slot(made, dtype) -> int:
    """The slot of a `forward_step`'s argument block (``made``: what it returned for ``dtype``)
    that takes the residual its store adds."""
    return _RESIDUAL_SLOT[bool(_channels_wide(made[0], np.dtype(dtype)))]


def _channels_wide(step, dtype: np.dtype) -> int:
    """Whether ``step`` runs a channels-wide layout, whose argument block's slots for the
    packed weight's flags and the residual are kernels/cconv_wide.py's: 0 (the column panels),
    1 (its packed weight kernels/cconv_wide.py's panels), 2 (its own panels:
    kernels/cconv_taps.py's wider blocking)."""
    if step is _step_function(dtype, _WIDE):
        return 1
    for blocking in cconv_taps.VARIANTS:
        if step is _step_function(dtype, cconv_taps.step_name(blocking)):
            return 1 if cconv_taps.shares_panels(blocking) else 2
    return 0


_local = threading.local()
# per thread, the forward steps kept (their padded-input and packed-weight scratch), charged to
# the running caller (conv_plan.charged_to) like the scratch arrays
_STEP_CACHE_ENTRIES = 32
_STEP_CACHE_BYTES = 64 << 20


def _thread_step(x_shape, w_shape, p: Plan, dtype, relu, any_layout=True, operands=None):
    """(the forward step as a callable, its argument block, the address of its own packed
    weight, whether it runs the channels-wide layout, the block's address) for this geometry,
    kept per thread (its scratch is written by each call: threads running the same convolution
    at once must not share it), or None. ``operands`` (x, w): the layout is the one measured
    faster on them (kernels/cconv_choice.py), else counted."""
    cache = _steps()
    relu = relu or None  # (no clamp, False or None: one key, so eager calls and graphs share steps)
    key = (x_shape, w_shape, p, np.dtype(dtype), relu, any_layout)
    found = cache.get(key)
    if found is not None:
        charge(("cconv step", key), found[3], _step_kept)
    else:
        # (a store into another array's phase keeps the plain column layout, whose store
        # table forward_into maps)
        wide, split = (None, None) if any_layout else (False, False)
        if operands is not None and any_layout and not pairs(dtype):
            way = cconv_choice.layout(x_shape, w_shape, p, dtype, relu, operands, forward_step)
            if way is not None:
                wide, split = way
        made = forward_step(x_shape, w_shape, p, dtype, relu, wide=wide, split=split)
        if made is None:
            return None
        step, args, keep = made
        size = sum(a.nbytes for a in keep if isinstance(a, np.ndarray))
        call = STEP_CALL(function_address(step))
        wide = _channels_wide(step, np.dtype(dtype))
        found = cache[key] = (call, args, keep, size, int(args[6]), wide, data_address(args))
        # the oldest geometries go, their scratch with them
        while len(cache) > _STEP_CACHE_ENTRIES or (
            len(cache) > 1 and sum(v[3] for v in cache.values()) > _STEP_CACHE_BYTES
        ):
            del cache[next(iter(cache))]
        charge(("cconv step", key), size, _step_kept)
    return found[0], found[1], found[4], found[5], found[6]


def _steps() -> dict:
    cache = getattr(_local, "steps", None)
    if cache is None:
        cache = _local.steps = {}
    return cache


conv_plan.on_release(lambda: _steps().clear())


def _step_kept(charged: tuple) -> bool:
    """Whether this thread's step cache still holds a charged entry (conv_plan.charged_to)."""
    return charged[1] in _steps()


def held_bytes() -> int:
    """Bytes of the scratch this thread's kept forward steps hold (the padded inputs and
    packed weights)."""
    return sum(v[3] for v in _steps().values())


def forward_step(
    x_shape: tuple, w_shape: tuple, p: Plan, dtype, relu,
    weight_constant: bool = False, wide: bool | None = None, split: bool | None = None,
):  # fmt: skip
    """The graph runner's step of a 2-d, one-group forward convolution (runtime/cgraph.py):
    (the step function, its argument block with zeros in the x, w, bias, out and mask slots
    0 to 4, what must stay alive), or None where `conv_forward` would not run. The layout is
    the column panels' or the channels-wide one; ``wide`` True or False forces one (tests; a
    phase's store needs the columns'); both None, the one measured fastest for this geometry
    on this machine (kernels/cconv_step_choice.py), or with ``EMBER_CONV_LAYOUT=count`` the
    one doing less counted work (`cconv_wide.wins`, `_relayout`).
    The column panels read the input relaid where ``split`` is True, or, where it is None,
    where the count says so (`_relayout`): a strided convolution's split by stride phases
    (kernels/cconv_split.py), a stride-1 batch side by side (kernels/cconv_side.py);
    `forward_into`'s store tables are the plain layout's (False). ``wide`` and ``split`` both
    True: the channels-wide layout over blocks of samples, which skips the taps that read the
    padding (kernels/cconv_taps.py; None where it does not apply). ``weight_constant``: the
    weight is the same unchanging array at every call (a graph's constant), packed once."""
    from . import cpool

    dtype = np.dtype(dtype)
    if len(x_shape) != 4 or 0 in x_shape or 0 in w_shape or _functions(dtype) is None:
        return None
    n, c, h, w = x_shape
    itemsize, compute = compute_itemsize(dtype), _compute_dtype(dtype)
    key = (tuple(x_shape), tuple(w_shape), p, 1, itemsize)
    f = _forward_layout(*key)
    threads = cpool.get_num_threads()
    pool = _functions(dtype)[3] or 0
    # (none of a dimension where its low padding covers all the windows read: a negative high
    # padding can crop the padded extent to less than the low padding)
    copied = [max(0, min(s, n_ - lo)) for lo, s, n_ in zip(p.lo, p.in_size, p.padded)]
    copy = [n * c, *copied, h, w, *p.lo, *p.padded]
    if wide is None:  # (the channels-wide layout has no bfloat16 pairs)
        wide = not pairs(dtype) and cconv_wide.wins(n * f.m, f.cog, f.rows, threads, itemsize)
        if split is None and not pairs(dtype) and not cconv_choice.counted_only():
            # a step left to choose: the layout measured for this geometry on this machine
            relaid = None if wide else _relayout(*key[:3], itemsize)
            counted = (wide, relaid is not None and relaid[1])
            wide, split = cconv_step_choice.built_layout(
                x_shape, w_shape, p, dtype, weight_constant,
                functools.partial(forward_step, x_shape, w_shape, p, dtype, relu, weight_constant),
                counted, cconv_step_choice.store_kind(relu),
            )  # fmt: skip
    if wide and pairs(dtype):
        return None
    if wide and split:  # the channels-wide layout over blocks of samples, skipping the padding
        if not cconv_taps.applies(x_shape, w_shape, p, dtype):
            return None
        blocking = cconv_taps.variant(n, w_shape[0], itemsize)
        step = _step_function(dtype, cconv_taps.step_name(blocking))
        if step is None:
            return None
        args, keep = cconv_taps.step_args(
            x_shape, w_shape, p, dtype, blocking, clamp_address(relu, dtype), pool, threads,
            weight_constant,
        )  # fmt: skip
        return step, args, (step, *keep)
    if wide:
        step = _step_function(dtype, _WIDE)
        if step is None:
            return None
        tables = _forward_tables(p, c, False)
        xp = None if f.unpadded else np.zeros(f.size, dtype)
        args, wp = cconv_wide.step_args(
            x_shape, w_shape, tables, f.rows, len(tables[0]), f.plane, f.m, xp, copy,
            clamp_address(relu, dtype),
            pool, threads, weight_constant, compute,
        )  # fmt: skip
        return step, args, (step, xp, wp.base, *tables)
    step = _step_function(dtype)
    if step is None:
        return None
    relaid = None if split is False else _relayout(*key[:3], itemsize)
    if relaid is not None and (split or relaid[1]):
        f = relaid[0]
    xp = None if f.unpadded else np.zeros(f.size, dtype)
    samples = n if f.samples is None else f.samples
    src, dst, roff = f.tables
    wp = np.empty((f.panels * _MR * f.rows,), compute)
    args = [0, 0, 0, 0, 0, 0 if xp is None else data_address(xp), data_address(wp)]
    args += [data_address(src), data_address(dst), data_address(roff), *copy]
    args += [f.cog, f.rows, f.panels]
    args += [f.panels, f.rows, samples * len(src), f.cog, f.m, len(src), c * f.plane]
    args += [f.cog * f.m]
    args += [clamp_address(relu, dtype), pool, _panel_group(f.panels, itemsize)]
    args += [int(weight_constant), 0, 0, 0]  # (then the weight's gather: forward_into's)
    args += [0 if f.split is None else data_address(f.split)]
    args += [0]  # (the residual: cconv_epilogue's steps)
    return step, np.array(args, np.int64), (step, xp, wp, src, dst, roff, f.split)
