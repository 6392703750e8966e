"""The activations whose number attributes are a traced ``.item()`` (ops/_item_scalars.py):
the same values and gradients as their one-op forms (activation.py), computed with the item's
graph value as a tensor operand in ``where`` selections, since an op's attribute must be a
number while the graph is built.

Each keeps its op's conventions: the gradient at 0 of leaky_relu, elu and celu is the
negative side's; hardtanh's gradient is 0 at its bounds; threshold, hardshrink and softshrink
keep NaN where their ops do; the branch that could overflow reads a masked input.
"""

from __future__ import annotations

from ..ops import _item_scalars as _items
from ..ops import api as E
from ..ops._registry import TensorBase


def operand(value, x, op: str, field: str):
    """``value`` as an operand next to ``x``: a traced item's 0-d tensor in x's dtype."""
    if _items.is_item(value):
        return _items.scalar(value, x.dtype, op, field)
    return value if isinstance(value, TensorBase) else float(value)


def leaky_relu(x, slope):
    return E.where(x > 0, x, x * operand(slope, x, "leaky_relu", "negative_slope"))


def elu(x, alpha, input_scale=1.0):
    """``x`` where positive, else ``alpha * expm1(x * input_scale)``."""
    positive = x > 0
    below = E.where(positive, 0, x)  # (exp never sees a large positive input)
    return E.where(positive, x, E.expm1(below * input_scale) * alpha)


def softplus(x, beta, threshold):
    beta = operand(beta, x, "softplus", "beta")
    threshold = operand(threshold, x, "softplus", "threshold")
    scaled = x * beta
    linear = scaled > threshold
    return E.where(linear, x, E.log1p(E.exp(E.where(linear, 0, scaled))) / beta)


def hardtanh(x, lo, hi):
    """Clamped into [lo, hi], the gradient 0 at the bounds and beyond (NaN stays NaN)."""
    lo, hi = operand(lo, x, "hardtanh", "min_val"), operand(hi, x, "hardtanh", "max_val")
    inside = (x > lo) & (x < hi)
    return E.where(inside, x, E.clamp(x, lo, hi).detach())


def threshold(x, th, value):
    th = operand(th, x, "threshold", "threshold")
    return E.where(x <= th, operand(value, x, "threshold", "value"), x)


def hardshrink(x, lambd):
    lambd = operand(lambd, x, "hardshrink", "lambd")
    return E.where((x >= -lambd) & (x <= lambd), 0, x)


def softshrink(x, lambd):
    lambd = operand(lambd, x, "softshrink", "lambd")
    shifted = E.where(x > 0, x - lambd, x + lambd)
    return E.where((x >= -lambd) & (x <= lambd), 0, shifted)
