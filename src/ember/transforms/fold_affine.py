"""Folding a constant per-channel affine into the weights of the call that produces its input:
an inference graph's batch normalization after a convolution (``conv -> batch_norm_eval`` with
frozen statistics and parameters) becomes the convolution with its weight rows scaled and a
per-channel bias added (which the epilogue pass then stores with the convolution).

Which calls qualify comes from two rules (ops/_rules.py): ``channel_affine`` (the reader: ``x *
scale[c] + shift[c]`` along dimension 1, given its constant operands) and ``channel_weight``
(the producer: the operand whose row ``c`` output channel ``c`` is linear in). The producer's
weight must be a constant and its result read by the affine alone, and it must have no bias
operand of its own (``channel_fold``'s ``bias``: a half-precision convolution's, which scaling
the weight would leave unscaled; transforms/fold_affine_inputs.py folds those). The new weight
is computed in float64 and rounded once to the weight's dtype, so results equal the unfolded
graph's within rounding (the product is rounded once instead of twice). The shift is added
after the call (the epilogue pass stores it with the convolution), or, where the producer's
rule offers a bias operand the call gains and its epilogue rule would not take the add (a
float32/float64 depthwise convolution, whose own kernel adds a bias), passed as that operand."""

from __future__ import annotations

import numpy as np

from ..graph.ir import Graph
from ..graph.rewrite import Pass, constant_value
from ..ops.binary import ADD

__all__ = ["FOLD_AFFINE", "fold_channel_affines"]


def _fold_one(graph: Graph, node) -> bool:
    rule = node.op.channel_affine
    if rule is None or len(node.outputs) != 1:
        return False
    arrays = [constant_value(v) for v in node.inputs]
    found = rule(arrays, node.attrs)
    if found is None:
        return False
    operand, scale, shift = found
    x = node.inputs[operand]
    producer = x.node
    if producer.kind != "call" or producer.op.channel_weight is None or len(producer.outputs) != 1:
        return False
    if len(x.users) != 1 or any(v is x for v in graph.outputs):
        return False  # the unscaled result is read elsewhere too
    slot = producer.op.channel_weight(producer.attrs)
    if slot is None or _has_bias(producer):
        return False
    gains = _gains_bias(producer)
    weight = constant_value(producer.inputs[slot])
    out = node.outputs[0]
    if weight is None or weight.shape[:1] != scale.shape or x.type != out.type:
        return False
    scaled = weight.astype(np.float64) * scale.reshape((-1,) + (1,) * (weight.ndim - 1))
    shape = (-1,) if gains else (1, -1) + (1,) * (len(out.shape) - 2)
    bias = shift.reshape(shape).astype(out.dtype.np)
    with graph.inserting_before(node):
        w = graph.add_constant(scaled.astype(weight.dtype), name="folded_weight", frozen=True)
        inputs = list(producer.inputs)
        inputs[slot] = w
        b = graph.add_constant(bias, name="folded_bias", frozen=True)
        if gains:  # (the call's own bias operand: a depthwise convolution's kernel adds it)
            result = graph.add_call(producer.op, [*inputs, b], dict(producer.attrs))
        else:
            call = graph.add_call(producer.op, inputs, dict(producer.attrs))
            result = graph.add_call(ADD, [call.outputs[0], b])
    graph.replace_all_uses(out, result.outputs[0])
    graph.erase_node(node)
    graph.erase_node(producer)
    return True


def _has_bias(producer) -> bool:
    """Whether the producer adds a per-channel bias operand of its own (a half-precision
    convolution's), which scaling its weight would leave unscaled."""
    rule = producer.op.channel_fold
    if rule is None:
        return False
    weights = rule([v.type for v in producer.inputs], producer.attrs)
    return weights is not None and weights.bias is not None and weights.bias < len(producer.inputs)


def _gains_bias(producer) -> bool:
    """Whether the shift goes into a bias operand the call gains rather than an add after
    it: where the producer's rule offers one (a depthwise convolution, a linear layer) and
    its epilogue rule would not take the add or would rather have the operand (a depthwise
    convolution's own kernel adds the bias, fused or not; a linear layer's add stays for the
    epilogue pass, as its product's kernel with a bias operand is another one)."""
    rule = producer.op.channel_fold
    if rule is None:
        return False
    weights = rule([v.type for v in producer.inputs], producer.attrs)
    if weights is None or weights.bias != len(producer.inputs):
        return False
    epilogue = producer.op.epilogue
    if epilogue is None or not epilogue.accepts(producer):
        return True
    return epilogue.bias_operand is not None and epilogue.bias_operand(producer)


def fold_channel_affines(graph: Graph) -> tuple[Graph, bool]:
    changed = False
    present = {id(n) for n in graph.nodes}  # (a fold erases nodes listed here: asked anew)
    for node in list(graph.nodes):
        if node.graph is graph and id(node) in present and node.kind == "call":
            if _fold_one(graph, node):
                changed = True
                present = {id(n) for n in graph.nodes}
    return graph, changed


FOLD_AFFINE = Pass(
    "fold_affine",
    fold_channel_affines,
    level=2,
    doc="constant per-channel affines (inference batch norm) into the producer's weights",
    rounds=True,
)
