"""Conformance samples for ops/rrelu_noise.py: rrelu's training slopes, drawn as PyTorch's
kernel draws them (one double uniform per element that is not positive, in memory order), so
the same seed gives PyTorch's result. test_conformance.py also captures each (trace, script,
graph gradients) and compares with eager."""

import numpy as np

import ember

from .harness import Sample, rng

r = rng(4901)
X = r.standard_normal((3, 7))


def torch():
    import torch as t

    return t


def _torch_rrelu(x):
    t = torch()
    t.manual_seed(3)
    return t.nn.functional.rrelu(x, 0.1, 0.4, training=True)


SAMPLES = [
    Sample(
        "random_rrelu_slopes/seeded",
        lambda x: ember.nn.functional.rrelu(x, 0.1, 0.4, True, generator=ember.Generator(3)),
        (X,),
        torch_fn=_torch_rrelu,
        grad=False,
    ),
    Sample(
        "random_rrelu_slopes/all-positive",
        lambda x: ember.nn.functional.rrelu(x, training=True, generator=ember.Generator(1)),
        (np.abs(X) + 0.5,),
        grad=False,
    ),
]
