"""Mixed precision: the training step's time and measured peak memory under ``ember.autocast``
against float32, on the zoo's CNN and transformer (ember.zoo), with PyTorch's autocast step
measured in the same run as the peer; optionally the accuracy of ``ember train --amp``.

Per model, one line per precision, each step captured with ``ember.function`` (zero_grad,
forward and loss under autocast, backward, optimizer step; float16 with a GradScaler), one
thread each side (``--threads``), times the best of interleaved rounds of process CPU time:
* ember ms: step time; x f32: its ratio to ember's float32 step;
* peak MiB: the step's measured peak (``ember.plan.measure_peak``); x f32: its ratio;
* torch ms, x f32: PyTorch eager's same step under ``torch.autocast`` and its ratio to torch's
  float32 step (torch's own speed-up on this CPU, the yardstick for ember's);
* torch peak, x f32: PyTorch's peak by the same definition: the bytes of the tensors alive
  when the step starts (parameters, gradients, optimizer state, the batch) plus the most
  bytes its CPU allocator holds beyond its start during the step (the profiler's
  ``profile_memory`` events), and its ratio to torch's float32 step.
The 16-bit speed depends on the C kernels reading and writing bfloat16/float16 (kernels/);
where a product or convolution has none, it runs the NumPy reference in 16 bits.

``--batch-scale K``: the zoo's training batch times K (at the zoo's batches the float32
parameters and optimizer state are a third of some steps' peaks; issue 22's 0.6x is for steps
whose activations dominate).

``--saved N``: after each model's lines, the N largest values its bfloat16 step holds at its
planned peak (`ember.plan.plan_program`), with their part, dtype and the op that made them:
where the 16-bit step's bytes are.

``--train-accuracy``: ``ember train`` of the default CNN on Fashion-MNIST for ``--epochs``, in
float32 and with ``--amp bf16`` and ``--amp fp16``, the same seed: the test accuracies and their
differences from float32, in points (issue 22 asks for within 0.3). Minutes per epoch.

    python benchmarks/precision.py [--models cnn,transformer] [--steps 5] [--rounds 3]
    python benchmarks/precision.py --train-accuracy [--epochs 1] [--amp bf16,fp16]
    python benchmarks/precision.py --all   # this, then the other parts of issue 22's figures

``--all`` runs, after the steps, the benchmarks of the other levers each in its own process:
precision_kernels.py (bfloat16/float16 kernels against float32 and torch), precision_int8.py
(int8 products and convolutions, the quantized CNN's accuracy per calibration method) and
precision_checkpoint.py (activation checkpointing's memory drop and time cost).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np

import ember
from ember import zoo
from ember.kernels.cpool import cpu_model  # noqa: E402
from ember.plan import measure_peak

PRECISIONS = ("float32", "bfloat16", "float16")


def _step(lib, name: str, precision: str, model, opt, captured: bool):
    """The training step of ``model`` in ``precision`` over ``lib`` (ember or torch)."""
    low = None if precision == "float32" else getattr(lib, precision)
    scaler = lib.amp.GradScaler("cpu", enabled=precision == "float16")

    def step(x, y):
        opt.zero_grad()
        with lib.autocast("cpu", dtype=low or lib.bfloat16, enabled=low is not None):
            loss = zoo.loss(lib, model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss

    return ember.function(step) if captured else step


def _setup(lib, name: str, scale: int = 1):
    lib.manual_seed(0)
    model = zoo.build(name, lib)
    opt = zoo.optimizer(name, lib, model.parameters())
    x, y = zoo.inputs(name, scale * zoo.SPECS[name].train_batch)
    return model, opt, lib.tensor(x), lib.tensor(y)


def _time(fn, args, steps: int) -> float:
    start = time.process_time()
    for _ in range(steps):
        fn(*args)
    return (time.process_time() - start) / steps


def _torch_storages_bytes(tensors) -> int:
    seen, total = set(), 0
    for t in tensors:
        if t is None:
            continue
        storage = t.untyped_storage()
        if storage.data_ptr() not in seen:
            seen.add(storage.data_ptr())
            total += storage.nbytes()
    return total


def _torch_peak(torch, fn, args, model, opt) -> int:
    """PyTorch's measured peak of one call (see the module docstring)."""
    import json

    alive = list(model.parameters()) + [p.grad for p in model.parameters()] + list(args)
    alive += [v for state in opt.state.values() for v in state.values() if torch.is_tensor(v)]
    held = _torch_storages_bytes(alive)
    activity = torch.profiler.ProfilerActivity.CPU
    with torch.profiler.profile(activities=[activity], profile_memory=True) as prof:
        fn(*args)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f)["traceEvents"]
    totals = [e["args"]["Total Allocated"] for e in events if e.get("name") == "[memory]"]
    return held + max([0, *totals])


