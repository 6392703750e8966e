"""The HuggingFace-style patterns of tests/onnx/_torch_zoo52.py written for ember (``import
ember as torch``) and exported by ``ember.onnx.export(..., dynamo=True, dynamic_shapes=...)``
run in onnxruntime at several batch sizes and lengths equal to ember. Before onnx52 the cached
decoder could not be captured over symbolic sizes: its positions ``arange(past, past + t)``
start at a symbolic size, which ember's arange refused."""

from __future__ import annotations

import types
from pathlib import Path

import numpy as np
import pytest

import ember
from ember import TensorSpec

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


def _zoo_on_ember():
    source = (Path(__file__).parent / "_torch_zoo52.py").read_text()
    imports = "import torch\nfrom torch import nn\nfrom torch.nn import functional as F"
    assert imports in source
    source = source.replace(
        imports, "import ember as torch\nfrom ember import nn\nfrom ember.nn import functional as F"
    )
    module = types.ModuleType("ember_zoo52")
    exec(compile(source, "_torch_zoo52.py (on ember)", "exec"), module.__dict__)
    return module


zoo = _zoo_on_ember()


@pytest.mark.parametrize("name", sorted(zoo.MODELS))
def test_exports_run_in_onnxruntime_as_in_ember(tmp_path, name):
    model = zoo.build(name)
    path = tmp_path / f"{name}.onnx"
    ember.onnx.export(
        model,
        tuple(ember.tensor(a) for a in zoo.inputs(name, 2, 7)),
        str(path),
        dynamo=True,
        dynamic_shapes=zoo.dynamic_shapes(name, ember.export.Dim),
        input_names=zoo.MODELS[name][1],
    )
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for batch, length in ((1, 5), (3, 8), (2, 6)):
        feed = zoo.inputs(name, batch, length)
        want = session.run(None, dict(zip(zoo.MODELS[name][1], feed)))
        with np.errstate(divide="ignore", invalid="ignore"):  # (T5's log of distance 0)
            got = model(*[ember.tensor(a) for a in feed])
        got = got if isinstance(got, tuple) else (got,)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert tuple(g.shape) == w.shape
            np.testing.assert_allclose(g.detach().numpy(), w, rtol=2e-5, atol=2e-6)


def test_a_range_from_a_symbolic_start():
    """arange(past, past + t) inside ember.function over symbolic sizes: the positions follow
    both sizes at every call, as eager arange gives them."""

    def positions(cache, new):
        past, t = cache.shape[0], new.shape[0]
        return ember.arange(past, past + t) * 10 + ember.arange(past, past + 2 * t, 2)

    f = ember.function(positions, input_signature=[TensorSpec(("p",)), TensorSpec(("t",))])
    for past, t in ((3, 1), (5, 4), (1, 2)):
        got = f(ember.zeros(past), ember.zeros(t)).numpy()
        want = np.arange(past, past + t) * 10 + np.arange(past, past + 2 * t, 2)
        np.testing.assert_array_equal(got, want)
        assert got.dtype == np.int64
