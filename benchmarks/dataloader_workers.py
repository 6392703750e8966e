"""Throughput of DataLoader worker processes: ember against torch.utils.data, same dataset.

The dataset's ``__getitem__`` is deliberately slow: a CPU transform (``--cpu-ms`` of NumPy work
on a 3x64x64 float32 image: box blurs, holding the GIL most of the time) plus a sleep standing
for file I/O (``--io-ms``). Both loaders read the very same dataset object (a plain class with
``__getitem__`` and ``__len__`` returning NumPy arrays; each library's default collate makes its
own tensors), with ``batch_size=--batch`` and 0, 1 and 2 workers (and more with ``--workers``).
An epoch includes starting and stopping the workers, as a non-persistent loader does.

Printed: the CPU model and load, then one line per worker count with samples/s (median of
``--rounds`` interleaved epochs) for ember and torch, and ember/torch (above 1: ember faster).

    python benchmarks/dataloader_workers.py [--samples 256] [--rounds 3] [--workers 0 1 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from ember.data import DataLoader
from ember.kernels.cpool import cpu_model  # noqa: E402


class SlowImages:
    """Sample i: a blurred 3x64x64 float32 image and its label, costing cpu_ms + io_ms."""

    def __init__(self, n: int, cpu_ms: float, io_ms: float):
        self.n, self.cpu_s, self.io_s = n, cpu_ms / 1e3, io_ms / 1e3
        self.base = np.random.default_rng(0).random((3, 64, 64), dtype=np.float32)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        time.sleep(self.io_s)
        image = self.base + np.float32(i)
        end = time.perf_counter() + self.cpu_s
        while time.perf_counter() < end:
            padded = np.pad(image, ((0, 0), (1, 1), (1, 1)), mode="edge")
            image = (padded[:, :-2, 1:-1] + padded[:, 2:, 1:-1] + padded[:, 1:-1, 1:-1]) / 3
        return image.astype(np.float32), i % 10


def epoch_seconds(loader) -> float:
    start = time.perf_counter()
    for _ in loader:
        pass
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=256)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--cpu-ms", type=float, default=1.0)
    parser.add_argument("--io-ms", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 1, 2])
    args = parser.parse_args()
    try:
        import torch
        import torch.utils.data as tud
    except ImportError:
        torch = tud = None
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"CPU: {cpu_model()}; {os.cpu_count()} CPUs, load average {load}")
    print(
        f"{args.samples} samples, batch {args.batch}, {args.cpu_ms} ms NumPy + {args.io_ms} ms "
        "sleep per sample"
    )
    if torch is None:
        print("torch is not installed: ember only")
    else:
        torch.set_num_threads(1)
    data = SlowImages(args.samples, args.cpu_ms, args.io_ms)
    for workers in args.workers:
        loaders = {"ember": DataLoader(data, batch_size=args.batch, num_workers=workers)}
        if tud is not None:
            loaders["torch"] = tud.DataLoader(data, batch_size=args.batch, num_workers=workers)
        times: dict = {name: [] for name in loaders}
        for _ in range(args.rounds):
            for name, loader in loaders.items():
                times[name].append(epoch_seconds(loader))
        rate = {name: args.samples / statistics.median(t) for name, t in times.items()}
        line = f"workers {workers}: ember {rate['ember']:8.0f} samples/s"
        if "torch" in rate:
            line += (
                f"  torch {rate['torch']:8.0f} samples/s  ember/torch "
                f"{rate['ember'] / rate['torch']:.2f}x"
            )
        print(line, flush=True)


if __name__ == "__main__":
    main()
