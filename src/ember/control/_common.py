"""What the control-flow ops share: their type-rule helpers (operands against a subgraph's
inputs, errors naming shapes and dtypes), the check that a loop body keeps its carries, the
``checkpoint_every`` check, the zero cost rule, and whether a graph is being built.

The forward modules (flow.py, scan.py) and the gradient modules (flow_grad.py, scan_grad.py)
import this one; it imports none of them, so the package's imports run one way: forward
modules import their gradient modules, which import only this one and each other (scan_grad.py
imports flow_grad.py).
"""

from __future__ import annotations

from ..errors import DTypeError, EmberError, ShapeError
from ..graph.builder import GraphBuilder
from ..graph.printer import format_type
from ..graph.tree import describe, flatten
from ..ops._registry import Cost, current_mode
from ..types import TensorType

__all__ = [
    "check_carries",
    "check_checkpoint",
    "check_operands",
    "fmt",
    "mismatch",
    "no_cost",
    "same",
    "tracing",
]


def fmt(t) -> str:
    return format_type(TensorType(tuple(t.shape), t.dtype))


def same(a, b) -> bool:
    return tuple(a.shape) == tuple(b.shape) and a.dtype == b.dtype


def mismatch(op: str, message: str, a, b) -> EmberError:
    cls = ShapeError if tuple(a.shape) != tuple(b.shape) else DTypeError
    return cls(message, op=op)


def check_operands(op: str, operands, graph, role: str) -> None:
    if len(operands) != len(graph.inputs):
        raise EmberError(
            f"the {role} graph takes {len(graph.inputs)} inputs, the node gives {len(operands)}",
            op=op,
        )
    for i, (x, v) in enumerate(zip(operands, graph.inputs)):
        if not same(x, v.type):
            raise mismatch(
                op,
                f"operand {i} is {fmt(x)} but the {role} graph's input %{v.name} is {fmt(v.type)}",
                x,
                v.type,
            )


def no_cost(in_types, out_types, attrs) -> Cost:
    return Cost(0, 0)  # the subgraphs' own nodes carry the cost; a trip count is unknown


def tracing() -> bool:
    return isinstance(current_mode(), GraphBuilder)


def check_carries(new, spec, types, paths, op: str = "while_loop") -> None:
    """The body kept the carries' structure and types (eager loops check every step)."""
    leaves, _, new_spec = flatten(new, "a loop body's result", numbers=True)
    if new_spec != spec:
        raise EmberError(
            f"the body returns {describe(new_spec)} but the carries are {describe(spec)}; a "
            "loop body must return its carries' structure",
            op=op,
        )
    for i, (t, want) in enumerate(zip(leaves, types)):
        if not same(t, want):
            raise mismatch(
                "while_loop",
                f"the body changes carry {i} (carry{paths[i]}) from {fmt(want)} to {fmt(t)}; a "
                "loop body must keep its carries' shapes and dtypes",
                want,
                t,
            )


def check_checkpoint(checkpoint_every, op: str = "while_loop") -> None:
    k = checkpoint_every
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise EmberError(
            f"checkpoint_every must be a positive int (keep every k-th carry for the backward "
            f"pass) or None (keep them all), got {k!r}",
            op=op,
        )
