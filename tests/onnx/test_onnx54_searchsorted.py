"""searchsorted exported over rows of a symbolic length is PyTorch's binary search, run in an
ONNX Loop of halvings: eager ember's and PyTorch's answer for every row, NaN and unsorted rows
included, at every length the file is run with (it had counted the elements below each
value, which agrees only on sorted rows without NaN)."""

from __future__ import annotations

import io

import numpy as np
import pytest

import ember
from ember import TensorSpec

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch")


def _rows(rng, shape, kind: str) -> np.ndarray:
    seq = np.sort(rng.standard_normal(shape).astype(np.float32), -1)
    if kind == "nan" and shape[-1] > 2:
        seq[..., 1] = np.nan
    elif kind == "unsorted":
        seq = rng.permutation(seq.reshape(-1)).reshape(shape)
    return seq


@pytest.mark.parametrize("right", [False, True])
@pytest.mark.parametrize("batched", [False, True])
def test_symbolic_row_length_is_the_binary_search(right, batched):
    signature = [TensorSpec((3, None) if batched else (None,)), TensorSpec((3, 5))]

    def f(a, b):
        return ember.searchsorted(a, b, right=right)

    buffer = io.BytesIO()
    ember.onnx.export(f, buffer, input_signature=signature)
    model = onnx.load_from_string(buffer.getvalue())
    assert "Loop" in {n.op_type for n in model.graph.node}
    session = ort.InferenceSession(buffer.getvalue(), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    rng = np.random.default_rng(0)
    for n in (0, 1, 2, 7, 16, 33):
        for kind in ("sorted", "nan", "unsorted"):
            seq = _rows(rng, (3, n) if batched else (n,), kind)
            values = rng.standard_normal((3, 5)).astype(np.float32)
            values[0, 0] = np.nan
            if n:
                values[1, :2] = seq.reshape(-1)[:1]  # (ties)
            (got,) = session.run(None, dict(zip(names, (seq, values))))
            want = f(ember.tensor(seq), ember.tensor(values)).numpy()
            np.testing.assert_array_equal(got, want, err_msg=f"{kind}, n={n}")
            theirs = torch.searchsorted(torch.tensor(seq), torch.tensor(values), right=right)
            np.testing.assert_array_equal(got, theirs.numpy(), err_msg=f"{kind}, n={n}")
