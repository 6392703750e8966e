"""A strided convolution over a dynamic height: refused naming conv and ``h - 1`` until
symbolic sizes took sums and floors (onnx50); now it exports and runs at every height."""

from __future__ import annotations

import io

import numpy as np
import pytest

pytest.importorskip("onnx")

import ember  # noqa: E402


def test_a_strided_conv_over_a_dynamic_height_exports():
    ort = pytest.importorskip("onnxruntime")
    model = ember.nn.Conv2d(3, 4, 3, stride=2, padding=1).eval()
    buffer = io.BytesIO()
    ember.onnx.export(
        model,
        (ember.randn(2, 3, 8, 8),),
        buffer,
        input_names=["x"],
        dynamic_axes={"x": {0: "batch", 2: "h"}},
    )
    session = ort.InferenceSession(buffer.getvalue(), providers=["CPUExecutionProvider"])
    for n, h in ((1, 5), (3, 8), (2, 13)):
        x = np.random.default_rng(h).standard_normal((n, 3, h, 8)).astype(np.float32)
        (got,) = session.run(None, {"x": x})
        np.testing.assert_allclose(
            got, model(ember.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-5
        )
