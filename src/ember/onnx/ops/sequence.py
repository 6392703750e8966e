"""ONNX's sequences and optionals.

A sequence value is a Python list of values (each a NumPy array or an ember tensor); an optional
is its value, or `EMPTY` when it has none (see onnx/_convert.py). The list lives only while the
importer walks the graph, so a captured model holds its elements as ordinary graph values: a
sequence whose length is known while importing (SplitToSequence of a tensor of known shape,
SequenceConstruct, inserts and erases at static positions) captures; a position read from the
data needs the model to run eagerly (`NeedsData`, through ``ctx.ints``).

SequenceMap runs its body once per element (a Python loop over the list, whose length is
known); its outputs are sequences again.
"""

from __future__ import annotations

import numpy as np

from .._convert import EMPTY, converter
from ._common import E, axis, rank_of


def _sequence(ctx, value, what: str = "the input sequence") -> list:
    if not isinstance(value, list):
        raise ctx.error(f"{what} must be a sequence, got {_kind(value)}")
    return value


def _kind(value) -> str:
    if value is None or value is EMPTY:
        return "an empty optional"
    if isinstance(value, list):
        return "a sequence"
    return "a tensor"


def _position(ctx, value, length: int, *, insert: bool = False) -> int:
    """A position in a sequence of ``length`` (negative counts from the back); an insert may
    also name the end (``length``)."""
    values = ctx.ints(value, "position")
    if len(values) != 1:
        raise ctx.error(f"position must be one integer, got {values}")
    pos = values[0]
    high = length if insert else length - 1
    if not -length <= pos <= high:
        raise ctx.error(f"position {pos} is out of range for a sequence of {length} tensors")
    return pos + length if pos < 0 else pos


@converter("SequenceConstruct", 11)
def _sequence_construct(ctx, *tensors):
    return list(tensors)


@converter("SequenceEmpty", 11)
def _sequence_empty(ctx):
    # the element type (attribute dtype) has no value to carry: a list has none of its own
    return []


@converter("SequenceLength", 11)
def _sequence_length(ctx, seq):
    return np.asarray(len(_sequence(ctx, seq)), dtype=np.int64)


@converter("SequenceAt", 11)
def _sequence_at(ctx, seq, position):
    seq = _sequence(ctx, seq)
    return seq[_position(ctx, position, len(seq))]


@converter("SequenceInsert", 11)
def _sequence_insert(ctx, seq, tensor, position=None):
    out = list(_sequence(ctx, seq))
    if position is None:
        out.append(tensor)
    else:
        out.insert(_position(ctx, position, len(out), insert=True), tensor)
    return out


@converter("SequenceErase", 11)
def _sequence_erase(ctx, seq, position=None):
    out = list(_sequence(ctx, seq))
    if not out:
        raise ctx.error("cannot erase from an empty sequence")
    index = len(out) - 1 if position is None else _position(ctx, position, len(out))
    del out[index]
    return out


@converter("SplitToSequence", 11)
def _split_to_sequence(ctx, x, split=None):
    x = ctx.tensor(x)
    dim = axis(ctx.attr("axis", 0), rank_of(x), ctx)
    size = int(x.shape[dim])
    if split is None:
        if ctx.attr("keepdims", 1):
            return [E.narrow(x, dim, i, 1) for i in range(size)]
        return [E.select(x, dim, i) for i in range(size)]
    lengths = ctx.ints(split, "split")
    if len(ctx.static(split, "split").shape) == 0:  # a scalar: chunks of that length
        (chunk,) = lengths
        if chunk <= 0:
            raise ctx.error(f"a scalar split must be positive, got {chunk}")
        lengths = [min(chunk, size - start) for start in range(0, size, chunk)]
        if chunk == 1 and not ctx.attr("keepdims", 1):
            # the spec ignores keepdims once split is given, but onnxruntime drops the axis of
            # a scalar split of 1, and PyTorch's exporter writes unbind as just that
            return [E.select(x, dim, i) for i in range(size)]
    if any(n < 0 for n in lengths) or sum(lengths) != size:
        raise ctx.error(
            f"split {lengths} must be non-negative lengths summing to the size {size} of axis {dim}"
        )
    out, start = [], 0
    for n in lengths:
        out.append(E.narrow(x, dim, start, n))
        start += n
    return out


@converter("ConcatFromSequence", 11)
def _concat_from_sequence(ctx, seq):
    tensors = [ctx.tensor(t) for t in _sequence(ctx, seq)]
    if not tensors:
        raise ctx.error("cannot concatenate an empty sequence")
    rank = rank_of(tensors[0])
    if ctx.attr("new_axis", 0):
        return E.stack(tensors, dim=axis(ctx.attr("axis"), rank + 1, ctx))
    return E.cat(tensors, dim=axis(ctx.attr("axis"), rank, ctx))


@converter("SequenceMap", 17, fold=False)
def _sequence_map(ctx, seq, *extra):
    # not folded as a node: the body may read values of the enclosing graph
    seq = _sequence(ctx, seq)
    body = ctx.subgraph("body")
    for i, value in enumerate(extra):
        if isinstance(value, list) and len(value) != len(seq):
            raise ctx.error(
                f"additional input {i + 1} is a sequence of {len(value)} tensors, the input "
                f"sequence has {len(seq)}"
            )
    outputs: list[list] = [[] for _ in range(ctx.num_outputs)]
    for k, element in enumerate(seq):
        inputs = [element] + [v[k] if isinstance(v, list) else v for v in extra]
        results = ctx.run(body, inputs)
        for out, r in zip(outputs, results):
            out.append(r)
    return tuple(outputs)


# ---------------------------------------------------------------------------------------------
# optionals


@converter("Optional", 15)
def _optional(ctx, value=None):
    return EMPTY if value is None else value


@converter("OptionalHasElement", 15)
def _optional_has_element(ctx, value=None):
    return np.asarray(value is not None and value is not EMPTY)


@converter("OptionalGetElement", 15)
def _optional_get_element(ctx, value):
    if value is None or value is EMPTY:
        raise ctx.error("the optional has no element")
    return value
