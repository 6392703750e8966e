"""Conformance samples for functional/attention.py and functional/embedding.py."""

import numpy as np

import ember

from .harness import Sample, rng

F = ember.nn.functional
r = rng(13)


def TF():
    return __import__("torch").nn.functional


Q = r.standard_normal((1, 2, 3, 4))  # (N, H, L, E)
K = r.standard_normal((1, 2, 5, 4))  # (N, H, S, E)
V = r.standard_normal((1, 2, 5, 3))  # (N, H, S, Ev)
BOOL_MASK = r.random((3, 5)) > 0.4
BOOL_MASK[0, 1] = True
BOOL_MASK[1] = False  # a query row with no key at all: zeros, as PyTorch
BOOL_MASK[2, 3] = True
FLOAT_MASK = r.standard_normal((1, 1, 3, 5))


def sdpa(lib_f, **kw):
    return lambda q, k, v: lib_f().scaled_dot_product_attention(q, k, v, **kw)


def sdpa_masked(lib_f, **kw):
    return lambda q, k, v, m: lib_f().scaled_dot_product_attention(q, k, v, attn_mask=m, **kw)


def ember_f():
    return F


SAMPLES = [
    Sample("F.sdpa/plain", sdpa(ember_f), (Q, K, V), torch_fn=sdpa(TF)),
    Sample(
        "F.sdpa/causal", sdpa(ember_f, is_causal=True), (Q, K, V), torch_fn=sdpa(TF, is_causal=True)
    ),
    Sample(
        "F.sdpa/causal-square",
        sdpa(ember_f, is_causal=True),
        (Q, K[:, :, :3], V[:, :, :3]),
        torch_fn=sdpa(TF, is_causal=True),
    ),
    Sample(
        "F.sdpa/bool-mask-with-empty-row",
        sdpa_masked(ember_f),
        (Q, K, V, BOOL_MASK),
        torch_fn=sdpa_masked(TF),
    ),
    Sample(
        "F.sdpa/float-mask",
        sdpa_masked(ember_f),
        (Q, K, V, FLOAT_MASK),
        torch_fn=sdpa_masked(TF),
        nondiff=(3,),
    ),
    Sample("F.sdpa/scale", sdpa(ember_f, scale=0.3), (Q, K, V), torch_fn=sdpa(TF, scale=0.3)),
    Sample(
        "F.sdpa/3d-inputs",
        sdpa(ember_f),
        (Q[0], K[0], V[0]),
        torch_fn=sdpa(TF),
    ),
    Sample(
        "F.sdpa/gqa",
        sdpa(ember_f, enable_gqa=True),
        (r.standard_normal((1, 4, 2, 3)), K[:, :, :3, :3], V[:, :, :3]),
        torch_fn=sdpa(TF, enable_gqa=True),
    ),
    Sample(
        "F.sdpa/dropout-seeded",  # a fixed generator: the same mask on every call
        lambda q, k, v: F.scaled_dot_product_attention(
            q, k, v, dropout_p=0.3, generator=ember.Generator(2)
        ),
        (Q, K, V),
    ),
]

# ---------------------------------------------------------------------------------- embedding
WEIGHT = r.standard_normal((5, 3))
IDX = np.array([[0, 2, 4], [2, 1, 2]])  # index 2 repeats: its gradient rows accumulate
SAMPLES += [
    Sample(
        "F.embedding/duplicates",
        lambda i, w: F.embedding(i, w),
        (IDX, WEIGHT),
        torch_fn=lambda i, w: TF().embedding(i, w),
    ),
    Sample(
        "F.embedding/padding_idx",
        lambda i, w: F.embedding(i, w, padding_idx=2),
        (IDX, WEIGHT),
        torch_fn=lambda i, w: TF().embedding(i, w, padding_idx=2),
        fd=False,  # the padding row is read but deliberately gets no gradient
    ),
    Sample(
        "F.embedding/negative-padding_idx",
        lambda i, w: F.embedding(i, w, padding_idx=-1),
        (np.array([4, 0, 4, 3]), WEIGHT),
        torch_fn=lambda i, w: TF().embedding(i, w, padding_idx=-1),
        fd=False,
    ),
    Sample(
        "F.embedding/scale_grad_by_freq",
        lambda i, w: F.embedding(i, w, scale_grad_by_freq=True),
        (IDX, WEIGHT),
        torch_fn=lambda i, w: TF().embedding(i, w, scale_grad_by_freq=True),
        fd=False,  # the gradient is rescaled on purpose
    ),
]
