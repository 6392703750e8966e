"""Run-time checks that a captured graph keeps: ``check(x, ok; message)`` is ``x`` itself, after
raising `CheckFailedError` with ``message`` where the boolean tensor ``ok`` is not all true
(``where``: the user's file:line that made the check, which the error names).

A check on a value's contents (a non-finite gradient norm, PyTorch's ``_assert_async``) cannot
run while a graph is built: the values are not there, and ``.item()`` on them would bake one
branch into the graph. As a node it runs when the graph runs, eagerly it runs at once. It
returns ``x`` (its memory: ``aliases``) so that everything computed from the checked value runs
after the check: a failed check leaves the parameters a step would have updated from it as they
were. Its ``effect`` keeps it in a graph whose result does not read it, and tells the executors
that it must not run on made-up inputs (the executor choice does not time such a graph).
ONNX has no operator that raises, so a check is refused on export rather than dropped.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..errors import DTypeError, EmberError, user_location
from ._registry import Cost, OpDef, apply, export, register
from ._rules import Complex, Effect
from ._util import same_type
from .promotion import to_tensor


class CheckFailedError(EmberError, RuntimeError):
    """A run-time check of a tensor's values failed (PyTorch raises a RuntimeError)."""


def _infer(x, ok, *, message, where):
    if ok.dtype is not dt.bool_:
        raise DTypeError(f"the condition must be a bool tensor, got {ok.dtype}", op="check")
    return same_type(x)


def _kernel(x, ok, *, message, where):
    if not np.all(ok):  # (in a graph the user's line is where the check was recorded)
        raise CheckFailedError(message, op="check", location=where or None)
    return x


CHECK = register(
    OpDef(
        name="check",
        kind="elementwise",
        float8=True,
        complex=Complex.GRADIENT,
        infer=_infer,
        kernel=_kernel,
        vjp=lambda ctx, g: (g, None),
        cost=lambda in_types, out_types, attrs: Cost(0, 0),
        save_inputs=(),
        aliases=True,  # the memory plan: the output is x's memory
        effect=Effect(ordered=None),
        doc="check(x, ok; message, where): x, after raising CheckFailedError(message) unless every "
        "element of the bool tensor ok is true (a run-time check a graph keeps)",
    )
)


def check(x, ok, message: str):
    """``x``, once ``ok`` (a bool tensor) is all true; raises `CheckFailedError` with
    ``message`` otherwise, now or, while a graph is built, whenever the graph runs."""
    return apply(CHECK, to_tensor(x), to_tensor(ok), message=str(message), where=user_location())


@export
def _assert_async(tensor, assert_msg: str | None = None):
    """PyTorch's ``torch._assert_async``: raise unless the one-element ``tensor`` is nonzero,
    eagerly at once and in a captured graph when it runs."""
    tensor = to_tensor(tensor)
    if tensor.numel() != 1:
        raise EmberError(
            "Expected a single-element tensor, got one of shape "
            f"{tuple(tensor.shape)} ({tensor.numel()} elements)",
            op="_assert_async",
        )
    message = assert_msg or "Expected Tensor with single nonzero value, but got zero"
    check(tensor, tensor != 0, message)
