"""kernels/cgroup_norm.py: group norm's forward and backward C kernels against the NumPy
kernels of ops/group_norm.py (the specification) and PyTorch, over random shapes (no positions,
1-d to 3-d, one group to one per channel, batch 1), float32/float64/bfloat16/float16, NaN and
Inf, one thread and two; captured and micro-batched steps; the op's use by F.group_norm and
nn.GroupNorm (mixed-dtype parameters included)."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.kernels import ccompile, cgroup_norm, cpool
from ember.ops.group_norm import GROUP_NORM, GROUP_NORM_BACKWARD

torch = pytest.importorskip("torch", reason="PyTorch (the reference peer) is not installed")
needs_cc = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")


def _random_case(rng):
    groups = int(rng.choice([1, 2, 3, 4]))
    per_group = int(rng.integers(1, 4))
    spatial = tuple(int(s) for s in rng.integers(1, 6, size=int(rng.integers(0, 4))))
    return (int(rng.integers(1, 4)), groups * per_group, *spatial), groups


def _tolerance(dtype, k: int) -> float:
    """Sums of ``k`` terms in another order, and rstd's rounding: a few ulps times sqrt(k)."""
    return 16 * float(np.finfo(dtype).eps) * np.sqrt(max(k, 1)) * 10


@needs_cc
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("seed", range(6))
def test_kernels_equal_the_numpy_reference(seed, dtype, threads):
    rng = np.random.default_rng(seed)
    shape, groups = _random_case(rng)
    x = (rng.standard_normal(shape) * 3 + rng.standard_normal()).astype(dtype)
    w, b = (rng.standard_normal(shape[1]).astype(dtype) for _ in range(2))
    g = rng.standard_normal(shape).astype(dtype)
    before = cpool.get_num_threads()
    cpool.set_num_threads(threads)
    try:
        y = cgroup_norm.group_norm(x, w, b, groups, 1e-5)
        grads = cgroup_norm.group_norm_backward(x, w, g, groups, 1e-5)
    finally:
        cpool.set_num_threads(before)
    k = x.size // (shape[0] * groups)
    tol = _tolerance(dtype, k)
    np.testing.assert_allclose(y, GROUP_NORM.kernel(x, w, b, groups=groups, eps=1e-5), tol, tol)
    expected = GROUP_NORM_BACKWARD.kernel(x, w, g, groups=groups, eps=1e-5)
    for got, want in zip(grads, expected):
        scale = 1 + np.abs(want).max()
        np.testing.assert_allclose(got, want, tol, tol * scale * np.sqrt(x.size / k))


@needs_cc
def test_large_inputs_over_the_pool_equal_the_reference():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 32, 40, 40)).astype(np.float32)
    w, b = rng.standard_normal(32).astype(np.float32), rng.standard_normal(32).astype(np.float32)
    g = rng.standard_normal(x.shape).astype(np.float32)
    np.testing.assert_allclose(
        cgroup_norm.group_norm(x, w, b, 8, 1e-5),
        GROUP_NORM.kernel(x, w, b, groups=8, eps=1e-5),
        rtol=1e-4,
        atol=1e-4,
    )
    for got, want in zip(
        cgroup_norm.group_norm_backward(x, w, g, 8, 1e-5),
        GROUP_NORM_BACKWARD.kernel(x, w, g, groups=8, eps=1e-5),
    ):
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3 * (1 + np.abs(want).max()))


@needs_cc
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nan_and_inf_stay_in_their_groups(dtype):
    x = np.random.default_rng(1).standard_normal((2, 4, 3)).astype(dtype)
    x[0, 0, 1], x[1, 3, 2] = np.nan, np.inf  # (sample 0 group 0, sample 1 group 1)
    w, b = np.ones(4, dtype), np.zeros(4, dtype)
    y = cgroup_norm.group_norm(x, w, b, 2, 1e-5)
    ref = GROUP_NORM.kernel(x, w, b, groups=2, eps=1e-5)
    np.testing.assert_array_equal(np.isnan(y), np.isnan(ref))
    assert np.isnan(y[0, :2]).all() and np.isnan(y[1, 2:]).all()
    assert np.isfinite(y[0, 2:]).all() and np.isfinite(y[1, :2]).all()
    np.testing.assert_allclose(y[0, 2:], ref[0, 2:], rtol=1e-5, atol=1e-5)


@needs_cc
@pytest.mark.parametrize("name", ["bfloat16", "float16"])
def test_half_precision_is_float32_rounded_once(name):
    rng = np.random.default_rng(2)
    dtype = getattr(ember, name).np
    x = rng.standard_normal((2, 6, 5, 3)).astype(dtype)
    w, b = rng.standard_normal(6).astype(dtype), rng.standard_normal(6).astype(dtype)
    g = rng.standard_normal(x.shape).astype(dtype)
    wide = [a.astype(np.float32) for a in (x, w, b)]
    want = GROUP_NORM.kernel(*wide, groups=3, eps=1e-5).astype(dtype)
    got = cgroup_norm.group_norm(x, w, b, 3, 1e-5)
    assert got.dtype == dtype
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), 1e-2, 1e-2)
    grads = cgroup_norm.group_norm_backward(x, w, g, 3, 1e-5)
    ref = GROUP_NORM_BACKWARD.kernel(
        x.astype(np.float32), w.astype(np.float32), g.astype(np.float32), groups=3, eps=1e-5
    )
    for got, want in zip(grads, ref):
        assert got.dtype == dtype
        np.testing.assert_allclose(got.astype(np.float32), want, 3e-2, 3e-2 * (1 + abs(want).max()))


