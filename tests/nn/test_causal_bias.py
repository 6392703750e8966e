"""`ember.nn.attention.bias` against PyTorch's ``torch.nn.attention.bias``: scaled dot-product
attention given causal_lower_right / causal_upper_left masks (decoding-step shapes, equal
lengths, GQA), values and gradients, the masks' materialized form and repr, the captured call,
and the refusals."""

import warnings

import numpy as np
import pytest

import ember
from ember.errors import ArgumentError

torch = pytest.importorskip("torch")
torch_bias = pytest.importorskip("torch.nn.attention.bias")


def _run(lib, bias_module):
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in [(2, 4, 3, 8), (2, 2, 7, 8)]]
    q, kv = (lib.tensor(a, requires_grad=True) for a in arrays)
    sdpa = lib.nn.functional.scaled_dot_product_attention
    masks = [
        bias_module.causal_lower_right(3, 7),
        bias_module.causal_upper_left(3, 7),
        bias_module.causal_lower_right(7, 7),
    ]
    outs = []
    for i, mask in enumerate(masks):
        query = q if mask.seq_len_q == 3 else kv.repeat_interleave(2, 1)
        outs.append(sdpa(query, kv, kv, attn_mask=mask, scale=0.3 + i / 10, enable_gqa=True))
    sum((o * o).sum() for o in outs).backward()
    results = [o.detach().numpy() for o in outs] + [q.grad.numpy(), kv.grad.numpy()]
    results += [m._materialize().numpy() for m in masks]
    text = repr(bias_module.causal_lower_right(2, 4)).replace("ember", "torch")
    return results, text, [int(m.variant) for m in masks]


def test_causal_biases_match_pytorch():
    want, want_text, want_variants = _run(torch, torch_bias)
    got, got_text, got_variants = _run(ember, ember.nn.attention.bias)
    for w, g in zip(want, got, strict=True):
        assert w.dtype == g.dtype and w.shape == g.shape
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    assert got_text == want_text and got_variants == want_variants


def test_a_lower_right_bias_captures():
    bias = ember.nn.attention.bias.causal_lower_right(2, 5)
    q, kv = ember.randn(1, 2, 2, 4), ember.randn(1, 2, 5, 4)

    def attend(q, kv):
        return ember.nn.functional.scaled_dot_product_attention(q, kv, kv, attn_mask=bias)

    np.testing.assert_allclose(
        ember.function(attend)(q, kv).numpy(), attend(q, kv).numpy(), rtol=1e-6
    )


def test_refusals():
    b = ember.nn.attention.bias
    q = ember.randn(1, 1, 3, 4)
    with pytest.raises(ArgumentError, match="causal=True"):
        ember.nn.functional.scaled_dot_product_attention(
            q, q, q, attn_mask=b.causal_upper_left(3, 3), is_causal=True
        )
    with pytest.raises(ArgumentError, match="2D"):
        b.causal_lower_right(1, 2, 3)
    with pytest.raises(ArgumentError, match="CausalVariant"):
        b.CausalBias(1, 2, 2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        b.causal_lower_right(4, 2)
    assert any("NaNs" in str(w.message) for w in caught)
