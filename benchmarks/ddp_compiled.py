"""Data-parallel training-step time: ember's DistributedDataParallel eager and inside
``ember.function`` (the bucket all-reduces as graph nodes), against PyTorch's DDP (gloo) in the
same run, on the same ranks.

    ember run -n 2 benchmarks/ddp_compiled.py [--steps 30] [--rounds 5]

Every rank uses one thread. Case: the MLP of benchmarks/train_step.py (784-512-512-10, ReLU,
cross-entropy, SGD with momentum), global batch 128 split over the ranks. Before timing, the
compiled step is checked against the eager one (three steps from the same weights). Columns:
median seconds per step over rounds (each round re-warms every side), and the ratios ember fn /
ember eager and ember / torch (below 1: ember is faster). Rank 0 prints.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

import ember
import ember.distributed as dist
from ember import nn
from ember.kernels.cpool import cpu_model  # noqa: E402
from ember.nn.parallel import DistributedDataParallel as DDP

GLOBAL_BATCH = 128


def ember_model(ns, seed: int):
    ember.manual_seed(seed)
    return ns.Sequential(
        ns.Linear(784, 512), ns.ReLU(), ns.Linear(512, 512), ns.ReLU(), ns.Linear(512, 10)
    )


def ember_steps(x, y, seed):
    net = DDP(ember_model(nn, seed))
    opt = ember.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)

    def step(xb, yb):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(net(xb), yb)
        loss.backward()
        opt.step()
        return loss

    return net, step, ember.function(step)


def torch_step(x, y, rank, world):
    import torch
    import torch.distributed as tdist

    torch.set_num_threads(1)
    port = os.environ.get("EMBER_BENCH_TORCH_PORT", "29517")
    tdist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
    )
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(784, 512),
        torch.nn.ReLU(),
        torch.nn.Linear(512, 512),
        torch.nn.ReLU(),
        torch.nn.Linear(512, 10),
    )
    net = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    tx, ty = torch.from_numpy(x), torch.from_numpy(y)

    def step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(tx), ty).backward()
        opt.step()

    return step


def seconds_per_step(fn, steps: int) -> float:
    dist.barrier()
    start = time.perf_counter()
    for _ in range(steps):
        fn()
    dist.barrier()
    return (time.perf_counter() - start) / steps


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    ember.set_num_threads(1)
    dist.init_process_group()
    rank, world = dist.get_rank(), dist.get_world_size()
    rng = np.random.RandomState(0)
    gx = rng.standard_normal((GLOBAL_BATCH, 784)).astype(np.float32)
    gy = rng.randint(0, 10, GLOBAL_BATCH).astype(np.int64)
    rows = slice(rank * GLOBAL_BATCH // world, (rank + 1) * GLOBAL_BATCH // world)
    x, y = gx[rows], gy[rows]
    ex, ey = ember.tensor(x), ember.tensor(y)

    # the compiled step reproduces the eager one
    eager_net, eager, _ = ember_steps(x, y, 0)
    compiled_net, _, compiled = ember_steps(x, y, 0)
    for _ in range(3):
        eager(ex, ey)
        compiled(ex, ey)
    for a, b in zip(eager_net.parameters(), compiled_net.parameters()):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)

    sides = {"ember": lambda: eager(ex, ey), "ember fn": lambda: compiled(ex, ey)}
    why_no_torch = None
    try:
        sides["torch"] = torch_step(x, y, rank, world)
    except Exception as exc:  # torch missing or gloo unavailable: say so, time the rest
        why_no_torch = f"{type(exc).__name__}: {exc}"
    times: dict = {k: [] for k in sides}
    for _ in range(args.rounds):
        for label, fn in sides.items():
            fn()  # re-warm
            times[label].append(seconds_per_step(fn, args.steps))
    if rank == 0:
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"CPU: {cpu_model()}; {world} rank(s) x 1 thread; MLP 784-512-512-10, global batch")
        print(f"{GLOBAL_BATCH}, SGD momentum; median of {args.rounds} rounds of {args.steps} steps")
        for label, t in med.items():
            print(f"  {label:9s} {t * 1e3:8.2f} ms/step")
        print(f"  ember fn / ember eager: {med['ember fn'] / med['ember']:.2f}")
        if "torch" in med:
            print(f"  ember / torch: {med['ember'] / med['torch']:.2f}")
            print(f"  ember fn / torch: {med['ember fn'] / med['torch']:.2f}")
        else:
            print(f"  torch: not measured ({why_no_torch})")
        buckets = len(compiled_net._buckets)
        print(f"  buckets: {buckets} (bucket_cap_mb=25); graph: {compiled.stats}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
