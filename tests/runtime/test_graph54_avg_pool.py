"""Average pooling's C kernel and graph-runner step (kernels/cavg_pool.py) against the NumPy
kernel (ops/pool_avg.py, bit for bit) and PyTorch 2.13: 1-d to 3-d, random sizes, kernels,
strides, padding, ceil_mode, count_include_pad and divisor_override, float32 and float64, with
-0.0, NaN and infinities in the data; without a compiler NumPy runs."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import ember
import ember.nn.functional as F
from ember.kernels import ccompile
from ember.ops.pool_avg import _avg_fast, _avg_kernel
from ember.runtime import cgraph

ROOT = Path(__file__).resolve().parents[2]
needs_c = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")
POOLS = {1: (F.avg_pool1d, torch.nn.functional.avg_pool1d)}
POOLS[2] = (F.avg_pool2d, torch.nn.functional.avg_pool2d)
POOLS[3] = (F.avg_pool3d, torch.nn.functional.avg_pool3d)


def _case(rng, nd: int, dtype):
    kernel = tuple(int(v) for v in rng.integers(1, 4, nd))
    stride = tuple(int(v) for v in rng.integers(1, 4, nd))
    padding = tuple(int(rng.integers(0, k // 2 + 1)) for k in kernel)
    size = tuple(
        int(v) for v in rng.integers(max(kernel) + 1, max(kernel) + (8 if nd < 3 else 4), nd)
    )
    x = rng.standard_normal((2, 3, *size)).astype(dtype)
    x.flat[::7] = -0.0
    x.flat[5] = np.nan
    x.flat[-1] = np.inf
    x.flat[-2] = -np.inf
    return x, kernel, stride, padding


def _bits(a):
    return a.view(np.uint8)


@needs_c
@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_kernel_is_numpys_bits(nd, dtype):
    rng = np.random.default_rng(nd)
    for _ in range(12):
        x, kernel, stride, padding = _case(rng, nd, dtype)
        for ceil, cip, override in itertools.product((False, True), (False, True), (None, 3)):
            attrs = dict(kernel=kernel, stride=stride, padding=padding, ceil_mode=ceil)
            attrs.update(count_include_pad=cip, divisor_override=override)
            got = _avg_fast(x, **attrs)
            assert got is not None and got.dtype == x.dtype
            with np.errstate(invalid="ignore"):  # (inf + -inf)
                want = _avg_kernel(x, **attrs)
            assert np.array_equal(_bits(got), _bits(want)), attrs


@needs_c
@pytest.mark.parametrize("nd", [1, 2, 3])
def test_graph_runner_step_matches_numpy_and_torch(nd):
    rng = np.random.default_rng(10 + nd)
    ours, theirs = POOLS[nd]
    for _ in range(6):
        x, kernel, stride, padding = _case(rng, nd, np.float32)
        x = np.nan_to_num(x, nan=0.5, posinf=2.0, neginf=-2.0)  # (torch sums in another order)
        for ceil, cip, override in [(False, True, None), (True, False, None), (True, True, 2)]:
            kw = dict(stride=stride, padding=padding, ceil_mode=ceil, count_include_pad=cip)
            if nd > 1:
                kw["divisor_override"] = override

            def pool(t):
                return ours(t * 1.0, kernel, **kw)  # noqa: B023

            graph = ember.trace(pool, ember.tensor(x)).graph
            steps = cgraph.c_steps(graph)
            assert steps is not None, str(graph)
            got = cgraph.CGraphProgram(graph, steps, None, 2)(x)[0]
            attrs = dict(kernel=kernel, stride=stride, padding=padding, ceil_mode=ceil)
            attrs.update(count_include_pad=cip, divisor_override=kw.get("divisor_override"))
            assert np.array_equal(_bits(got), _bits(_avg_kernel(x, **attrs)))
            want = theirs(torch.from_numpy(x), kernel, **kw).numpy()
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_without_a_compiler_numpy_runs(tmp_path):
    code = (
        "import numpy as np, ember\n"
        "from ember.ops.pool_avg import _avg_fast, _avg_kernel\n"
        "from ember.runtime import cgraph\n"
        "x = np.random.default_rng(0).standard_normal((2, 3, 7, 6)).astype(np.float32)\n"
        "a = dict(kernel=(3, 2), stride=(2, 2), padding=(1, 1), ceil_mode=True,\n"
        "         count_include_pad=False, divisor_override=None)\n"
        "assert _avg_fast(x, **a) is None\n"
        "f = lambda t: ember.nn.functional.avg_pool2d(t, (3, 2), 2, 1, True, False)\n"
        "assert cgraph.c_steps(ember.trace(f, ember.tensor(x)).graph) is None\n"
        "assert np.array_equal(f(ember.tensor(x)).numpy(), _avg_kernel(x, **a))\n"
    )
    env = dict(
        os.environ, CC="/bin/false", EMBER_CACHE_DIR=str(tmp_path), PYTHONPATH=str(ROOT / "src")
    )
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
