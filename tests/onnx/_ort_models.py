"""Building small ONNX models with onnx.helper and comparing ember's results with
onnxruntime's (the control-flow, reduction and sequence tests share these)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as TP
from onnx import helper as h

F32, I64, BOOL = TP.FLOAT, TP.INT64, TP.BOOL


def vi(name, dtype, shape):
    return h.make_tensor_value_info(name, dtype, shape)


def const(name, array):
    array = np.asarray(array)
    return h.make_tensor(
        name, h.np_dtype_to_tensor_dtype(array.dtype), array.shape, array.reshape(-1).tolist()
    )


def model(nodes, inputs, outputs, inits=(), opset=17, check=True):
    graph = h.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
    if check:  # the checker wants every output's rank; a few models leave it open
        onnx.checker.check_model(m, full_check=True)
    return m


def run_ort(m, feeds):
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def numpy_of(value):
    if isinstance(value, (list, tuple)):
        return [numpy_of(v) for v in value]
    return value.numpy() if hasattr(value, "numpy") else np.asarray(value)


def assert_same(ours, theirs, rtol=1e-5, atol=1e-6):
    ours = numpy_of(ours)
    if isinstance(theirs, list) and isinstance(ours, list):
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            assert_same(a, b, rtol, atol)
        return
    assert ours.shape == theirs.shape, (ours.shape, theirs.shape)
    assert ours.dtype == theirs.dtype, (ours.dtype, theirs.dtype)
    np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=atol)
