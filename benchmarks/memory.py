"""Memory planning on the reference training steps: predicted vs measured peak (tracemalloc,
plan/program.py's definition), the peak without planning (every value kept to the end; and
liveness frees without buffer reuse), the memory-aware order, and the GPT-block step's time
under memory budgets (the cost of recomputation). Medians of --repeat calls.

    PYTHONPATH=src python benchmarks/memory.py [--repeat 10]
"""

from __future__ import annotations

import argparse
import statistics
import time

import ember
from ember.models import example_step
from ember.plan import measure_peak, plan_memory
from ember.plan.schedule import schedule
from ember.transforms.remat import MemoryBudgetError

MIB = 2**20


def _step(name, **options):
    example = example_step(name)
    example.step()
    fn = ember.function(example.step, **options)
    return fn, fn.compile()


def _no_frees(graph) -> int:
    return sum(b.nbytes for b in plan_memory(graph, reuse="none").buffers)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    print("step  predicted  measured  ratio | no frees  frees only  planned  scheduled (MiB)")
    for name in ("mlp", "cnn", "gpt"):
        fn, program = _step(name)
        plan = program.memory_plan
        fn()
        measured = statistics.median(measure_peak(fn) for _ in range(3))
        graph = program.graph.copy()
        frees_only = plan_memory(graph, reuse="none").peak_bytes
        scheduled = plan_memory(schedule(graph.copy())[0]).peak_bytes
        print(
            f"{name:<5} {plan.peak_bytes / MIB:9.2f} {measured / MIB:9.2f} "
            f"{plan.peak_bytes / measured:6.3f} | {_no_frees(graph) / MIB:8.2f} "
            f"{frees_only / MIB:11.2f} {plan.peak_bytes / MIB:8.2f} {scheduled / MIB:10.2f}"
        )
    fn, program = _step("gpt")
    unconstrained = program.memory_plan.peak_bytes
    print(
        f"\nGPT-block step under memory budgets (unconstrained plan {unconstrained / MIB:.2f} MiB)"
    )
    base_time = None
    for fraction in (None, 0.9, 0.7, 0.5):
        budget = None if fraction is None else int(fraction * unconstrained)
        try:
            fn, program = _step("gpt", memory_budget=budget)
        except MemoryBudgetError as error:
            print(f"  {fraction:4.0%} budget: {error}".split("\n")[0])
            continue
        fn()
        times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        t = statistics.median(times)
        base_time = base_time or t
        label = "none" if fraction is None else f"{fraction:.0%}"
        extra = program.remat.extra_flops if program.remat else 0
        print(
            f"  budget {label:>4}: measured peak {measure_peak(fn) / MIB:6.2f} MiB, "
            f"step {t * 1e3:7.2f} ms ({t / base_time:4.2f}x), recomputation {extra / 1e9:.2f} GFLOP"
        )


if __name__ == "__main__":
    main()
