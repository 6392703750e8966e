"""Conformance samples for ops/segment.py (segment_sum, segment_mean, segment_max, segment_min,
segment_expand) and ops/varlen_attention.py (varlen_attention and its gradient op): each
against PyTorch (torch.segment_reduce; repeat_interleave; scaled_dot_product_attention per
sequence), gradients against finite differences, capture against eager."""

import numpy as np

import ember
from ember.ops.varlen_attention import varlen_attention

from .harness import Sample, rng

r = rng(240)
VALUES = r.standard_normal((7, 3))  # distinct values: no ties, so finite differences hold
SPLITS = np.array([0, 2, 5, 7])  # three rows, none empty
EMPTY_SPLITS = np.array([0, 2, 2, 7, 7])  # empty rows in the middle and at the end
EQUAL_SPLITS = np.array([0, 2, 4, 6])
PER_ROW = r.standard_normal((3, 1, 3))
Q = r.standard_normal((7, 2, 4))  # (total length, heads, head size)
K = r.standard_normal((7, 2, 4))
V = r.standard_normal((7, 2, 3))


def torch():
    import torch as t

    return t


def _ember_reduce(reduce, splits):
    return lambda v: ember.segment_reduce(v, reduce, offsets=ember.tensor(splits))


def _torch_reduce(reduce, splits):
    return lambda v: torch().segment_reduce(v, reduce, offsets=torch().tensor(splits))


SAMPLES = []
for _reduce in ("sum", "mean", "max", "min"):
    SAMPLES += [
        Sample(
            f"segment_{_reduce}/rows",
            _ember_reduce(_reduce, SPLITS),
            (VALUES,),
            torch_fn=_torch_reduce(_reduce, SPLITS),
        ),
        Sample(  # (rows of one length: the middle axis of a view reduced)
            f"segment_{_reduce}/equal-rows",
            _ember_reduce(_reduce, EQUAL_SPLITS),
            (VALUES[:6],),
            torch_fn=_torch_reduce(_reduce, EQUAL_SPLITS),
        ),
        Sample(
            f"segment_{_reduce}/empty-rows",
            _ember_reduce(_reduce, EMPTY_SPLITS),
            (VALUES,),
            torch_fn=_torch_reduce(_reduce, EMPTY_SPLITS),
            grad=False,  # (NaN and infinite results: compared in value only)
        ),
    ]


def _torch_varlen(splits, scale):
    def run(q, k, v):
        t = torch()
        outs = []
        for a, b in zip(splits[:-1], splits[1:]):
            qs, ks, vs = (x[a:b].transpose(0, 1) for x in (q, k, v))  # (H, L, D)
            o = t.nn.functional.scaled_dot_product_attention(qs, ks, vs, scale=scale)
            outs.append(o.transpose(0, 1))
        return t.cat(outs)

    return run


SAMPLES += [
    Sample(
        "segment_expand/per-row",
        lambda v, p: (ember.ragged.from_row_splits(v, SPLITS) * p).values,
        (VALUES, PER_ROW),
        torch_fn=lambda v, p: (
            v * torch().repeat_interleave(p[:, 0], torch().tensor(np.diff(SPLITS)), 0)
        ),
    ),
    Sample(
        "varlen_attention/self",
        lambda q, k, v: varlen_attention(q, k, v, ember.tensor(SPLITS), scale=0.5),
        (Q, K, V),
        torch_fn=_torch_varlen(SPLITS, 0.5),
    ),
    Sample(
        "varlen_attention/default-scale",
        lambda q, k, v: varlen_attention(q, k, v, ember.tensor(np.array([0, 1, 7]))),
        (Q, K, V),
        torch_fn=_torch_varlen(np.array([0, 1, 7]), 0.5),
    ),
]
