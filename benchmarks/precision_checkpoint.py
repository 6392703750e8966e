"""Activation checkpointing: the memory it saves and the time it costs, on the zoo's transformer
(one encoder layer), its ViT (four encoder layers) and its ResNet-18 (eight basic blocks).

* eager: forward and backward, each block (encoder layer, basic block) wrapped in
  ``ember.utils.checkpoint.checkpoint(..., use_reentrant=False)``, against the plain model;
  peak = tracemalloc's peak over the call (NumPy's arrays are traced);
* compiled: the zoo's training step (its optimizer) under ``ember.function``: the per-block
  regions, and the whole-graph policies ``dots_saveable`` (save the products' results),
  ``save_only("matmul", "conv")`` and ``nothing_saveable``; peak = ``ember.plan.measure_peak``
  (the arrays the call is given, parameters and optimizer state included).

Ratios are to the plain run measured in the same process; the rule of thumb for per-block
checkpointing is 20-30% more time (one more forward pass in a step that costs about three).

    PYTHONPATH=src python benchmarks/precision_checkpoint.py [--repeat 5] [--models vit,resnet18]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time
import tracemalloc

import ember
import ember.nn as nn
from ember import zoo
from ember.plan import measure_peak
from ember.utils.checkpoint import checkpoint, save_only

MIB = 2**20


class Checkpointed(nn.Module):
    """A block whose forward runs under ``checkpoint``."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return checkpoint(self.inner, x, use_reentrant=False)


def build(name: str, per_block: bool):
    ember.manual_seed(0)
    model = zoo.build(name, ember)
    if per_block:
        if name == "transformer":
            model.layer = Checkpointed(model.layer)
        else:
            layers = model.layers if name == "vit" else model.blocks
            for i in range(len(layers)):
                layers[i] = Checkpointed(layers[i])
    return model


def batch(name: str):
    x, y = zoo.inputs(name, zoo.SPECS[name].train_batch)
    return ember.tensor(x), ember.tensor(y)


def eager_case(name: str, per_block: bool):
    """(the peak of one forward and backward, the function running one)."""
    model = build(name, per_block)
    x, y = batch(name)

    def run():
        model.zero_grad(set_to_none=True)
        zoo.loss(ember, model(x), y).backward()

    run()
    tracemalloc.start()
    tracemalloc.reset_peak()
    before, _ = tracemalloc.get_traced_memory()
    run()
    peak = tracemalloc.get_traced_memory()[1] - before
    tracemalloc.stop()
    return peak, run


def compiled_case(name: str, per_block: bool, policy):
    """(the measured peak of one training step, the function running one)."""
    model = build(name, per_block)
    opt = zoo.optimizer(name, ember, model.parameters())
    x, y = batch(name)

    def step(x, y):
        opt.zero_grad()
        loss = zoo.loss(ember, model(x), y)
        loss.backward()
        opt.step()
        return loss

    fn = ember.function(step, remat_policy=policy)
    for _ in range(2):
        fn(x, y)
    return measure_peak(fn, x, y), lambda: fn(x, y)


def _medians(runs: list, repeat: int) -> list[float]:
    """The median time of each of ``runs``, called in turn ``repeat`` times (alternating, so
    that a change in the machine's load falls on all of them alike)."""
    times = [[] for _ in runs]
    for _ in range(repeat):
        for run, row in zip(runs, times):
            start = time.perf_counter()
            run()
            row.append(time.perf_counter() - start)
    return [statistics.median(row) for row in times]


def cpu_model() -> str:
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    return next((ln.split(":", 1)[1].strip() for ln in out.splitlines() if "Model name" in ln), "?")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--models", default="transformer,vit,resnet18")
    args = parser.parse_args()
    print(f"CPU: {cpu_model()}; rule of thumb: per-block checkpointing costs 1.20-1.30x the time")
    print(f"{'model':<12} {'mode':<38} {'peak MiB':>9} {'plain':>8} {'peak ratio':>10} "
          f"{'time ms':>8} {'plain':>8} {'time ratio':>10}")  # fmt: skip
    for name in args.models.split(","):
        cases = [
            ("eager, per block", eager_case(name, False), eager_case(name, True)),
            ("compiled, per block", compiled_case(name, False, None),
             compiled_case(name, True, None)),
        ]  # fmt: skip
        cases += [
            (f"compiled, {policy}", cases[1][1], compiled_case(name, False, policy))
            for policy in ("dots_saveable", save_only("matmul", "conv"), "nothing_saveable")
        ]
        for label, (base_peak, base_run), (peak, run) in cases:
            base_time, seconds = _medians([base_run, run], args.repeat)
            print(
                f"{name:<12} {label:<38} {peak / MIB:9.2f} {base_peak / MIB:8.2f} "
                f"{peak / base_peak:10.2f} {seconds * 1e3:8.1f} {base_time * 1e3:8.1f} "
                f"{seconds / base_time:10.2f}"
            )


if __name__ == "__main__":
    main()
