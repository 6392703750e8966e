"""Memory planning on the reference training steps.

1. Predicted vs measured peak (tracemalloc, plan/program.py's definition), and the peak
   without planning: every value kept to the end of the call ("no frees"), values freed after
   their last use but no buffer reuse ("frees only"), then what generated code does (frees,
   operand reuse, in-place updates: "planned"), and the scheduling pass's order planned the
   same way (in-place updates included).
2. The arena of every buffer allocated during a call (plan/arena.py): its size against the sum
   of the buffers' sizes and the most bytes alive at once (fragmentation).
3. Planned execution (``executor="arena"``) against generated code: peak and step time.
4. The GPT-block step under memory budgets: measured peak, step time (the cost of
   recomputation and of running the batch in slices), extra FLOPs, slices, compile time.

Times are medians of --repeat calls, the executors' calls interleaved.

    PYTHONPATH=src python benchmarks/memory.py [--repeat 10]
"""

from __future__ import annotations

import argparse
import statistics
import time

import ember
from ember.models import example_step
from ember.plan import measure_peak, plan_memory
from ember.plan.program import Planner
from ember.plan.schedule import schedule
from ember.transforms.remat import MemoryBudgetError

MIB = 2**20


def _step(name, **options):
    example = example_step(name)
    example.step()
    fn = ember.function(example.step, **options)
    start = time.perf_counter()
    program = fn.compile()
    return fn, program, time.perf_counter() - start


def _no_frees(graph) -> int:
    return sum(b.nbytes for b in plan_memory(graph, reuse="none").buffers)


def _times(fns: list, repeat: int) -> list[float]:
    for fn in fns:
        fn()
    samples: list[list] = [[] for _ in fns]
    for _ in range(repeat):
        for k, fn in enumerate(fns):
            start = time.perf_counter()
            fn()
            samples[k].append(time.perf_counter() - start)
    return [statistics.median(s) for s in samples]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    print(
        "step  predicted  measured  ratio | no frees  frees only  planned  scheduled (MiB)\n"
        "      arena: size  buffers  alive at once  fragmentation"
    )
    programs = {}
    for name in ("mlp", "cnn", "gpt"):
        fn, program, _ = _step(name)
        programs[name] = fn
        plan = program.memory_plan
        fn()
        measured = statistics.median(measure_peak(fn) for _ in range(3))
        graph = program.graph.copy()
        frees_only = plan_memory(graph, reuse="none").peak_bytes
        scheduled = Planner(program.memory_parts())(schedule(graph.copy())[0]).peak_bytes
        arena = plan.arena
        print(
            f"{name:<5} {plan.peak_bytes / MIB:9.2f} {measured / MIB:9.2f} "
            f"{plan.peak_bytes / measured:6.3f} | {_no_frees(graph) / MIB:8.2f} "
            f"{frees_only / MIB:11.2f} {plan.peak_bytes / MIB:8.2f} {scheduled / MIB:10.2f}\n"
            f"      arena: {arena.size / MIB:6.2f} {arena.total / MIB:8.2f} "
            f"{arena.live_peak / MIB:14.2f} {arena.fragmentation:14.1%}"
        )
    print("\nplanned execution (executor='arena') vs generated code")
    print("step  codegen peak  arena peak (predicted)  codegen ms  arena ms  arena/codegen")
    for name in ("mlp", "cnn", "gpt"):
        fn = programs[name]
        planned, program, _ = _step(name, executor="arena")
        planned()
        peaks = [measure_peak(f) for f in (fn, planned)]
        t_codegen, t_arena = _times([fn, planned], args.repeat)
        print(
            f"{name:<5} {peaks[0] / MIB:12.2f} {peaks[1] / MIB:11.2f} "
            f"({program.memory_plan.peak_bytes / MIB:6.2f}) {t_codegen * 1e3:14.2f} "
            f"{t_arena * 1e3:9.2f} {t_arena / t_codegen:14.2f}"
        )
    fn, program, compile_s = _step("gpt")
    unconstrained = program.memory_plan.peak_bytes
    print(
        f"\nGPT-block step under memory budgets (unconstrained plan {unconstrained / MIB:.2f} MiB)"
    )
    runs = [("none", fn, program, compile_s)]
    for fraction in (0.9, 0.7, 0.6, 0.5, 0.45, 0.4):
        budget = int(fraction * unconstrained)
        try:
            runs.append((f"{fraction:.0%}", *_step("gpt", memory_budget=budget)))
        except MemoryBudgetError as error:
            print(f"  budget {fraction:.0%}: {str(error).splitlines()[0]}")
    times = _times([r[1] for r in runs], args.repeat)
    for (label, fn, program, compile_s), t in zip(runs, times):
        extra = program.remat.extra_flops if program.remat else 0
        slices = program.remat.microbatches if program.remat else 1
        print(
            f"  budget {label:>4}: measured peak {measure_peak(fn) / MIB:6.2f} MiB, "
            f"step {t * 1e3:7.2f} ms ({t / times[0]:4.2f}x), recomputation "
            f"{extra / 1e9:.3f} GFLOP, batch in {slices} slice{'s' * (slices > 1)}, "
            f"compile {compile_s:.2f} s"
        )


if __name__ == "__main__":
    main()
