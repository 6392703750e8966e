"""``add_scaled(x, y, alpha)``: ``x + alpha * y`` rounded once, ``alpha`` a 0-d tensor operand
(a graph value: a recorded optimizer step's hyper-parameter, which changes between calls
without a new trace), as ops/add_alpha.py computes it for a number ``alpha`` (its kernel, the
same single rounding, ``alpha`` rounded to the tensors' dtype first). So a captured SGD or Adam
step (optim/_common.py `add_scaled`) rounds as the eager one, PyTorch's ``add(alpha=)``, where
``x + (alpha * y)`` as two ops rounds the product first."""

from __future__ import annotations

from ..errors import ShapeError
from . import api as E
from ._registry import OpDef, register
from ._util import elementwise_cost, require_float, require_same_dtype
from .add_alpha import _fast as _add_alpha_fast
from .add_alpha import _infer as _add_alpha_infer
from .add_alpha import _kernel as _fused_kernel
from .add_alpha import _reduce_to


def _infer(x, y, alpha):
    require_float("add_scaled", alpha)
    if tuple(alpha.shape) != ():
        raise ShapeError(
            f"alpha must be a 0-d tensor, got shape {tuple(alpha.shape)}", op="add_scaled"
        )
    require_same_dtype("add_scaled", x, y)
    return _add_alpha_infer(x, y, alpha=1.0)


def _kernel(x, y, alpha):
    return _fused_kernel(x, y, alpha=float(alpha))


def _fast(x, y, alpha, out=None):
    """add_alpha's fast rule (kernels/cadd_alpha.py's direct C loop, else its fused loop) with
    the operand's value: one pass, where the NumPy kernel's exact emulation takes about ten."""
    return _add_alpha_fast(x, y, alpha=float(alpha), out=out)


_fast.declines_complex = True


def _vjp(c, g):
    x, y, alpha = c.inputs
    nx, ny, na = c.needs_input_grad
    a = E.cast(alpha, g.dtype) if alpha.dtype is not g.dtype else alpha
    return (
        _reduce_to(g, c.in_types[0]) if nx else None,
        _reduce_to(g * a, c.in_types[1]) if ny else None,
        E.cast(E.sum(g * y), alpha.dtype) if na else None,
    )


ADD_SCALED = register(
    OpDef(
        name="add_scaled",
        kind="elementwise",
        infer=_infer,
        cached_infer=True,
        kernel=_kernel,
        vjp=_vjp,
        cost=elementwise_cost(2),
        save_inputs=(1, 2),
        fast=_fast,
        doc="add_scaled(x, y, alpha): x + alpha * y rounded once, alpha a 0-d tensor (add_alpha "
        "with a run-time alpha)",
    )
)
