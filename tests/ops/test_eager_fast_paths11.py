"""The eager fast paths of issue 20: linear resampling as one op (ops/resample.py) with its C
kernels (kernels/cresample.py), the eager tape's one-pass ReLU gradient (``relu_backward``)
and BatchNorm's running statistics updated on the arrays.

Each against its reference: the C kernels against the ops' NumPy kernels bit for bit (every
dtype they take, each of their loops: the last axis in blocks of 16 rows and row by row, rows
of taps lists, narrow rows scattered), the ops against the composites they replace bit for
bit, and interpolate and BatchNorm against PyTorch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.kernels import cpool, cresample
from ember.ops.resample import LINEAR_RESAMPLE, LINEAR_RESAMPLE_BACKWARD

from .harness import recording

torch = pytest.importorskip("torch")

DTYPES = [np.float32, np.float64, ml_dtypes.bfloat16, np.float16]
ROOT = Path(__file__).resolve().parents[2]
needs_c = pytest.mark.skipif(
    cresample._functions(np.dtype(np.float32)) is None, reason="no C compiler"
)


def _bits(a):
    a = np.ascontiguousarray(a)
    return a.view(f"u{a.dtype.itemsize}")


def _taps(rng, n, m):
    """Unsorted, repeated indices in [0, n) and weights (the kernels assume no order)."""
    i0 = rng.integers(0, n, m)
    return i0, np.minimum(i0 + 1, n - 1), rng.random(m)


# (shape, axis): the last axis in full and partial blocks of 16 rows, and with more taps than
# the transposed block holds; rows of 3 and 20 values: scattered, and summed per position
# (taps lists), and narrow rows too many to scatter on the stack
GEOMETRIES = [
    ((3, 7, 9), 2),
    ((2, 8, 5), 2),
    ((2, 700), 1),
    ((2, 4, 6, 3), 2),
    ((3, 5, 20), 1),
    ((2, 900, 3), 1),
    ((9, 4), 0),
]


@needs_c
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_c_kernels_match_the_numpy_kernels(dtype):
    rng = np.random.default_rng(0)
    for shape, axis in GEOMETRIES:
        n = shape[axis]
        for m in (2 * n + 1, max(1, n // 2)):
            i0, i1, w = _taps(rng, n, m)
            w0, w1 = (1 - w).astype(dtype), w.astype(dtype)
            x = rng.standard_normal(shape).astype(dtype)
            fast = LINEAR_RESAMPLE.fast(x, i0, i1, w0, w1, axis=axis)
            want = LINEAR_RESAMPLE.kernel(x, i0, i1, w0, w1, axis=axis)
            assert fast is not None and np.array_equal(_bits(fast), _bits(want)), (shape, m)
            g_shape = list(shape)
            g_shape[axis] = m
            g = rng.standard_normal(g_shape).astype(dtype)
            args = (g, i0, i1, w0, w1)
            fast = LINEAR_RESAMPLE_BACKWARD.fast(*args, axis=axis, size=n)
            want = LINEAR_RESAMPLE_BACKWARD.kernel(*args, axis=axis, size=n)
            assert fast is not None and np.array_equal(_bits(fast), _bits(want)), (shape, m)


@needs_c
@pytest.mark.parametrize("threads", [2, 3])
def test_c_kernels_over_the_pool_match_the_numpy_kernels(threads):
    """Large enough to share rows of the outer dimension over the pool's threads."""
    rng = np.random.default_rng(threads)
    before = cpool.get_num_threads()
    cpool.set_num_threads(threads)
    try:
        for shape, axis in (((4, 33, 40, 50), 3), ((4, 33, 40, 50), 2)):
            n = shape[axis]
            i0, i1, w = _taps(rng, n, 2 * n)
            w0, w1 = (1 - w).astype(np.float32), w.astype(np.float32)
            x = rng.standard_normal(shape).astype(np.float32)
            got = LINEAR_RESAMPLE.fast(x, i0, i1, w0, w1, axis=axis)
            want = LINEAR_RESAMPLE.kernel(x, i0, i1, w0, w1, axis=axis)
            assert np.array_equal(_bits(got), _bits(want))
            g = rng.standard_normal(got.shape).astype(np.float32)
            got = LINEAR_RESAMPLE_BACKWARD.fast(g, i0, i1, w0, w1, axis=axis, size=n)
            want = LINEAR_RESAMPLE_BACKWARD.kernel(g, i0, i1, w0, w1, axis=axis, size=n)
            assert np.array_equal(_bits(got), _bits(want))
    finally:
        cpool.set_num_threads(before)


