"""The eager hardtanh ops (ops/hardtanh.py) against PyTorch: values and gradients at and beyond
the bounds, NaN and infinities in the input and in the incoming gradient, half precision,
0-d, empty and non-contiguous arrays; a graph keeps the fusable composite."""

import numpy as np
import pytest
import torch

import ember
import ember.nn.functional as F
from ember.ops.hardtanh import HARDTANH_BACKWARD

BOUNDS = [(-1.0, 1.0), (0.0, 6.0), (-0.5, 3.0)]


def _values(rng, shape):
    x = rng.standard_normal(shape) * 4
    flat = x.reshape(-1)
    specials = [0.0, 6.0, -1.0, 1.0, -0.5, 3.0, np.nan, np.inf, -np.inf, -0.0]
    flat[: min(len(specials), flat.size)] = specials[: flat.size]
    return x


@pytest.mark.parametrize("lo,hi", BOUNDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(), (0, 3), (4, 7), (2, 3, 5, 5)])
def test_values_and_gradients_equal_torch(lo, hi, dtype, shape):
    rng = np.random.default_rng(0)
    x = _values(rng, shape).astype(dtype)
    g = rng.standard_normal(shape).astype(dtype)
    if g.size > 2:
        g.reshape(-1)[-2:] = [np.nan, np.inf]  # non-finite gradients where x may be outside
    xe = ember.tensor(x, requires_grad=True)
    y = F.hardtanh(xe, lo, hi)
    y.backward(ember.tensor(g))
    xt = torch.tensor(x, requires_grad=True)
    yt = torch.nn.functional.hardtanh(xt, lo, hi)
    yt.backward(torch.tensor(g))
    np.testing.assert_array_equal(y.numpy(), yt.detach().numpy())
    np.testing.assert_array_equal(xe.grad.numpy(), xt.grad.numpy())


def test_non_contiguous_and_half_precision_gradients():
    rng = np.random.default_rng(1)
    x = _values(rng, (6, 8)).astype(np.float32)
    g = rng.standard_normal((8, 6)).astype(np.float32).T  # not C-contiguous
    want = np.where((x > 0) & (x < 6), g, 0)
    got = ember.ops._registry.apply(
        HARDTANH_BACKWARD, ember.tensor(g), ember.tensor(x), lo=0.0, hi=6.0
    )
    np.testing.assert_array_equal(got.numpy(), want)
    for dtype in (ember.float16, ember.bfloat16):
        xh = ember.tensor(x).to(dtype).requires_grad_()
        F.relu6(xh).sum().backward()
        xf = xh.detach().float().numpy()
        np.testing.assert_array_equal(xh.grad.float().numpy(), (xf > 0) & (xf < 6))


def test_a_graph_keeps_the_fusable_composite():
    f = ember.function(lambda t: F.relu6(t) * 2)
    x = ember.tensor(_values(np.random.default_rng(2), (4, 5)).astype(np.float32))
    np.testing.assert_array_equal(f(x).numpy(), np.clip(x.numpy(), 0, 6) * 2)
    names = {n.op.name for n in f.graph.nodes if n.kind == "call"}
    assert "hardtanh" not in names
