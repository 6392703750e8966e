"""Conformance samples for ops/control.py.

The public ``ember.cond`` / ``ember.while_loop`` run eagerly as plain Python and never reach the
registry, so these samples call ``staged_cond`` / ``staged_while_loop``, which record the node
even eagerly: the op's shape rule, its kernel (the subgraphs run by the interpreter) and, for
cond, its VJP on the tape are then checked like any other op's. Predicates sit far from their
switching point so finite differences stay on one branch.
"""

import numpy as np

from ember.ops.control import staged_cond, staged_while_loop
from ember.ops.scan import staged_scan

from .harness import Sample, rng

r = rng(11)
X = r.standard_normal((2, 3))
W = r.standard_normal((2, 3))
POS = np.abs(r.standard_normal(4)) + 0.5


def _two_outputs(x, w):
    return staged_cond(
        (x * x).sum() > 1.0,
        lambda a, b: (a * b, (a - b).sum()),
        lambda a, b: (a + b, (a * b).mean()),
        x,
        w,
    )


def _closure(x, w):
    # the branches close over w: it is lifted to an operand of the node
    return staged_cond(x.sum() < 0, lambda a: (a * w).tanh(), lambda a: a.exp() * w, x)


def _doubling(x):
    return staged_while_loop(lambda v: v.sum() < 50.0, lambda v: v * 2.0 + 1.0, x)


def _counted(x):
    # an int64 counter and a float carry, returned as a tuple
    return staged_while_loop(
        lambda s: s[0] < 3, lambda s: (s[0] + 1, s[1] * 0.5 + s[1].sin()), (x.sum() > 0, x)
    )[1]


def _cumulative(h, xs):
    # a carry and two stacked outputs (a y per step and a tuple of them)
    return staged_scan(lambda c, x: (c * 0.5 + x, (c.sum(), {"y": c * x})), h, xs)


def _flat(result):
    carry, (total, d) = result
    return carry, total, d["y"]


SAMPLES = [
    Sample("cond/true-branch", _two_outputs, (X + 2.0, W)),
    Sample("cond/false-branch", _two_outputs, (X * 0.01, W)),
    Sample("cond/closure-true", _closure, (-POS[:3], W[0])),
    Sample("cond/closure-false", _closure, (POS[:3], W[1])),
    Sample("while_loop/doubling", _doubling, (POS,), grad=False),
    Sample("while_loop/zero-trips", _doubling, (POS * 100.0,), grad=False),
    Sample("scan/cumulative", lambda h, xs: _flat(_cumulative(h, xs)), (W[0], X), grad=False),
    Sample("scan/zero-steps", lambda h, xs: _flat(_cumulative(h, xs)), (W[0], X[:0]), grad=False),
]
