"""Which values share memory: the strides a NumPy kernel gives each value, and which outputs
are views of an input rather than new arrays.

The memory plan must know what the executor really allocates. A ``reshape`` of a contiguous
array is free, of a transposed one a copy; ``permute``, ``broadcast_to``, basic ``getitem`` and
``split`` are views; ``stop_gradient`` returns its input itself. `Layouts` follows the strides
through the graph (in elements): results of other ops are new C-contiguous arrays, except that
a single NumPy ufunc keeps the memory order of a full-shape operand that is laid out otherwise
(NumPy's ``order='K'``). A view op runs on a stand-in array with the real strides over a
one-element buffer (``as_strided``): only metadata is touched, never data; ``reshape`` asks
NumPy with ``copy=False`` whether it can avoid the copy.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

__all__ = ["Layouts", "c_strides", "nbytes"]


def nbytes(value) -> int:
    """Bytes of a value's array (a symbolic size counts as 1: plan with concrete shapes)."""
    shape = value.type.shape
    n = value.type.dtype.itemsize
    for d in shape:
        if isinstance(d, int):
            n *= d
    return n


_C_STRIDES: dict = {}  # shape -> its C-contiguous strides (planning asks per value, often)


def c_strides(shape) -> tuple:
    try:
        return _C_STRIDES[shape]
    except (KeyError, TypeError):  # (a list, or a shape not seen yet)
        pass
    if not all(isinstance(d, (int, np.integer)) for d in shape):
        # (a symbolic size: no numeric strides; such a value counts as C-contiguous, the
        # layout of every array the runtime makes for it; a lone op's loop copies others)
        return None
    strides, step, concrete = [], 1, True
    for d in reversed(shape):
        strides.append(step)
        step *= max(int(d), 1)
        concrete = concrete and type(d) is int
    strides = tuple(reversed(strides))
    if concrete and type(shape) is tuple and len(_C_STRIDES) < 65536:
        _C_STRIDES[shape] = strides
    return strides


def _concrete(shape) -> bool:
    return all(isinstance(d, int) for d in shape)


class Layouts:
    """Strides (in elements) of every value of a graph, and which call outputs alias an input.

    ``alias[id(value)]`` is the input value whose memory an output shares (views and
    identities: views, ``split``, ``stop_gradient``), absent for new arrays."""

    def __init__(self, graph, order=None):
        self.strides: dict[int, tuple] = {}
        self.alias: dict = {}
        for node in order or graph.nodes:
            if node.kind != "call":
                for v in node.outputs:
                    self.strides[id(v)] = c_strides(v.type.shape)
                continue
            self._call(node)

    def strides_of(self, value) -> tuple:
        """``value``'s strides in elements (C-contiguous where none were recorded)."""
        return self.strides.get(id(value)) or c_strides(value.type.shape)

    def contiguous(self, value) -> bool:
        shape = value.type.shape
        c = c_strides(shape)
        strides = self.strides.get(id(value), c)
        return strides == c or all(s == k or d == 1 for s, k, d in zip(strides, c, shape))

    def _call(self, node) -> None:
        op = node.op
        # ``extra["aliases"]``: a kernel returning views of input 0 or input 0 itself (split,
        # stop_gradient) without being a view op for autograd's version counters
        views = op.view or op.aliases
        if views and _concrete(node.inputs[0].type.shape):
            results = self._view(node)
            if results is not None:
                for v, r in zip(node.outputs, results):
                    self.strides[id(v)] = tuple(s // r.itemsize for s in r.strides)
                    self.alias[id(v)] = node.inputs[0]
                return
        for v in node.outputs:
            self.strides[id(v)] = self._new_strides(node, v)

    def _view(self, node):
        """The kernel's results on a stand-in of input 0, or None when it would copy."""
        source = node.inputs[0]
        dtype = source.type.dtype.np
        item = np.dtype(dtype).itemsize
        strides = self.strides[id(source)]
        stand_in = as_strided(
            np.zeros(1, dtype), tuple(source.type.shape), tuple(s * item for s in strides)
        )
        try:
            # (an op whose kernel may copy declares how to ask for a view only: the stand-in's
            # memory must never be read)
            result = (node.op.as_view or node.op.kernel)(stand_in, **node.attrs)
        except Exception:
            return None
        results = result if isinstance(result, tuple) else (result,)
        if not all(isinstance(r, np.ndarray) and np.shares_memory(r, stand_in) for r in results):
            return None
        return results

    def _new_strides(self, node, value) -> tuple:
        shape = value.type.shape
        ordered = isinstance(node.op.kernel, np.ufunc) or node.op.keeps_order
        if ordered and _concrete(shape):
            # order='K': the memory order of the first full-shape operand
            for v in node.inputs:
                if tuple(v.type.shape) == tuple(shape) and not self.contiguous(v):
                    order = sorted(range(len(shape)), key=lambda a: -self.strides[id(v)][a])
                    strides, step = [0] * len(shape), 1
                    for a in reversed(order):
                        strides[a] = step
                        step *= max(int(shape[a]), 1)
                    return tuple(strides)
                if tuple(v.type.shape) == tuple(shape):
                    break
        return c_strides(shape)