def test_without_a_compiler_numpy_runs(tmp_path):
    """With CC=/bin/false the kernels decline and interpolate runs the ops' NumPy kernels."""
    code = (
        "import numpy as np, ember\n"
        "import ember.nn.functional as F\n"
        "from ember.kernels import cresample\n"
        "x = np.arange(24.0, dtype=np.float32).reshape(1, 2, 3, 4)\n"
        "i = np.array([0, 1, 1])\n"
        "w = np.ones(3, np.float32)\n"
        "assert cresample.resample(x, i, i, w, w, 2) is None\n"
        "t = ember.tensor(x, requires_grad=True)\n"
        "F.interpolate(t, scale_factor=2, mode='bilinear').sum().backward()\n"
        "assert abs(float(t.grad.sum()) - 4 * x.size) < 1e-3\n"
    )
    env = dict(
        os.environ, CC="/bin/false", EMBER_CACHE_DIR=str(tmp_path), PYTHONPATH=str(ROOT / "src")
    )
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@needs_c
def test_c_kernels_take_strided_operands_and_decline_bad_indices():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 4, 5)).astype(np.float32).transpose(2, 1, 0)  # (5, 4, 6)
    i0, i1, w = _taps(rng, 6, 11)
    w0, w1 = (1 - w).astype(np.float32), w.astype(np.float32)
    for axis in (2,):
        got = LINEAR_RESAMPLE.fast(x, i0, i1, w0, w1, axis=axis)
        np.testing.assert_array_equal(got, LINEAR_RESAMPLE.kernel(x, i0, i1, w0, w1, axis=axis))
        g = rng.standard_normal((11, 4, 5)).astype(np.float32).transpose(2, 1, 0)
        got = LINEAR_RESAMPLE_BACKWARD.fast(g, i0, i1, w0, w1, axis=axis, size=6)
        want = LINEAR_RESAMPLE_BACKWARD.kernel(g, i0, i1, w0, w1, axis=axis, size=6)
        np.testing.assert_array_equal(got, want)
    bad = i0.copy()
    bad[3] = 6
    assert LINEAR_RESAMPLE.fast(x, bad, i1, w0, w1, axis=2) is None
    assert LINEAR_RESAMPLE.fast(x, i0 - 7, i1, w0, w1, axis=2) is None


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.bfloat16])
def test_resample_op_is_the_composite_it_replaced(dtype):
    """index_select, mul, add forward; their tape's gradient backward: the same bits."""
    rng = np.random.default_rng(2)
    x0 = rng.standard_normal((2, 3, 6, 5))
    for axis in (2, 3):
        n = x0.shape[axis]
        i0, i1, w = _taps(rng, n, 2 * n)
        shape = [1] * 4
        shape[axis] = -1
        w0 = ember.tensor(1 - w, dtype=dtype)
        w1 = ember.tensor(w, dtype=dtype)
        t0, t1 = ember.tensor(i0), ember.tensor(i1)
        x = ember.tensor(x0, dtype=dtype, requires_grad=True)
        new = ember.ops._registry.apply(LINEAR_RESAMPLE, x, t0, t1, w0, w1, axis=axis)
        y = ember.tensor(x0, dtype=dtype, requires_grad=True)
        old = ember.index_select(y, axis, t0) * w0.reshape(shape)
        old = old + ember.index_select(y, axis, t1) * w1.reshape(shape)
        assert np.array_equal(_bits(new.detach().numpy()), _bits(old.detach().numpy()))
        g = ember.tensor(rng.standard_normal(tuple(new.shape)), dtype=dtype)
        new.backward(g)
        old.backward(g)
        assert np.array_equal(_bits(x.grad.numpy()), _bits(y.grad.numpy()))


CASES = [
    ((2, 3, 9, 7), dict(scale_factor=2, mode="bilinear", align_corners=False)),
    ((2, 3, 5, 7), dict(size=(9, 4), mode="bilinear", align_corners=True)),
    ((2, 3, 11), dict(size=6, mode="linear", align_corners=False)),
    ((1, 2, 3, 4, 5), dict(scale_factor=1.7, mode="trilinear", align_corners=False)),
]


