"""A traced ``.item()`` (graph/traced_item.py) given as an op's number attribute: a Python
scalar argument that is not a tensor operand (add's ``alpha``, addcmul's ``value``, lerp's
``weight``, F.pad's ``value``, leaky_relu's ``negative_slope``, ...).

While a graph is built the item has no number, so an attribute the op bakes into its node
cannot take it. Where the op's math allows, the public function computes the same result with
the item's graph value as a tensor operand instead (`scalar`); where it does not (a norm's
order, a size), `refuse` raises a `TraceError` naming the op and the argument at the user's
line, saying what to pass instead.
"""

from __future__ import annotations

from ..errors import DTypeError, TraceError
from ._registry import is_traced

__all__ = ["is_item", "refuse", "scalar"]


def is_item(value) -> bool:
    """Whether ``value`` is a traced ``.item()``."""
    return is_traced(value)


def scalar(value, dtype, op: str, field: str, *, truncate: bool = False):
    """The traced item ``value`` as a 0-d tensor of ``dtype`` (no gradient), by PyTorch's rule
    for a Python scalar attribute: a complex number only for a complex result, a float one not
    for an integer result unless the op truncates it (``truncate``: addcmul's value)."""
    kind = value.kind  # (0 bool, 1 int, 2 float, 3 complex: the number's Python type)
    if kind == 3 and not dtype.is_complex:
        raise DTypeError(f"a complex {field} for a {dtype} result", op=op)
    if kind == 2 and not truncate and not (dtype.is_floating_point or dtype.is_complex):
        raise DTypeError(f"for {dtype} tensors, {field} must not be a floating point number", op=op)
    return value.tensor_for(dtype)


def refuse(value, op: str, field: str, what: str = "a Python number") -> None:
    """Raise where ``value`` is a traced item given for an attribute whose number the op needs
    while the graph is built."""
    if is_traced(value):
        raise TraceError(
            f"its {field} is the .item() of a traced tensor (from {value.location}), "
            f"whose number a graph does not have while it is built, and {op} needs {what} "
            f"there; pass a Python number computed outside the traced function, or compute "
            f"the result from the tensor itself",
            op=op,
        )


def any_item(*values) -> bool:
    return any(is_traced(v) for v in values)


def add_scaled(op: str, input, product, beta, alpha, dtype):
    """``beta * input + alpha * product`` (addmm, addbmm, baddbmm, addmv, addr) where beta or
    alpha is a traced item: multiplied by its tensor; the input ignored where beta is 0, its
    NaN and infinities too, by a selection (the item's number is not known)."""
    from . import api as E

    if is_traced(alpha):
        product = product * scalar(alpha, dtype, op, "alpha")
    elif alpha != 1:
        product = product * alpha
    if not is_traced(beta):
        return E.zeros_like(input) + product if beta == 0 else product + input * beta
    beta = scalar(beta, dtype, op, "beta")
    return product + E.where(beta == 0, 0, input * beta)


def number(value):
    """``float(value)``, or a traced item itself, which tensor arithmetic takes as the weak
    scalar its Python number would be (a loss's margin, an eps added to a tensor)."""
    return value if is_traced(value) else float(value)
