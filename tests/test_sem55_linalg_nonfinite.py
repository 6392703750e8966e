"""SVD-based linalg functions on a non-finite matrix raise PyTorch's LinAlgError with its
message, naming the batch element (they raised a generic 'kernel failed' EmberError)."""

from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

A = np.array([[[1.0, 0.0], [0.0, 1.0]], [[1.0, 2.0], [3.0, np.nan]]], np.float32)
CALLS = {
    "pinv": lambda m, a: m.linalg.pinv(a),
    "svd": lambda m, a: m.linalg.svd(a),
    "svdvals_one": lambda m, a: m.linalg.svdvals(a[1]),
    "matrix_norm_2": lambda m, a: m.linalg.matrix_norm(a, 2),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_svd_of_non_finite_matrix_raises_torch_linalg_error(name):
    with pytest.raises(torch.linalg.LinAlgError) as t:
        CALLS[name](torch, torch.tensor(A))
    with pytest.raises(ember.linalg.LinAlgError) as e:
        CALLS[name](ember, ember.tensor(A))
    assert isinstance(e.value, RuntimeError)
    assert str(t.value).split("\n")[0] in str(e.value)


def test_lstsq_of_non_finite_matrix_raises_a_runtime_error():
    # (PyTorch's MKL driver trips an internal assert: a RuntimeError too)
    with pytest.raises(RuntimeError):
        torch.linalg.lstsq(torch.tensor(A), torch.tensor(A))
    with pytest.raises(RuntimeError, match="non-finite"):
        ember.linalg.lstsq(ember.tensor(A), ember.tensor(A))
