"""transforms/scatter_masks.py: a mask on max pooling's gradient moved before the scatter.

Hand-built graphs check when the rewrite fires and that it is exact (bit for bit, NaN, -0.0
and ties included); captured training steps check that no activation-sized mask is left, that
values and gradients equal eager ember's and PyTorch's, and that the planned and measured
peaks drop by the mask's bytes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember
from ember import dtypes as dt
from ember.graph import interpreter
from ember.graph.ir import Graph
from ember.ops._registry import REGISTRY
from ember.ops.pool_codes import window_of
from ember.plan import measure_peak
from ember.transforms.pipeline import passes_for
from ember.transforms.scatter_masks import SCATTER_MASKS, move_masks
from ember.types import TensorType

F = ember.nn.functional


def _pool_attrs(kernel, stride, padding, dilation=1, ceil_mode=False, codes=True):
    return dict(
        kernel=(kernel, kernel),
        stride=(stride, stride),
        padding=(padding, padding),
        dilation=(dilation, dilation),
        ceil_mode=ceil_mode,
        codes=codes,
    )


def _graph(pool, *, fill=0.0, mask_from="relu", extra_reader=False, dtype=dt.float64):
    """x -> relu -> max_pool, and the backward's where(mask, pool_scatter(g, idx), fill)."""
    g = Graph("masked")
    x = g.add_input(TensorType((2, 3, 9, 9), dtype), "x")
    other = g.add_input(TensorType((2, 3, 9, 9), dtype), "other")
    r = g.add_call(REGISTRY["relu"], [x]).outputs[0]
    values, idx = g.add_call(REGISTRY["max_pool"], [r], pool).outputs
    grad = g.add_input(values.type, "grad")
    window = {"window": window_of(pool)} if pool["codes"] else {}
    scattered = g.add_call(REGISTRY["pool_scatter"], [grad, idx], dict(in_size=(9, 9), **window))
    zero = g.add_constant(np.array(0.0, dtype.np))
    source = {"relu": r, "input": x, "other": other}[mask_from]
    mask = g.add_call(REGISTRY["gt"], [source, zero]).outputs[0]
    fill_value = g.add_constant(np.array(fill, dtype.np))
    masked = g.add_call(REGISTRY["where"], [mask, scattered.outputs[0], fill_value]).outputs[0]
    outputs = [values, masked]
    if extra_reader:
        outputs.append(g.add_call(REGISTRY["neg"], [scattered.outputs[0]]).outputs[0])
    g.set_outputs(outputs)
    return g


def _arrays(graph, seed):
    rng = np.random.default_rng(seed)
    arrays = []
    for v in graph.inputs:
        a = rng.integers(-3, 4, size=v.shape).astype(v.dtype.np)  # ties within windows
        a.flat[::7] = -0.0
        a.flat[3::11] = np.nan
        arrays.append(a)
    return arrays


def _same(a, b) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


POOLS = {
    "2x2": _pool_attrs(2, 2, 0),
    "3x3 s2 p1 (overlapping)": _pool_attrs(3, 2, 1),
    "3x3 s1 p1": _pool_attrs(3, 1, 1),
    "dilated, ceil": _pool_attrs(2, 2, 0, dilation=2, ceil_mode=True),
    "flat indices": _pool_attrs(3, 2, 1, codes=False),
}


@pytest.mark.filterwarnings("ignore:invalid value encountered")
@pytest.mark.parametrize("name", list(POOLS))
@pytest.mark.parametrize("dtype", [dt.float64, dt.float32, dt.bfloat16])
def test_the_mask_moves_before_the_scatter_exactly(name, dtype):
    graph = _graph(POOLS[name], dtype=dtype)
    reference = _graph(POOLS[name], dtype=dtype)
    _, changed = move_masks(graph)
    assert changed
    ops = [n.op.name for n in graph.nodes if n.kind == "call"]
    assert "gt" in ops and "pool_gather" not in ops  # the mask is read off the pooled values
    (gt,) = [n for n in graph.nodes if n.kind == "call" and n.op.name == "gt"]
    assert gt.inputs[0].node.op.name == "max_pool", "the mask is of the pooled values"
    for seed in range(4):
        arrays = _arrays(graph, seed)
        for got, want in zip(interpreter.run(graph, arrays), interpreter.run(reference, arrays)):
            assert _same(got, want)


