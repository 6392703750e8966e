"""kernels/cdepthwise.py: the depthwise convolution's forward, input gradient and weight
gradient against the NumPy kernels of ops/_conv_kernels.py and against PyTorch, over random
geometries (1-d and 2-d, strides, dilations, low and high padding, negative high padding,
channel multipliers, batch 1, float32/float64, NaN/Inf, with and without a bias); the dispatch
from the ``conv`` op; NumPy without a compiler."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.kernels import ccompile, cdepthwise, cdepthwise_wide
from ember.kernels.conv_plan import conv_geometry
from ember.ops import _conv_kernels as reference

pytestmark = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")

NAMES = ("conv_forward", "conv_input_grad", "conv_weight_grad")


def _tolerance(dtype, length: int) -> float:
    """A sum of ``length`` products in another order: a few ulps times sqrt(length)."""
    return 8 * float(np.finfo(dtype).eps) * np.sqrt(max(length, 1))


# (kernel, stride, dilation) per spatial dimension: each combination compiles its own library,
# so the random cases draw from a few
GEOMETRIES = [(3, 1, 1), (3, 2, 1), (3, 1, 2), (1, 1, 1), (2, 3, 1), (4, 2, 2), (5, 1, 1)]


def _random_case(rng):
    nd = int(rng.integers(1, 3))
    n, c, m = int(rng.integers(1, 4)), int(rng.integers(2, 7)), int(rng.integers(1, 3))
    picks = [GEOMETRIES[i] for i in rng.integers(0, 3 if nd == 2 else len(GEOMETRIES), nd)]
    kernel, stride, dilation = (tuple(g[i] for g in picks) for i in range(3))
    padding = tuple((int(rng.integers(0, 4)), int(rng.integers(-1, 4))) for _ in range(nd))
    size = tuple(int(v) for v in rng.integers(1, 12, nd))
    attrs = dict(stride=stride, padding=padding, dilation=dilation, groups=c)
    try:
        p = conv_geometry(attrs, size, (c * m, 1) + kernel)
    except ember.EmberError:
        return None
    if any(o <= 0 for o in p.out_size):
        return None
    return n, c, m, kernel, size, p


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_against_the_numpy_kernels_on_random_geometries(dtype):
    rng = np.random.default_rng(7)
    biases = np.random.default_rng(8)  # (every other trial: the forward's, the gradient's)
    checked = 0
    for trial in range(300):
        case = _random_case(rng)
        if case is None:
            continue
        n, c, m, kernel, size, p = case
        x = rng.standard_normal((n, c) + size).astype(dtype)
        w = rng.standard_normal((c * m, 1) + kernel).astype(dtype)
        gy = rng.standard_normal((n, c * m) + tuple(p.out_size)).astype(dtype)
        # non-finite values where padding meets them: NaN/Inf times a padded zero is NaN in the
        # NumPy kernels, and must be in these
        if trial % 5 == 0:
            x.flat[rng.integers(x.size)] = np.nan
        if trial % 7 == 0:
            w.flat[rng.integers(w.size)] = np.inf
        if trial % 3 == 0:
            gy.flat[rng.integers(gy.size)] = -np.inf
        for name, a, b in (
            ("conv_forward", x, w),
            ("conv_input_grad", gy, w),
            ("conv_weight_grad", x, gy),
        ):
            bias = ()
            if trial % 2 and name != "conv_weight_grad":
                bias = (biases.standard_normal(c * m if name == "conv_forward" else c),)
                bias = (bias[0].astype(dtype),)
            got = getattr(cdepthwise, name)(a, b, p, c, *bias)
            want = getattr(reference, name)(a, b, p, c)
            if bias:
                want = want + bias[0].reshape((1, -1) + (1,) * len(size))
            assert got is not None and got.dtype == want.dtype and got.shape == want.shape
            finite = np.isfinite(want)
            np.testing.assert_array_equal(np.isfinite(got), finite, err_msg=name)
            np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=name)
            length = (
                n * int(np.prod(p.out_size))
                if name == "conv_weight_grad"
                else int(np.prod(kernel)) * m
            )
            scale = np.abs(want[finite]).max() if finite.any() else 0.0
            tol = _tolerance(dtype, length)
            np.testing.assert_allclose(got[finite], want[finite], rtol=tol, atol=tol * scale * 4)
        checked += 1
    assert checked > 100


@pytest.mark.parametrize("stride,padding,dilation", [(1, 1, 1), (2, 1, 1), (1, 2, 2), (2, 0, 1)])
def test_gradients_against_torch(stride, padding, dilation):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    for n, c, m, size in ((2, 8, 1, 9), (1, 1 + 2, 2, 7), (3, 16, 1, 4)):
        x = rng.standard_normal((n, c, size, size + 1), dtype=np.float64)
        w = rng.standard_normal((c * m, 1, 3, 3), dtype=np.float64)
        args = dict(stride=stride, padding=padding, dilation=dilation, groups=c)
        ex, ew = ember.tensor(x, requires_grad=True), ember.tensor(w, requires_grad=True)
        tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
        y, ty = F.conv2d(ex, ew, **args), torch.nn.functional.conv2d(tx, tw, **args)
        g = rng.standard_normal(tuple(y.shape))
        gx, gw = ember.autograd.grad(y, (ex, ew), ember.tensor(g))
        tgx, tgw = torch.autograd.grad(ty, (tx, tw), torch.tensor(g))
        np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(
            gx.detach().numpy(), tgx.detach().numpy(), rtol=1e-12, atol=1e-12
        )
        np.testing.assert_allclose(gw.numpy(), tgw.numpy(), rtol=1e-11, atol=1e-11)


def test_large_kernels_against_torch():
    """ConvNeXt's 7x7 depthwise convolution (padding 3, planes smaller than the kernel's
    reach too) and a strided 5x5: the kernels whose tap loops are unrolled by pragma."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    for kernel, stride, padding, size in ((7, 1, 3, 8), (7, 1, 3, 3), (5, 2, 2, 11)):
        x = rng.standard_normal((2, 6, size, size + 2), dtype=np.float64)
        w = rng.standard_normal((6, 1, kernel, kernel), dtype=np.float64)
        b = rng.standard_normal(6)
        args = dict(stride=stride, padding=padding, groups=6)
        ex, ew = ember.tensor(x, requires_grad=True), ember.tensor(w, requires_grad=True)
        tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
        y = F.conv2d(ex, ew, ember.tensor(b), **args)
        ty = torch.nn.functional.conv2d(tx, tw, torch.tensor(b), **args)
        g = rng.standard_normal(tuple(y.shape))
        gx, gw = ember.autograd.grad(y, (ex, ew), ember.tensor(g))
        tgx, tgw = torch.autograd.grad(ty, (tx, tw), torch.tensor(g))
        np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(
            gx.detach().numpy(), tgx.detach().numpy(), rtol=1e-12, atol=1e-12
        )
        np.testing.assert_allclose(gw.numpy(), tgw.numpy(), rtol=1e-11, atol=1e-11)


