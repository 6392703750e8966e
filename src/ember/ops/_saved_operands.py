"""The operands PyTorch's backward node of a composite saves, checked for in-place changes.

A composite public function (addcmul, addcdiv, lerp, clamp with tensor bounds) records its
gradient through the nodes of the ops it is written in, which save intermediates: ``a * v * b``
saves ``a * v``, a 16-bit call its float32 casts. PyTorch's one node (AddcmulBackward0) saves
the user's operands themselves, so an in-place change of one of them before backward, the
call's own destination included (``v.addcmul_(v, b, value=2)``), is refused there with "one of
the variables needed for gradient computation has been modified by an inplace operation".
`saves` records those operands, with their versions, on the result's node; the tape's node
(autograd_node.py) checks them when backward reaches it, as it checks what its VJP saved.

Which operands PyTorch saves depends on which gradients the call needs (its autograd codegen
saves an operand only for the formulas that read it): each composite says so with `needs`.
"""

from __future__ import annotations

from . import _node_names
from ._registry import TensorBase, current_mode, is_grad_enabled


def needs(*operands) -> bool:
    """Whether a gradient is wanted for any of ``operands`` (PyTorch saves what the wanted
    gradients' formulas read)."""
    return is_grad_enabled() and any(
        isinstance(t, TensorBase) and t.requires_grad for t in operands
    )


def saves(result, *operands):
    """Record ``operands`` (tensors; None and numbers skipped) at their current versions on
    ``result``'s node, to be checked when backward runs it; returns ``result``. A result
    without a tape node (no gradient, or a symbolic tensor) is left alone."""
    fn = getattr(result, "grad_fn", None)
    base = _node_names.NODE_BASE
    if fn is None or base is None or not isinstance(fn, base):
        return result
    kept = [(t, t._vc[0]) for t in operands if isinstance(t, TensorBase) and hasattr(t, "_vc")]
    if kept:
        fn._witnesses = (fn._witnesses or ()) + tuple(kept)
    return result


def refuses_backward(result, message: str):
    """Make backward through ``result``'s node raise ``message`` (a RuntimeError) when it
    reaches it, as PyTorch's NotImplemented node of a call it has no derivative formula for
    (``remainder(3.0, x)``); returns ``result``. A captured call's result (no tape node) is
    marked by the graph builder, whose graph autodiff records the refusal as a check that
    raises when the backward graph runs (graph/builder.py `refuse_gradient`)."""
    fn = getattr(result, "grad_fn", None)
    base = _node_names.NODE_BASE
    if fn is not None and base is not None and isinstance(fn, base):
        fn._witnesses = (fn._witnesses or ()) + ((None, message),)
    elif is_grad_enabled():
        refuse = getattr(current_mode(), "refuse_gradient", None)
        if refuse is not None:
            refuse(result, message)
    return result
