"""A 1-d convolution as the 2-d one of height 1 (the C graph runner's steps of ``conv`` and of
its ``fused_epilogue``): the same windows over the same contiguous memory, x (N, C, L) read as
(N, C, 1, L) and w (O, C/g, K) as (O, C/g, 1, K), so the 2-d kernels' steps (kernels/cconv.py,
kernels/cdepthwise.py) run it on the node's own arrays."""

from __future__ import annotations

from ..types import TensorType

__all__ = ["lifted", "lifted_node"]


def lifted(x_shape: tuple, w_shape: tuple, attrs: dict) -> tuple:
    """(x shape, w shape, attributes) of the 2-d convolution that computes a 1-d one; a 2-d
    convolution as given."""
    if len(x_shape) != 3:
        return tuple(x_shape), tuple(w_shape), attrs
    x_shape = (*x_shape[:2], 1, x_shape[2])
    w_shape = (*w_shape[:2], 1, w_shape[2])
    attrs = dict(attrs)
    attrs["stride"] = (1, *attrs["stride"])
    attrs["dilation"] = (1, *attrs["dilation"])
    attrs["padding"] = ((0, 0), *attrs["padding"])
    return x_shape, w_shape, attrs


class _LiftedValue:
    """A graph value seen with its 2-d type (the node that makes it unchanged)."""

    __slots__ = ("node", "type")

    def __init__(self, value, shape: tuple):
        self.node, self.type = value.node, TensorType(shape, value.type.dtype)


class _LiftedNode:
    """A 1-d convolution's ``fused_epilogue`` node as the 2-d one a step builder reads: its x
    and w typed (N, C, 1, L) and (O, C/g, 1, K), its convolution's attributes lifted; every
    other input, output and attribute the node's own."""

    def __init__(self, node, x_shape: tuple, w_shape: tuple, producer_attrs: dict):
        self._node = node
        x, w, *rest = node.inputs
        self.inputs = [_LiftedValue(x, x_shape), _LiftedValue(w, w_shape), *rest]
        self.attrs = {**node.attrs, "producer_attrs": tuple(sorted(producer_attrs.items()))}

    def __getattr__(self, name):
        return getattr(self._node, name)


def lifted_node(node, producer_attrs: dict):
    """(node, producer attributes) of a ``fused_epilogue`` node of a convolution as the 2-d
    one's, for kernels/cconv_epilogue.py's step builders; a 2-d one as given."""
    x, w = (v.type for v in node.inputs[:2])
    if len(x.shape) != 3:
        return node, producer_attrs
    x_shape, w_shape, attrs = lifted(tuple(x.shape), tuple(w.shape), producer_attrs)
    return _LiftedNode(node, x_shape, w_shape, attrs), attrs
