"""Conformance samples for ops/random.py.

Each sample draws from a fresh generator seeded inside the call, so repeated calls (the float32
run, finite differences) see the same draws. Statistical and reproducibility properties are
tested in tests/test_random.py; here the registry's rules are checked against the kernels.
"""

import numpy as np

import ember

from .harness import Sample, rng


def gen(seed: int = 0) -> ember.Generator:
    return ember.Generator(seed)


r = rng(9)
P = r.uniform(0.1, 0.9, (3, 4))
MEAN = r.standard_normal((2, 3))
STD = r.uniform(0.5, 2.0, (2, 3))

SAMPLES = [
    Sample("rand/2x3", lambda: ember.rand(2, 3, generator=gen()), (), grad=False),
    Sample(
        "rand/float64",
        lambda: ember.rand((4,), generator=gen(), dtype=ember.float64),
        (),
        grad=False,
    ),
    Sample("randn/3x2", lambda: ember.randn(3, 2, generator=gen()), (), grad=False),
    Sample("uniform/-2..3", lambda: ember.uniform(-2, 3, (5,), generator=gen()), (), grad=False),
    Sample(
        "normal/scalars", lambda: ember.normal(1.0, 2.0, (2, 2), generator=gen()), (), grad=False
    ),
    # tensor mean/std: the reparametrized draw is differentiable in both
    Sample(
        "normal/tensor-mean-std",
        lambda m, s: ember.normal(m, s, generator=gen()),
        (MEAN, STD),
    ),
    Sample("randint/0..10", lambda: ember.randint(0, 10, (3, 3), generator=gen()), (), grad=False),
    Sample(
        "randint/int32",
        lambda: ember.randint(5, (4,), generator=gen(), dtype=ember.int32),
        (),
        grad=False,
    ),
    Sample("randperm/7", lambda: ember.randperm(7, generator=gen()), (), grad=False),
    Sample("bernoulli/p", lambda p: ember.bernoulli(p, generator=gen()), (P,), grad=False),
    Sample(
        "bernoulli/method",
        lambda p: p.bernoulli(generator=gen()),
        (np.full((2, 5), 0.5),),
        grad=False,
    ),
]
