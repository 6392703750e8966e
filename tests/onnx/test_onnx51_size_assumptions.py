"""A function captured over symbolic image sizes checks, on every call, the size equalities its
trace took for aligned sizes (symbolic.py's ALIGNED; recorded by symbolic_assumptions.py).
Before onnx51 a U-Net captured with ``TensorSpec((None, 3, None, None))`` and called at an odd
size failed inside NumPy's concatenate with a ValueError, and a split by ``H // 2`` silently
gave two pieces where the model gives three. Now such a call raises a ShapeError naming the
assumption and the sizes, while sizes that keep the assumption (not only aligned ones) run and
equal the eager model."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember import TensorSpec
from ember.errors import ShapeError

SPEC = [TensorSpec((None, 3, None, None))]


class UNetish(nn.Module):
    def __init__(self):
        super().__init__()
        self.down, self.up = nn.Conv2d(3, 4, 3, padding=1), nn.Conv2d(8, 2, 3, padding=1)

    def forward(self, x):
        a = F.relu(self.down(x))
        b = F.interpolate(F.max_pool2d(a, 2), scale_factor=2, mode="nearest")
        return self.up(ember.cat([a, b], 1))  # (H and 2*(H//2): equal for even H only)


def _x(shape, seed=0):
    return ember.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def test_a_skip_connection_refuses_an_odd_size_by_name():
    model = UNetish().eval()
    captured = ember.function(model, input_signature=SPEC)
    for shape in ((1, 3, 8, 8), (2, 3, 10, 6), (1, 3, 6, 12)):
        x = _x(shape)
        np.testing.assert_allclose(
            captured(x).detach().numpy(), model(x).detach().numpy(), rtol=1e-5, atol=1e-6
        )
    with pytest.raises(ShapeError) as caught:
        captured(_x((1, 3, 7, 8)))
    message = str(caught.value)
    assert "assuming" in message and "(1, 3, 7, 8)" in message and "=7" in message
    with pytest.raises(ShapeError):  # (the model itself refuses that size eagerly)
        model(_x((1, 3, 7, 8)))
    # a refused call leaves the function usable
    x = _x((2, 3, 4, 6), 1)
    np.testing.assert_allclose(captured(x).detach().numpy(), model(x).detach().numpy(), rtol=1e-5)


def test_a_split_into_halves_refuses_the_size_that_gives_three_pieces():
    def halves(x):
        top, bottom = x.split(x.shape[2] // 2, 2)
        return top * 2.0 - bottom

    captured = ember.function(halves, input_signature=SPEC)
    x = _x((2, 3, 6, 5))
    np.testing.assert_allclose(captured(x).detach().numpy(), halves(x).numpy())
    assert len(_x((1, 3, 5, 5)).split(2, 2)) == 3  # (eagerly: 2, 2, 1)
    with pytest.raises(ShapeError, match="assuming"):
        captured(_x((1, 3, 5, 5)))


def test_divisibility_is_checked_on_the_sizes_not_on_their_alignment():
    """``reshape(N, -1, 4)`` over ``3*H*W`` assumes 4 divides it: a 5 x 4 image keeps that
    (though 5 is odd), a 5 x 5 one does not."""

    def grouped(x):
        return x.reshape(x.shape[0], -1, 4).sum(-1)

    captured = ember.function(grouped, input_signature=SPEC)
    for shape in ((2, 3, 8, 8), (1, 3, 5, 4), (3, 3, 2, 6)):
        x = _x(shape)
        np.testing.assert_allclose(captured(x).detach().numpy(), grouped(x).numpy(), rtol=1e-6)
    with pytest.raises(ShapeError, match="divides"):
        captured(_x((1, 3, 5, 5)))


def test_graphs_without_aligned_decisions_check_nothing():
    """A graph whose sizes never needed the alignment (strides that only shrink the image)
    carries no check, and runs at any size."""
    model = nn.Sequential(nn.Conv2d(3, 4, 3, stride=2), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
    captured = ember.function(model.eval(), input_signature=SPEC)
    for shape in ((1, 3, 9, 9), (2, 3, 7, 12)):
        x = _x(shape)
        np.testing.assert_allclose(
            captured(x).detach().numpy(), model(x).detach().numpy(), rtol=1e-5, atol=1e-6
        )
    entry = captured.compile(_x((1, 3, 9, 9)))
    assert entry.check_sizes is None


def test_an_exported_file_lists_the_assumptions(tmp_path):
    """ember.onnx.export writes the same graph: its metadata says which sizes it is for."""
    onnx = pytest.importorskip("onnx")
    import json

    path = tmp_path / "unet.onnx"
    ember.onnx.export(UNetish().eval(), path, input_signature=SPEC)
    props = {p.key: p.value for p in onnx.load(str(path)).metadata_props}
    assumed = json.loads(props["ember.size_assumptions"])
    assert any("==" in a and "//" in a for a in assumed), assumed
