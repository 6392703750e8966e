"""The recurrent layers' workspace rule (ops/recurrent.py, ops/recurrent_elman.py): what the
compiled layer and its gradient allocate beyond their results (kernels/crnn.py
`temporaries`: the packed W_hh, the per-step product, the weight gradient's sums), so a
training step's plan matches its measured peak; none where the NumPy kernels run."""

from __future__ import annotations

import functools

from ._util import value_bytes


@functools.cache
def _crnn():
    from ..kernels import crnn

    return crnn


def workspace(cell: str, backward: bool, weight: int):
    """The ``workspace`` rule of ``cell``'s layer (or its gradient, ``backward``) whose W_hh
    is operand ``weight``: operand 0 is (steps, rows, features)."""

    def rule(node, layouts) -> int:
        first, w = node.inputs[0], node.inputs[weight]
        sizes = (*first.shape[:2], w.shape[1])
        if not all(isinstance(d, int) for d in sizes) or not value_bytes(first):
            return 0
        producer = getattr(w, "node", None)
        kept = producer is not None and producer.kind == "constant"  # (packed once per node)
        found = _crnn().temporaries(cell, backward, *sizes, first.dtype.np, kept)
        return found or 0

    return rule
