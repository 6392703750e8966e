"""TfIdfVectorizer against onnxruntime over random pools, skip counts, gram lengths and modes."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper  # noqa: E402

import ember  # noqa: E402


def _model(rng, mode, low, high, skips, strings):
    unigrams = sorted(rng.choice(8, 4, replace=False).tolist())
    bigrams = rng.integers(0, 8, (3, 2)).reshape(-1).tolist()
    trigrams = rng.integers(0, 8, (2, 3)).reshape(-1).tolist()
    pool = unigrams + bigrams + trigrams
    counts = [0, len(unigrams), len(unigrams) + len(bigrams)]
    n = len(unigrams) + 3 + 2
    indexes = rng.permutation(n).tolist()
    attrs = dict(
        mode=mode, min_gram_length=low, max_gram_length=high, max_skip_count=skips,
        ngram_counts=counts, ngram_indexes=indexes,
    )  # fmt: skip
    if mode != "TF":
        attrs["weights"] = rng.uniform(0.5, 2, n).astype(np.float32).tolist()
    if strings:
        attrs["pool_strings"] = [f"w{v}" for v in pool]
        elem = TensorProto.STRING
    else:
        attrs["pool_int64s"] = pool
        elem = TensorProto.INT64
    node = helper.make_node("TfIdfVectorizer", ["x"], ["y"], **attrs)
    graph = helper.make_graph(
        [node],
        "tfidf",
        [helper.make_tensor_value_info("x", elem, None)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])


@pytest.mark.parametrize("seed", range(12))
def test_tfidf_matches_onnxruntime(seed):
    rng = np.random.default_rng(seed)
    mode = ["TF", "IDF", "TFIDF"][seed % 3]
    low = int(rng.integers(1, 3))
    high = int(rng.integers(low, 4))
    strings = seed % 4 == 3
    model = _model(rng, mode, low, high, int(rng.integers(0, 4)), strings)
    tokens = rng.integers(0, 8, (3, 12))
    x = np.array([[f"w{v}" for v in row] for row in tokens], object) if strings else tokens
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    got = ember.onnx.load(model)(x)
    got = got if isinstance(got, np.ndarray) else got.numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6)
