"""``add_scaled(x, y, alpha)``: ``x + alpha * y`` rounded once, ``alpha`` a 0-d tensor operand
(a graph value: a recorded optimizer step's hyper-parameter, which changes between calls
without a new trace), as ops/add_alpha.py computes it for a number ``alpha`` (its kernel, the
same single rounding, ``alpha`` rounded to the tensors' dtype first). So a captured SGD or Adam
step (optim/_common.py `add_scaled`) rounds as the eager one, PyTorch's ``add(alpha=)``, where
``x + (alpha * y)`` as two ops rounds the product first. ``alpha`` may also hold one value
per element (broadcast as any elementwise operand): the op's C expression, which fuses the
update into the loop writing the parameter in place, reads it so."""

from __future__ import annotations

import numpy as np

from ..types import TensorType
from ._half import elementwise_fast
from ._registry import OpDef, register
from ._util import broadcast_shapes, elementwise_cost, require_float, require_same_dtype
from .add_alpha import _fast as _add_alpha_fast
from .add_alpha import _infer as _add_alpha_infer
from .add_alpha import _kernel as _fused_kernel
from .add_alpha import _reduce_to, numpy_workspace


def _infer(x, y, alpha):
    require_float("add_scaled", alpha)
    # (alpha in the tensors' dtype, as optim/_common.py casts it: the C expression's fma
    # takes one precision)
    require_same_dtype("add_scaled", x, y, alpha)
    result = _add_alpha_infer(x, y, alpha=1.0)
    if tuple(alpha.shape) == ():  # (a recorded optimizer step's hyper-parameter)
        return result
    # (one alpha per element, broadcast as any elementwise operand: the op's C expression
    # reads it so in a loop)
    return TensorType(broadcast_shapes("add_scaled", result.shape, alpha.shape), result.dtype)


def _kernel(x, y, alpha):
    # (a graph's alpha is 0-d; the kernel also takes one per element, as the op's C
    # expression reads it in a loop: tests/ops/test_c_expressions.py)
    return _fused_kernel(x, y, alpha=float(alpha) if np.ndim(alpha) == 0 else alpha)


def _fast(x, y, alpha, out=None):
    """add_alpha's fast rule (kernels/cadd_alpha.py's direct C loop, else its fused loop) with
    the operand's value: one pass, where the NumPy kernel's exact emulation takes about ten."""
    if np.ndim(alpha) == 0:
        return _add_alpha_fast(x, y, alpha=float(alpha), out=out)
    return _loop(x, y, alpha, out=out)


_loop = elementwise_fast("add_scaled", measured_from=1)


_fast.declines_complex = True


def _onnx_add_scaled(e):
    """ONNX has no fused multiply-add: Mul then Add (two roundings, as add_alpha's export)."""
    return e.node("Add", [e.inputs[0], e.node("Mul", [e.inputs[1], e.inputs[2]])])


def _vjp(c, g):
    x, y, alpha = c.inputs
    nx, ny, na = c.needs_input_grad
    return (
        _reduce_to(g, c.in_types[0]) if nx else None,
        _reduce_to(g * alpha, c.in_types[1]) if ny else None,
        _reduce_to(g * y, c.in_types[2]) if na else None,
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
        workspace=numpy_workspace,
        # (add_alpha's builtin with alpha read from its operand: a recorded optimizer step's
        # update fuses into the loop that writes the parameter in place, rounded once)
        c="__builtin_fma{f} ({1}, {2}, {0})",
        onnx=_onnx_add_scaled,
        fast=_fast,
        doc="add_scaled(x, y, alpha): x + alpha * y rounded once, alpha a 0-d tensor (add_alpha "
        "with a run-time alpha)",
    )
)
