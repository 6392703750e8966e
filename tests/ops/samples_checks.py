"""Conformance samples for ``check`` (ops/checks.py): a passing check is its input (values,
the gradient through it, tracing); failing ones are tests/ops/test_checks.py's."""

import numpy as np

from ember.ops.checks import check

from .harness import Sample, rng

r = rng(37)
X = r.standard_normal((3, 4))

SAMPLES = [
    Sample(
        "check/finite",
        lambda x: check(x, x == x, "not a number"),
        (X,),
        torch_fn=lambda x: x.clone(),
    ),
    Sample(
        "check/condition-of-another-shape",
        lambda x, ok: check(x, ok, "a flag is off"),
        (X, np.ones((2,), bool)),
        torch_fn=lambda x, ok: x.clone(),
    ),
]
