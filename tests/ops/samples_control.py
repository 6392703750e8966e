"""Conformance samples for control/flow.py.

The public ``ember.cond`` / ``ember.while_loop`` / ``ember.scan`` run eagerly as plain Python and
never reach the registry, so these samples call ``staged_cond`` / ``staged_while_loop`` /
``staged_scan``, which record the node even eagerly: the op's shape rule, its kernel (the
subgraphs run by the interpreter) and its VJP on the tape are then checked like any other op's.
The while_loop gradient samples run ``while_loop_grad`` (control/flow_grad.py), the node the
VJP emits, with and without checkpointing. Predicates and loop exits sit far from their
switching points so finite differences stay on one branch and one trip count.
"""

import numpy as np

import ember
from ember.control.flow import staged_cond, staged_while_loop
from ember.control.scan import staged_scan

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
    start = (x.sum() > 0).to(ember.int64)
    return staged_while_loop(
        lambda s: s[0] < 3, lambda s: (s[0] + 1, s[1] * 0.5 + s[1].sin()), (start, x)
    )[1]


def _grow(x, w):
    # a data-dependent trip count; the body closes over w (a lifted operand with a gradient)
    return staged_while_loop(lambda v: (v * v).sum() < 30.0, lambda v: v * w + 0.25, x)


def _grow_checkpointed(x, w):
    return staged_while_loop(
        lambda v: (v * v).sum() < 30.0, lambda v: v * w + 0.25, x, checkpoint_every=2
    )


def _cumulative(h, xs):
    # a carry and two stacked outputs (a y per step and a tuple of them)
    return staged_scan(lambda c, x: (c * 0.5 + x, (c.sum(), {"y": c * x})), h, xs)


def _weighted(h, xs, w):
    # an int64 counter carry, an int sequence and a closed-over weight next to float ones
    steps = (xs[:, 0] > 0).to(ember.int64)

    def body(c, x):
        n, v = c
        seq, flag = x
        v = (v * w + seq).tanh() + flag.to(v.dtype) * 0.1
        return (n + flag, v), (v * seq).sum()

    (n, v), total = staged_scan(body, (ember.tensor(0), h), (xs, steps))
    return v, total


def _flat(result):
    carry, (total, d) = result
    return carry, total, d["y"]


SAMPLES = [
    Sample("cond/true-branch", _two_outputs, (X + 2.0, W)),
    Sample("cond/false-branch", _two_outputs, (X * 0.01, W)),
    Sample("cond/closure-true", _closure, (-POS[:3], W[0])),
    Sample("cond/closure-false", _closure, (POS[:3], W[1])),
    Sample("while_loop/doubling", _doubling, (POS,)),
    Sample("while_loop/zero-trips", _doubling, (POS * 100.0,)),
    Sample("while_loop/counted", _counted, (X[0] + 2.0,)),
    Sample("while_loop/closure", _grow, (POS[:3] * 0.3, POS[1:] + 0.6)),
    Sample("while_loop/checkpointed", _grow_checkpointed, (POS[:3] * 0.3, POS[1:] + 0.6)),
    Sample("scan/cumulative", lambda h, xs: _flat(_cumulative(h, xs)), (W[0], X)),
    Sample("scan/zero-steps", lambda h, xs: _flat(_cumulative(h, xs)), (W[0], X[:0])),
    Sample("scan/ints-and-closure", _weighted, (W[0, :2].copy(), X.T.copy(), W[1, :2].copy())),
]