def bench_model(
    name: str, steps: int, rounds: int, torch, precisions, saved: int = 0, scale: int = 1
) -> None:
    runs, objects = {}, {}
    for precision in precisions:
        model, opt, x, y = _setup(ember, name, scale)
        runs[("ember", precision)] = (_step(ember, name, precision, model, opt, True), (x, y))
        if torch is not None:
            model, opt, x, y = _setup(torch, name, scale)
            runs[("torch", precision)] = (_step(torch, name, precision, model, opt, False), (x, y))
            objects[precision] = (model, opt)
    peaks, torch_peaks = {}, {}
    for (side, precision), (fn, args) in runs.items():
        fn(*args)  # trace / warm up
        fn(*args)
        if side == "ember":
            peaks[precision] = measure_peak(fn, *args)
        else:
            torch_peaks[precision] = _torch_peak(torch, fn, args, *objects[precision])
    times: dict = {key: [] for key in runs}
    for _ in range(rounds):  # interleaved: each round re-warms every side
        for key, (fn, args) in runs.items():
            fn(*args)
            times[key].append(_time(fn, args, steps))
    med = {key: min(t) for key, t in times.items()}
    for precision in precisions:
        ours = med[("ember", precision)]
        line = (
            f"{name:12s} {precision:9s} ember {ours * 1e3:9.1f} ms  "
            f"x f32 {ours / med[('ember', 'float32')]:5.2f}  "
            f"peak {peaks[precision] / 2**20:8.1f} MiB  "
            f"x f32 {peaks[precision] / peaks['float32']:5.2f}"
        )
        if torch is not None:
            theirs = med[("torch", precision)]
            line += (
                f"  | torch {theirs * 1e3:9.1f} ms  "
                f"x f32 {theirs / med[('torch', 'float32')]:5.2f}  "
                f"ember/torch {ours / theirs:5.2f}  "
                f"peak {torch_peaks[precision] / 2**20:8.1f} MiB  "
                f"x f32 {torch_peaks[precision] / torch_peaks['float32']:5.2f}"
            )
        print(line, flush=True)
    if saved and "bfloat16" in precisions:
        fn, args = runs[("ember", "bfloat16")]
        print("\n".join(largest_at_peak(fn, args, saved)), flush=True)


def largest_at_peak(fn, args, count: int) -> list[str]:
    """The ``count`` largest buffers alive at the planned peak of ``fn``'s program: one line
    each (MiB, part, dtype and shape, the op that made it)."""
    from ember.plan.program import plan_program

    program = fn.compile(*args)
    plan = plan_program(program)
    graph = program.memory_layout().graph
    made = {v.name: (v.type, n) for n in graph.nodes for v in n.outputs}
    made.update({v.name: (v.type, None) for v in graph.inputs})
    lines = [f"  planned peak {plan.peak_bytes / 2**20:.2f} MiB at %{plan.peak_node}"]
    for live in sorted(plan.live_at_peak, key=lambda b: -b.nbytes)[:count]:
        kind, node = made.get(live.name, (None, None))
        what = "input" if node is None else node.op.name if node.kind == "call" else node.kind
        shape = "" if kind is None else f"{kind.dtype} {tuple(kind.shape)}"
        lines.append(f"    {live.nbytes / 2**20:7.3f} MiB  {live.part:18s} {shape}  {what}")
    return lines


def _cpu_family_model() -> str:
    """The CPU's family, model and whether it has AVX512_BF16 (/proc/cpuinfo)."""
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read().split("\n\n")[0]
    except OSError:
        return "family unknown"
    fields = dict(ln.split(":", 1) for ln in text.splitlines() if ":" in ln)
    fields = {k.strip(): v.strip() for k, v in fields.items()}
    bf16 = "avx512_bf16" in fields.get("flags", "").split()
    return (
        f"family {fields.get('cpu family', '?')} model {fields.get('model', '?')}, "
        f"AVX512_BF16 {'yes' if bf16 else 'no'}"
    )


def train_accuracy(epochs: int, amps: list) -> None:
    from ember.train import TrainConfig, run

    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for amp in [None, *amps]:
            start = time.perf_counter()
            result = run(
                TrainConfig(
                    model="cnn",
                    dataset="fashion-mnist",
                    epochs=epochs,
                    seed=0,
                    progress=False,
                    checkpoint=os.path.join(tmp, f"{amp}.ckpt"),
                    amp=amp,
                )
            )
            results[amp] = result.test_accuracy
            seconds = time.perf_counter() - start
            label = amp or "float32"
            diff = 100 * (result.test_accuracy - results[None])
            print(
                f"fashion-mnist cnn, {epochs} epoch(s), {label:7s}: test accuracy "
                f"{100 * result.test_accuracy:.2f}% ({diff:+.2f} points vs float32), "
                f"{seconds:.0f} s",
                flush=True,
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="cnn,transformer")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="threads of each side")
    parser.add_argument("--precisions", default=",".join(PRECISIONS))
    parser.add_argument(
        "--batch-scale", type=int, default=1, help="the zoo's training batch times this"
    )
    parser.add_argument("--saved", type=int, default=0, help="list the bf16 step's N largest")
    parser.add_argument("--train-accuracy", action="store_true")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--amp", default="bf16,fp16", help="the --amp settings to compare")
    parser.add_argument("--all", action="store_true", help="then the other precision_*.py")
    args = parser.parse_args()
    warnings.simplefilter("ignore", RuntimeWarning)  # float16 overflows the scaler skips
    print(
        f"CPU: {cpu_model()} ({_cpu_family_model()}); {os.cpu_count()} CPUs; "
        f"{args.threads} thread(s) each side; best of {args.rounds} interleaved rounds of "
        f"{args.steps} steps, process CPU time"
    )
    ember.set_num_threads(args.threads)
    if args.train_accuracy:
        train_accuracy(args.epochs, args.amp.split(","))
        return
    try:
        import torch

        torch.set_num_threads(args.threads)
    except ImportError:
        torch = None
        print("(torch not installed: no peer column; pip install torch)")
    for name in args.models.split(","):
        precisions = args.precisions.split(",")
        bench_model(name, args.steps, args.rounds, torch, precisions, args.saved, args.batch_scale)
    np.seterr(all="warn")
    if args.all:
        here = os.path.dirname(os.path.abspath(__file__))
        for part in ("precision_kernels", "precision_int8", "precision_checkpoint"):
            print(f"\n== {part}.py", flush=True)
            subprocess.run([sys.executable, os.path.join(here, f"{part}.py")], check=True)


if __name__ == "__main__":
    main()
