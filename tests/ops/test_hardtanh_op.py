"""The eager hardtanh ops (ops/hardtanh.py) against PyTorch: values and gradients at and beyond
the bounds, NaN and infinities in the input and in the incoming gradient, half precision,
0-d, empty and non-contiguous arrays; in graphs both ops fuse into C loops."""

import numpy as np
import pytest
import torch

import ember
import ember.nn.functional as F
from ember.kernels.ccompile import compiler_available
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
    np.testing.assert_array_equal(y.detach().numpy(), yt.detach().numpy())
    np.testing.assert_array_equal(xe.grad.detach().numpy(), xt.grad.detach().numpy())


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


HALF_BOUNDS = BOUNDS + [(-0.3, 0.3)]  # (0.3 lies between two bfloat16 values)


@pytest.mark.parametrize("lo,hi", HALF_BOUNDS)
@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "float16"])
def test_graphs_fuse_both_ops_and_equal_eager(lo, hi, dtype):
    """In a graph hardtanh and its gradient are the ops, fused into C loops with their
    neighbours (their bounds written as constants rounded to the dtype), bit for bit eager's."""
    rng = np.random.default_rng(3)
    base = _values(rng, (5, 9))
    base.reshape(-1)[10:14] = [lo, hi, np.nextafter(hi, 0), np.nextafter(lo, 0)]
    x = ember.tensor(base.astype(np.float32)).to(getattr(ember, dtype))
    g = ember.tensor(rng.standard_normal((5, 9)).astype(np.float32)).to(x.dtype)

    def step(t, u):
        y = F.hardtanh(t * 1.5, lo, hi) + 1
        (y * u).sum().backward()
        return y

    def eager(t, u):
        t = t.detach().requires_grad_()
        return step(t, u), t.grad

    xs = x.detach().requires_grad_()
    f = ember.function(step)
    y = f(xs, g)
    y_ref, grad_ref = eager(x, g)
    np.testing.assert_array_equal(y.float().detach().numpy(), y_ref.float().detach().numpy())
    np.testing.assert_array_equal(
        xs.grad.float().detach().numpy(), grad_ref.float().detach().numpy()
    )
    if compiler_available() or dtype in ("float32", "float64"):
        names = {n.op.name for n in f.graph.nodes if n.kind == "call"}
        assert not names & {"hardtanh", "hardtanh_backward"}, names


def test_fused_bounds_are_checked():
    from ember.errors import EmberError

    x = ember.tensor(np.ones(3, np.float32))
    with pytest.raises(EmberError, match="bound lo"):
        ember.ops._registry.apply(ember.ops.hardtanh.HARDTANH, x, lo="0); exit(1", hi=6.0)
