"""TfIdfVectorizer: n-gram counts of token rows (strings or integers) against a pool of n-grams.

A featurizer over token ids or strings, computed in NumPy from the data (it reads tokens, not
numbers to differentiate), so a captured model with it runs eagerly. The semantics follow the
operator's spec: for each skip distance ``d`` from 1 to ``max_skip_count + 1``, each start
position, the n-grams made of the items at ``start, start + d, ...`` whose length lies in
[min_gram_length, max_gram_length] and which the pool holds are counted at their output column
(``ngram_indexes``); unigrams are counted once, not once per skip distance. ``mode`` then
weights the counts: TF the counts, IDF ``weights`` (1 by default) where a count is positive,
TFIDF ``weights * counts`` (the i-th weight is the i-th n-gram's, at its column).
"""

from __future__ import annotations

import numpy as np

from .._convert import converter


def _pool(ctx) -> dict:
    """{n-gram tuple: output column} of the node's pool."""
    strings = ctx.attr("pool_strings", None)
    ints = ctx.attr("pool_int64s", None)
    if (strings is None) == (ints is None):
        raise ctx.error("exactly one of pool_strings and pool_int64s is required")
    items = list(strings) if strings is not None else [int(v) for v in ints]
    counts = [int(c) for c in ctx.attr("ngram_counts")]
    indexes = [int(i) for i in ctx.attr("ngram_indexes")]
    low, high = int(ctx.attr("min_gram_length")), int(ctx.attr("max_gram_length"))
    if not 1 <= low <= high:
        raise ctx.error(f"min_gram_length {low} and max_gram_length {high} are not 1 <= min <= max")
    if counts != sorted(counts) or (counts and (counts[0] != 0 or counts[-1] > len(items))):
        raise ctx.error(f"ngram_counts {counts} must rise from 0 within the pool's {len(items)}")
    pool, ngram_id = {}, 0
    for length, start in enumerate(counts, start=1):
        end = counts[length] if length < len(counts) else len(items)
        for first in range(start, end - length + 1, length):
            if low <= length <= high:
                if ngram_id >= len(indexes):
                    raise ctx.error("ngram_indexes has fewer entries than the pool has n-grams")
                pool[tuple(items[first : first + length])] = indexes[ngram_id]
            ngram_id += 1
    return pool


@converter("TfIdfVectorizer", 9, fold=True)
def _tfidf(ctx, x):
    data = np.asarray(ctx.static(x, "TfIdfVectorizer's tokens"))
    if data.ndim not in (1, 2) or (data.ndim == 2 and data.shape[0] < 1):
        raise ctx.error(f"takes tokens of shape [C] or [N, C] with N > 0, got {data.shape}")
    pool = _pool(ctx)
    indexes = [int(i) for i in ctx.attr("ngram_indexes")]
    size = max(indexes) + 1 if indexes else 0
    low, high = int(ctx.attr("min_gram_length")), int(ctx.attr("max_gram_length"))
    skips = int(ctx.attr("max_skip_count", 0))
    if skips < 0 or any(i < 0 for i in indexes):
        raise ctx.error("max_skip_count and ngram_indexes must not be negative")
    rows = data.reshape(1, -1) if data.ndim == 1 else data
    counts = np.zeros((rows.shape[0], size), np.int64)
    text = data.dtype.kind in "OSU"
    for r, row in enumerate(rows):
        tokens = [str(t) if text else int(t) for t in row]
        for distance in range(1, skips + 2):
            shortest = low if low > 1 or distance == 1 else 2  # unigrams counted once
            for start in range(len(tokens)):
                for length in range(shortest, high + 1):
                    last = start + (length - 1) * distance
                    if last >= len(tokens):
                        break
                    column = pool.get(tuple(tokens[start : last + 1 : distance]))
                    if column is not None:
                        counts[r, column] += 1
    mode = ctx.attr("mode")
    # the spec's weights follow the pool's n-grams (the i-th weighs the i-th n-gram), which
    # land at their columns (onnxruntime's reading; onnx's reference indexes them by column,
    # the same where ngram_indexes is the identity, as in its cases)
    weights = ctx.attr("weights", None)
    w = np.ones(size, np.float32)
    if weights is not None:
        if len(weights) != len(indexes):
            raise ctx.error(f"weights has {len(weights)} values for {len(indexes)} n-grams")
        w[indexes] = np.asarray(weights, np.float32)
    if mode == "TF":
        out = counts.astype(np.float32)
    elif mode == "IDF":
        out = np.where(counts > 0, w, np.float32(0))
    elif mode == "TFIDF":
        out = counts * w
    else:
        raise ctx.error(f"mode must be TF, IDF or TFIDF, got {mode!r}")
    out = out.astype(np.float32)
    return out[0] if data.ndim == 1 else out
