"""Hostile tokenizer.json files in a sentence-transformers folder (text/embedder.py): a
structured fuzzer replaces the tokenizer's parts (normalizer, post-processor, truncation,
padding, model vocabulary, added tokens) with hostile ones, and embedding texts with the
folder must give vectors or an `EmberError` naming the tokenizer's file.

Escapes these found (files57): a ``Precompiled`` normalizer whose charsmap is damaged made the
Rust library panic, at load or only when a text was normalized, and pyo3's PanicException is
a BaseException, which the loader's ``except Exception`` let through (and the texts' encoding
was not guarded at all); a post-processor's special tokens and type ids are the file's own
numbers, so ids past the model's embeddings, or more tokens than max_seq_length, reached BERT
and failed there as an index error naming no file.
"""

from __future__ import annotations

import base64
import copy
import json
import random
import shutil

import numpy as np
import pytest

from ember.errors import EmberError
from ember.text.embedder import sentence_embedder

from . import files54_fuzzing as fz
from .test_files54_text_models import WORDS, model_folder  # noqa: F401 (the fixture)

tokenizers = pytest.importorskip("tokenizers")


@pytest.fixture
def seed_folder(request):
    """test_files54_text_models' tiny model folder (its module-scoped fixture)."""
    return request.getfixturevalue("model_folder")


TEXTS = ["hello world", "files are hostile hello", "unknown words here"]


def _charsmap(rng: random.Random) -> str:
    """A precompiled charsmap: a little-endian trie size, then bytes, of random lengths."""
    size = rng.choice([0, 1, 4, 8, 16, 2**31 - 1, rng.randrange(64)])
    body = bytes(rng.randrange(256) for _ in range(rng.choice([0, 3, 8, 17, 64])))
    return base64.b64encode(size.to_bytes(4, "little") + body).decode()


def _template(rng: random.Random) -> dict:
    token = rng.choice(["[CLS]", "[SEP]", "<x>"])
    count = rng.choice([1, 2, 20])
    single = [{"SpecialToken": {"id": token, "type_id": rng.choice([0, 1, 7])}}] * count
    single.append({"Sequence": {"id": "A", "type_id": rng.choice([0, 1, 2, 2**31])}})
    ids = rng.choice([[2], [len(WORDS)], [2**32 - 1], [2, 3], []])
    special = {token: {"id": token, "ids": ids, "tokens": [token] * len(ids)}}
    return {
        "type": "TemplateProcessing",
        "single": single,
        "pair": single,
        "special_tokens": special,
    }


def _mutation(tokenizer: dict, rng: random.Random) -> dict:
    tokenizer = copy.deepcopy(tokenizer)
    part = rng.choice(["normalizer", "post", "truncation", "padding", "vocab", "added", "json"])
    if part == "normalizer":
        tokenizer["normalizer"] = rng.choice([
            {"type": "Precompiled", "precompiled_charsmap": _charsmap(rng)},
            {"type": "Replace", "pattern": {"Regex": rng.choice(["(", "a{99999999}", "."])},
             "content": "x" * rng.choice([0, 1, 1000])},
            {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}]},
        ])  # fmt: skip
    elif part == "post":
        tokenizer["post_processor"] = _template(rng)
    elif part == "truncation":
        tokenizer["truncation"] = {
            "direction": rng.choice(["Right", "Left", "Up"]),
            "max_length": rng.choice([0, 1, 2**31, -1]),
            "strategy": rng.choice(["LongestFirst", "OnlyFirst"]),
            "stride": rng.choice([0, 5, 2**31]),
        }
    elif part == "padding":
        tokenizer["padding"] = {
            "strategy": rng.choice(["BatchLongest", {"Fixed": rng.choice([0, 3, 2**20])}]),
            "direction": "Right", "pad_to_multiple_of": rng.choice([None, 0, 7]),
            "pad_id": rng.choice([0, len(WORDS), 2**32 - 1]), "pad_type_id": rng.choice([0, 9]),
            "pad_token": "[PAD]",
        }  # fmt: skip
    elif part == "vocab":
        word = rng.choice(WORDS)
        tokenizer["model"]["vocab"][word] = rng.choice([0, -1, len(WORDS), 2**32, 2**32 - 1])
    elif part == "added":
        tokenizer["added_tokens"] = [
            {"id": rng.choice([0, 4, len(WORDS), 2**32 - 1]), "content": rng.choice(["hello", ""]),
             "single_word": False, "lstrip": False, "rstrip": False, "normalized": True,
             "special": rng.random() < 0.5}
        ]  # fmt: skip
    else:
        return fz.mutate_json(tokenizer, rng)
    return tokenizer


def test_seeded_hostile_tokenizers_embed_or_are_refused_naming_the_file(seed_folder, tmp_path):
    seed = json.loads((seed_folder / "tokenizer.json").read_text())
    rng = random.Random(fz.seed(57))
    folder = tmp_path / "m"
    shutil.copytree(seed_folder, folder)
    embedded = refused = 0
    for case in range(fz.cases(150)):
        hostile = _mutation(seed, rng)
        try:
            text = json.dumps(hostile)
        except (ValueError, RecursionError):
            continue
        (folder / "tokenizer.json").write_text(text, errors="surrogatepass")
        try:
            out = sentence_embedder(str(folder))(TEXTS, numpy=True, ragged=case % 2 == 0)
        except EmberError as exc:
            assert "tokenizer.json" in str(exc), f"case {case}: {exc}"
            refused += 1
            continue
        assert out.shape == (3, 4) and np.isfinite(out).all(), case
        embedded += 1
    assert embedded > 10 and refused > 10  # (both outcomes reached)


@pytest.mark.parametrize("trie_size", [0, 4, 8])
def test_a_damaged_precompiled_charsmap_is_refused_naming_the_file(
    seed_folder, tmp_path, trie_size
):
    """These made the library panic when a text was normalized (the charsmap's trie indexes
    past its bytes): a BaseException the loader's ``except Exception`` did not catch."""
    tokenizer = json.loads((seed_folder / "tokenizer.json").read_text())
    charsmap = trie_size.to_bytes(4, "little") + bytes(range(1, 1 + trie_size // 2))
    tokenizer["normalizer"] = {
        "type": "Precompiled",
        "precompiled_charsmap": base64.b64encode(charsmap).decode(),
    }
    folder = tmp_path / "m"
    shutil.copytree(seed_folder, folder)
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))
    with pytest.raises(EmberError, match="tokenizer.json: the tokenizer failed"):
        sentence_embedder(str(folder))(TEXTS)


@pytest.mark.parametrize(
    ("ids", "type_id", "message"),
    [([len(WORDS)], 0, "token id 9, past the model's vocab_size 9"),
     ([2], 2, "token type 2, past the model's type_vocab_size 2")],
)  # fmt: skip
def test_post_processor_ids_past_the_model_are_refused_naming_the_file(
    seed_folder,
    tmp_path,
    ids,
    type_id,
    message,
):
    tokenizer = json.loads((seed_folder / "tokenizer.json").read_text())
    tokenizer["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [
            {"SpecialToken": {"id": "[CLS]", "type_id": type_id}},
            {"Sequence": {"id": "A", "type_id": 0}},
        ],
        "pair": [{"Sequence": {"id": "A", "type_id": 0}}],
        "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": ids, "tokens": ["[CLS]"]}},
    }
    folder = tmp_path / "m"
    shutil.copytree(seed_folder, folder)
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))
    for ragged in (False, True):
        with pytest.raises(EmberError, match=f"tokenizer.json: the tokenizer gave {message}"):
            sentence_embedder(str(folder))(TEXTS, ragged=ragged)
