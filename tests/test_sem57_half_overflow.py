"""A Python number beyond a floating dtype's range written into a tensor of it: PyTorch 2.13's
``checked_convert`` refuses it where it converts the number to the tensor's dtype (fill_,
full, full_like, new_full, clamp, masked_fill, index_fill, scatter, pad, hardtanh,
threshold's value; threshold's threshold in float32), and writes the infinity where it does
not (where, item assignment, scalar_tensor, nan_to_num); ember wrote infinities everywhere."""

from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

VALUES = [1e5, -1e5, 65504.0, 65519.0, 65520.0, 3.3e38, 3.4e38, 1e39, -1e300, float("inf"),
          -float("inf"), float("nan"), 100000]  # fmt: skip

CALLS = {
    "fill_": lambda m, x, v: x.clone().fill_(v),
    "full": lambda m, x, v: m.full((2,), v, dtype=x.dtype),
    "full_like": lambda m, x, v: m.full_like(x, v),
    "new_full": lambda m, x, v: x.new_full((2,), v),
    "clamp_max": lambda m, x, v: x.clamp(max=v),
    "clamp_min_": lambda m, x, v: x.clone().clamp_min_(-v),
    "clip": lambda m, x, v: m.clip(x, -abs(v), abs(v)),
    "masked_fill": lambda m, x, v: x.masked_fill(m.tensor([True, False, True]), v),
    "masked_fill_": lambda m, x, v: x.clone().masked_fill_(m.tensor([True, False, True]), v),
    "index_fill": lambda m, x, v: x.index_fill(0, m.tensor([1]), v),
    "scatter": lambda m, x, v: x.scatter(0, m.tensor([0]), v),
    "fill_diagonal_": lambda m, x, v: m.zeros(2, 2, dtype=x.dtype).fill_diagonal_(v),
    "pad": lambda m, x, v: m.nn.functional.pad(x, (1, 1), value=v),
    "hardtanh": lambda m, x, v: m.nn.functional.hardtanh(x, -abs(v), abs(v)),
    "Hardtanh": lambda m, x, v: m.nn.Hardtanh(-abs(v), abs(v))(x),
    "threshold_value": lambda m, x, v: m.nn.functional.threshold(x, 0.5, v),
    "threshold_threshold": lambda m, x, v: m.nn.functional.threshold(x, v, 0.0),
    "Threshold": lambda m, x, v: m.nn.Threshold(0.5, v)(x),
    "where": lambda m, x, v: m.where(x > 0.5, x, v),
    "setitem": lambda m, x, v: x.clone().__setitem__(0, v),
    "scalar_tensor": lambda m, x, v: m.scalar_tensor(v, dtype=x.dtype),
    "nan_to_num": lambda m, x, v: m.nan_to_num(x, nan=v, posinf=v),
    "tensor": lambda m, x, v: m.tensor([v], dtype=x.dtype),
}


def _run(m, how, dtype, v):
    x = m.tensor([0.0, 1.0, float("nan")], dtype=getattr(m, dtype))
    try:
        return CALLS[how](m, x, v)
    except RuntimeError as e:
        return e


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("how", list(CALLS))
def test_numbers_beyond_the_range(how, dtype):
    for v in VALUES:
        t, e = _run(torch, how, dtype, v), _run(ember, how, dtype, v)
        assert isinstance(e, Exception) == isinstance(t, Exception), (v, t, e)
        if isinstance(t, Exception):
            assert isinstance(e, ember.errors.EmberError)
            assert "without overflow" in str(t) and str(t).split(" without")[0] in str(e), (t, e)
        elif isinstance(t, torch.Tensor):
            np.testing.assert_array_equal(e.float().numpy(), t.float().numpy())
