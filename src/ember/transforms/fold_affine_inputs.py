"""Folding a per-channel affine whose parameters are graph inputs into the weights of the call
that produces its input: ``conv -> batch_norm_eval`` where the statistics and the affine
parameters are inputs of the graph (``ember.function(model.eval())`` passes a module's
parameters and buffers as inputs, so they may change between calls) becomes a convolution whose
weight rows are scaled by ``s = gamma / sqrt(var + eps)`` and a per-channel bias ``b * s + beta -
mean * s`` added after it (which the epilogue pass then stores with the convolution, before the
activation). ``s`` and the new bias are computed by graph ops on every call, so changed buffers
change the result; their cost is that of one pass over the weight, far below the convolution's.

Which calls qualify comes from two rules (ops/_rules.py): ``channel_terms`` (a reader ``x *
scale[c] + shift[c]`` whatever its operands hold: batch_norm_eval, and an add of a per-channel
vector, so ``conv -> add bias -> batch_norm_eval`` folds too) and ``channel_fold`` (the producer
and how its operands take the scale and the shift: conv, the transposed convolution, linear).
transforms/fold_affine.py, earlier in the pipeline, handles affines whose operands are constants.

Only where no gradient needs the unfolded values: every value the chain passes through must be
read by the next call of the chain alone and not returned, so a graph whose backward reads the
convolution's output (a gradient with respect to the statistics or the affine parameters, or the
training step of a network in eval mode) keeps its batch norm; training-mode batch norm is
another op with no rule. The rounding differs from the unfolded graph's: the product ``w * s``
is rounded once before the sums instead of the sum being scaled after them, so results agree
within a few ulps times the square root of the reduction length, relative to ``|w| |x|``.
"""

from __future__ import annotations

from ..graph.ir import Graph
from ..graph.rewrite import Pass
from ..graph.subgraph import trace_subgraph
from ..ops.elementwise import ADD
from ..ops.shape import RESHAPE

__all__ = ["FOLD_AFFINE_INPUTS", "fold_affine_inputs"]

MAX_CHAIN = 4  # affines between the producer and the outermost one (bias add, batch norm)


def _types(node) -> list:
    return [v.type for v in node.inputs]


def _read_once(graph: Graph, value, reader) -> bool:
    """``value`` is read by ``reader`` alone, once, and is not a graph output."""
    if any(v is value for v in graph.outputs) or len(value.users) != 1:
        return False
    return value.users[0] is reader and sum(v is value for v in reader.inputs) == 1


def _find(graph: Graph, root):
    """(producer, fold, [(node, operand, terms)] innermost first) for the chain that ends in
    ``root``, or None."""
    chain, node = [], root
    while len(chain) <= MAX_CHAIN:
        rule = node.op.channel_terms
        found = None if rule is None or len(node.outputs) != 1 else rule(_types(node), node.attrs)
        if found is None:
            return None
        operand, terms = found
        chain.append((node, operand, terms))
        x = node.inputs[operand]
        producer = x.node
        if producer.kind != "call" or len(producer.outputs) != 1:
            return None
        if not _read_once(graph, x, node) or x.type != node.outputs[0].type:
            return None
        fold_rule = producer.op.channel_fold
        fold = None if fold_rule is None else fold_rule(_types(producer), producer.attrs)
        if fold is not None:
            return producer, fold, chain[::-1]
        node = producer
    return None


def _fold_one(graph: Graph, root) -> bool:
    found = _find(graph, root)
    if found is None:
        return False
    producer, fold, chain = found
    out = root.outputs[0]
    dtype = out.dtype
    if not dtype.is_floating_point:
        return False
    # the operands the new computation reads: the producer's, then each affine's own
    operands, index = [], {}
    for v in list(producer.inputs) + [v for node, _, _ in chain for v in node.inputs]:
        if v.node is producer or any(v is n.outputs[0] for n, _, _ in chain):
            continue
        if id(v) not in index:
            index[id(v)] = len(operands)
            operands.append(v)
    if any(v.dtype != dtype for v in operands if v.dtype.is_floating_point):
        return False
    left = {}

    def compute(*tensors):
        def get(v):
            return tensors[index[id(v)]]

        scale = shift = None
        for node, operand, terms in chain:
            args = [None if i == operand else get(v) for i, v in enumerate(node.inputs)]
            s, t = terms(*args)
            if s is not None:
                scale = s if scale is None else scale * s
                shift = None if shift is None else shift * s
            if t is not None:
                shift = t if shift is None else shift + t
        if scale is None:
            left["nothing"] = True  # shifts only: the producer's weights would not change
            return ()
        inputs, rest = fold(*[get(v) for v in producer.inputs], scale, shift)
        left["shift"], left["inputs"] = rest is not None, len(inputs)
        return tuple(inputs) + ((rest,) if rest is not None else ())

    try:
        sub, _, _, lifted = trace_subgraph(
            compute, [v.type for v in operands], [v.name for v in operands], "fold", "fold"
        )
    except Exception:  # a rule that does not apply to these operands: leave the graph as it is
        return False
    if left.get("nothing") or lifted:
        return False
    n_inputs = left["inputs"]  # (a bias-free linear gains its bias operand)
    with graph.inserting_before(root):
        env = {id(v): o for v, o in zip(sub.inputs, operands)}
        for node in sub.nodes:
            if node.kind == "constant":
                env[id(node.outputs[0])] = graph.add_constant(sub.constants[node.name])
            elif node.kind == "call":
                made = graph.add_call(node.op, [env[id(v)] for v in node.inputs], dict(node.attrs))
                for v, w in zip(node.outputs, made.outputs):
                    env[id(v)] = w
        results = [env[id(v)] for v in sub.outputs]
        call = graph.add_call(producer.op, results[:n_inputs], dict(producer.attrs))
        value = call.outputs[0]
        if left["shift"]:
            c = out.shape[1]
            view = (1, c) + (1,) * (len(out.shape) - 2)
            shift = graph.add_call(RESHAPE, [results[n_inputs]], {"shape": view})
            value = graph.add_call(ADD, [value, shift.outputs[0]]).outputs[0]
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
    for node in list(graph.nodes):
        if node.graph is graph and node in graph.nodes and node.kind == "call":
            if node.op.channel_terms is not None:
                changed |= _fold_one(graph, node)
    return graph, changed


FOLD_AFFINE_INPUTS = Pass(
    "fold_affine_inputs",
    fold_affine_inputs,
    level=2,
    doc="per-channel affines with input parameters (inference batch norm) into the producer's "
    "weights, computed per call",
    rounds=True,
)
