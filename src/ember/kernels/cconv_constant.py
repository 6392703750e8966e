"""A graph node's forward convolution whose weight is a frozen graph constant (`frozen_weight`:
an imported ONNX model's, a folded batch norm's): its weight panels are packed at the first
call and kept for the program's life instead of at every call (kernels/cconv.py's steps take
``weight_constant``).

The C graph runner's steps get this from ops/conv.py's and kernels/cconv_epilogue.py's
``c_step`` hooks; generated code gets it from `compile_node` (the conv op's ``compile`` hook)
and from kernels/cconv_epilogue.py's ``build``, both through `ConstantWeightForward`.
"""

from __future__ import annotations

import threading

import numpy as np

from . import cconv
from .conv_plan import Plan, charge, conv_geometry
from .cstep import STEP_CALL, data_address, function_address

__all__ = ["ConstantWeightForward", "compile_node", "for_node", "frozen_array", "frozen_weight"]


def frozen_weight(node) -> bool:
    """Whether a convolution node's weight (its input 1) is a frozen graph constant: a
    read-only array that the graph's own passes or an import made (graph/ir.py
    ``add_constant(frozen=True)``), so panels packed from it stay valid. Another constant may
    be memory its caller still writes, and is packed at every call."""
    return frozen_array(node) is not None


def frozen_array(node, i: int = 1) -> np.ndarray | None:
    """The array of the node's input ``i`` where it is a frozen graph constant (see
    `frozen_weight`), else None."""
    producer = node.inputs[i].node
    if producer.kind != "constant":
        return None
    array = producer.graph.constants.get(producer.name)
    frozen = isinstance(array, np.ndarray) and not array.flags.writeable
    return array if frozen else None


def for_node(node, conv_attrs: dict, relu):
    """A `ConstantWeightForward` for ``node`` (a ``conv``, or a ``fused_epilogue`` of one:
    inputs x and w first; the convolution's attributes ``conv_attrs``) where its weight is a
    frozen constant and it is a 2-d, one-group convolution of static shapes in one float
    dtype the C kernels run, else None."""
    x, w = (v.type for v in node.inputs[:2])
    if (
        not frozen_weight(node)
        or conv_attrs["groups"] != 1
        or len(x.shape) != 4
        or not all(isinstance(d, int) for d in (*x.shape, *w.shape))
        or x.dtype != w.dtype
        or not cconv.available(x.dtype.np)
    ):
        return None
    p = conv_geometry(conv_attrs, x.shape[2:], w.shape)
    return ConstantWeightForward(x.shape, w.shape, p, x.dtype.np, relu)


class ConstantWeightForward:
    """The forward convolution of one graph node whose weight is a graph constant, for
    generated code (ops/conv.py's and kernels/cconv_epilogue.py's ``compile`` hooks): a step
    of its own, whose weight panels are packed at the first call and kept, as the C runner's
    steps of such nodes do. ``fn(x, w, bias, mask, out)`` returns the result, or None where it
    does not apply (then the caller runs `conv_forward`): another geometry, no compiler, or
    the step busy on another thread."""

    def __init__(self, x_shape: tuple, w_shape: tuple, p: Plan, dtype, relu):
        x_shape, w_shape = tuple(x_shape), tuple(w_shape)
        self._shapes = (x_shape, w_shape)
        self._out_shape = (x_shape[0], w_shape[0]) + tuple(p.out_size)
        self._dtype = np.dtype(dtype)
        made = cconv.forward_step(x_shape, w_shape, p, dtype, relu, weight_constant=True)
        self._lock = threading.Lock()
        self._call = self._args = None
        self.held_bytes = 0
        if made is not None:
            step, self._args, self._keep = made
            self._call = STEP_CALL(function_address(step))
            self._residual = cconv.residual_slot(made, dtype)
            self.held_bytes = sum(a.nbytes for a in self._keep if isinstance(a, np.ndarray))

    def __call__(self, x, w, bias=None, mask=None, out=None, residual=None):
        if (
            self._call is None
            or (x.shape, w.shape) != self._shapes
            or x.dtype != self._dtype
            or w.dtype != self._dtype
            or (residual is not None and residual.shape != self._out_shape)
            or (residual is not None and residual.dtype != self._dtype)
            or not self._lock.acquire(blocking=False)
        ):
            return None
        try:
            if out is None or not out.flags.c_contiguous or out.dtype != self._dtype:
                out = np.empty(self._out_shape, self._dtype)
            x, w = np.ascontiguousarray(x), np.ascontiguousarray(w)
            bias = None if bias is None else np.ascontiguousarray(bias, self._dtype)
            args = self._args
            args[0], args[1], args[3] = data_address(x), data_address(w), data_address(out)
            args[2] = 0 if bias is None else data_address(bias)
            args[4] = 0 if mask is None else data_address(mask)
            if residual is not None:
                residual = np.ascontiguousarray(residual)
                # (a residual sharing the result's buffer is read before each tile's store)
            args[self._residual] = 0 if residual is None else data_address(residual)
            self._call(data_address(args))
            charge(("cconv node step", id(self)), self.held_bytes, _held_by_node)
            return out
        finally:
            self._lock.release()


def _held_by_node(charged: tuple) -> bool:
    return True  # (a node's step lives as long as its program)


def compile_node(node, run):
    """``(x, w[, bias], out=None) -> y`` for a 2-d, one-group ``conv`` node whose weight is a
    graph constant, else None; ``run(x, w[, bias], **attrs)`` computes what it declines."""
    attrs = node.attrs
    forward = for_node(node, attrs, relu=False)
    if forward is None or node.outputs[0].dtype != node.inputs[0].type.dtype:
        return None

    def call(x, w, *bias, out=None):
        target = None if out is None else out[0]
        # (an unpadded step reads x where it is: never into x's own buffer)
        into = None if target is None or np.may_share_memory(target, x) else target
        y = forward(x, w, *bias, out=into)
        if y is None:
            y = run(x, w, *bias, **attrs)
        if target is not None and y is not target:
            np.copyto(target, y)
            y = target
        return y

    return call
