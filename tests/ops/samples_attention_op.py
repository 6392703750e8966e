"""Conformance samples for the ``attention`` primitive (ops/attention.py): the rule against the
NumPy kernel, the recomputing VJP against finite differences and PyTorch, capture against
eager. PyTorch's twin is F.scaled_dot_product_attention with the same scale; a float mask is
added, a bool one keeps its True positions."""

from ember.ops._registry import apply
from ember.ops.attention import ATTENTION

from .harness import Sample, rng

r = rng(29)
Q = r.standard_normal((2, 3, 4, 5))  # (N, H, L, E)
K = r.standard_normal((2, 3, 6, 5))  # (N, H, S, E)
V = r.standard_normal((2, 3, 6, 3))  # (N, H, S, Ev)
K1 = r.standard_normal((2, 1, 6, 5))  # one key head broadcast over the query heads
FLOAT_MASK = r.standard_normal((2, 1, 1, 6))  # per batch, per key (a padding-like bias)
BOOL_MASK = r.random((4, 6)) > 0.4
BOOL_MASK[:, 0] = True


def TF():
    return __import__("torch").nn.functional


def _ember(scale=0.4, causal=False, safe=False):
    return lambda q, k, v, *m: apply(ATTENTION, q, k, v, *m, scale=scale, causal=causal, safe=safe)


def _torch(scale=0.4, causal=False):
    def run(q, k, v, *m):
        if k.ndim == 4 and k.shape[1] != q.shape[1]:
            k = k.expand(k.shape[0], q.shape[1], *k.shape[2:])
        mask = m[0] if m else None
        return TF().scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=causal, scale=scale
        )

    return run


SAMPLES = [
    Sample("attention/plain", _ember(), (Q, K, V), torch_fn=_torch()),
    Sample("attention/causal", _ember(causal=True), (Q, K, V), torch_fn=_torch(causal=True)),
    Sample("attention/float-mask", _ember(), (Q, K, V, FLOAT_MASK), torch_fn=_torch()),
    Sample(
        "attention/bool-mask-safe",
        _ember(safe=True),
        (Q, K, V, BOOL_MASK),
        torch_fn=_torch(),
    ),
    Sample("attention/broadcast-key-head", _ember(scale=0.7), (Q, K1, V), torch_fn=_torch(0.7)),
    Sample("attention/3d", _ember(scale=1.0), (Q[0], K[0], V[0]), torch_fn=_torch(scale=1.0)),
]
