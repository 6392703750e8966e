"""Hand-built ONNX graphs in the less common forms of their operators (the cases:
_onnx57_graph_cases*.py), imported by ``ember.onnx.load`` and run against onnxruntime with its
graph optimizations off (its kernels' own semantics: its layout optimizer moves a uint8
Resize into a fixed-point NHWC kernel whose roundings differ).

Left out, where onnxruntime departs from ONNX: MaxUnpool's ``output_shape`` (onnxruntime
indexes the larger output with the pooled input's flat indices; ONNX's reference and its node
test keep the unpooled block at the start, as ember), LSTM's ``layout=1``, Where, Add and Conv
on bool, bfloat16 and float64 values onnxruntime has no kernels for, and Einsum's ellipsis
broadcast over different ranks (onnxruntime refuses it)."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import ember  # noqa: E402
import ember.onnx  # noqa: E402

from . import _onnx57_graph_cases as base  # noqa: E402
from . import _onnx57_graph_cases2 as more  # noqa: E402
from . import _onnx57_graph_cases3 as third  # noqa: E402
from . import _onnx57_graph_cases4 as fourth  # noqa: E402

CASES = {**base.CASES, **third.CASES, **fourth.CASES, **more.CASES}


def _outputs(values) -> list:
    values = values if isinstance(values, (tuple, list)) else (values,)
    return [
        [np.asarray(t) for t in v] if isinstance(v, list) else np.asarray(v.numpy()) for v in values
    ]


def _assert_equal(got, want, tol, label):
    assert got.shape == want.shape and got.dtype == want.dtype, label
    if want.dtype.kind == "f":
        np.testing.assert_allclose(
            got.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol, err_msg=label
        )
    else:
        np.testing.assert_array_equal(got, want, err_msg=label)


@pytest.mark.parametrize("name", sorted(CASES))
def test_graph_matches_onnxruntime(name, tmp_path):
    base.reseed(name)
    model, feeds, *tol = CASES[name]()
    tol = tol[0] if tol else 1e-5
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, str(path))
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    want = session.run(None, feeds)
    got = _outputs(ember.onnx.load(str(path))(*[feeds[i.name] for i in session.get_inputs()]))
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        if isinstance(w, list):  # a sequence output
            assert len(g) == len(w)
            for j, (gj, wj) in enumerate(zip(g, w)):
                _assert_equal(np.asarray(gj), wj, tol, f"output {k}[{j}]")
        else:
            _assert_equal(g, w, tol, f"output {k}")
