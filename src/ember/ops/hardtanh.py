"""hardtanh (and so relu6, ReLU6 of the MobileNets) as one op each way, eagerly and in graphs.

Eagerly, ``F.hardtanh`` built of ``where`` and comparisons runs four NumPy passes forward and as
many backward, each with its own temporaries; these ops run one (``np.clip``) forward and one
masked pass backward. In a graph both ops have C expressions (the bounds are attributes,
written into the loop as constants), so they fuse into C loops with their neighbours.

The gradient is PyTorch's ``hardtanh_backward``: the incoming gradient strictly inside the
bounds, zero at and beyond them and for a NaN input, read off the result (strictly inside the
bounds exactly where the input is), which the next layer keeps anyway: no mask is saved.
"""

from __future__ import annotations

import numpy as np

from ..errors import EmberError
from ..types import TensorType
from ._registry import OpDef, apply, register
from ._rules import Clamp
from ._select import select_bits
from ._util import elementwise_cost, numel, require_float, same_type, zero_input_grad

try:  # NumPy's clip ufunc itself: np.clip reaches it through two Python layers, which cost an
    # eager ReLU6 at MobileNet's sizes a third of its time (for floats they add nothing)
    from numpy._core.umath import clip as _clip
except ImportError:  # (NumPy 1.x)
    from numpy.core.umath import clip as _clip


def _check_bounds(op: str, lo, hi) -> None:
    # the bounds become C constants in fused loops (a graph file's attributes included)
    for name, value in (("lo", lo), ("hi", hi)):
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value != value:
            raise EmberError(f"bound {name} must be a real number, got {value!r}", op=op)


def _infer(x, *, lo, hi):
    require_float("hardtanh", x)
    _check_bounds("hardtanh", lo, hi)
    return same_type(x)


def _kernel(x, *, lo, hi):
    return _clip(x, lo, hi).astype(x.dtype, copy=False)


def _vjp(c, g):
    # the result decides as well as the input: lo < y < hi exactly where lo < x < hi (y is x
    # there, a bound elsewhere; NaN stays NaN), and the result is what the next layer saves
    return (apply(HARDTANH_BACKWARD, g, c.outputs[0], **c.attrs),)


def _grad_infer(g, x, *, lo, hi):
    require_float("hardtanh_backward", g, x)
    _check_bounds("hardtanh_backward", lo, hi)
    if tuple(g.shape) != tuple(x.shape) or g.dtype != x.dtype:
        from ..errors import ShapeError

        raise ShapeError(f"the gradient {g} must have the input's type {x}", op="hardtanh_backward")
    return TensorType(tuple(x.shape), x.dtype)


def _grad_kernel(g, x, *, lo, hi):
    inside = np.asarray(x > lo)
    inside &= x < hi
    # g where inside, +0.0 elsewhere (NaNs inside stay): the mask applied to g's bits by one
    # multiply (ops/_select.py), where np.where on a random mask runs several times slower
    return select_bits(inside, g, np.zeros((), g.dtype))


def _grad_workspace(node, layouts) -> int:
    """`_grad_kernel`'s temporaries beyond its result: the bool mask and the comparison
    ANDed into it (the widened mask is the result's own buffer)."""
    return 2 * numel(node.inputs[1].shape)


_grad_workspace.types_only = True  # (reads only the node's types: fused programs count it too)


def _grad_vjp(c, a):
    # linear in the gradient (the same mask); piecewise constant in x: zeros, as PyTorch's
    return apply(HARDTANH_BACKWARD, a, c.inputs[1], **c.attrs), zero_input_grad(c, 1)


def _onnx_hardtanh_backward(e):
    g, x = e.inputs
    dtype = e.in_types[1].dtype
    lo, hi = (e.scalar(e.attrs[k], dtype) for k in ("lo", "hi"))
    inside = e.node("And", [e.node("Greater", [x, lo]), e.node("Less", [x, hi])])
    return e.node("Where", [inside, g, e.scalar(0, e.in_types[0].dtype)])


HARDTANH_BACKWARD = register(
    OpDef(
        name="hardtanh_backward",
        onnx=_onnx_hardtanh_backward,
        kind="elementwise",
        infer=_grad_infer,
        cached_infer=True,
        kernel=_grad_kernel,
        vjp=_grad_vjp,
        workspace=_grad_workspace,
        cost=elementwise_cost(3),
        # NaN x compares false: a zero gradient, as the kernel's
        c="(({1} > {lo} && {1} < {hi}) ? {0} : ({T})0)",
        doc="hardtanh_backward(g, x; lo, hi): g where lo < x < hi, else 0 (NaN x: 0)",
    )
)


def _clamp_rule(attrs, constants):
    # the expression's order (lo tested first) is a clamp's only where lo <= hi; ties keep x
    lo, hi = float(attrs["lo"]), float(attrs["hi"])
    return Clamp(lo, hi) if lo <= hi else None


def _onnx_hardtanh(e):
    dtype = e.in_types[0].dtype
    bounds = [e.scalar(e.attrs[k], dtype) for k in ("lo", "hi")]
    return e.node("Clip", [e.inputs[0], *bounds])


HARDTANH = register(
    OpDef(
        name="hardtanh",
        onnx=_onnx_hardtanh,
        kind="elementwise",
        infer=_infer,
        cached_infer=True,
        kernel=_kernel,
        vjp=_vjp,
        save_inputs=(),
        save_outputs=(0,),
        cost=elementwise_cost(2),
        # NaN stays NaN (both comparisons false), as np.clip's
        c="({0} < {lo} ? {lo} : ({0} > {hi} ? {hi} : {0}))",
        clamp=_clamp_rule,
        doc="hardtanh(x; lo, hi): x clamped into [lo, hi] (gradient zero at the bounds)",
    )
)
