"""The axis a C kernel steps along, checked before any extent is derived from it.

A kernel that sees its input as (outer, n, inner) around ``axis`` takes ``prod(shape[:axis])``
and ``prod(shape[axis + 1:])`` as the extents its loop writes: a negative axis (-1 gives an
inner extent of the whole array) or one past the dimensions makes them wrong and the loop
writes outside its output. The ops' public functions pass normalized axes, but a graph file
(graph/load.py) holds whatever axis its author wrote, so each such kernel asks `kernel_axis`
first and declines (its caller runs NumPy, which names the bad axis) what is no axis.
"""

from __future__ import annotations

import operator

__all__ = ["kernel_axis"]


def kernel_axis(axis, ndim: int) -> int | None:
    """``axis`` of an ``ndim``-dimensional array as a non-negative axis, or None where it is
    no whole number in ``[-ndim, ndim)``."""
    try:
        axis = operator.index(axis)
    except TypeError:
        return None
    if not -ndim <= axis < ndim:
        return None
    return axis % ndim
