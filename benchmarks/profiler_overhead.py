"""What recording costs: ember.profiler against torch.profiler on the same work.

Cases, each timed without and with the library's profiler recording (interleaved, medians; one
case after another, so that one library's idle threads do not slow the next one's BLAS):
* eager chain: 100 elementwise ops on 64 float32 (benchmarks/overhead.py's chain), where the
  per-op cost of recording dominates;
* mlp step: the reference MLP training step (``ember.models.example_step("mlp")``) eager, and
  compiled (``ember.function``), against the same model in PyTorch eager.

Prints milliseconds per call unprofiled and profiled, and the slowdown (profiled / unprofiled)
for ember and for PyTorch (``torch.profiler.profile(record_shapes=True, profile_memory=True,
with_flops=True)``, the same information).

    python benchmarks/profiler_overhead.py [--reps 7]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from overhead import chain

import ember
import ember.models
from ember import profiler


def _time(run, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        run()
    return (time.perf_counter() - start) / calls


def _ember_profiled(run):
    def profiled():
        with profiler.profile(record_shapes=True, profile_memory=True) as prof:
            run()
        return prof

    return profiled


def _torch_sides(x: np.ndarray, sides: dict) -> None:
    try:
        import torch
    except ImportError:
        print("PyTorch is not installed: no torch rows (pip install torch==2.13.0)")
        return

    def profiled(run):
        def call():
            with torch.profiler.profile(record_shapes=True, profile_memory=True, with_flops=True):
                run()

        return call

    tx = torch.from_numpy(x)
    sides["torch eager chain"] = lambda: chain(tx, torch.sin, 100)
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(),
        torch.nn.Linear(512, 10),
    )  # fmt: skip
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = torch.randn(128, 784)
    labels = torch.randint(0, 10, (128,))

    def step():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(data), labels)
        loss.backward()
        opt.step()

    sides["torch mlp step"] = step
    for name in ("torch eager chain", "torch mlp step"):
        sides[name] = (sides[name], profiled(sides[name]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=7, help="timed repetitions per side")
    args = parser.parse_args()

    x = np.random.default_rng(0).standard_normal(64).astype(np.float32)
    ex = ember.tensor(x)
    example = ember.models.example_step("mlp")
    compiled = ember.function(example.step)
    compiled()
    sides = {}
    for name, run in (
        ("ember eager chain", lambda: chain(ex, ember.sin, 100)),
        ("ember mlp step", example.step),
        ("ember fn mlp step", compiled),
    ):
        sides[name] = (run, _ember_profiled(run))
    _torch_sides(x, sides)
    calls = {name: 20 if "chain" in name else 3 for name in sides}
    times = {name: ([], []) for name in sides}
    # case by case (a library's idle threads left spinning would slow the next one's BLAS),
    # unprofiled and profiled interleaved within a case
    for name, (plain, profiled) in sides.items():
        plain(), profiled()  # warm-up: the first profiled compiled call instruments its code
        for _ in range(args.reps):
            times[name][0].append(_time(plain, calls[name]))
            times[name][1].append(_time(profiled, calls[name]))
    print(f"{'case':20}{'plain ms':>10}{'profiled ms':>13}{'slowdown':>10}")
    for name, (plain, profiled) in times.items():
        a, b = statistics.median(plain), statistics.median(profiled)
        print(f"{name:20}{a * 1e3:10.3f}{b * 1e3:13.3f}{b / a:10.2f}")


if __name__ == "__main__":
    main()
