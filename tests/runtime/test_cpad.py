"""kernels/cpad.py: reflect, replicate and circular padding and its adjoint in C equal
ops/pad.py's NumPy kernels bit for bit (a copy for any element size; the adjoint's sums in the
NumPy kernel's order) over random shapes and pads (circular ones wrapping more than once,
unpadded axes between padded ones), on one thread and two; F.pad's values and gradients equal
PyTorch's; constant padding and other dtypes' adjoints decline."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.kernels import ccompile, cpool
from ember.ops.pad import _PAD, _PAD_BACKWARD

needs_cc = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")
MODES = ["reflect", "replicate", "circular"]


def _random_case(rng, mode):
    nd = int(rng.integers(1, 6))
    shape = tuple(int(s) for s in rng.integers(1, 7, nd))
    pads = []
    for n in shape:
        most = n - 1 if mode == "reflect" else 2 * n + 1  # (circular: around more than once)
        padded = rng.random() < 0.6
        pads.append(tuple(int(rng.integers(0, most + 1)) if padded else 0 for _ in range(2)))
    return shape, tuple(pads)


@needs_cc
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("seed", range(30))
def test_padding_and_its_adjoint_equal_the_numpy_kernels(seed, mode, threads):
    rng = np.random.default_rng(seed)
    shape, pads = _random_case(rng, mode)
    if seed == 0:
        shape, pads = (4, 64, 40, 48), ((0, 0), (0, 0), (3, 2), (3, 3))  # (for the pool)
    before = cpool.get_num_threads()
    cpool.set_num_threads(threads)
    try:
        for dtype in (np.float32, np.float64, np.int8, np.float16, np.complex128):
            x = (rng.standard_normal(shape) * 10).astype(dtype)
            want = _PAD.kernel(x, pads=pads, mode=mode, value=0.0)
            got = _PAD.fast(x, pads=pads, mode=mode, value=0.0)
            assert got is not None and got.shape == want.shape and got.dtype == want.dtype
            np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
            attrs = dict(pads=pads, mode=mode, in_shape=shape)
            g = (rng.standard_normal(want.shape) * 10).astype(dtype)
            got = _PAD_BACKWARD.fast(g, **attrs)
            if dtype not in (np.float32, np.float64):
                assert got is None
                continue
            want = _PAD_BACKWARD.kernel(g, **attrs)
            assert got is not None and got.shape == want.shape
            np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    finally:
        cpool.set_num_threads(before)


@needs_cc
def test_constant_padding_declines():
    x = np.ones((2, 3), np.float32)
    pads = ((1, 1), (2, 0))
    assert _PAD.fast(x, pads=pads, mode="constant", value=0.0) is None
    assert _PAD_BACKWARD.fast(np.ones((4, 5), np.float32), pads=pads, mode="constant",
                              in_shape=(2, 3)) is None  # fmt: skip


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("seed", range(4))
def test_f_pad_matches_pytorch(seed, mode):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(seed)
    nd = int(rng.integers(3, 6))
    shape = tuple(int(s) for s in rng.integers(3, 8, nd))
    pad = tuple(int(p) for p in rng.integers(0, 3, 2 * (nd - 2)))
    x = rng.standard_normal(shape)
    g = rng.standard_normal(torch.nn.functional.pad(torch.tensor(x), pad, mode=mode).shape)
    t = torch.tensor(x, requires_grad=True)
    y = torch.nn.functional.pad(t, pad, mode=mode)
    y.backward(torch.tensor(g))
    e = ember.tensor(x, requires_grad=True)
    z = ember.nn.functional.pad(e, pad, mode=mode)
    z.backward(ember.tensor(g))
    np.testing.assert_array_equal(z.detach().numpy(), y.detach().numpy())
    np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("grad", [False, True])
def test_diag_embed_matches_pytorch_either_way(grad):
    # without a gradient eager diag_embed pads each value with n zeros (cpad's constant mode is
    # NumPy's); with one it writes into zeros, its gradient the gradient's diagonal
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    for shape, kw in [((3, 4), {}), ((2, 3, 5), {"dim1": 0, "dim2": 2}), ((4,), {"offset": -2})]:
        x = rng.standard_normal(shape)
        t = torch.tensor(x, requires_grad=grad)
        e = ember.tensor(x, requires_grad=grad)
        y, z = torch.diag_embed(t, **kw), ember.diag_embed(e, **kw)
        np.testing.assert_array_equal(z.detach().numpy(), y.detach().numpy())
        if grad:
            g = rng.standard_normal(tuple(y.shape))
            y.backward(torch.tensor(g))
            z.backward(ember.tensor(g))
            np.testing.assert_array_equal(e.grad.numpy(), t.grad.numpy())