def test_without_a_compiler_the_kernels_decline(monkeypatch):
    monkeypatch.setattr(ccompile, "compiler_available", lambda: False)
    cgroup_norm._functions.cache_clear()
    try:
        x = np.ones((2, 4, 3), np.float32)
        assert cgroup_norm.group_norm(x, x[0, :, 0], x[0, :, 0], 2, 1e-5) is None
        y = F.group_norm(ember.tensor(x * np.arange(3, dtype=np.float32)), 2)
        assert np.allclose(y.numpy().mean(axis=(1, 2)), 0, atol=1e-6)
    finally:
        cgroup_norm._functions.cache_clear()


@pytest.mark.parametrize("affine", [True, False])
def test_group_norm_module_matches_torch_eager_and_captured(affine):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 8, 5, 5)).astype(np.float32)
    t_mod = torch.nn.GroupNorm(4, 8, affine=affine)
    e_mod = ember.nn.GroupNorm(4, 8, affine=affine)
    if affine:
        with torch.no_grad():
            t_mod.weight.copy_(torch.tensor(rng.standard_normal(8).astype(np.float32)))
            t_mod.bias.copy_(torch.tensor(rng.standard_normal(8).astype(np.float32)))
        e_mod.load_state_dict({k: ember.tensor(v.numpy()) for k, v in t_mod.state_dict().items()})
    tx = torch.tensor(x, requires_grad=True)
    (t_mod(tx).tanh() * torch.arange(200.0).reshape(1, 8, 5, 5)).sum().backward()

    def loss(ex):
        return (e_mod(ex).tanh() * ember.arange(200.0).reshape(1, 8, 5, 5)).sum()

    for fn in (loss, ember.function(loss)):
        ex = ember.tensor(x, requires_grad=True)
        e_mod.zero_grad()
        fn(ex).backward()
        np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=2e-4, atol=2e-4)
        if affine:
            np.testing.assert_allclose(
                e_mod.weight.grad.numpy(), t_mod.weight.grad.numpy(), rtol=2e-4, atol=2e-3
            )
            np.testing.assert_allclose(
                e_mod.bias.grad.numpy(), t_mod.bias.grad.numpy(), rtol=2e-4, atol=2e-3
            )


def test_float32_parameters_on_a_bfloat16_input_keep_the_input_dtype():
    x = ember.randn(2, 4, 3).to(ember.bfloat16)
    w = ember.ones(4, requires_grad=True)
    y = F.group_norm(x, 2, w, ember.zeros(4))
    assert y.dtype == ember.bfloat16
    y.float().sum().backward()
    assert w.grad is not None and w.grad.dtype == ember.float32


def test_refusals_name_the_op_and_shapes():
    from ember.errors import ShapeError
    from ember.ops._registry import apply

    x = ember.randn(2, 6, 3)
    with pytest.raises(ShapeError, match=r"group_norm.*cannot be split into 4 groups"):
        apply(GROUP_NORM, x, ember.ones(6), ember.zeros(6), groups=4, eps=1e-5)
    with pytest.raises(ShapeError, match=r"group_norm.*\(6,\)"):
        apply(GROUP_NORM, x, ember.ones(5), ember.zeros(6), groups=3, eps=1e-5)
    with pytest.raises(ShapeError, match="num_groups must divide"):
        F.group_norm(x, 4)


def test_a_step_in_slices_equals_the_whole_batch():
    """The batch rules: each sample's groups are its own (forward), the parameters' gradients
    are sums over the slices (backward)."""
    from ember.capture.call import TensorFeed
    from ember.graph import interpreter
    from ember.transforms.microbatch import batch_inputs, split_batch

    model = ember.nn.Sequential(ember.nn.Conv2d(3, 8, 3), ember.nn.GroupNorm(2, 8))
    x = ember.randn(4, 3, 6, 6)

    def step(x):
        loss = model(x).square().mean()
        loss.backward()
        return loss, model[1].weight.grad

    program = ember.function(step, opt_level=0).compile(x)
    arrays = [f.tensor._data if isinstance(f, TensorFeed) else x.numpy() for f in program.feeds]
    graph = program.graph
    names = {n.op.name for n in graph.nodes if n.op is not None}
    assert {"group_norm", "group_norm_backward"} <= names
    split = split_batch(graph, 2, batch_inputs(graph, program.memory_parts().input_parts))
    split.verify()
    for want, got in zip(interpreter.run(graph, arrays), interpreter.run(split, arrays)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@needs_cc
def test_forward_statistics_of_a_mean_far_from_zero_equal_numpy():
    # float32 rows read once: sums of x - x[0] (a shift near the mean), so E[d^2] - E[d]^2
    # does not cancel where the mean is thousands of deviations from zero
    from ember.ops import group_norm as ops

    rng = np.random.default_rng(2)
    for mean, std in [(0.0, 1.0), (1e3, 0.5), (1e5, 1.0), (3e4, 0.01)]:
        x = (rng.standard_normal((4, 8, 5, 7)) * std + mean).astype(np.float32)
        w, b = rng.standard_normal((2, 8)).astype(np.float32)
        got = cgroup_norm.group_norm(x, w, b, 4, 1e-5)
        want = ops._gn_kernel(x, w, b, groups=4, eps=1e-5)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
