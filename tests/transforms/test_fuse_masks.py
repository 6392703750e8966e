"""transforms/fuse.py: a node whose group is read before it (a ReLU's mask, read only in the
backward) joins that group's early loop or runs where it is, whichever plans the lower peak."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.plan import measure_peak
from ember.transforms import fuse

nn = ember.nn


def _blocks(channels=16, depth=3, act=nn.ReLU):
    layers = [nn.Conv2d(3, channels, 3, padding=1), nn.BatchNorm2d(channels), act()]
    for _ in range(depth):
        layers += [nn.Conv2d(channels, channels, 3, padding=1), nn.BatchNorm2d(channels), act()]
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels, 10))


def _step(model):
    opt = ember.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return step


def _bool_saved_across_forward(graph) -> list:
    """Bool values made by fused loops and read only much later (a mask held from the
    forward into the backward)."""
    position = {id(n): i for i, n in enumerate(graph.nodes)}
    held = []
    for node in graph.nodes:
        for v in node.outputs:
            if v.dtype is ember.bool and v.ndim == 4 and v.users:
                first = min(position[id(u)] for u in v.users)
                if first - position[id(node)] > 5:
                    held.append(v)
    return held


@pytest.fixture
def early_only(monkeypatch):
    """The grouping before this rule: every node joins its group's early loop."""
    monkeypatch.setattr(fuse, "_grouping", lambda graph: fuse._groups(graph)[0])
    return monkeypatch


def _compiled(x, y, act=nn.ReLU):
    ember.manual_seed(0)
    model = _blocks(act=act)
    fn = ember.function(_step(model))
    return model, fn, fn.compile(x, y)


@pytest.mark.parametrize("act", [nn.ReLU, nn.ReLU6, nn.Hardtanh], ids=["relu", "relu6", "hardtanh"])
def test_conv_blocks_keep_no_mask_over_the_forward(bare_executors, act):
    # (ReLU6 and hardtanh: their gradient reads the result, ops/hardtanh.py, no mask at all)
    x, y = ember.randn(16, 3, 16, 16), ember.randint(0, 10, (16,))
    model, fn, program = _compiled(x, y, act)
    assert not _bool_saved_across_forward(program.graph), str(program.graph)
    fn(x, y)
    fn(x, y)
    measured = measure_peak(fn, x, y)
    assert abs(measured - program.memory_plan.peak_bytes) <= 0.05 * measured


def test_the_lower_planned_peak_is_taken(early_only, bare_executors):
    x, y = ember.randn(16, 3, 16, 16), ember.randint(0, 10, (16,))
    _, _, before = _compiled(x, y)
    assert _bool_saved_across_forward(before.graph)  # (the old grouping held the masks)
    early_only.undo()
    _, _, after = _compiled(x, y)
    masks = 4 * 16 * 16 * 16 * 16  # four ReLU masks of one byte an element
    assert before.memory_plan.peak_bytes - after.memory_plan.peak_bytes >= 0.5 * masks


@pytest.mark.parametrize("act", [nn.ReLU, nn.ReLU6], ids=["relu", "relu6"])
def test_deferred_masks_give_eager_values(act):
    x, y = ember.randn(8, 3, 8, 8, dtype=ember.float64), ember.randint(0, 10, (8,))
    ember.manual_seed(0)
    model = _blocks(channels=8, depth=2, act=act).double()
    start = {k: v.detach().clone() for k, v in model.state_dict().items()}
    fn = ember.function(_step(model), verify=True)
    losses = [fn(x, y).item() for _ in range(3)]
    got = {k: v.detach().clone() for k, v in model.state_dict().items()}
    model.load_state_dict(start)
    step = _step(model)  # a fresh optimizer: its momentum starts at zero as the captured one
    want = [step(x, y).item() for _ in range(3)]
    np.testing.assert_allclose(losses, want, rtol=1e-10)
    for k, v in model.state_dict().items():
        np.testing.assert_allclose(got[k].numpy(), v.numpy(), rtol=1e-9, atol=1e-12)
