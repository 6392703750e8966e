"""`ember.nn.attention.flex_attention` against PyTorch's: outputs, log-sum-exps and block
structures of score_mods (ALiBi, a bias table a mod indexes, soft-capping) under mask_mods
combined with and_masks/or_masks, GQA, a key batch of one, fully masked rows and float64;
gradients (PyTorch has no CPU backward for flex_attention) against PyTorch's
scaled_dot_product_attention given the same mask and bias; the captured call against eager;
and the refusals PyTorch makes.
"""

import importlib
import math
import warnings

import numpy as np
import pytest

import ember
from ember.errors import ArgumentError

torch = pytest.importorskip("torch")


def _flex(lib):
    return importlib.import_module(lib.__name__ + ".nn.attention.flex_attention")


def _causal(b, h, q_idx, kv_idx):
    return q_idx + 2 >= kv_idx


def _window(b, h, q_idx, kv_idx):
    return (q_idx - kv_idx).abs() <= 3


def _per_document(b, h, q_idx, kv_idx):
    return (b == 0) | (kv_idx < 5)


def _alibi(score, b, h, q_idx, kv_idx):
    return score + (h + 1) * 0.1 * (kv_idx - q_idx)


def _inputs(lib, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    q = lib.tensor(rng.standard_normal((2, 4, 8, 16)).astype(dtype))
    k = lib.tensor(rng.standard_normal((2, 2, 10, 16)).astype(dtype))
    v = lib.tensor(rng.standard_normal((2, 2, 10, 12)).astype(dtype))
    bias = lib.tensor(rng.standard_normal((4, 8, 10)).astype(dtype))
    return q, k, v, bias


def _results(lib):
    fa = _flex(lib)
    q, k, v, bias = _inputs(lib)

    def table(score, b, h, q_idx, kv_idx):
        return score + bias[h, q_idx, kv_idx]

    def softcap(score, b, h, q_idx, kv_idx):
        return 5 * lib.tanh(score / 5)

    def first_rows(b, h, q_idx, kv_idx):
        return (q_idx < 2) & (kv_idx >= 0)

    out = []
    causal = fa.create_block_mask(_causal, None, None, 8, 10, device="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out += fa.flex_attention(
            q, k, v, score_mod=_alibi, block_mask=causal, enable_gqa=True, return_lse=True
        )
    mask = fa.and_masks(_causal, _window, _per_document)
    blocks = fa.create_block_mask(mask, 2, 1, 8, 10, device="cpu", BLOCK_SIZE=4)
    o, aux = fa.flex_attention(
        q, k, v, table, blocks, scale=0.3, enable_gqa=True, return_aux=fa.AuxRequest(lse=True)
    )
    out += [o, aux.lse, blocks.to_dense(), blocks.kv_num_blocks, blocks.full_kv_num_blocks]
    out += [blocks.kv_indices, blocks.full_kv_indices, blocks.shape, blocks.sparsity()]
    rows = fa.create_block_mask(first_rows, 1, 1, 8, 10, device="cpu", BLOCK_SIZE=(2, 4))
    o, aux = fa.flex_attention(
        q, k, v, softcap, rows, enable_gqa=True, return_aux=fa.AuxRequest(lse=True)
    )
    out += [o, aux.lse, rows.to_dense()]  # (rows 2.. fully masked: zeros and -inf)
    causal2 = fa.create_block_mask(_causal, 2, None, 8, 10, device="cpu")
    out.append(fa.flex_attention(q[:, :2], k[:1], v[:1], block_mask=causal2))  # (a key batch of 1)
    out.append(fa.create_mask(fa.or_masks(_causal, _per_document), 2, None, 8, 10, device="cpu"))
    out.append(fa.create_mask(fa.noop_mask, 1, 1, 2, 3, device="cpu"))
    out.append(fa.flex_attention(q.double(), k.double(), v.double(), enable_gqa=True))
    return out


def test_outputs_and_block_structure_match_pytorch():
    for want, got in zip(_results(torch), _results(ember), strict=True):
        if isinstance(want, torch.Tensor):
            assert want.dtype == getattr(torch, str(got.dtype).split(".")[-1])
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
        else:
            assert got == want


def _sdpa_reference(q, k, v, bias, mask, scale):
    """PyTorch's scaled_dot_product_attention with the flex call's mask and additive bias."""
    k, v = k.repeat_interleave(2, 1), v.repeat_interleave(2, 1)
    attn = torch.where(mask, bias, -math.inf)
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=attn, scale=scale)