@pytest.mark.parametrize(
    "why, kwargs",
    [
        ("a -0.0 fill turns untouched zeros negative", dict(fill=-0.0)),
        ("a nonzero fill is no mask", dict(fill=1.0)),
        ("the scatter has another reader", dict(extra_reader=True)),
        ("the mask is not of the pooled tensor", dict(mask_from="other")),
        ("the mask is of the ReLU's input, not what was pooled", dict(mask_from="input")),
    ],
)
def test_the_rewrite_does_not_fire(why, kwargs):
    graph = _graph(POOLS["2x2"], **kwargs)
    before = [n.op.name for n in graph.nodes if n.kind == "call"]
    _, changed = move_masks(graph)
    assert not changed, why
    assert [n.op.name for n in graph.nodes if n.kind == "call"] == before


def _step(pool, activation, dtype, dims=2):
    torch.manual_seed(0)
    ember.manual_seed(0)
    conv = getattr(ember.nn, f"Conv{dims}d")(3, 8, 3, padding=1).to(dtype)
    opt = ember.optim.SGD(conv.parameters(), lr=0.1)

    def step(x):
        opt.zero_grad()
        loss = pool(activation(conv(x))).square().sum()
        loss.backward()
        opt.step()
        return loss

    return conv, step


POOLINGS = {
    "2x2": (2, lambda t: F.max_pool2d(t, 2)),
    "3x3 s2 p1": (2, lambda t: F.max_pool2d(t, 3, 2, 1)),
    "1d": (1, lambda t: F.max_pool1d(t, 4)),
    "3d": (3, lambda t: F.max_pool3d(t, 2)),
    "indices": (2, lambda t: F.max_pool2d(t, 3, 2, 1, return_indices=True)[0]),
}


@pytest.mark.parametrize("pooling", list(POOLINGS))
def test_captured_steps_equal_eager_and_keep_no_full_mask(pooling):
    dims, pool = POOLINGS[pooling]
    x = ember.randn(4, 3, *(12,) * dims, dtype=ember.float64)
    conv, step = _step(pool, ember.relu, ember.float64, dims)
    start = [p.detach().clone() for p in conv.parameters()]
    fn = ember.function(step, verify=True)  # (each pass checked against its input graph)
    graph = fn.compile(x).graph
    masks = [v for n in graph.nodes for v in n.outputs if v.dtype is dt.bool_ and v.ndim >= 3]
    assert all(v.shape[-1] < 12 for v in masks), str(graph)
    got = fn(x).item()
    after = [p.detach().clone() for p in conv.parameters()]
    with ember.no_grad():
        for p, s in zip(conv.parameters(), start):
            p.copy_(s)
    want = step(x).item()
    assert got == pytest.approx(want, rel=1e-12)
    for p, a in zip(conv.parameters(), after):
        np.testing.assert_allclose(a.numpy(), p.detach().numpy(), rtol=1e-12, atol=1e-14)


def test_a_captured_forward_saves_the_pooled_values_not_the_activation():
    # ember.function on the forward only, backward outside: the AOT partition's forward must
    # not keep the full ReLU output for a mask the backward now reads off the pooled values
    conv = ember.nn.Conv2d(3, 8, 3, padding=1).double()
    fn = ember.function(lambda x: F.max_pool2d(ember.relu(conv(x)), 2))
    x = ember.randn(2, 3, 8, 8, dtype=ember.float64, requires_grad=True)
    fn(x).square().sum().backward()
    forward = next(g for g in fn.compile(x).graphs.values() if g.name.endswith("forward"))
    assert all(v.shape[-1] == 4 for v in forward.outputs if v.ndim == 4), str(forward)
    tx = torch.tensor(x.detach().numpy(), requires_grad=True)
    tconv = torch.nn.Conv2d(3, 8, 3, padding=1).double()
    with torch.no_grad():
        tconv.weight.copy_(torch.tensor(conv.weight.detach().numpy()))
        tconv.bias.copy_(torch.tensor(conv.bias.detach().numpy()))
    torch.nn.functional.max_pool2d(torch.relu(tconv(tx)), 2).square().sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(conv.weight.grad.numpy(), tconv.weight.grad.numpy(), rtol=1e-12)


def test_the_peak_drops_by_the_mask(bare_executors):
    x = ember.randn(16, 3, 32, 32)
    peaks = {}
    without = [p for p in passes_for(3) if p is not SCATTER_MASKS]
    for label, level in (("with", 3), ("without", without)):
        _, step = _step(POOLINGS["2x2"][1], ember.relu, ember.float32)
        fn = ember.function(step, opt_level=level)
        planned = fn.compile(x).memory_plan.peak_bytes
        fn(x)
        fn(x)
        measured = measure_peak(fn, x)
        assert abs(measured - planned) <= 0.05 * measured
        peaks[label] = measured
    mask_bytes = 16 * 8 * 32 * 32  # one bool per activation element
    assert peaks["without"] - peaks["with"] >= 0.9 * mask_bytes, peaks