def test_the_conv_op_dispatches_depthwise_convolutions_here(monkeypatch):
    calls = []
    for name in NAMES:
        original = getattr(cdepthwise, name)

        def spy(*args, _original=original, _name=name):
            result = _original(*args)
            calls.append((_name, result is not None))
            return result

        monkeypatch.setattr(cdepthwise, name, spy)
    rng = np.random.default_rng(0)
    x = ember.tensor(rng.standard_normal((2, 6, 8, 8), dtype=np.float32), requires_grad=True)
    w = ember.tensor(rng.standard_normal((6, 1, 3, 3), dtype=np.float32), requires_grad=True)
    F.conv2d(x, w, padding=1, stride=2, groups=6).sum().backward()
    assert sorted(calls) == [(n, True) for n in sorted(NAMES)]
    calls.clear()
    dense = ember.tensor(rng.standard_normal((6, 6, 3, 3), dtype=np.float32))
    F.conv2d(x, dense, padding=1)  # (groups 1: cconv's kernel, the depthwise one never asked)
    assert calls == []
    grouped = ember.tensor(rng.standard_normal((6, 2, 3, 3), dtype=np.float32))
    F.conv2d(x, grouped, padding=1, groups=3)  # (asked, and declines: 2 channels a group)
    assert calls == [("conv_forward", False)]