def test_gradients_match_scaled_dot_product_attention():
    fa = _flex(ember)
    arrays = [t.numpy() for t in _inputs(ember, seed=3, dtype=np.float64)]
    q, k, v, table = (ember.tensor(a, requires_grad=True) for a in arrays)
    tq, tk, tv, ttable = (torch.tensor(a, requires_grad=True) for a in arrays)

    def score_mod(score, b, h, q_idx, kv_idx):
        return score + table[h, q_idx, kv_idx] + _alibi(0.0, b, h, q_idx, kv_idx)

    blocks = fa.create_block_mask(fa.and_masks(_causal, _window), 2, 4, 8, 10, BLOCK_SIZE=4)
    out = fa.flex_attention(q, k, v, score_mod, blocks, scale=0.25, enable_gqa=True)
    (out * ember.linspace(-1, 1, 12, dtype=ember.float64)).sum().backward()

    b, h, i, j = (torch.arange(n).reshape(s) for n, s in zip((2, 4, 8, 10), _SHAPES))
    mask = (_causal(b, h, i, j) & _window(b, h, i, j)).expand(2, 4, 8, 10)
    bias = ttable[h, i, j] + _alibi(0.0, b, h, i, j)  # (added to the scaled scores)
    want = _sdpa_reference(tq, tk, tv, bias, mask, 0.25)
    (want * torch.linspace(-1, 1, 12, dtype=torch.float64)).sum().backward()
    np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), rtol=1e-10)
    for got, ref in [(q, tq), (k, tk), (v, tv), (table, ttable)]:
        np.testing.assert_allclose(got.grad.numpy(), ref.grad.numpy(), rtol=1e-9, atol=1e-12)


_SHAPES = [(-1, 1, 1, 1), (1, -1, 1, 1), (1, 1, -1, 1), (1, 1, 1, -1)]


def test_fully_masked_rows_give_zeros_and_finite_gradients():
    fa = _flex(ember)
    q, k, v, _ = (t.requires_grad_() for t in _inputs(ember, seed=1))
    blocks = fa.create_block_mask(lambda b, h, qi, ki: (qi < 3) & (ki >= 0), None, None, 8, 10)
    out = fa.flex_attention(q, k, v, block_mask=blocks, enable_gqa=True)
    out.square().sum().backward()
    assert np.all(out.detach().numpy()[:, :, 3:] == 0)
    for t in (q, k, v):
        assert np.isfinite(t.grad.numpy()).all()
    assert np.all(q.grad.numpy()[:, :, 3:] == 0)


def test_captured_call_equals_eager():
    fa = _flex(ember)
    q, k, v, bias = _inputs(ember, seed=2)
    blocks = fa.create_block_mask(_causal, None, None, 8, 10)

    def attend(q, k, v):
        score_mod = lambda s, b, h, i, j: s + bias[h, i, j]  # noqa: E731
        return fa.flex_attention(q, k, v, score_mod, blocks, enable_gqa=True)

    np.testing.assert_allclose(
        ember.function(attend)(q, k, v).numpy(), attend(q, k, v).numpy(), rtol=1e-6, atol=1e-6
    )


def test_refusals_name_the_problem():
    fa = _flex(ember)
    q, k, v, _ = _inputs(ember)
    with pytest.raises(ember.ShapeError, match="enable_gqa=True"):
        fa.flex_attention(q, k, v)
    with pytest.raises(ember.ShapeError, match="block_mask was created for"):
        blocks = fa.create_block_mask(_causal, 1, 1, 8, 12)
        fa.flex_attention(q, k, v, block_mask=blocks, enable_gqa=True)
    with pytest.raises(ember.ShapeError, match="same batch size"):
        fa.flex_attention(q, k[:1], v[:1], enable_gqa=True)
    with pytest.raises(NotImplementedError, match="4-D"):
        fa.flex_attention(q[0], k[0], v[0])
    with pytest.raises(ArgumentError, match="mask_mod"):
        fa.create_block_mask(_alibi, 1, 1, 8, 10)
    with pytest.raises(ArgumentError, match="callable"):
        fa.and_masks(_causal, 3)
