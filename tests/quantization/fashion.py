"""A small CNN trained briefly on Fashion-MNIST, shared by the quantization tests and
benchmarks/precision_int8.py (trained once per process: a fixed seed, a few hundred steps)."""

from __future__ import annotations

import functools
import os

import numpy as np

import ember
from ember import nn

ROOT = "/usr/share/datasets/fashion-mnist"
AVAILABLE = os.path.isdir(ROOT)
MISSING = f"Fashion-MNIST is not installed in {ROOT} (apt-get install dataset-fashion-mnist)"


def make_model() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1),
        nn.BatchNorm2d(16),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.BatchNorm2d(32),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(32 * 7 * 7, 64),
        nn.ReLU(),
        nn.Linear(64, 10),
    )


@functools.cache
def data():
    from ember.data import datasets

    train = datasets.fashion_mnist(train=True)
    test = datasets.fashion_mnist(train=False)
    return (train.data.numpy(), train.targets.numpy(), test.data.numpy(),
            test.targets.numpy())  # fmt: skip


@functools.cache
def trained(steps: int = 400, batch: int = 64, seed: int = 0):
    """(model, test images, test labels): Adam for ``steps`` steps."""
    xs, ys, xt, yt = data()
    ember.manual_seed(seed)
    model = make_model()
    opt = ember.optim.Adam(model.parameters(), lr=2e-3)
    rng = np.random.default_rng(seed)
    model.train()
    for _ in range(steps):
        idx = rng.integers(0, len(xs), batch)
        loss = nn.functional.cross_entropy(model(ember.tensor(xs[idx])), ember.tensor(ys[idx]))
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    return model, xt, yt


def accuracy(model, x, y, batch: int = 1000) -> float:
    """Percent correct."""
    right = 0
    with ember.no_grad():
        for i in range(0, len(x), batch):
            logits = model(ember.tensor(x[i : i + batch])).numpy()
            right += int((logits.argmax(1) == y[i : i + batch]).sum())
    return 100.0 * right / len(x)


def calibration(n: int = 512, batch: int = 128, seed: int = 1):
    xs = data()[0]
    idx = np.random.default_rng(seed).choice(len(xs), n, replace=False)
    return [xs[idx[i : i + batch]] for i in range(0, n, batch)]