def test_not_applicable_returns_none():
    p = conv_geometry(
        dict(stride=(1,) * 3, padding=((1, 1),) * 3, dilation=(1,) * 3, groups=2),
        (4, 4, 4),
        (2, 1, 3, 3, 3),
    )
    x = np.ones((1, 2, 4, 4, 4), np.float32)
    assert cdepthwise.conv_forward(x, np.ones((2, 1, 3, 3, 3), np.float32), p, 2) is None  # 3-d
    p2 = conv_geometry(
        dict(stride=(1, 1), padding=((1, 1),) * 2, dilation=(1, 1), groups=2), (4, 4), (2, 1, 3, 3)
    )
    x2 = np.ones((1, 2, 4, 4), np.int64)
    assert cdepthwise.conv_forward(x2, np.ones((2, 1, 3, 3), np.int64), p2, 2) is None  # int
    assert (
        cdepthwise.conv_forward(
            np.ones((0, 2, 4, 4), np.float32), np.ones((2, 1, 3, 3), np.float32), p2, 2
        )
        is None
    )
    assert cdepthwise.multiplier(2, (2, 1, 3, 3), 1) is None
    assert cdepthwise.multiplier(4, (4, 2, 3, 3), 2) is None
    assert cdepthwise.multiplier(4, (8, 1, 3, 3), 4) == 2


def test_graphs_run_the_kernels():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 8, 10, 10), dtype=np.float32)
    w = rng.standard_normal((8, 1, 3, 3), dtype=np.float32)
    b = rng.standard_normal(8, dtype=np.float32)

    def step(x, w, b):
        return F.relu(F.conv2d(x, w, b, padding=1, groups=8)).sum()

    ex, ew, eb = (ember.tensor(a, requires_grad=True) for a in (x, w, b))
    grads = ember.function(lambda x, w, b: ember.autograd.grad(step(x, w, b), (x, w, b)))(
        ex, ew, eb
    )
    eager = ember.autograd.grad(step(ex, ew, eb), (ex, ew, eb))
    for got, want in zip(grads, eager):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-4, atol=1e-4)


def test_without_a_compiler_numpy_runs(tmp_path):
    code = textwrap.dedent(
        """
        import warnings
        import numpy as np
        import ember
        import ember.nn.functional as F
        from ember.kernels import cdepthwise
        warnings.simplefilter("ignore")
        rng = np.random.default_rng(0)
        x = ember.tensor(rng.standard_normal((2, 4, 6, 6)), requires_grad=True)
        w = ember.tensor(rng.standard_normal((4, 1, 3, 3)), requires_grad=True)
        y = F.conv2d(x, w, padding=1, groups=4)
        y.sum().backward()
        assert cdepthwise._functions(np.dtype(np.float64), (3, 3), (1, 1), (1, 1)) is None
        assert x.grad is not None and w.grad is not None
        print("ok")
        """
    )
    env = dict(os.environ, CC="/bin/false", EMBER_CACHE_DIR=str(tmp_path), PYTHONPATH="src")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "ok" in out.stdout


@pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")
@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "float16"])
def test_every_geometry_builds(dtype):
    """A library that fails to build falls back to the grouped path silently (right values,
    many times slower): each specialisation must compile, strided and flat loops included,
    and kernels/cdepthwise_wide.py's channels-wide ones (which fall back to the row-wide)."""
    import ml_dtypes

    np_dtype = np.dtype(getattr(ml_dtypes, dtype) if dtype == "bfloat16" else dtype)
    # every kernel with every stride, the dilations alternating so that each kernel and each
    # stride meets both (pairwise: half the compilations of the full grid, which took most of
    # this file's time on a fresh cache)
    pairs = [(k, s) for k in [(3, 3), (5, 5), (7, 7), (1, 7)] for s in [(1, 1), (2, 2), (1, 2)]]
    for i, (kernel, stride) in enumerate(pairs):
        dilation = [(1, 1), (2, 1)][i % 2]
        found = cdepthwise._functions(np_dtype, kernel, stride, dilation)
        assert found is not None, (kernel, stride, dilation)
        # the channels-wide kernels (half precision: the weight gradient's)
        wide = cdepthwise_wide._functions(np_dtype, kernel, stride, dilation)
        assert wide is not None, ("channels wide", kernel, stride, dilation)
