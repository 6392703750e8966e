"""Text models: BERT encoders with Hugging Face's names (bert.py) and sentence embeddings
from a sentence-transformers model directory (embedder.py: tokenizer, model, pooling)."""

from .bert import BertConfig, BertModel, load_bert

__all__ = ["BertConfig", "BertModel", "load_bert", "sentence_embedder"]


def __getattr__(name):
    if name == "sentence_embedder":
        from .embedder import sentence_embedder

        return sentence_embedder
    raise AttributeError(f"module 'ember.text' has no attribute {name!r}")
