"""An export whose symbolic sizes a shape rule cannot express is refused naming the op."""

from __future__ import annotations

import io

import pytest

pytest.importorskip("onnx")

import ember  # noqa: E402
from ember.errors import ShapeError  # noqa: E402


def test_a_strided_conv_over_a_dynamic_height_names_conv_and_the_size():
    model = ember.nn.Conv2d(3, 4, 3, stride=2, padding=1).eval()
    with pytest.raises(ShapeError, match=r"conv: .*\bh - 1\b"):
        ember.onnx.export(
            model,
            (ember.randn(2, 3, 8, 8),),
            io.BytesIO(),
            input_names=["x"],
            dynamic_axes={"x": {0: "batch", 2: "h"}},
        )
