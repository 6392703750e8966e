"""The C graph runner's step of a view op without a rule of its own (``view``: permute,
broadcast_to, basic getitem, ...): the view's elements copied into the node's own array (the
runner's arrays are contiguous; kernels/csteps.py `strided_copy_step`). Which elements, at
which strides, is the op's kernel's answer on a stand-in of its contiguous input: an array of
the input's shape over a one-element buffer (`as_strided`), so only metadata is touched, never
data, as plan/layout.py asks (an op whose kernel may copy, reshape, asks with ``as_view``)."""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

__all__ = ["view_c_step"]


def view_c_step(node):
    """The step of call ``node`` of a ``view`` op with one output, or None (a symbolic size,
    a kernel that would copy, no compiler)."""
    op = node.op
    if node.kind != "call" or not op.view or len(node.outputs) != 1 or len(node.inputs) < 1:
        return None
    x, out = node.inputs[0].type, node.outputs[0].type
    shapes = (tuple(x.shape), tuple(out.shape))
    if x.dtype != out.dtype or not all(isinstance(d, int) for s in shapes for d in s):
        return None
    dtype = x.dtype.np
    strides, step = [], dtype.itemsize
    for d in reversed(shapes[0]):
        strides.append(step)
        step *= max(d, 1)
    buffer = np.zeros(1, dtype)
    stand_in = as_strided(buffer, shapes[0], tuple(reversed(strides)))
    try:
        result = (op.as_view or op.kernel)(stand_in, **node.attrs)
    except Exception:  # (the view cannot be made without a copy)
        return None
    if (
        not isinstance(result, np.ndarray)
        or tuple(result.shape) != shapes[1]
        or result.dtype != dtype
        or not np.may_share_memory(result, stand_in)
    ):
        return None
    from ..kernels import csteps

    offset = result.__array_interface__["data"][0] - buffer.__array_interface__["data"][0]
    return csteps.strided_copy_step(dtype.itemsize, shapes[1], tuple(result.strides), offset)
