"""Folding a per-channel affine whose parameters are graph inputs into the weights of the call
that produces its input: ``conv -> batch_norm_eval`` where the statistics and the affine
parameters are inputs of the graph (``ember.function(model.eval())`` passes a module's
parameters and buffers as inputs, so they may change between calls) becomes one
``batch_norm_fold`` node, which scales the weight's rows by ``s = gamma / sqrt(var + eps)`` and
makes the shift ``b * s + beta - mean * s``, then the convolution with that weight and the shift
added after it (which the epilogue or fusion pass then stores with the convolution, before the
activation). The fold runs on every call, so changed buffers change the result.

Which calls qualify comes from two rules (ops/_rules.py): ``channel_terms`` (a reader ``x *
scale[c] + shift[c]`` whatever its operands hold, and how it folds into a weight: batch_norm_eval,
and an add of a per-channel vector, so ``conv -> add bias -> batch_norm_eval`` folds too) and
``channel_fold`` (the producer's `ChannelWeights`: which operand is the weight, how output
channels read it, where the shift goes: conv, the transposed convolution, linear).
transforms/fold_affine.py, earlier in the pipeline, folds affines whose operands are constants.

When it pays: the fold replaces the affine's pass over the result (a read and a write of each
element) by one over the weight, so it applies where the weight has no more elements than the
result (at batch 1 the late layers of a ResNet keep their batch norm: their weights are larger
than their outputs). Only where no gradient needs the unfolded values: every value the chain
passes through must be read by the next call of the chain alone and not returned, so a graph
whose backward reads the convolution's output (a gradient with respect to the statistics or the
affine parameters, or the training step of a network in eval mode) keeps its batch norm;
training-mode batch norm is another op with no rule. The rounding differs from the unfolded
graph's: the weights are scaled before the sums instead of the sums after them, so results
agree within a few ulps times the square root of the reduction length, relative to ``|w s|
|x|`` summed (tests/transforms/test_fold_affine_inputs.py).
"""

from __future__ import annotations

import math

from ..errors import EmberError
from ..graph.ir import Graph
from ..graph.rewrite import Pass
from ..graph.subgraph import trace_subgraph
from ..ops import api as E
from ..ops.binary import ADD

__all__ = ["FOLD_AFFINE_INPUTS", "fold_affine_inputs"]

MAX_CHAIN = 4  # affines between the producer and the outermost one (bias add, batch norm)


def _types(node) -> list:
    return [v.type for v in node.inputs]


def _elements(shape) -> int:
    """Elements of ``shape``, a symbolic size counted as 1 (the smallest it may be)."""
    return math.prod(d if isinstance(d, int) else 1 for d in shape)


def _read_once(graph: Graph, value, reader) -> bool:
    """``value`` is read by ``reader`` alone, once, and is not a graph output."""
    if any(v is value for v in graph.outputs) or len(value.users) != 1:
        return False
    return value.users[0] is reader and sum(v is value for v in reader.inputs) == 1


def _find(graph: Graph, root):
    """(producer, its `ChannelWeights`, [(node, operand, fold)] innermost first) for the chain
    that ends in ``root``, or None."""
    chain, node = [], root
    while len(chain) <= MAX_CHAIN:
        rule = node.op.channel_terms
        found = None if rule is None or len(node.outputs) != 1 else rule(_types(node), node.attrs)
        if found is None:
            return None
        operand, fold = found
        chain.append((node, operand, fold))
        x = node.inputs[operand]
        producer = x.node
        if producer.kind != "call" or len(producer.outputs) != 1:
            return None
        if not _read_once(graph, x, node) or x.type != node.outputs[0].type:
            return None
        fold_rule = producer.op.channel_fold
        weights = None if fold_rule is None else fold_rule(_types(producer), producer.attrs)
        if weights is not None:
            return producer, weights, chain[::-1]
        node = producer
    return None


