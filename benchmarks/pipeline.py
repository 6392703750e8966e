"""Epoch time of a training loop with a slow input pipeline: synchronous versus overlapped.

The model is ember's reference CNN (``ember.models.example_step("cnn")``: 1x28x28 images, two
convs, SGD with momentum) trained by one compiled step, ``ember.function(step)``, on batches of
64 from a `LabeledImages` dataset of random images whose transform is deliberately slow: a
random crop with 2 pixels of padding, then a stand-in for decoding that takes a fixed time per
sample outside the GIL (``--kind sleep``, as file reads and image decoders do) or NumPy work
(``--kind numpy``: repeated blurs, which compete with the step for the cores). The per-sample
cost is set so that loading a batch takes ``--load-ratio`` times the step's compute.

Printed (medians of interleaved rounds, seconds per epoch):
* load: an epoch of the DataLoader alone (prefetch 0);
* compute: the compiled steps alone on batches already in memory;
* sum and max of the two: what a synchronous loop costs, and the best an overlapped one can do;
* sync: ``DataLoader(prefetch=0)`` feeding the step: load then compute, batch after batch;
* overlapped: ``DataLoader(prefetch=2)``: a background thread builds the next batches while the
  step runs.
Ratios: sync / overlapped (the speedup) and overlapped / max (1.0: perfect overlap).

The step runs with single-threaded BLAS by default (``--blas-threads default`` for OpenBLAS's
own threads): on a machine shared with other processes, OpenBLAS's threads wait for busy cores
and made the same step take 20 to 250 ms from one epoch to the next, which no comparison of
epochs survives.

    python benchmarks/pipeline.py [--batches 10] [--rounds 5] [--kind sleep|numpy]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

import ember
import ember.nn.functional as F
from ember import models
from ember.data import DataLoader
from ember.data import transforms as T
from ember.data.datasets import LabeledImages
from ember.kernels import blas_threads

BATCH = 64


def compiled_step():
    example = models.example_step("cnn", batch=BATCH)
    model, optimizer = example.model, example.optimizer

    def step(x, y):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        return loss

    return ember.function(step)


class SlowDecode:
    """The deliberately slow transform: ``seconds`` per sample, sleeping (I/O-like, the GIL
    released) or blurring the image with NumPy until that much time has passed."""

    def __init__(self, seconds: float, kind: str):
        self.seconds, self.kind = seconds, kind

    def __call__(self, image):
        if self.kind == "sleep":
            time.sleep(self.seconds)
            return image
        array = image.numpy()
        end = time.perf_counter() + self.seconds
        while time.perf_counter() < end:  # 3x3 box blurs, as much as the budget allows
            padded = np.pad(array, ((0, 0), (1, 1), (1, 1)), mode="edge")
            array = sum(
                padded[:, i : i + array.shape[1], j : j + array.shape[2]]
                for i in range(3)
                for j in range(3)
            ) / np.float32(9)
        return ember.tensor(array.astype(np.float32))


def dataset(n: int, seconds: float, kind: str) -> LabeledImages:
    rng = np.random.default_rng(0)
    images = ember.tensor(rng.random((n, 1, 28, 28), dtype=np.float32))
    labels = ember.tensor(rng.integers(0, 10, n))
    transform = T.Compose([T.RandomCrop(28, padding=2), SlowDecode(seconds, kind)])
    return LabeledImages(images, labels, transform=transform)


def epoch(step, loader) -> float:
    start = time.perf_counter()
    for x, y in loader:
        if step is not None:
            step(x, y)
    return time.perf_counter() - start


def compute_only(step, batches) -> float:
    start = time.perf_counter()
    for x, y in batches:
        step(x, y)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--kind", choices=("sleep", "numpy"), default="sleep")
    parser.add_argument("--load-ratio", type=float, default=1.0)
    parser.add_argument(
        "--blas-threads",
        choices=("1", "default"),
        default="1",
        help="the step's BLAS threads: 1 keeps its time steady on a shared machine, where "
        "OpenBLAS's own threads wait for busy cores",
    )
    args = parser.parse_args()
    if args.blas_threads == "1":
        blas_threads.pin_this_thread()
    n = args.batches * BATCH
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"load average {load} on {os.cpu_count()} CPUs (other processes take cores too)")
    step = compiled_step()
    generator = ember.Generator().manual_seed(0)
    warm = list(DataLoader(dataset(n, 0.0, args.kind), batch_size=BATCH, generator=generator))
    for _ in range(2):  # trace and compile, then warm
        compute_only(step, warm)
    per_batch = statistics.median(compute_only(step, warm) for _ in range(3)) / args.batches
    seconds = args.load_ratio * per_batch / BATCH
    data = dataset(n, seconds, args.kind)
    print(
        f"CNN step, batch {BATCH}, {args.batches} batches; compute {per_batch * 1e3:.1f} ms per "
        f"batch; slow transform ({args.kind}) {seconds * 1e6:.0f} us per sample"
    )
    sync_loader = DataLoader(data, batch_size=BATCH, shuffle=True, generator=generator)
    overlapped_loader = DataLoader(
        data, batch_size=BATCH, shuffle=True, generator=generator, prefetch=2
    )
    rows: dict = {"load": [], "compute": [], "sync": [], "overlapped": []}
    for _ in range(args.rounds):
        rows["load"].append(epoch(None, sync_loader))
        rows["compute"].append(compute_only(step, warm))
        rows["sync"].append(epoch(step, sync_loader))
        rows["overlapped"].append(epoch(step, overlapped_loader))
    med = {k: statistics.median(v) for k, v in rows.items()}
    total, best = med["load"] + med["compute"], max(med["load"], med["compute"])
    print(
        f"load {med['load']:.3f} s  compute {med['compute']:.3f} s  sum {total:.3f} s  "
        f"max {best:.3f} s"
    )
    print(f"sync {med['sync']:.3f} s  overlapped {med['overlapped']:.3f} s")
    print(
        f"sync/overlapped {med['sync'] / med['overlapped']:.2f}x  overlapped/max "
        f"{med['overlapped'] / best:.2f}  overlapped/sum {med['overlapped'] / total:.2f}"
    )


if __name__ == "__main__":
    main()
