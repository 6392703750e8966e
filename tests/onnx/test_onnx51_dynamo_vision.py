"""Image models and selections written by PyTorch's dynamo exporter (see
test_onnx51_dynamo_exports.py), against onnxruntime at several batch and image sizes: a
ConvNeXt block, a MobileNetV3 block (hardswish, hardsigmoid squeeze-excite; the optimizer folds
its BatchNorms into the convolutions), a ResNet with BatchNorm in eval mode, a model of where,
masked_fill, cumsum, topk, gather and index_select, and one of interpolate, affine_grid and
grid_sample (its base grid folded into an initializer)."""

from __future__ import annotations

import functools

import pytest

pytest.importorskip("torch")
pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript", reason="torch.onnx.export(dynamo=True) needs onnxscript")

from ..on_demand import OnDemand  # noqa: E402
from . import _torch_zoo51 as zoo  # noqa: E402
from .test_onnx51_dynamo_exports import check_against_onnxruntime  # noqa: E402

CASES = [
    ("convnext", 18, True),
    ("mobilenet", 20, True),
    ("resnet", 18, False),
    ("selections", 20, True),
    ("resample", 20, True),
]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    # (each case at its first test: tests/on_demand.py)
    return OnDemand(functools.partial(zoo.export_case, tmp_path_factory.mktemp("dynamo")))


@pytest.mark.parametrize("name, opset, optimize", CASES)
def test_imports_equal_onnxruntime(files, name, opset, optimize):
    check_against_onnxruntime(name, files[name, opset, optimize][1])
