"""Conformance samples for sem58's ops: ``as_strided_view`` (windows of a tensor's storage,
overlapping ones included: their gradient adds up) and the ``linspace`` creation op that a
graph over symbolic sizes makes (``linspace(a, b, x.size(1))``; a concrete count is a
constant, so the op is run here directly, eagerly, as the graph runs it)."""

import ember
from ember.ops import creation
from ember.ops._registry import apply

from .harness import Sample, rng

r = rng(5801)
X = r.standard_normal((3, 4))


def _torch():
    import torch

    return torch


SAMPLES = [
    Sample(
        "as_strided_view/offset-window",
        lambda x: x.as_strided((2, 3), (1, 2), 1),
        (X,),
        torch_fn=lambda x: x.as_strided((2, 3), (1, 2), 1),
    ),
    Sample(
        "as_strided_view/overlapping",
        lambda x: x.as_strided((3, 3), (1, 1)),
        (X,),
        torch_fn=lambda x: x.as_strided((3, 3), (1, 1)),
    ),
    Sample(
        "linspace/symbolic-count-op",
        lambda: apply(creation._LINSPACE, start=-1.5, end=2.0, steps=7, dtype=ember.float32),
        (),
        torch_fn=lambda: _torch().linspace(-1.5, 2.0, 7),
        grad=False,
        float32=False,
    ),
]
