"""``ember.autograd.grad`` with PyTorch's arguments around the engine's `_grad`:
``materialize_grads`` (zeros for the inputs no output reaches), ``is_grads_batched`` (one
backward pass per row of the grad_outputs, the gradients stacked), ``only_inputs`` (ignored, as
PyTorch's). Attached to ``ember.autograd`` by ``ember/__init__.py``."""

from __future__ import annotations

from .autograd import _as_tuple, _grad
from .errors import ArgumentError, AutogradError
from .ops import api as E
from .tensor import Tensor

__all__ = ["grad"]


def grad(
    outputs,
    inputs,
    grad_outputs=None,
    retain_graph=None,
    create_graph=False,
    only_inputs=True,
    allow_unused=None,
    is_grads_batched=False,
    materialize_grads=False,
):
    """Return d(outputs)/d(inputs) without touching any ``.grad``, with PyTorch's arguments.

    With ``create_graph=True`` the returned gradients are themselves differentiable. An input
    no output reaches raises, or with ``allow_unused`` gets None, or with ``materialize_grads``
    zeros. ``is_grads_batched``: each grad_output has a leading batch dimension, and each input's
    gradient gets one (one backward pass per row). ``only_inputs`` is PyTorch's deprecated,
    ignored argument.
    """
    if materialize_grads and allow_unused is False:
        raise ArgumentError(
            "Expected allow_unused to be True or not passed when materialize_grads=True, "
            "but got: allow_unused=False.",
            op="grad",
        )
    allow_unused = bool(allow_unused) or materialize_grads
    inputs = _as_tuple(inputs)
    if is_grads_batched:
        result = _batched_grad(outputs, inputs, grad_outputs, retain_graph, create_graph)
    else:
        result = _grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused)
    if materialize_grads:
        result = tuple(E.zeros_like(t) if g is None else g for t, g in zip(inputs, result))
    return result


def _batched_grad(outputs, inputs, grad_outputs, retain_graph, create_graph) -> tuple:
    """One backward pass per row of the grad_outputs, the gradients stacked (PyTorch vmaps
    over them; an input a row does not reach gets zeros in that row, None if none reaches)."""
    rows = _as_tuple(grad_outputs)
    if not rows or any(not isinstance(r, Tensor) or r.ndim == 0 for r in rows):
        raise AutogradError(
            "is_grads_batched=True needs grad_outputs: tensors with a leading batch dimension",
            op="grad",
        )
    batch = rows[0].shape[0]
    last = retain_graph if retain_graph is not None else create_graph
    per_row = [
        _grad(outputs, inputs, [r[i] for r in rows], i < batch - 1 or last, create_graph, True)
        for i in range(batch)
    ]
    result = []
    for k, t in enumerate(inputs):
        gs = [row[k] for row in per_row]
        if all(g is None for g in gs):
            result.append(None)
        else:
            result.append(E.stack([E.zeros_like(t) if g is None else g for g in gs]))
    return tuple(result)
