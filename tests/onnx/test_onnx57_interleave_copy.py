"""The C graph runner's strided copy zipping a block's few far-apart columns (kernels/csteps.py
`ZIP_COLUMNS`: rows of 2 to 4 elements of 4 or 8 bytes whose columns are runs, as a pixel
shuffle's and a tiled transposed convolution's interleave) against NumPy's copy of the same
view, with NaN and infinities carried bit for bit, inside larger blocks and with leading
dimensions; imported DepthToSpace and tiled ConvTranspose nodes (onnx/ops/nn.py
`_unshuffled_product`: the weight's transpose times the positions as columns, then the zip)
against onnxruntime at batches 1 and 3, on the C graph runner."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.kernels import ccompile, csteps
from ember.kernels.cstep import STEP_CALL, data_address
from ember.runtime import cgraph

needs_c = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")


def _copied(view: np.ndarray, base: np.ndarray) -> np.ndarray:
    offset = view.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    step = csteps.strided_copy_step(base.itemsize, view.shape, view.strides, offset)
    out = np.empty(view.shape, base.dtype)
    for slot, role, _ in step.slots:
        step.args[slot] = data_address(out if role == "out" else base)
    STEP_CALL(step.fn)(data_address(step.args))
    return out


@needs_c
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.float16, np.uint8])
def test_zipped_columns_are_numpys_copy(dtype):
    rng = np.random.default_rng(57)
    for k in (2, 3, 4, 5):
        for lead, rows in (((), 7), ((2, 3), 16), ((1, 5, 2), 33)):
            base = (rng.standard_normal((*lead, k, rows)) * 100).astype(dtype)
            if base.dtype.kind == "f":
                base.flat[rng.integers(0, base.size, 3)] = np.nan
                base.flat[rng.integers(0, base.size, 2)] = -np.inf
            view = np.swapaxes(base, -1, -2)  # (..., rows, k): columns are runs
            got = _copied(view, base)
            assert np.array_equal(got.view(np.uint8), np.ascontiguousarray(view).view(np.uint8))
            # a sliced view of it: an offset, and columns not adjacent
            part = view[..., 1:, ::-1] if k > 2 else view[..., 1:, :]
            want = np.ascontiguousarray(part)
            assert np.array_equal(_copied(part, base).view(np.uint8), want.view(np.uint8))


def _single_node(op, x_shape, inits, **attrs):
    onnx = pytest.importorskip("onnx")
    h, nh = onnx.helper, onnx.numpy_helper
    names = ["x", *(n for n, _ in inits)]
    graph = h.make_graph(
        [h.make_node(op, names, ["y"], **attrs)],
        "g",
        [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["n", *x_shape[1:]])],
        [h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
        [nh.from_array(a, n) for n, a in inits],
    )
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()


@needs_c
@pytest.mark.parametrize(
    "op, x_shape, inits, attrs",
    [
        ("DepthToSpace", (1, 12, 5, 7), [], {"blocksize": 2, "mode": "CRD"}),
        ("DepthToSpace", (1, 18, 4, 3), [], {"blocksize": 3, "mode": "DCR"}),
        ("ConvTranspose", (1, 6, 5, 7), [("w", (6, 4, 2, 2)), ("b", (4,))], {"strides": [2, 2]}),
        ("ConvTranspose", (1, 5, 3, 4), [("w", (5, 3, 3, 4))], {"strides": [3, 4]}),
        ("ConvTranspose", (1, 3, 4, 3, 5), [("w", (3, 2, 2, 2, 2))], {"strides": [2, 2, 2]}),
    ],
)
def test_imported_interleaves_match_onnxruntime(op, x_shape, inits, attrs):
    ort = pytest.importorskip("onnxruntime")
    rng = np.random.default_rng(570)
    inits = [(n, rng.standard_normal(s).astype(np.float32)) for n, s in inits]
    data = _single_node(op, x_shape, inits, **attrs)
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    f = ember.onnx.load(data)
    for batch in (1, 3):
        x = rng.standard_normal((batch, *x_shape[1:])).astype(np.float32)
        x.flat[rng.integers(0, x.size, 2)] = np.nan
        want = session.run(None, {"x": x})[0]
        got = f(ember.tensor(x)).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, equal_nan=True)
        assert cgraph.c_steps(f.graph) is not None, str(f.graph)
