"""Per-op time of one reference training step: ember eager, ``ember.function`` and PyTorch eager.

For ember, every op's kernel and every compiled implementation the code generator builds
(fused C loops, epilogues, the pooling scatter) is wrapped with a timer; the table lists the
milliseconds per step spent in each, largest first, with the calls per step. For PyTorch, the
table is torch.profiler's self CPU time per aten op. Kernel times include the thread pools'
work but not the Python between them (the step's total is printed above each table).

    python benchmarks/step_ops.py [--case cnn] [--steps 30] [--sides ember,fn,torch]
"""

from __future__ import annotations

import argparse
import collections
import time

import ember
from ember import models
from ember.ops._registry import REGISTRY

_times: dict = collections.defaultdict(float)
_calls: collections.Counter = collections.Counter()


def _timed(label: str, fn):
    def call(*args, **kwargs):
        start = time.perf_counter()
        result = fn(*args, **kwargs)
        _times[label] += time.perf_counter() - start
        _calls[label] += 1
        return result

    return call


def _instrument() -> None:
    """Time every op kernel, and every compiled node the code generator builds."""
    from ember.kernels import cepilogue, cfuse, cpooling

    for op in REGISTRY.values():
        object.__setattr__(op, "kernel", _timed(op.name, op.kernel))

    def hook(module, name, label):
        build = getattr(module, name)

        def timed_build(node):
            run = build(node)
            return None if run is None else _timed(label(node), run)

        setattr(module, name, timed_build)

    hook(cpooling, "build_scatter", lambda n: "C pool_scatter")
    hook(cepilogue, "build", lambda n: f"C epilogue of {n.attrs['producer']}")
    hook(cfuse, "build", lambda n: "C " + "+".join(p[0] for p in n.attrs["program"])[:50])


def _table(title: str, step, steps: int) -> None:
    for _ in range(5):
        step()
    _times.clear()
    _calls.clear()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    total = (time.perf_counter() - start) / steps
    print(
        f"{title}: {total * 1e3:.2f} ms per step, {sum(_times.values()) / steps * 1e3:.2f} in ops"
    )
    for label, seconds in sorted(_times.items(), key=lambda item: -item[1]):
        print(f"  {seconds / steps * 1e3:8.3f} ms  x{_calls[label] // steps:<3d} {label}")


def _torch_table(case: str, steps: int) -> None:
    import numpy as np
    import torch
    from torch.profiler import ProfilerActivity, profile

    example = models.example_step(case)
    weights = {k: torch.from_numpy(v.numpy().copy()) for k, v in example.model.state_dict().items()}
    if case != "cnn":
        raise SystemExit("the PyTorch twin is built for the cnn case only")
    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, 32, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(32, 64, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Flatten(),
        torch.nn.Linear(64 * 7 * 7, 128),
        torch.nn.ReLU(),
        torch.nn.Linear(128, 10),
    )
    model.load_state_dict(weights)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.from_numpy(np.asarray(example.x.numpy()))
    y = torch.from_numpy(np.asarray(example.y.numpy()))

    def step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    for _ in range(5):
        step()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    print(f"torch: {(time.perf_counter() - start) / steps * 1e3:.2f} ms per step")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
    rows = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)
    for event in rows[:15]:
        per_step = event.self_cpu_time_total / steps / 1e3
        print(f"  {per_step:8.3f} ms  x{event.count // steps:<3d} {event.key}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--case", default="cnn", choices=models.EXAMPLE_STEPS)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--sides", default="ember,fn,torch", help="comma-separated")
    args = parser.parse_args()
    sides = args.sides.split(",")
    if "torch" in sides:
        _torch_table(args.case, args.steps)
    _instrument()
    if "ember" in sides:
        _table("ember eager", models.example_step(args.case).step, args.steps)
    if "fn" in sides:
        _table("ember.function", ember.function(models.example_step(args.case).step), args.steps)


if __name__ == "__main__":
    main()
