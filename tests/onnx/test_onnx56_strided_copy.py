"""The C graph runner's strided copy (kernels/csteps.py `strided_copy_step`: a view's elements
copied, the last two dimensions one block, a row that is one run copied as one unit) against
NumPy's copy of the same view: random permutations (a pixel shuffle's short runs among them),
strided and reversed slices, broadcasts, 1 to 6 dimensions, element sizes 1 to 16 bytes, NaN
and infinities carried bit for bit; imported Transpose nodes against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.kernels import ccompile, csteps
from ember.kernels.cstep import STEP_CALL, data_address

needs_c = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")
DTYPES = (np.uint8, np.float16, np.float32, np.float64, np.complex128)


def _copied(view: np.ndarray, base: np.ndarray) -> np.ndarray:
    """The step's copy of ``view`` (a view of the C-contiguous ``base``)."""
    offset = view.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    step = csteps.strided_copy_step(base.itemsize, view.shape, view.strides, offset)
    assert step is not None
    out = np.empty(view.shape, base.dtype)
    for slot, role, _ in step.slots:
        step.args[slot] = data_address(out if role == "out" else base)
    STEP_CALL(step.fn)(data_address(step.args))
    return out


def _base(rng, shape, dtype):
    data = rng.standard_normal(shape) * 100
    base = data.astype(dtype) if dtype != np.complex128 else (data + 1j * data[::-1]).astype(dtype)
    if np.issubdtype(dtype, np.floating):
        base.flat[:: max(1, base.size // 3)] = np.nan
        base.flat[-1] = np.inf
    return np.ascontiguousarray(base)


@needs_c
@pytest.mark.parametrize("dtype", DTYPES)
def test_permutations_slices_and_broadcasts_match_numpy(dtype):
    rng = np.random.default_rng(560 + np.dtype(dtype).itemsize)
    for trial in range(40):
        nd = int(rng.integers(1, 7))
        shape = tuple(int(s) for s in rng.integers(1, 6 if nd > 3 else 12, nd))
        base = _base(rng, shape, dtype)
        view = base.transpose(rng.permutation(nd))
        if trial % 3 == 1:  # strided and reversed slices
            view = view[tuple(slice(None, None, int(rng.choice([1, 2, -1]))) for _ in range(nd))]
        elif trial % 3 == 2:  # a broadcast (zero strides) in front
            view = np.broadcast_to(view, (int(rng.integers(1, 4)), *view.shape))
        got = _copied(view, base)
        want = np.ascontiguousarray(view)
        assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), (shape, view.strides)


@needs_c
def test_pixel_shuffle_runs():
    """A tiled transposed convolution's copy: (N, H, W, C, 2, 2) -> (N, C, H, 2, W, 2), rows of
    2-element runs (one 8-byte unit each)."""
    rng = np.random.default_rng(56)
    for n, h, w, c, k in [(1, 5, 7, 3, 2), (2, 8, 8, 16, 2), (1, 3, 9, 5, 3)]:
        base = _base(rng, (n, h, w, c, k, k), np.float32)
        view = base.transpose(0, 3, 1, 4, 2, 5)
        got = _copied(view, base)
        assert np.array_equal(got.view(np.uint8), np.ascontiguousarray(view).view(np.uint8))


def test_imported_transposes_match_onnxruntime():
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    h = onnx.helper
    rng = np.random.default_rng(7)
    for perm, shape in [((0, 2, 1), (2, 5, 33)), ((0, 3, 1, 2), (1, 7, 9, 3))]:
        perm2 = perm[::-1]
        nodes = [
            h.make_node("Relu", ["x"], ["r"]),
            h.make_node("Transpose", ["r"], ["t"], perm=list(perm)),
            h.make_node("Transpose", ["t"], ["y"], perm=list(perm2)),
        ]
        graph = h.make_graph(
            nodes,
            "transposes",
            [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, list(shape))],
            [h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
        )
        data = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()
        x = rng.standard_normal(shape).astype(np.float32)
        options = ort.SessionOptions()
        options.log_severity_level = 3
        session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
        want = session.run(None, {"x": x})[0]
        got = ember.onnx.load(data)(ember.tensor(x)).numpy()
        assert np.array_equal(got, want)
