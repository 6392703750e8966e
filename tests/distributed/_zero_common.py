"""What the ZeroRedundancyOptimizer and resume workers share with the tests' one-process
references: the model, its two param groups, the data, the training loops."""

from __future__ import annotations

import numpy as np

import ember
from ember import nn

B = 8
N = 32  # samples in the resume runs' dataset: 4 global batches an epoch


def model(seed: int = 0) -> nn.Module:
    ember.manual_seed(seed)
    return nn.Sequential(
        nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 3)
    )


def groups(net) -> tuple[list, dict]:
    """The first layer at the optimizer's lr; the rest a second group added later, at 0.005."""
    rest = [p for layer in (net[2], net[4]) for p in layer.parameters()]
    return list(net[0].parameters()), {"params": rest, "lr": 0.005}


def batch(n: int = B, seed: int = 1):
    rng = np.random.RandomState(seed)
    return (
        rng.standard_normal((n, 6)).astype(np.float32),
        rng.standard_normal((n, 3)).astype(np.float32),
    )


def step(net, opt, x, y) -> None:
    opt.zero_grad()
    nn.functional.mse_loss(net(ember.tensor(x)), ember.tensor(y)).backward()
    opt.step()


def epoch(net, opt, loader) -> None:
    for xb, yb in loader:
        opt.zero_grad()
        nn.functional.mse_loss(net(xb), yb).backward()
        opt.step()


def state(net) -> dict:
    return {k: v.numpy().copy() for k, v in net.state_dict().items()}


def flat_optimizer_state(sd: dict, prefix: str) -> dict:
    out = {}
    for index, entries in sd["state"].items():
        for name, value in entries.items():
            out[f"{prefix}{index}_{name}"] = np.asarray(
                value.numpy() if isinstance(value, ember.Tensor) else value, dtype=np.float64
            )
    return out
