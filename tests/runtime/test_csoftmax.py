"""kernels/csoftmax.py: softmax and log_softmax along any axis in C equal ops/softmax.py's
NumPy arithmetic to a few ulps, special values (NaN, infinities, fully masked rows) included."""

import numpy as np
import pytest

from ember.kernels import ccompile, csoftmax
from ember.ops import softmax as ops

pytestmark = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")


def _numpy_softmax(x, safe):
    _, e = ops._shifted_exp(x, -1, safe)
    total = e.sum(axis=-1, keepdims=True)
    if safe:
        total[total == 0] = 1
    return (e / total).astype(x.dtype)


def _numpy_log_softmax(x):
    shifted, e = ops._shifted_exp(x, -1)
    return (shifted - np.log(e.sum(axis=-1, keepdims=True))).astype(x.dtype)


def _same(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    tol = 4e-6 if want.dtype == np.float32 else 1e-13
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)  # (NaN and inf where want has them)


def _special(rng, shape, dtype):
    x = (rng.standard_normal(shape) * 4).astype(dtype)
    rows = x.reshape(-1, shape[-1])
    if len(rows) >= 6 and shape[-1] >= 2:
        rows[0, :2] = -np.inf  # partly masked
        rows[1, :] = -np.inf  # fully masked
        rows[2, 1] = np.nan
        rows[3, 0] = np.inf
        rows[4, :] = 1e30  # large logits: the shift keeps them finite
        rows[5, :] = -1e30
    return x


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1,), (7,), (6, 1), (6, 33), (3, 4, 130), (2, 8, 64, 64)])
def test_softmax_and_log_softmax_equal_numpy(shape, dtype):
    rng = np.random.default_rng(len(shape))
    x = _special(rng, shape, dtype)
    with np.errstate(all="ignore"):
        for safe in (False, True):
            _same(csoftmax.softmax(x, safe), _numpy_softmax(x, safe))
        _same(csoftmax.log_softmax(x), _numpy_log_softmax(x))


def test_a_non_contiguous_input_is_read_as_its_values():
    x = np.random.default_rng(0).standard_normal((16, 20)).astype(np.float32)
    view = x[::2, ::2]
    _same(csoftmax.softmax(view), _numpy_softmax(np.ascontiguousarray(view), False))


def test_what_it_does_not_take_is_left_to_numpy():
    assert csoftmax.softmax(np.ones((3, 0), np.float32)) is None
    assert csoftmax.softmax(np.ones(3, np.int64)) is None
    assert csoftmax.log_softmax(np.float32(1.0).reshape(())) is None


def test_the_ops_use_it_along_every_axis(monkeypatch):
    calls = []
    original = csoftmax.softmax
    monkeypatch.setattr(csoftmax, "softmax", lambda x, **k: calls.append(1) or original(x, **k))
    x = np.random.default_rng(1).standard_normal((4, 5, 6)).astype(np.float32)
    for axis in (0, 1, 2, -1):
        want = np.exp(x - x.max(axis, keepdims=True))
        want /= want.sum(axis, keepdims=True)
        np.testing.assert_allclose(ops.SOFTMAX.run(x, axis=axis, safe=False), want, rtol=1e-6)
    assert len(calls) == 4
    # the reference kernel (the interpreter's) stays NumPy
    np.testing.assert_allclose(ops._softmax_kernel(x, axis=-1, safe=False), want, rtol=1e-6)
    assert len(calls) == 4


def test_along_an_axis_not_the_last_equals_numpy():
    # the columns side by side: special values (a column fully masked, NaN, infinities) moved
    # to the axis, float32/float64 and 16-bit storage, against the NumPy kernels
    rng = np.random.default_rng(4)
    cases = [((6, 33), 0), ((3, 7, 20), 1), ((2, 6, 5, 3), 1), ((6, 4, 1), 0), ((2, 3, 6, 9), -2)]
    for shape, axis in cases:
        for dtype in (np.float32, np.float64, np.float16):
            moved = list(shape)
            moved.append(moved.pop(axis))
            x = np.moveaxis(_special(rng, tuple(moved), dtype), -1, axis)
            with np.errstate(all="ignore"):
                for safe in (False, True):
                    got = csoftmax.softmax(x, safe, axis)
                    want = ops._softmax_kernel(x, axis=axis, safe=safe)
                    _near(got, want)
                _near(csoftmax.log_softmax(x, axis), ops._log_softmax_kernel(x, axis=axis))


def _near(got, want):
    if want.dtype != np.float16:
        return _same(got, want)
    # 16 bits: float32 arithmetic rounded once, as the NumPy kernel's float32 copy
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(
        got.astype(np.float32), want.astype(np.float32), rtol=2e-3, atol=1e-6
    )
