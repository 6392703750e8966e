"""``F.embedding(..., sparse=True)`` eagerly: the weight's gradient is a sparse COO tensor
(ops/sparse_tensor.py ``SparseTensor``), as PyTorch's ``embedding_sparse_backward`` makes it:
uncoalesced, one index per looked-up position (``padding_idx`` positions left out) and the
incoming gradient's rows as values. The engine accumulates it into a leaf's ``.grad``
(autograd.py: sparse + sparse concatenates, sparse + dense is dense); SGD, Adagrad and SparseAdam
take it, the other optimizers refuse it with PyTorch's error (optim/optimizer.py).

Where the weight is not a leaf (its gradient flows on into other ops' VJPs, which take dense
tensors) the gradient is the dense equivalent; so it is while a graph is built (ember.function,
graph autodiff): a captured step computes the dense gradient, whose values are the sparse one's
``to_dense()``. So that a captured step refuses what the eager one refuses, the lookup notes a
leaf weight with the graph-building mode (`note_captured`), and an optimizer that refuses sparse
gradients refuses that weight's gradient in that graph (`captured_sparse`, optim/optimizer.py).
"""

from __future__ import annotations

import weakref

from ..autograd import AccumulateGrad
from ..autograd_function import Function
from ..errors import AutogradError
from ..ops import api as E
from ..ops.sparse_tensor import SparseTensor

# id(weight) -> (a weak reference to the weight, the mode that built a graph looking it up)
_CAPTURED: dict = {}


def note_captured(weight, mode) -> None:
    """``F.embedding(sparse=True)`` looked up leaf ``weight`` while ``mode`` built a graph."""
    for key in [k for k, (ref, _) in _CAPTURED.items() if ref() is None]:
        del _CAPTURED[key]
    _CAPTURED[id(weight)] = (weakref.ref(weight), mode)


def captured_sparse(weight, mode) -> bool:
    """Whether eager execution would have given ``weight`` a sparse gradient in the graph
    ``mode`` is building."""
    entry = _CAPTURED.get(id(weight))
    return entry is not None and entry[0]() is weight and entry[1] is mode


class EmbeddingSparse(Function):
    """``weight[flat]`` whose backward gives ``weight`` a sparse gradient (see the module)."""

    @staticmethod
    def forward(ctx, flat, weight, pad, freq):
        ctx.flat, ctx.pad, ctx.freq = flat, pad, freq
        ctx.size = tuple(weight.shape)
        return E.index_select(weight, 0, flat)

    @staticmethod
    def backward(ctx, grad):
        if ctx.freq:
            raise AutogradError(
                "embedding_backward: scale_grad_by_freq not supported with sparse gradients",
                op="embedding",
            )
        flat = ctx.flat
        if ctx.pad is not None:
            keep = flat != ctx.pad
            flat, grad = flat[keep], grad[keep]
        sparse = SparseTensor(E.reshape(flat, (1, -1)), grad, ctx.size, False)
        edge = ctx._edges[1]
        if edge is None or type(edge[0]) is not AccumulateGrad:
            return None, sparse.to_dense(), None, None
        return None, sparse, None, None
