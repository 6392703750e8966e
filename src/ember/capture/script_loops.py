"""Staging of converted loops for ``ember.script``: a ``while`` whose condition, or a ``for``
over a ``range`` whose bound, is a tensor while a graph is built becomes an ``ember.while_loop``
(``ember.fori_loop`` for a plain ``range`` with step 1).

The carries are the loop's variables that hold a tensor (or a nest of tensors) or a Python
number (made a 0-d tensor) on entry; a Python value of another kind must stay unchanged by the
body; a variable with no value on entry is not carried and has no value after the loop (it may
run zero times), except the lowered return value, which a first trace of the body discovers and
a second carries (zeros until a return sets it). Each carry must keep its structure, shape and
dtype; a mismatch is a `ScriptError` naming the variable and the loop's line.
"""

from __future__ import annotations

from ..control.flow import fori_loop, while_loop
from ..errors import ScriptError
from ..ops._registry import TensorBase
from .script_analysis import RETVAL
from .script_values import (
    NO_RETURN,
    Undefined,
    _describe,
    _kind,
    _number,
    _Retry,
    _same_python,
    _scalar,
    _struct,
    _zeros_like_struct,
)


class TensorRange:
    """``range(...)`` with a tensor bound while a graph is built: becomes a loop node."""

    def __init__(self, args, location=None):
        self.lower, self.upper, self.step = (0, args[0], 1) if len(args) == 1 else (*args, 1)[:3]


def staged_loop(test_fn, body_fn, vals, names, site, location, rng: TensorRange | None = None):
    """Record a ``while_loop`` (or ``fori_loop``) for a converted loop whose condition or bound
    is a tensor, starting from the variables' current values ``vals``."""
    from ..ops.creation import tensor

    if rng is not None and not isinstance(rng.step, int):
        raise ScriptError(
            f"the {site} has a tensor step; only its bounds may be tensors",
            op="script",
            location=location,
        )
    late: dict = {}  # the return value, unset at entry, set by the body: carried on a retry
    for _attempt in range(2):
        slots, init = _initial_carries(vals, names, late, site, location)
        structs = [_struct(c) for c in init]

        def full_vals(carries):
            out = list(vals)
            for i, c in zip(slots, carries):
                out[i] = c
            return out

        def body(carries, item=None):
            new = body_fn(*([] if rng is None else [item]), *full_vals(carries))
            return _carries(new, vals, slots, structs, init, names, site, location, late)

        def keep_going(carries, extra=None):
            c = test_fn(*full_vals(carries)) if test_fn is not None else True
            if extra is not None:
                from ..ops.api import logical_and

                c = logical_and(extra, c)
            return c if isinstance(c, TensorBase) else tensor(bool(c))

        try:
            result = _record(rng, test_fn is None, keep_going, body, tuple(init))
            break
        except _Retry:
            continue
    out = list(vals)
    for i, c in zip(slots, result):
        out[i] = c
    for i, v in enumerate(vals):
        if isinstance(v, Undefined) and i not in slots:
            reason = (
                f"it is first assigned inside the {site}, which depends on a tensor (and may run "
                "zero times); assign it before the loop"
            )
            out[i] = NO_RETURN if v is NO_RETURN else Undefined(names[i], reason, location)
    return tuple(out)


def _initial_carries(vals, names, late: dict, site, location) -> tuple[list, list]:
    """(positions of the variables the loop carries, their values at entry): tensors, numbers
    (as 0-d tensors) and the values a first attempt found set by the body (``late``)."""
    slots, init = [], []
    for i, v in enumerate(vals):
        if i in late:
            slots.append(i)
            init.append(_zeros_like_struct(late[i]))
        elif _kind(v) == "T":
            slots.append(i)
            init.append(v)
        elif _number(v):
            slots.append(i)
            init.append(_scalar(v))
    if not slots:
        unset = [n for n, v in zip(names, vals) if isinstance(v, Undefined)]
        hint = f"; {', '.join(unset)} first get a value inside it: assign them before it"
        raise ScriptError(
            f"the {site} depends on a tensor but carries no tensor from before it"
            + (hint if unset else ""),
            op="script",
            location=location,
        )
    return slots, init


def _record(rng, no_test: bool, keep_going, body, init: tuple):
    """The loop node: a ``while_loop``, a ``fori_loop`` for a unit-step range without a test,
    or a ``while_loop`` carrying the range's counter."""
    from ..dtypes import int64
    from ..ops.creation import tensor

    if rng is None:
        return while_loop(keep_going, body, init)
    if no_test and rng.step == 1:
        return fori_loop(rng.lower, rng.upper, lambda i, c: body(c, i), init)
    step, upper = rng.step, rng.upper
    start = rng.lower.to(int64) if isinstance(rng.lower, TensorBase) else rng.lower
    start = start if isinstance(start, TensorBase) else tensor(start, dtype=int64)
    return while_loop(
        lambda s: keep_going(s[1], s[0] < upper if step > 0 else s[0] > upper),
        lambda s: (s[0] + step, body(s[1], s[0])),
        (start, init),
    )[1]


def _carries(new, vals, slots, structs, init, names, site, location, late) -> tuple:
    """The loop body's new values of the carried variables, checked against their entry."""
    out = []
    for i, (old, v) in enumerate(zip(vals, new)):
        name = names[i]
        if i in slots:
            k = slots.index(i)
            if _number(v) and isinstance(init[k], TensorBase):
                from ..ops.creation import full

                v = full(tuple(init[k].shape), v, dtype=init[k].dtype)
            if _kind(v) != "T" or _struct(v) != structs[k]:
                raise ScriptError(
                    f"variable {name!r} changes from {_describe(init[k])} to {_describe(v)} in "
                    f"the {site}, which depends on a tensor; a loop must keep each variable's "
                    "structure, shapes and dtypes",
                    op="script",
                    location=location,
                )
            out.append(v)
        elif isinstance(old, Undefined):
            if name == RETVAL and _kind(v) == "T" and i not in late:
                late[i] = v
                raise _Retry
        elif not _same_python(old, v):
            raise ScriptError(
                f"variable {name!r} ({_describe(old)}) changes inside the {site}, which depends "
                "on a tensor; only tensors (and Python numbers, which become tensors) can change "
                "in such a loop",
                op="script",
                location=location,
            )
    return tuple(out)
