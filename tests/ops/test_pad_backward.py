"""pad's adjoint (ops/pad.py `_pad_backward_kernel`: the interior sliced, each padded position
added back by slice, or by one np.add.at beyond a few) against the plain definition, every
input position the sum of the padded positions that copy it, over random shapes, pads and
modes; and F.pad's gradient against torch's."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember
from ember.ops.pad import _NP_MODES, _pad_backward_kernel, _pad_kernel, _source_index


def _definition(g, pads, mode, in_shape):
    out = np.zeros(in_shape, g.dtype)
    for index in np.ndindex(*g.shape):
        src = [_source_index(n, lo, hi, mode)[i] for i, n, (lo, hi) in zip(index, in_shape, pads)]
        if all(s >= 0 for s in src):
            out[tuple(src)] += g[index]
    return out


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_the_adjoint_sums_every_copy(mode):
    rng = np.random.default_rng(len(mode))
    for _ in range(40):
        shape = tuple(int(v) for v in rng.integers(1, 6, rng.integers(1, 4)))
        pads = []
        for n in shape:
            top = {"reflect": n - 1, "circular": n}.get(mode, 4)
            pads.append((int(rng.integers(0, top + 1)), int(rng.integers(0, top + 1))))
        pads = tuple(pads)
        g = rng.standard_normal(tuple(n + lo + hi for n, (lo, hi) in zip(shape, pads)))
        got = _pad_backward_kernel(g, pads=pads, mode=mode, in_shape=shape)
        np.testing.assert_allclose(got, _definition(g, pads, mode, shape), rtol=1e-12, atol=1e-12)


def test_wide_padding_takes_the_scatter_path():
    rng = np.random.default_rng(1)
    for mode in ("replicate", "constant"):
        g = rng.standard_normal((3, 80 + 4 + 70))
        pads = ((0, 0), (80, 70))
        got = _pad_backward_kernel(g, pads=pads, mode=mode, in_shape=(3, 4))
        np.testing.assert_allclose(got, _definition(g, pads, mode, (3, 4)), rtol=1e-12)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_conv_padding_gradients_equal_torch(mode):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3, 7, 6)).astype(np.float32)
    out = []
    for lib in (torch, ember):
        conv = lib.nn.Conv2d(3, 4, 3, padding=2, padding_mode=mode)
        if lib is torch:
            weights = {k: v.detach().numpy() for k, v in conv.state_dict().items()}
        else:
            conv.load_state_dict({k: ember.tensor(v) for k, v in weights.items()})
        t = lib.tensor(x, requires_grad=True)
        (conv(t) ** 2).sum().backward()
        out.append(t.grad.numpy())
    np.testing.assert_allclose(out[1], out[0], rtol=1e-4, atol=1e-4)


def test_padding_equals_numpys_pad():
    # the kernel fills constant borders itself and takes the copied positions otherwise
    # (np.pad's generality cost ten times a small padding's copy): random ranks, empty
    # dimensions, transposed inputs, each side padded or not, every mode
    rng = np.random.default_rng(1)
    for _ in range(400):
        shape = tuple(int(s) for s in rng.integers(0, 5, rng.integers(1, 5)))
        x = rng.standard_normal(shape).astype(np.float32)
        if rng.random() < 0.3:
            x = x.T
        mode = str(rng.choice(list(_NP_MODES)))
        if mode != "constant" and 0 in x.shape:
            continue  # (refused by the shape rule where padded)
        # (reflect: below each size; circular: wrapping around more than once too)
        limit = {"reflect": min(x.shape), "circular": 2 * max(x.shape) + 2}.get(mode, 3)
        pads = tuple((int(rng.integers(0, limit)), int(rng.integers(0, limit))) for _ in x.shape)
        fill = np.float32(rng.standard_normal())
        want = (
            np.pad(x, pads, constant_values=fill)
            if mode == "constant"
            else np.pad(x, pads, mode=_NP_MODES[mode])
        )
        got = _pad_kernel(x, pads=pads, mode=mode, value=fill)
        assert got.shape == want.shape and np.array_equal(got, want), (x.shape, pads, mode)
        assert not np.may_share_memory(got, x)
