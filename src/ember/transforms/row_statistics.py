"""A float32 result the backward reads, saved as its 16-bit operand and per-row statistics.

Under autocast the loss's log_softmax reads the bfloat16 logits as float32 (widened_reads.py)
and writes float32 log-probabilities, which its gradient reads: kept from the forward, they
are the largest value saved at the step's peak (GPT's 1000-class loss: 3.9 MiB, twice the
logits). An op whose ``row_statistics`` rule (ops/_rules.py) writes its result as per-row
statistics of its operand and an elementwise function of the two (log_softmax: ``(x - m) -
log(sum(exp(x - m)))``, m the row maximum) is split here: the statistics stay where the op
was; the elementwise rest is written again before the backward's first reader (fusion puts it
inside that reader's loop, reading the 16-bit operand), and, for a forward reader that picks
elements along the op's axis (the loss's gather of each target's log-probability: a `gathers`
rule), on the picked elements only; so the full float32 result is never stored, and the
forward saves the 16-bit operand and two numbers per row instead: half the bytes. The nodes
compute what the op's kernel computes (NumPy's bits along the last axis: a gather picks the
same elements before the elementwise rest as after it), so every value is what it was.

Only a split that saves bytes is offered (the operand narrower than the result);
transforms/cheap_remat.py tries it and keeps it only where the memory plan scores lower.
"""

from __future__ import annotations

from ..plan.layout import nbytes

__all__ = ["saves_bytes", "split"]


def saves_bytes(node) -> bool:
    """Whether ``node`` has a ``row_statistics`` rule and its operand takes fewer bytes than
    its one result (a 16-bit operand read widened)."""
    if node.kind != "call" or node.op.row_statistics is None or len(node.outputs) != 1:
        return False
    return bool(node.inputs) and nbytes(node.inputs[0]) < nbytes(node.outputs[0])


def _picks_along(user, result, axis: int) -> bool:
    """Whether ``user`` reads ``result`` as operand 0 of a `gathers` op along ``axis``, its
    index of ``result``'s shape but along that axis (so the statistics line up with it)."""
    if user.kind != "call" or user.op.gathers is None or len(user.inputs) < 2:
        return False
    if user.inputs[0] is not result or any(v is result for v in user.inputs[1:]):
        return False
    along = user.op.gathers(user.attrs)
    shape, index = result.type.shape, user.inputs[1].type.shape
    if along is None or len(index) != len(shape) or along % len(shape) != axis:
        return False
    return all(a == b for d, (a, b) in enumerate(zip(shape, index)) if d != axis)


def split(graph, node, forward: set):
    """Replace ``node`` in ``graph`` (in place) by its ``row_statistics`` nodes: the
    statistics where it was, its result recomputed before its first reader outside
    ``forward`` (ids of the forward pass's nodes) for those readers, on the picked elements
    for each forward `gathers` reader, and once where it was for other forward readers.
    Returns whether it did (the rule declined, the result is returned or read through a
    view: the graph unchanged)."""
    rule, x, result = node.op.row_statistics, node.inputs[0], node.outputs[0]
    if any(v is result for v in graph.outputs) or not result.users:
        return False
    if any(u.kind == "call" and (u.op.view or u.op.aliases) for u in result.users):
        return False
    added = []

    def add(op, inputs, attrs=None):
        call = graph.add_call(op, list(inputs), dict(attrs or {}))
        call.scope, call.region = node.scope, node.region
        added.append(call)
        return call.outputs[0]

    attrs = dict(node.attrs)
    with graph.inserting_before(node):
        stats = rule.statistics(add, x, attrs)
    if stats is None:
        for call in reversed(added):
            graph.erase_node(call)
        return False
    axis = attrs["axis"] % len(result.type.shape)
    readers = list({id(u): u for u in result.users}.values())
    backward = sorted((u for u in readers if id(u) not in forward), key=graph.nodes.index)
    others = [u for u in readers if id(u) in forward and not _picks_along(u, result, axis)]
    for user in readers:
        if id(user) in forward and _picks_along(user, result, axis):
            with graph.inserting_before(user):
                picked = add(user.op, [x, *user.inputs[1:]], user.attrs)
                value = rule.result(add, picked, stats, attrs)
            _same_type(value, user.outputs[0], node)
            graph.replace_all_uses(user.outputs[0], value)
            graph.erase_node(user)
    for group in (others, backward):
        if not group:
            continue
        with graph.inserting_before(min(group, key=graph.nodes.index)):
            value = rule.result(add, x, stats, attrs)
        _same_type(value, result, node)
        for user in group:
            user.replace_input(result, value)
    graph.erase_node(node)
    return True


def _same_type(value, old, node) -> None:
    if value.type != old.type:
        raise AssertionError(f"{node.op.name}'s row_statistics give {value.type}, not {old.type}")
