"""Copies and cuts: ``copy`` (clone: a new array, gradients flow), ``stop_gradient`` (the
same values, no gradient: a graph's detach) and ``contiguous``."""

from __future__ import annotations

import numpy as np

from ..devices import check_memory_format, preserve_format
from . import _memory_format, _onnx
from ._registry import Cost, OpDef, apply, export, register
from ._rules import Complex
from ._util import memory_cost, same_type
from .promotion import to_tensor

COPY = register(
    OpDef(
        name="copy",
        quantized="all",  # (copies elements: ops/qtensor.py)
        grad_fn="CloneBackward0",
        # (contiguous() copies into row-major order, clone() keeps the source's: the callers
        # choose, not the elementwise default)
        layout=None,
        float8=True,
        complex=Complex.GRADIENT,
        onnx=_onnx.node("Identity"),
        kind="elementwise",
        infer=same_type,
        kernel=lambda x: np.array(x, copy=True, order="C"),  # contiguous() relies on C order
        vjp=lambda c, g: (g,),
        cost=memory_cost,
        save_inputs=(),
        doc="copy(x): a new tensor with the same values (clone).",
        # a graph's values are never written, so a reader may read x itself; simplify keeps
        # the copy where it is returned and x is an input (graph/rewrite.py replace_value)
        noop=lambda x: True,
    )
)


@export(method=True)
def clone(x, *, memory_format=None):
    """A copy of ``x`` that stays in the graph (gradients flow through it), row-major, or in
    ``memory_format``'s order; by default (``preserve_format``) a channels-last ``x`` gives a
    channels-last copy, as PyTorch's (ops/_memory_format.py)."""
    check_memory_format(memory_format, "clone(memory_format)")
    x = to_tensor(x)
    out = apply(COPY, x)
    if memory_format is None or memory_format is preserve_format:
        data = getattr(x, "_data", None)
        if data is None or data.ndim < 4:  # (no channels-last order to keep)
            return out
        memory_format = _memory_format.preserved(data)
    else:
        _memory_format.check_rank(memory_format, x.ndim, "clone")
    return out if memory_format is None else _memory_format.relayout(out, memory_format)


_STOP_GRADIENT = register(
    OpDef(
        name="stop_gradient",
        complex=Complex.GRADIENT,
        onnx=_onnx.node("Identity"),
        kind="elementwise",
        infer=same_type,
        kernel=lambda x: x,
        vjp=lambda c, g: (None,),
        cost=lambda in_types, out_types, attrs: Cost(0, 0),
        save_inputs=(),
        doc="stop_gradient(x): x itself, through which no gradient flows (a graph's detach).",
        aliases=True,  # the memory plan: the output is the input's memory
        stops_gradient=True,
    )
)


@export
def stop_gradient(x):
    """``x``'s values, cut off from differentiation (``detach`` as a graph op, like
    ``jax.lax.stop_gradient``). An eager tensor's ``detach()`` needs no op; a symbolic one uses
    this so that graph autodiff sees the cut."""
    return apply(_STOP_GRADIENT, to_tensor(x))


@export(method=True, toplevel=False)
def contiguous(x):
    """``x`` itself if its eager array is C-contiguous, else a contiguous copy."""
    data = getattr(x, "_data", None)
    return x if data is None or data.flags.c_contiguous else apply(COPY, x)
