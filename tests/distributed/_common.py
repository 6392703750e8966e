"""What the distributed workers and the tests' single-process references share: the models, the
global batch, the training loops. A rank r of w trains on rows [r*B/w, (r+1)*B/w) of the batch."""

from __future__ import annotations

import numpy as np

import ember
from ember import nn

B = 8
CONFIGS = ("sgd_small_buckets", "sgd", "adam", "syncbn", "accumulate", "unused")
STEPS = 3


def batch():
    rng = np.random.RandomState(1)
    x = rng.standard_normal((B, 6)).astype(np.float32)
    y = rng.standard_normal((B, 3)).astype(np.float32)
    return x, y


class WithUnused(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(6, 8)
        self.unused = nn.Linear(8, 8)
        self.b = nn.Linear(8, 3)

    def forward(self, x):
        return self.b(ember.tanh(self.a(x)))


def model(config: str, seed: int) -> nn.Module:
    ember.manual_seed(seed)
    if config == "syncbn":
        return nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))
    if config == "unused":
        return WithUnused()
    return nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))


def optimizer(config: str, params):
    if config == "adam":
        return ember.optim.Adam(params, lr=0.01)
    return ember.optim.SGD(params, lr=0.1, momentum=0.9)


def train(config: str, net, x: np.ndarray, y: np.ndarray, no_sync=None) -> None:
    """STEPS steps on (x, y); "accumulate" splits each step into two halves, the first inside
    ``no_sync`` (when given), each loss halved."""
    opt = optimizer(config, net.parameters())
    xs, ys = ember.tensor(x), ember.tensor(y)
    for _ in range(STEPS):
        opt.zero_grad()
        if config == "accumulate":
            half = len(x) // 2
            import contextlib

            with no_sync() if no_sync is not None else contextlib.nullcontext():
                loss = nn.functional.mse_loss(net(xs[:half]), ys[:half]) * 0.5
                loss.backward()
            loss = nn.functional.mse_loss(net(xs[half:]), ys[half:]) * 0.5
            loss.backward()
        else:
            nn.functional.mse_loss(net(xs), ys).backward()
        opt.step()


def state(net) -> dict:
    return {k: v.numpy().copy() for k, v in net.state_dict().items()}
