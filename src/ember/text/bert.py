"""BERT encoders (`BertModel`, `BertConfig`) built from ``ember.nn``, with Hugging Face's
parameter names, so a ``transformers`` BERT checkpoint (``model.safetensors``) loads with
``load_state_dict(strict=True)``: ``embeddings.word_embeddings.weight``,
``encoder.layer.N.attention.self.query.weight``, ..., ``pooler.dense.weight``.

The forward pass is Hugging Face's ``BertModel`` (post-LayerNorm blocks, absolute positions,
dropout at the config's rates in training mode only): self-attention through
``F.scaled_dot_product_attention`` with the attention mask as a boolean keep-mask over the keys
(padding positions are never attended to), or, for ragged input ids (``ember.ragged``), over the
packed tokens of all sentences with no padding at all: attention within each sentence
(ops/varlen_attention.py), positions restarting per sentence; the feed-forward activation that
``hidden_act`` names ("gelu": exact erf form, "gelu_new" / "gelu_pytorch_tanh": the tanh
approximation, "relu"). It returns
``(last_hidden_state, pooler_output)`` as ``transformers`` does with ``return_dict=False``.

`load_bert(directory)` reads ``config.json`` and ``model.safetensors`` with ember's own
safetensors reader (ember/io/checkpoint.py: header, extents and file size checked).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, fields

import numpy as np

from .. import nn
from .._file_limits import check_allocation, read_json
from ..dtypes import bool_, int64
from ..errors import EmberError
from ..nn import functional as F
from ..ops.creation import arange, from_numpy, ones_like, zeros, zeros_like
from ..ops.indexing import getitem as E_getitem
from ..ragged import RaggedTensor, varlen_attention
from ..tensor import Tensor

__all__ = ["BertConfig", "BertModel", "load_bert"]

_ACTIVATIONS = {
    "gelu": lambda x: F.gelu(x),
    "gelu_new": lambda x: F.gelu(x, approximate="tanh"),
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "relu": F.relu,
}


@dataclass(frozen=True)
class BertConfig:
    """The fields of a ``transformers`` BERT ``config.json`` that the forward pass reads (the
    file's other entries, e.g. dropout rates used only in training, are ignored)."""

    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    hidden_dropout_prob: float = 0.1  # (training only: eval() turns dropout off)
    attention_probs_dropout_prob: float = 0.1
    pad_token_id: int = 0
    position_embedding_type: str = "absolute"

    def __post_init__(self):
        if self.hidden_size % self.num_attention_heads:
            raise EmberError(
                f"hidden_size {self.hidden_size} is not a multiple of num_attention_heads "
                f"{self.num_attention_heads}",
                op="BertConfig",
            )
        if self.hidden_act not in _ACTIVATIONS:
            raise EmberError(
                f"hidden_act {self.hidden_act!r} is not supported; one of "
                f"{', '.join(_ACTIVATIONS)}",
                op="BertConfig",
            )
        if self.position_embedding_type != "absolute":
            raise EmberError(
                f"position_embedding_type {self.position_embedding_type!r} is not supported "
                "(only 'absolute')",
                op="BertConfig",
            )

    @classmethod
    def from_dict(cls, values: dict, where: str = "BertConfig") -> BertConfig:
        """The configuration of a ``config.json``'s object; every field the forward pass reads
        is checked for its kind and range (a file is not trusted), each refusal naming
        ``where`` (the file) and the field."""
        known = {f.name for f in fields(cls)}
        chosen = {k: v for k, v in values.items() if k in known}
        for name, value in chosen.items():
            _check_field(name, value, where)
        config = cls(**chosen)
        if not 0 <= config.pad_token_id < config.vocab_size:
            raise EmberError(
                f"{where}: pad_token_id {config.pad_token_id} is not a token id below "
                f"vocab_size {config.vocab_size}",
                op="BertConfig",
            )
        return config

    def parameter_count(self) -> int:
        """How many numbers `BertModel` of this configuration holds (its weights and the
        position-ids buffer): what building it allocates."""
        h, i = self.hidden_size, self.intermediate_size
        embeddings = (self.vocab_size + self.max_position_embeddings + self.type_vocab_size) * h
        layer = 4 * (h * h + h) + 2 * h * i + i + h + 4 * h  # attention, feed-forward, 2 norms
        norm, pooler, position_ids = 2 * h, h * h + h, self.max_position_embeddings
        return embeddings + norm + self.num_hidden_layers * layer + pooler + position_ids

    @classmethod
    def from_json(cls, path) -> BertConfig:
        """The configuration in a ``transformers`` ``config.json``."""
        path = os.fspath(path)
        values = read_json(path, "a BERT config", dict, EmberError, "BertConfig.from_json")
        if values.get("model_type", "bert") != "bert":
            raise EmberError(
                f"{path}: model_type is {values['model_type']!r:.60}, not 'bert'",
                op="BertConfig.from_json",
            )
        return cls.from_dict(values, path)


# what each field read from a file must be: sizes are counts of at least one (pad_token_id
# and the dropout rates may be 0), rates lie in [0, 1], the epsilon is positive and finite
_AT_LEAST = {"pad_token_id": 0}
_RATES = ("hidden_dropout_prob", "attention_probs_dropout_prob")


def _check_field(name: str, value, where: str) -> None:
    kind = {f.name: f.type for f in fields(BertConfig)}[name]
    if kind == "int":
        ok = type(value) is int and value >= _AT_LEAST.get(name, 1)
        wanted = f"a whole number of at least {_AT_LEAST.get(name, 1)}"
    elif kind == "float":
        ok = type(value) in (int, float) and math.isfinite(value)
        ok = ok and (0 <= value <= 1 if name in _RATES else value > 0)
        wanted = "a number from 0 to 1" if name in _RATES else "a positive finite number"
    else:
        ok, wanted = isinstance(value, str), "a string"
    if not ok:
        raise EmberError(f"{where}: {name} must be {wanted}, got {value!r:.60}", op="BertConfig")


class BertEmbeddings(nn.Module):
    def __init__(self, c: BertConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(c.vocab_size, c.hidden_size, padding_idx=c.pad_token_id)
        self.position_embeddings = nn.Embedding(c.max_position_embeddings, c.hidden_size)
        self.token_type_embeddings = nn.Embedding(c.type_vocab_size, c.hidden_size)
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.dropout = nn.Dropout(c.hidden_dropout_prob)
        # (transformers' checkpoints of this era save position_ids; it is a buffer there too)
        self.register_buffer("position_ids", arange(c.max_position_embeddings).reshape(1, -1))

    def forward(self, input_ids, token_type_ids, positions=None):
        # 0, 1, ..., S-1 per row, written so that S may be a symbolic size (ONNX export); the
        # position_ids buffer is there for the checkpoint's sake. Packed (1-D) ids come with
        # their positions, which restart at each sentence
        if positions is None:
            positions = ones_like(input_ids).cumsum(1) - 1
        x = (
            self.word_embeddings(input_ids)
            + self.token_type_embeddings(token_type_ids)
            + self.position_embeddings(positions)
        )
        return self.dropout(self.LayerNorm(x))


class BertSelfAttention(nn.Module):
    def __init__(self, c: BertConfig):
        super().__init__()
        self.heads = c.num_attention_heads
        self.head_size = c.hidden_size // c.num_attention_heads
        self.query = nn.Linear(c.hidden_size, c.hidden_size)
        self.key = nn.Linear(c.hidden_size, c.hidden_size)
        self.value = nn.Linear(c.hidden_size, c.hidden_size)
        self.dropout_p = c.attention_probs_dropout_prob

    def _split(self, x):
        b, s, _ = x.shape
        return x.reshape(b, s, self.heads, self.head_size).transpose(1, 2)

    def forward(self, x, keep):
        if x.ndim == 2:  # packed sentences (tokens, hidden); keep: their row splits
            return self._packed(x, keep)
        b, s, h = x.shape
        q, k, v = self._split(self.query(x)), self._split(self.key(x)), self._split(self.value(x))
        p = self.dropout_p if self.training else 0.0
        # (scale: 1/sqrt(head size), the default)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, dropout_p=p)
        return out.transpose(1, 2).reshape(b, s, h)

    def _packed(self, x, row_splits):
        """Attention within each packed sentence (ops/varlen_attention.py): the block
        diagonal of the scores, so no sentence sees another and there is no padding."""
        if self.training and self.dropout_p:
            raise EmberError(
                "packed (ragged) attention has no attention dropout: call eval() or pad",
                op="BertSelfAttention",
            )
        t, h = x.shape

        def heads(y):
            return y.reshape(t, self.heads, self.head_size)

        q, k, v = heads(self.query(x)), heads(self.key(x)), heads(self.value(x))
        return varlen_attention(q, k, v, row_splits).reshape(t, h)


class BertSelfOutput(nn.Module):
    def __init__(self, c: BertConfig):
        super().__init__()
        self.dense = nn.Linear(c.hidden_size, c.hidden_size)
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.dropout = nn.Dropout(c.hidden_dropout_prob)

    def forward(self, x, residual):
        return self.LayerNorm(self.dropout(self.dense(x)) + residual)


class BertAttention(nn.Module):
    def __init__(self, c: BertConfig):
        super().__init__()
        self.self = BertSelfAttention(c)
        self.output = BertSelfOutput(c)

    def forward(self, x, keep):
        return self.output(self.self(x, keep), x)


class BertIntermediate(nn.Module):
    def __init__(self, c: BertConfig):
        super().__init__()
        self.dense = nn.Linear(c.hidden_size, c.intermediate_size)
        self.act = _ACTIVATIONS[c.hidden_act]

    def forward(self, x):
        return self.act(self.dense(x))


class BertOutput(nn.Module):
    def __init__(self, c: BertConfig):
        super().__init__()
        self.dense = nn.Linear(c.intermediate_size, c.hidden_size)
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.dropout = nn.Dropout(c.hidden_dropout_prob)

    def forward(self, x, residual):
        return self.LayerNorm(self.dropout(self.dense(x)) + residual)


class BertLayer(nn.Module):
    def __init__(self, c: BertConfig):
        super().__init__()
        self.attention = BertAttention(c)
        self.intermediate = BertIntermediate(c)
        self.output = BertOutput(c)

    def forward(self, x, keep):
        a = self.attention(x, keep)
        return self.output(self.intermediate(a), a)


class BertEncoder(nn.Module):
    def __init__(self, c: BertConfig):
        super().__init__()
        self.layer = nn.ModuleList([BertLayer(c) for _ in range(c.num_hidden_layers)])

    def forward(self, x, keep):
        for block in self.layer:
            x = block(x, keep)
        return x


def first_token(x):
    """``x[:, 0]`` of (batch, sequence, hidden) states (the [CLS] token's), written with
    index_select so that the batch and sequence sizes may be symbolic (ONNX export)."""
    index = zeros((1,), dtype=int64)
    return x.index_select(1, index).reshape(x.shape[0], x.shape[2])


class BertPooler(nn.Module):
    def __init__(self, c: BertConfig):
        super().__init__()
        self.dense = nn.Linear(c.hidden_size, c.hidden_size)

    def forward(self, x):
        return F.tanh(self.dense(first_token(x)))


class BertModel(nn.Module):
    """``transformers.BertModel``'s structure and names. ``forward(input_ids,
    attention_mask=None, token_type_ids=None)`` takes (batch, sequence) int64 token ids, a
    (batch, sequence) mask (nonzero / True: a real token, 0: padding; default all real) and
    segment ids (default 0), and returns ``(last_hidden_state, pooler_output)``."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.embeddings = BertEmbeddings(config)
        self.encoder = BertEncoder(config)
        self.pooler = BertPooler(config)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        if isinstance(input_ids, RaggedTensor):
            return self._forward_packed(input_ids, attention_mask, token_type_ids)
        if input_ids.ndim != 2:
            raise EmberError(
                f"input_ids must be (batch, sequence), got shape {tuple(input_ids.shape)}",
                op="BertModel",
            )
        length = input_ids.shape[1]  # (a symbolic size while exporting: checked at run time)
        if isinstance(length, int) and length > self.config.max_position_embeddings:
            raise EmberError(
                f"sequence of {input_ids.shape[1]} tokens is longer than the model's "
                f"{self.config.max_position_embeddings} positions; truncate it",
                op="BertModel",
            )
        if token_type_ids is None:
            token_type_ids = zeros_like(input_ids)
        if attention_mask is None:
            keep = ones_like(input_ids, dtype=bool_)
        else:
            keep = attention_mask != 0
        keep = keep.reshape(input_ids.shape[0], 1, 1, input_ids.shape[1])
        x = self.embeddings(input_ids, token_type_ids)
        x = self.encoder(x, keep)
        return x, self.pooler(x)

    def _forward_packed(self, input_ids, attention_mask, token_type_ids):
        """Ragged input ids (one row per sentence): BERT over the packed tokens, no padding.
        Linear layers, layer norms and GELU run on the (tokens, hidden) values, attention
        within each sentence, positions restart at each sentence. Returns the ragged last
        hidden state and the (sentences, hidden) pooler output."""
        if attention_mask is not None:
            raise EmberError(
                "ragged input_ids take no attention_mask: every token is real", op="BertModel"
            )
        splits = input_ids.row_splits
        if isinstance(splits, Tensor):  # (known eagerly; a captured call checks nothing)
            lengths = np.diff(splits.numpy(force=True))
            most = self.config.max_position_embeddings
            if len(lengths) and (lengths.min() < 1 or lengths.max() > most):
                raise EmberError(
                    f"every sentence needs 1 to {most} tokens, got lengths from "
                    f"{lengths.min()} to {lengths.max()}; truncate long ones",
                    op="BertModel",
                )
        ids = input_ids.values
        types = zeros_like(ids) if token_type_ids is None else token_type_ids.values
        positions = input_ids.row_positions()
        x = self.embeddings(ids, types, positions)
        x = self.encoder(x, splits)
        cls = x.index_select(0, E_getitem(splits, slice(None, -1)))
        return input_ids.with_values(x), F.tanh(self.pooler.dense(cls))


def load_bert(directory) -> BertModel:
    """The BERT model saved in ``directory`` (``config.json`` and ``model.safetensors`` as
    ``transformers`` writes them), weights loaded strictly, in eval mode."""
    from ..io.checkpoint import read_safetensors

    directory = os.fspath(directory)
    config_path = os.path.join(directory, "config.json")
    weights = os.path.join(directory, "model.safetensors")
    config = BertConfig.from_json(config_path)
    _check_size(config, config_path, weights)
    model = BertModel(config)
    _metadata, arrays = read_safetensors(weights, lambda metadata, path: None)
    state = {name: from_numpy(a) for name, a in arrays.items()}
    # (newer transformers versions no longer save the position_ids buffer)
    state.setdefault("embeddings.position_ids", model.embeddings.position_ids)
    model.load_state_dict(state, strict=True)
    return model.eval()


def _check_size(config: BertConfig, config_path: str, weights: str) -> None:
    """Refuse a configuration whose model could not be what ``weights`` holds, before the
    model is built: a strict load needs every weight in the file, at least a byte each (the
    position ids excepted: newer files leave them out), and none may outgrow memory."""
    count = config.parameter_count()
    check_allocation(4 * count, f"{config_path}: the model it configures", EmberError, "load_bert")
    try:
        size = os.stat(weights).st_size
    except OSError:
        return  # (the reader says what is wrong with it)
    if count - config.max_position_embeddings > size:
        raise EmberError(
            f"{config_path}: configures {count:,} weights, more than {weights}'s {size:,} "
            "bytes can hold",
            op="load_bert",
        )
