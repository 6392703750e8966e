"""The attention op's `PatternRule` (ops/_rules.py): the subgraph exporters write for attention,
``matmul(softmax(matmul(q, kt) * s + mask, axis=-1), v)`` (ONNX's MatMul, Div or Mul by a
constant, Add or Where, Softmax, MatMul; the scale on the scores, on q, or absent; the mask
absent, a float tensor added to the scores or a bool one selecting them), is one ``attention``
call (ops/attention.py), whose kernel
keeps a block of query rows' scores in cache from the first product to the second.

Conditions (the rule refuses otherwise): every intermediate (the scores, the scaled and masked
scores, the weights) is read only by the next op of the pattern and is no graph output; the
softmax is over the last axis; a scale is a constant holding one finite, nonzero value, whose
broadcast does not change the scores' shape or dtype (a division by ``c`` becomes a scale of
``1/c``); the mask has the scores' dtype and broadcasts to their shape without changing it (the
add's result has the scores' type), or is a bool tensor of the kept positions in
``where(keep, scores, -inf)`` (all of the constant -inf), and a constant lower triangle of
them is ``causal``; both, ``where(keep, scores, fill) + mask`` (HuggingFace GPT-2's), where
``keep`` is that triangle; q, kt and v have at least two dimensions, and the call's
result type is the second product's. A causal ``where`` may fill with the dtype's lowest finite
value (``finfo.min``, PyTorch's and HuggingFace's fill) as well as -inf: every row keeps its
first key, so a masked position weighs exp(lowest - row max), which is 0 as -inf's is unless the
kept scores themselves lie within ~100 of the lowest float (a row whose every kept score is
-inf, from a mask added after, is the case that differs: 0/NaN in the op, not in the pattern).
The key is kt with its last two axes swapped (a ``permute``: a view, which simplify composes
with a permute before it).

The weights may have their NaN zeroed, ``where(isnan(w), 0, w)``, which PyTorch's exporter
writes after a bool-masked scaled_dot_product_attention's softmax for the rows every key is
masked from: the op's ``safe`` (zeros for such a row, as PyTorch's attention). The two differ
where a score is NaN (NaN inputs: the op's row is NaN, the file's zeros).

The scale multiplies q before the product in the op (as ONNX's Attention and PyTorch's
composites do) where the pattern scales the scores after it: equal but for rounding (the pass
is checked within rounding).
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as dt
from ..errors import EmberError
from ._registry import REGISTRY
from ._rules import PatternRule
from .binary import ADD, DIV, MUL
from .linalg import MATMUL
from .shape import _PERMUTE
from .softmax import SOFTMAX
from .where import _WHERE

__all__ = ["attention_pattern"]


def _call(value, op):
    """The node making ``value`` when it is a call of ``op`` whose result only one node reads
    (and the graph does not return), else None."""
    node = value.node
    if node.kind != "call" or node.op is not op or len(value.users) != 1:
        return None
    if any(v is value for v in node.graph.outputs):
        return None
    return node


def _scalar(value, constant) -> float | None:
    """The one finite, nonzero value a constant operand holds, else None."""
    array = constant(value)
    if array is None or array.size == 0 or array.dtype.kind != "f":
        return None
    first = array.reshape(-1)[0]
    if not np.all(array == first):
        return None
    c = float(first)
    return c if math.isfinite(c) and c != 0.0 else None


def _scaled(node, operand, constant):
    """(the other operand, the factor) when ``node`` multiplies or divides its operand
    ``operand`` by a constant scalar without changing its type; else None."""
    if node.attrs or node.outputs[0].type != operand.type:
        return None
    a, b = node.inputs
    if node.op is MUL:
        other = b if a is operand else a
        c = _scalar(other, constant)
        return None if c is None else c
    if node.op is DIV and a is operand:
        c = _scalar(b, constant)
        return None if c is None else 1.0 / c
    return None


def _scores(value, constant):
    """(q, kt, scale) when ``value`` is ``matmul(q, kt)``, optionally scaled by a constant
    (after the product, or on q before it); else None."""
    scale = 1.0
    node = value.node
    if node.kind == "call" and node.op in (MUL, DIV) and _call(value, node.op) is not None:
        inner = [v for v in node.inputs if v.node.kind == "call" and v.node.op is MATMUL]
        factor = _scaled(node, inner[0], constant) if inner else None
        if factor is None:
            return None
        scale, value = factor, inner[0]
    product = _call(value, MATMUL)
    if product is None:
        return None
    q, kt = product.inputs
    before = q.node
    if before.kind == "call" and before.op is MUL and _call(q, MUL) is not None:
        inner = next((v for v in before.inputs if constant(v) is None), None)
        factor = None if inner is None else _scaled(before, inner, constant)
        if factor is not None:
            q, scale = inner, scale * factor
    if len(q.shape) < 2 or len(kt.shape) < 2:
        return None
    return q, kt, scale


def _far_below(filled, dtype) -> bool:
    """Whether every value of the constant ``filled`` is -inf or the dtype's lowest finite value
    (what PyTorch's and HuggingFace's causal masks fill with: ``finfo.min``)."""
    lowest = np.finfo(dtype.np).min if dtype.is_floating_point else None
    return lowest is not None and bool(np.all(np.isneginf(filled) | (filled == lowest)))


def _selected(value, constant):
    """(q, kt, scale, keep, finite fill) when ``value`` is ``where(keep, scores, fill)`` with a
    bool ``keep`` and a constant fill of -inf or the lowest float (finite fill: whether it is
    not all -inf); else None."""
    node = value.node
    if node.kind != "call" or node.op is not _WHERE or _call(value, _WHERE) is None:
        return None
    keep, scores, fill = node.inputs
    filled = constant(fill)
    if (
        keep.type.dtype is not dt.bool_
        or node.outputs[0].type != scores.type
        or filled is None
        or filled.size == 0
        or not _far_below(filled, scores.type.dtype)
    ):
        return None
    found = _scores(scores, constant)
    return None if found is None else (*found, keep, not bool(np.all(np.isneginf(filled))))


def _masked(value, constant):
    """(q, kt, scale, mask or None, keep or None, finite fill) for the softmax's operand
    ``value``: an additive float ``mask``, a bool ``keep`` selected by a ``where``, or both
    (``where(keep, scores, fill) + mask``, HuggingFace GPT-2's); else None."""
    found = _scores(value, constant)
    if found is not None:
        return (*found, None, None, False)
    selected = _selected(value, constant)
    if selected is not None:
        q, kt, scale, keep, finite = selected
        return q, kt, scale, None, keep, finite
    node = value.node
    if node.kind != "call" or node.op is not ADD or _call(value, ADD) is None or node.attrs:
        return None
    for i in (0, 1):
        scores, mask = node.inputs[i], node.inputs[1 - i]
        if node.outputs[0].type != scores.type or mask.type.dtype is not scores.type.dtype:
            continue
        found = _scores(scores, constant)
        if found is not None:
            return (*found, mask, None, False)
        selected = _selected(scores, constant)
        if selected is not None:
            q, kt, scale, keep, finite = selected
            return q, kt, scale, mask, keep, finite
    return None


def _causal(mask, constant, rows: int, cols: int) -> bool:
    """Whether ``mask`` is a constant bool lower triangle (key j kept for query i when
    j <= i, top-left aligned) over (rows, cols), the same for every batch element."""
    keep = constant(mask)
    if keep is None or keep.dtype != np.bool_ or keep.ndim < 2:
        return False
    if any(d != 1 for d in keep.shape[:-2]) or not isinstance(rows, int):
        return False
    plane = keep.reshape(keep.shape[-2:])
    tri = np.tri(rows, cols, dtype=bool)
    return plane.shape == tri.shape and bool(np.array_equal(plane, tri))


def _nan_zeroed(value, constant):
    """The softmax node when ``value`` is ``where(isnan(w), 0, w)`` of a softmax's weights
    ``w`` (read only there), else None."""
    node = value.node
    if node.kind != "call" or node.op is not _WHERE or _call(value, _WHERE) is None:
        return None
    test, zero, w = node.inputs
    filled = constant(zero)
    if filled is None or filled.size == 0 or not np.all(filled == 0) or node.attrs:
        return None
    check = test.node
    if check.kind != "call" or check.op is not REGISTRY["isnan"] or len(test.users) != 1:
        return None
    softmax = w.node
    if check.inputs[0] is not w or softmax.kind != "call" or softmax.op is not SOFTMAX:
        return None
    if len(w.users) != 2 or any(x is w for x in node.graph.outputs):
        return None
    return softmax if node.outputs[0].type == w.type else None


def _match(attention, node, constant):
    weights, v = node.inputs
    softmax = _call(weights, SOFTMAX)
    zeroed = softmax is None and (softmax := _nan_zeroed(weights, constant)) is not None
    if softmax is None or len(v.shape) < 2:
        return None
    rank = len(weights.shape)
    if softmax.attrs.get("axis") not in (-1, rank - 1):
        return None
    found = _masked(softmax.inputs[0], constant)
    if found is None:
        return None
    q, kt, scale, mask, keep, finite = found
    n = len(kt.shape)
    dims = (*range(n - 2), n - 1, n - 2)
    causal = keep is not None and _causal(keep, constant, q.shape[-2], kt.shape[-1])
    if keep is not None and not causal:
        if mask is not None or finite:  # (the op takes one mask; a finite fill needs a kept key)
            return None
        mask = keep
    safe = zeroed or bool(softmax.attrs.get("safe", False))
    attrs = {"scale": scale, "causal": causal, "safe": safe}
    operands = [q, kt, v] + ([mask] if mask is not None else [])
    try:  # the op's own rule decides the types (a batch that does not broadcast, a dtype)
        k_type = _PERMUTE.infer(kt.type, dims=dims)
        out = attention.infer(q.type, k_type, v.type, *[m.type for m in operands[3:]], **attrs)
    except EmberError:
        return None
    if out != node.outputs[0].type:
        return None

    def build(graph):
        k = graph.add_call(_PERMUTE, [kt], {"dims": dims}).outputs[0]
        return graph.add_call(attention, [q, k, v, *operands[3:]], attrs).outputs[0]

    return build


def attention_pattern() -> PatternRule:
    return PatternRule(roots=(MATMUL,), match=_match)
