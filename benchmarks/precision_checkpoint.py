"""Activation checkpointing: the memory it saves and the time it costs, on the zoo's transformer
(one encoder layer), its ViT (four encoder layers) and its ResNet-18 (eight basic blocks).

* eager: forward and backward, each block (encoder layer, basic block) wrapped in
  ``ember.utils.checkpoint.checkpoint(..., use_reentrant=False)``, against the plain model;
  peak = tracemalloc's peak over the call (NumPy's arrays are traced);
* compiled: the zoo's training step (its optimizer) under ``ember.function``: the per-block
  regions, and the whole-graph policies ``dots_saveable`` (save the products' results) and
  ``nothing_saveable``; peak = ``ember.plan.measure_peak`` (the arrays the call is given,
  parameters and optimizer state included).

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
from ember.utils.checkpoint import checkpoint

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


def eager_case(name: str, per_block: bool, repeat: int) -> tuple[int, float]:
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
    return peak, _median(run, repeat)


def compiled_case(name: str, per_block: bool, policy, repeat: int) -> tuple[int, float]:
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
    return measure_peak(fn, x, y), _median(lambda: fn(x, y), repeat)


def _median(run, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def cpu_model() -> str:
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    return next((ln.split(":", 1)[1].strip() for ln in out.splitlines() if "Model name" in ln), "?")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--models", default="transformer,vit,resnet18")
    args = parser.parse_args()
    print(f"CPU: {cpu_model()}; rule of thumb: per-block checkpointing costs 1.20-1.30x the time")
    print(f"{'model':<12} {'mode':<26} {'peak MiB':>9} {'plain':>8} {'peak ratio':>10} "
          f"{'time ms':>8} {'plain':>8} {'time ratio':>10}")  # fmt: skip
    for name in args.models.split(","):
        cases = [("eager, per block", lambda n=name: eager_case(n, True, args.repeat))]
        plain_eager = eager_case(name, False, args.repeat)
        plain_compiled = compiled_case(name, False, None, args.repeat)
        cases += [
            ("compiled, per block", lambda n=name: compiled_case(n, True, None, args.repeat)),
            ("compiled, dots_saveable", lambda n=name: compiled_case(n, False, "dots_saveable",
                                                                     args.repeat)),
            ("compiled, nothing_saveable", lambda n=name: compiled_case(n, False,
                                                                        "nothing_saveable",
                                                                        args.repeat)),
        ]  # fmt: skip
        for label, case in cases:
            peak, seconds = case()
            base_peak, base_time = plain_eager if label.startswith("eager") else plain_compiled
            print(
                f"{name:<12} {label:<26} {peak / MIB:9.2f} {base_peak / MIB:8.2f} "
                f"{peak / base_peak:10.2f} {seconds * 1e3:8.1f} {base_time * 1e3:8.1f} "
                f"{seconds / base_time:10.2f}"
            )


if __name__ == "__main__":
    main()