def _fold_one(graph: Graph, root) -> bool:
    found = _find(graph, root)
    if found is None:
        return False
    producer, weights, chain = found
    out = root.outputs[0]
    if not out.dtype.is_floating_point or len(out.shape) < 2:
        return False
    # the fold trades the affine's pass over the result (a read and a write of each element)
    # for a pass over the weight (the same per element): only where the weight is no larger
    if _elements(producer.inputs[weights.weight].shape) > _elements(out.shape):
        return False
    channels = out.shape[1]
    shift_shape = weights.shift_shape(len(out.shape), channels)
    # the operands the new computation reads: the producer's, then each affine's own
    operands, index = [], {}
    chain_values = {id(n.outputs[0]) for n, _, _ in chain}
    for v in list(producer.inputs) + [v for node, _, _ in chain for v in node.inputs]:
        if v.node is producer or id(v) in chain_values or id(v) in index:
            continue
        index[id(v)] = len(operands)
        operands.append(v)
    if any(v.dtype != out.dtype for v in operands if v.dtype.is_floating_point):
        return False
    inputs = list(producer.inputs)
    has_bias = weights.bias is not None and weights.bias < len(inputs)
    layout = dict(groups=weights.groups, axis=weights.axis, shift_shape=shift_shape)
    made = {}

    def compute(*tensors):
        def get(v):
            return tensors[index[id(v)]]

        weight = original = get(inputs[weights.weight])
        shift = None
        if has_bias:
            shift = E.reshape(get(inputs[weights.bias]), shift_shape)
        for node, operand, fold in chain:
            args = [None if i == operand else get(v) for i, v in enumerate(node.inputs)]
            weight, shift = fold(weight, shift, args, **layout)
        made["changed"] = weight is not original  # shifts alone: nothing to fold into weights
        return weight, shift

    try:
        sub, _, _, lifted = trace_subgraph(
            compute, [v.type for v in operands], [v.name for v in operands], "fold", "fold"
        )
    except EmberError:  # a rule that does not fit these operands: leave the graph as it is
        return False
    if not made.get("changed") or lifted:
        return False
    with graph.inserting_before(root):
        env = {id(v): o for v, o in zip(sub.inputs, operands)}
        for node in sub.nodes:
            if node.kind == "constant":
                env[id(node.outputs[0])] = graph.add_constant(sub.constants[node.name])
            elif node.kind == "call":
                new = graph.add_call(node.op, [env[id(v)] for v in node.inputs], dict(node.attrs))
                for v, w in zip(node.outputs, new.outputs):
                    env[id(v)] = w
        weight, shift = (env[id(v)] for v in sub.outputs)
        inputs[weights.weight] = weight
        if weights.bias is not None:
            inputs = inputs[: weights.bias] + [shift]
        call = graph.add_call(producer.op, inputs, dict(producer.attrs))
        value = call.outputs[0]
        if weights.bias is None:
            value = graph.add_call(ADD, [value, shift]).outputs[0]
    if value.type != out.type:  # (the rules keep the type; a wrong one leaves the graph unfolded)
        _erase_unused(graph, value.node)
        return False
    graph.replace_all_uses(out, value)
    for node, _, _ in chain[::-1]:
        graph.erase_node(node)
    graph.erase_node(producer)
    return True


def _erase_unused(graph: Graph, node) -> None:
    """Remove ``node`` and the nodes only it read, after an abandoned rewrite."""
    stack = [node]
    while stack:
        n = stack.pop()
        if n.kind == "input" or any(v.users for v in n.outputs):
            continue
        if any(v is o for v in n.outputs for o in graph.outputs):
            continue
        inputs = [v.node for v in n.inputs]
        graph.erase_node(n)
        stack.extend(inputs)


def fold_affine_inputs(graph: Graph) -> tuple[Graph, bool]:
    changed = False
    # (a fold erases nodes listed here, and only a fold: a rewrite abandoned after adding
    # nodes erases those alone; nodes still in the graph asked anew after each)
    present = {id(n) for n in graph.nodes}
    for node in list(graph.nodes):
        if node.graph is graph and id(node) in present and node.kind == "call":
            if node.op.channel_terms is not None and _fold_one(graph, node):
                changed = True
                present = {id(n) for n in graph.nodes}
    return graph, changed


FOLD_AFFINE_INPUTS = Pass(
    "fold_affine_inputs",
    fold_affine_inputs,
    # O3: the shift's add pays only where fusion or a convolution's epilogue takes it with the
    # activation; alone it would be one pass for another, plus the weight's
    level=3,
    doc="per-channel affines with input parameters (inference batch norm) into the producer's "
    "weights, computed per call",
    rounds=True,
)