@pytest.mark.parametrize("shape, kwargs", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_interpolate_matches_pytorch(shape, kwargs, dtype):
    rng = np.random.default_rng(3)
    a = rng.standard_normal(shape).astype(dtype)
    x = ember.tensor(a, requires_grad=True)
    tx = torch.tensor(a, requires_grad=True)
    y = F.interpolate(x, **kwargs)
    ty = torch.nn.functional.interpolate(tx, **kwargs)
    g = rng.standard_normal(tuple(ty.shape)).astype(dtype)
    y.backward(ember.tensor(g))
    ty.backward(torch.tensor(g))
    # two weighted terms per axis, rounded in another order than PyTorch's: a few eps of the
    # largest magnitude; gradients sum at most ceil(1 / scale) + 1 terms per axis more
    eps = np.finfo(dtype).eps
    bound = 8 * eps * np.abs(a).max() * len(shape)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=0, atol=bound)
    bound = 8 * eps * np.abs(g).sum(axis=tuple(range(2, len(shape)))).max()
    np.testing.assert_allclose(
        x.grad.detach().numpy(), tx.grad.detach().numpy(), rtol=0, atol=bound
    )


# --------------------------------------------------------------------------------- ReLU


def test_relu_gradient_is_one_op_eagerly_and_keeps_its_values():
    rng = np.random.default_rng(4)
    a = rng.standard_normal((5, 33)).astype(np.float32)
    a[0, :4] = [np.nan, 0.0, -0.0, np.inf]
    g = rng.standard_normal((5, 33)).astype(np.float32)
    g[1, 0] = -0.0
    x = ember.tensor(a, requires_grad=True)
    y = F.relu(x)
    with recording() as ran:
        y.backward(ember.tensor(g))
    assert ran.forward == {"relu_backward"}
    # 0 where the result is at most 0, g elsewhere: at NaN too, as PyTorch's threshold_backward
    want = np.where(np.maximum(a, 0) <= 0, np.float32(0), g)
    assert np.array_equal(_bits(x.grad.numpy()), _bits(want))
    # traced, the gradient keeps the mask-and-select form its graph passes read: same values
    traced = ember.trace(ember.grad(lambda t: (F.relu(t) * ember.tensor(g)).sum()), x)
    assert np.array_equal(_bits(traced(x).numpy()), _bits(want))


def test_relu_second_derivative_through_the_eager_op():
    a = np.array([[-1.5, 0.5, 2.0], [3.0, -0.25, 1.0]])
    x = ember.tensor(a, requires_grad=True)
    tx = torch.tensor(a, requires_grad=True)
    (gx,) = ember.autograd.grad((F.relu(x) ** 2).sum(), x, create_graph=True)
    (tgx,) = torch.autograd.grad((torch.relu(tx) ** 2).sum(), tx, create_graph=True)
    gx.sum().backward()
    tgx.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())


# ---------------------------------------------------------------------------- BatchNorm


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_batch_norm_running_statistics_match_the_ops_and_pytorch(dtype):
    rng = np.random.default_rng(5)
    bn = ember.nn.BatchNorm2d(3, momentum=0.3).to(getattr(ember, np.dtype(dtype).name))
    tbn = torch.nn.BatchNorm2d(3, momentum=0.3).to(getattr(torch, np.dtype(dtype).name))
    mean, var = bn.running_mean, bn.running_var
    versions = mean._version, var._version
    x = rng.standard_normal((4, 3, 5, 6)).astype(dtype) * 3 + 1
    for _ in range(2):
        bn(ember.tensor(x))
        tbn(torch.tensor(x))
    assert (mean._version, var._version) == (versions[0] + 2, versions[1] + 2)
    eps = np.finfo(dtype).eps
    np.testing.assert_allclose(mean.numpy(), tbn.running_mean.numpy(), rtol=0, atol=64 * eps)
    np.testing.assert_allclose(var.numpy(), tbn.running_var.numpy(), rtol=32 * eps)
    # the same bits as the ops' update (recorded while a graph is built: run by a trace)
    bn2 = ember.nn.BatchNorm2d(3, momentum=0.3).to(getattr(ember, np.dtype(dtype).name))
    traced = ember.trace(lambda t: bn2(t), ember.tensor(x))
    for _ in range(2):
        traced(ember.tensor(x))
    for ours, theirs in ((mean, bn2.running_mean), (var, bn2.running_var)):
        assert np.array_equal(_bits(ours.numpy()), _bits(theirs.numpy()))
