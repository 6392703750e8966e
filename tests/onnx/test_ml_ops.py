"""The ai.onnx.ml preprocessing and linear models of scikit-learn pipelines (onnx/ops/ml.py:
Scaler, Normalizer, LinearRegressor) on models built with onnx.helper, against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto as TP  # noqa: E402
from onnx import helper as h  # noqa: E402

import ember  # noqa: E402
import ember.onnx  # noqa: E402
from ember.errors import OnnxError  # noqa: E402

from ._ort_models import assert_same, run_ort  # noqa: E402

_ML = "ai.onnx.ml"


def _model(node, dtype=TP.FLOAT, shape=(None, 3)):
    graph = h.make_graph(
        [node],
        "g",
        [h.make_tensor_value_info("x", dtype, list(shape))],
        [h.make_tensor_value_info("y", TP.FLOAT, None)],
    )
    opsets = [h.make_opsetid("", 13), h.make_opsetid(_ML, 1)]
    return h.make_model(graph, opset_imports=opsets)


def test_scaler_normalizer_and_linear_regressor_match_onnxruntime():
    """Each norm (rows of zeros stay zero), offsets and scales of one or per feature on float,
    double and integer inputs, one or two regression targets under every post_transform
    (onnxruntime transforms a single target by PROBIT only; its PROBIT is an approximation
    within 2e-4 of the exact one ember computes). Unknown attributes' values are refused naming
    them."""
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.standard_normal((4, 3)), np.zeros((1, 3)), -np.ones((1, 3))])
    x = x.astype(np.float32)
    cases = [
        (_model(h.make_node("Normalizer", ["x"], ["y"], domain=_ML, norm=n)), x, 1e-6)
        for n in ("MAX", "L1", "L2")
    ]
    for dtype, np_dtype in ((TP.FLOAT, np.float32), (TP.DOUBLE, np.float64), (TP.INT64, np.int64)):
        for offset, scale in (([1.0], [2.0]), ([1, 2, 3.0], [0.5, 1, 2.0])):
            node = h.make_node("Scaler", ["x"], ["y"], domain=_ML, offset=offset, scale=scale)
            cases.append((_model(node, dtype), (x * 10).astype(np_dtype), 1e-6))
    for transform in ("NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT"):
        for targets, coefficients, intercepts in (
            (2, [1, 2, 3, -1, 0, 0.5], [0.5, -0.2]),
            (1, [0.1, 0.2, -0.3], [0.25]),
        ):
            node = h.make_node(
                "LinearRegressor",
                ["x"],
                ["y"],
                domain=_ML,
                targets=targets,
                coefficients=coefficients,
                intercepts=intercepts,
                post_transform=transform,
            )
            cases.append((_model(node), x / 10, 2e-4 if transform == "PROBIT" else 1e-6))
    for m, data, atol in cases:
        assert_same(ember.onnx.load(m)(data), run_ort(m, {"x": data})[0], rtol=1e-5, atol=atol)
    bad = h.make_node("Normalizer", ["x"], ["y"], domain=_ML, norm="L3")
    with pytest.raises(OnnxError, match="Normalizer.*norm 'L3'"):
        ember.onnx.load(_model(bad))(x)
    bad = h.make_node("Scaler", ["x"], ["y"], domain=_ML, offset=[1.0, 2.0], scale=[1.0])
    with pytest.raises(OnnxError, match="Scaler.*offset has 2 values"):
        ember.onnx.load(_model(bad))(x)
