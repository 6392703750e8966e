"""Hostile model folders for `ember.text` (load_bert, sentence_embedder): seeded mutations of
a tiny sentence-transformers folder (config.json, modules.json, the pooling config,
sentence_bert_config.json, model.safetensors, tokenizer.json) are loaded and run, or refused
with an `EmberError` naming the file; a module path read from modules.json never leads out of
the folder; a config whose model no memory (or no weights file) holds is refused before the
model is built."""

from __future__ import annotations

import json
import os
import random
import shutil

import numpy as np
import pytest

import ember
from ember.errors import EmberError
from ember.text.bert import BertConfig, BertModel, load_bert
from ember.text.embedder import sentence_embedder

from . import files54_fuzzing as fz

tokenizers = pytest.importorskip("tokenizers")
safetensors_numpy = pytest.importorskip("safetensors.numpy")

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "hello", "world", "files", "are", "hostile"]
CONFIG = {
    "architectures": ["BertModel"],
    "model_type": "bert",
    "vocab_size": len(WORDS),
    "hidden_size": 4,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "intermediate_size": 8,
    "hidden_act": "gelu",
    "max_position_embeddings": 16,
    "type_vocab_size": 2,
    "layer_norm_eps": 1e-12,
    "pad_token_id": 0,
}
KINDS = ("Transformer", "Pooling", "Normalize")
MODULES = [
    {"idx": k, "name": str(k), "path": path, "type": f"sentence_transformers.models.{kind}"}
    for k, (path, kind) in enumerate(zip(("", "1_Pooling", "2_Normalize"), KINDS))
]
JSON_FILES = {
    "config.json": CONFIG,
    "modules.json": MODULES,
    "1_Pooling/config.json": {"word_embedding_dimension": 4, "pooling_mode_mean_tokens": True},
    "sentence_bert_config.json": {"max_seq_length": 12, "do_lower_case": False},
}


def _tokenizer_json() -> str:
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    tokenizer = Tokenizer(models.WordLevel({w: k for k, w in enumerate(WORDS)}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    return tokenizer.to_str()


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("model")
    (folder / "1_Pooling").mkdir()
    (folder / "2_Normalize").mkdir()
    for name, value in JSON_FILES.items():
        (folder / name).write_text(json.dumps(value))
    (folder / "tokenizer.json").write_text(_tokenizer_json())
    ember.manual_seed(0)
    model = BertModel(BertConfig.from_dict(CONFIG))
    state = {k: v.numpy() for k, v in model.state_dict().items()}
    safetensors_numpy.save_file(state, str(folder / "model.safetensors"))
    return folder


def test_the_seed_folder_embeds(model_folder):
    out = sentence_embedder(str(model_folder))(["hello world", "files are hostile"], numpy=True)
    assert out.shape == (2, 4) and np.allclose(np.linalg.norm(out, axis=1), 1, atol=1e-6)


def _write_mutation(folder, rng: random.Random) -> str:
    if rng.random() < 0.25:
        name = rng.choice(["model.safetensors", "tokenizer.json"])
        data = (folder / name).read_bytes()
        (folder / name).write_bytes(fz.mutate_bytes(data, rng, [0, 8, 9, 16, 64, 200]))
        return name
    name = rng.choice(list(JSON_FILES))
    value = fz.mutate_json(JSON_FILES[name], rng)
    try:
        text = json.dumps(value)
    except (RecursionError, ValueError):
        text = "[" * 100000
    (folder / name).write_text(text, errors="surrogatepass")
    return f"{name}: {text[:120]}"


def test_mutated_model_folders_load_and_run_or_are_refused(model_folder, tmp_path):
    rng = random.Random(fz.seed())
    tally = fz.Tally()
    for case in range(fz.cases(400)):
        folder = tmp_path / str(case)
        shutil.copytree(model_folder, folder)
        what = _write_mutation(folder, rng)
        tally.check(f"case {case}, {what}", lambda: sentence_embedder(str(folder))("hello world"))
        shutil.rmtree(folder)
    assert not tally.escapes, tally.report()
    assert tally.read and tally.refused  # both outcomes reached


@pytest.mark.parametrize("path", ["../outside", "/etc", "a/../../outside", "link", 7, None])
def test_a_module_path_may_not_lead_out_of_the_folder(model_folder, tmp_path, path):
    folder = tmp_path / "m"
    shutil.copytree(model_folder, folder)
    outside = tmp_path / "outside"
    shutil.copytree(model_folder / "1_Pooling", outside)
    os.symlink(outside, folder / "link")
    modules = json.loads((folder / "modules.json").read_text())
    modules[1]["path"] = path
    (folder / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(
        EmberError,
        match=f"modules.json: module 1's path .*{'' if path is None or path == 7 else 'outside'}",
    ):  # noqa: E501
        sentence_embedder(str(folder))


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("hidden_size", 2**31, "more than this machine's"),
        ("vocab_size", 10**6, "more than .*model.safetensors's"),
        ("num_hidden_layers", 10**4, "more than .*model.safetensors's"),
        ("num_attention_heads", 0, "num_attention_heads must be a whole number of at least 1"),
        ("layer_norm_eps", "x", "layer_norm_eps must be a positive finite number"),
        ("pad_token_id", len(WORDS), "pad_token_id 9 is not a token id below vocab_size 9"),
        ("hidden_act", ["gelu"], "hidden_act must be a string"),
        ("max_position_embeddings", True, "max_position_embeddings must be a whole number"),
    ],
)
def test_config_fields_are_checked_before_the_model_is_built(
    model_folder, tmp_path, field, value, message
):
    folder = tmp_path / "m"
    shutil.copytree(model_folder, folder)
    (folder / "config.json").write_text(json.dumps({**CONFIG, field: value}))
    with pytest.raises(EmberError, match=f"config.json: (.*){message}"):
        load_bert(str(folder))


def test_parameter_count_is_what_the_model_holds():
    config = BertConfig.from_dict(CONFIG)
    model = BertModel(config)
    assert config.parameter_count() == sum(t.numel() for t in model.state_dict().values())


def test_a_tokenizer_giving_ids_past_the_vocabulary_is_refused_naming_it(model_folder, tmp_path):
    from tokenizers import Tokenizer, models

    folder = tmp_path / "m"
    shutil.copytree(model_folder, folder)
    vocabulary = {"[UNK]": 1, "hello": len(WORDS)}  # one past the model's embeddings
    Tokenizer(models.WordLevel(vocabulary, unk_token="[UNK]")).save(str(folder / "tokenizer.json"))
    with pytest.raises(EmberError, match="tokenizer.json: .* ids up to 9, .*vocab_size 9"):
        sentence_embedder(str(folder))


def test_a_tokenizer_file_no_memory_can_parse_is_refused_before_parsing(model_folder, tmp_path):
    from ember._file_limits import physical_memory

    folder = tmp_path / "m"
    shutil.copytree(model_folder, folder)
    with open(folder / "tokenizer.json", "ab") as f:
        f.truncate(physical_memory() // 2)  # (sparse: no disk used)
    with pytest.raises(EmberError, match="tokenizer.json: parsing this tokenizer .* more than"):
        sentence_embedder(str(folder))
