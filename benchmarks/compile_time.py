"""Compile time of the GPT-block training step (benchmarks/train_step.py's ``gpt`` case).

* ember cold: a fresh process with an empty kernel cache: trace, optimize, generate code and
  compile every fused C kernel (``fn.compile()``, no step run).
* ember warm: a fresh process with the cache the cold run filled (nothing to compile).
* torch.compile: a fresh process, first call of the compiled step minus one eager step.

Each runs in its own process (``--child``), so nothing is shared in memory; the medians of
``--reps`` runs are printed with the kernels compiled / found on disk.

    python benchmarks/compile_time.py [--reps 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _child(kind: str) -> None:
    sys.path.insert(0, str(HERE))
    import train_step as ts

    case = next(iter(ts._cases(["gpt"])))
    if kind == "ember":
        from ember.kernels import ccompile

        step = ts._ember_function_step(case)
        start = time.perf_counter()
        step.compile()
        seconds = time.perf_counter() - start
        print(seconds, ccompile.stats.compiles, ccompile.stats.disk_hits)
        return
    import torch

    import ember

    torch.set_num_threads(2)
    ember.manual_seed(0)
    ember_model = case.build()
    weights = {k: v.numpy() for k, v in ember_model.state_dict().items()}
    eager_step = ts._torch_step(case, ts._torch_model(case, ember_model, weights))
    eager_step()  # warm the eager path so the subtraction leaves the compile
    start = time.perf_counter()
    eager_step()
    eager = time.perf_counter() - start
    compiled = ts._torch_step(case, ts._torch_model(case, ember_model, weights), compiled=True)
    start = time.perf_counter()
    compiled()
    print(time.perf_counter() - start - eager, 0, 0)


def _run(kind: str, cache: str) -> tuple[float, int, int]:
    env = dict(os.environ, EMBER_CACHE_DIR=cache)
    out = subprocess.run(
        [sys.executable, __file__, "--child", kind], env=env, capture_output=True, text=True
    )
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip().splitlines()[-1])
    seconds, compiles, hits = out.stdout.split()[-3:]
    return float(seconds), int(compiles), int(hits)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--child", choices=["ember", "torch"])
    args = parser.parse_args()
    if args.child:
        _child(args.child)
        return
    cold, warm = [], []
    for _ in range(args.reps):
        cache = tempfile.mkdtemp(prefix="ember-kernels-")
        try:
            cold.append(_run("ember", cache))
            warm.append(_run("ember", cache))
        finally:
            shutil.rmtree(cache, ignore_errors=True)
    print(f"GPT-block training step, compile time, median of {args.reps} fresh processes")
    for name, runs in (("ember cold", cold), ("ember warm", warm)):
        seconds = statistics.median(r[0] for r in runs)
        kernels = f"{runs[0][1]} kernels compiled, {runs[0][2]} from disk"
        print(f"  {name:<14} {seconds:6.2f} s  ({kernels})")
    try:
        torch_runs = [_run("torch", tempfile.gettempdir())[0] for _ in range(args.reps)]
        print(f"  {'torch.compile':<14} {statistics.median(torch_runs):6.2f} s")
    except RuntimeError as exc:
        print(f"  torch.compile       -   ({exc})")


if __name__ == "__main__":
    main()
