"""``autograd_function``: one call of a custom ``autograd.Function`` whose backward is its own.

A graph being built records a Function's forward as ordinary ops with gradients off (graph
autodiff never differentiates them: they are not what the user's backward describes), then
passes its differentiable outputs through this op. Its operands are the Function's
differentiable arguments, the tensors its ``ctx`` saved, then the forward's outputs; its results
are those outputs, unchanged. Its VJP is the Function's ``backward``, called by whoever
differentiates the graph (graph autodiff while the graph is built, or the tape where the node
is replayed eagerly) with the saved tensors rebound to the operands it is given, so the
backward's ops are recorded into the graph as any VJP's are (autograd_function.py makes the
node and its ``backward`` object).

attrs: ``function`` (the Function's class name, for printing), ``outputs`` (how many results),
``backward`` (an object whose ``vjp(context, grads)`` returns one gradient or None per operand).
The last is a Python object, so a graph holding this op has no graph file (graph/serialize.py
refuses it); its ONNX form is the outputs themselves (Identity nodes).
"""

from __future__ import annotations

import numpy as np

from ._registry import Cost, OpDef, register
from ._rules import Complex
from ._util import io_bytes


def _infer(*in_types, function, outputs, backward):
    return tuple(in_types[len(in_types) - outputs :])


def _kernel(*arrays, function, outputs, backward):
    # copies: the results must not share memory with an operand the memory plan may reuse
    return tuple(np.array(a, copy=True) for a in arrays[len(arrays) - outputs :])


def _vjp(c, *grads):
    return c.attrs["backward"].vjp(c, grads)


def _onnx(e):
    return tuple(e.node("Identity", [name]) for name in e.inputs[-e.attrs["outputs"] :])


def _cost(in_types, out_types, attrs) -> Cost:
    return Cost(0, io_bytes(in_types[len(in_types) - len(out_types) :], out_types))


AUTOGRAD_FUNCTION = register(
    OpDef(
        name="autograd_function",
        kind="control",
        infer=_infer,
        kernel=_kernel,
        vjp=_vjp,
        cost=_cost,
        num_outputs=None,
        batch=None,
        onnx=_onnx,
        complex=Complex.GRADIENT,  # (the Function's own ops checked the rule when recorded)
        doc=(
            "autograd_function(*args, *saved, *outputs; function, outputs, backward): a custom "
            "autograd Function's outputs, passed through; its VJP is the Function's backward"
        ),
    )
)
