"""Conformance samples for linear_resample and linear_resample_backward (ops/resample.py),
called directly: forward, the gradients of the values and of the weights by finite
differences, and PyTorch's equivalents (the gather-multiply-add they compute, written in torch
ops). Repeated and unsorted indices, along a middle and the last axis."""

import numpy as np

from ember.ops._registry import apply
from ember.ops.resample import LINEAR_RESAMPLE, LINEAR_RESAMPLE_BACKWARD

from .harness import Sample, rng

r = rng(43)
X = r.standard_normal((2, 3, 5, 4))
I0 = np.array([0, 0, 1, 3, 2, 4, 4])
I1 = np.array([1, 1, 2, 4, 0, 4, 3])
W0 = r.random(7)
W1 = 1.0 - W0


def _torch_resample(axis):
    def fn(x, i0, i1, w0, w1):
        torch = __import__("torch")
        shape = [1] * x.dim()
        shape[axis] = -1
        lo = torch.index_select(x, axis, i0) * w0.reshape(shape)
        return lo + torch.index_select(x, axis, i1) * w1.reshape(shape)

    return fn


def _torch_resample_backward(axis, size):
    def fn(g, i0, i1, w0, w1):
        torch = __import__("torch")
        shape = [1] * g.dim()
        shape[axis] = -1
        out = list(g.shape)
        out[axis] = size
        lo = torch.zeros(out, dtype=g.dtype).index_add(axis, i0, g * w0.reshape(shape))
        return lo + torch.zeros(out, dtype=g.dtype).index_add(axis, i1, g * w1.reshape(shape))

    return fn


SAMPLES = []
for _axis in (2, 3):
    _n = X.shape[_axis]
    _i0, _i1 = I0 % _n, I1 % _n
    SAMPLES.append(
        Sample(
            f"linear_resample/axis{_axis}",
            lambda x, i0, i1, w0, w1, a=_axis: apply(LINEAR_RESAMPLE, x, i0, i1, w0, w1, axis=a),
            (X, _i0, _i1, W0, W1),
            torch_fn=_torch_resample(_axis),
        )
    )
    _g_shape = list(X.shape)
    _g_shape[_axis] = len(I0)
    SAMPLES.append(
        Sample(
            f"linear_resample_backward/axis{_axis}",
            lambda g, i0, i1, w0, w1, a=_axis, n=_n: apply(
                LINEAR_RESAMPLE_BACKWARD, g, i0, i1, w0, w1, axis=a, size=n
            ),
            (r.standard_normal(_g_shape), _i0, _i1, W0, W1),
            torch_fn=_torch_resample_backward(_axis, _n),
        )
    )
