"""Conformance samples for ops/random_counts.py (poisson, binomial), each drawing from a fresh
generator seeded inside the call (as samples_random.py's). poisson's VJP is PyTorch's zero:
checked to run, not by finite differences (a draw is piecewise constant in its rate)."""

import numpy as np

import ember

from .harness import Sample, rng

r = rng(7110)
RATES = r.uniform(0.5, 20.0, (3, 4))
COUNT = np.floor(r.uniform(0.0, 30.0, (2, 3)))
PROB = r.uniform(0.0, 1.0, (2, 3))


def gen(seed: int = 0) -> ember.Generator:
    return ember.Generator(seed)


SAMPLES = [
    Sample("poisson/rates", lambda x: ember.poisson(x, generator=gen()), (RATES,), fd=False),
    Sample(
        "binomial/counts",
        lambda n, p: ember.binomial(n, p, generator=gen()),
        (COUNT, PROB),
        grad=False,
    ),
]
