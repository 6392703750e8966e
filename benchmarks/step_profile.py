"""One zoo model's training step op by op: ember (``ember.function`` or eager) under
``ember.profiler`` beside PyTorch eager under ``torch.profiler``, self time per call grouped by
op and input shapes, the largest first, so the two frameworks' op families can be compared.

The names differ (ember's ``conv_input_grad`` is PyTorch's share of
``aten::convolution_backward``), so the two tables are printed side by side, not joined; the
family totals at the bottom group both by coarse family (convolution, normalization,
elementwise, copies).

On a loaded machine wall-clock events mislead (a kernel preempted looks ten times slower):
``--cpu`` times ember's events in this thread's CPU time (one thread); PyTorch's profiler
keeps wall time, so compare its table with benchmarks/conv_kernels.py's per-kernel ratios.
One profiled call runs first on each side, untimed: the instrumented code's first run
allocates and would be counted otherwise.

    python benchmarks/step_profile.py --model unet [--variant fn|eager] [--calls 3] [--rows 25]
                                      [--cpu]
"""

from __future__ import annotations

import argparse
import subprocess
from collections import defaultdict

import ember
from ember import zoo

_FAMILIES = (  # (family, substrings of an op's name, either framework's)
    ("conv", ("conv", "cudnn", "mkldnn_convolution")),
    ("norm", ("batch_norm", "native_batch_norm")),
    ("resample", ("resample", "upsample")),
    ("copy/concat", ("concat", "cat", "copy", "split", "slice", "narrow", "broadcast", "permute")),
    ("pool", ("pool",)),
    ("optimizer", ("adam", "sgd", "foreach", "lerp", "addcdiv", "addcmul")),
)


def _family(name: str) -> str:
    lowered = name.lower()
    for family, keys in _FAMILIES:
        if any(k in lowered for k in keys):
            return family
    return "elementwise/other"


def _ember_table(step, calls: int) -> dict:
    step()
    with ember.profiler.profile():  # (the instrumented code's first run, untimed)
        step()
    with ember.profiler.profile() as prof:
        for _ in range(calls):
            step()
    rows: dict = defaultdict(float)
    for e in prof.events():
        if e.cat not in ("op", "backward", "kernel"):
            continue
        shapes = e.input_shapes or []
        key = (e.name[:60], str([tuple(s) for s in shapes[:2]]))
        rows[key] += (e.duration_ns - e.children_ns) / calls / 1e6
    return rows


def _torch_table(torch, step, calls: int) -> dict:
    step()
    with torch.profiler.profile():
        step()
    with torch.profiler.profile(record_shapes=True) as prof:
        for _ in range(calls):
            step()
    rows: dict = defaultdict(float)
    for e in prof.key_averages(group_by_input_shape=True):
        key = (e.key[:60], str([tuple(s) for s in e.input_shapes[:2]]))
        rows[key] += e.self_cpu_time_total / calls / 1e3
    return rows


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="unet")
    parser.add_argument("--variant", default="fn", choices=("fn", "eager"))
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--rows", type=int, default=25)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--cpu", action="store_true", help="ember's events in this thread's CPU time (one thread)"
    )
    args = parser.parse_args()
    if args.cpu:  # (a loaded machine's other processes then inflate ember's events less)
        import time

        from ember.profiler import recorder

        recorder._now = time.thread_time_ns
    torch.set_num_threads(args.threads)
    ember.set_num_threads(args.threads)
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    print(next((line for line in lscpu.splitlines() if "Model name" in line), "CPU: ?"))
    spec = zoo.SPECS[args.model]
    x, y = zoo.inputs(args.model, spec.train_batch, seed=0)
    ember.manual_seed(0)
    mine, theirs = zoo.build(args.model, ember), zoo.build(args.model, torch)
    zoo.copy_weights(mine, theirs)

    def step_of(lib, model, xs, ys):
        opt = zoo.optimizer(args.model, lib, model.parameters())

        def step():
            opt.zero_grad()
            loss = lib.nn.functional.cross_entropy(model(xs), ys)
            loss.backward()
            opt.step()
            return loss

        return step

    ours = step_of(ember, mine, ember.tensor(x), ember.tensor(y))
    if args.variant == "fn":
        ours = ember.function(ours)
    peer = step_of(torch, theirs, torch.from_numpy(x), torch.tensor(y))
    tables = {"ember " + args.variant: _ember_table(ours, args.calls)}
    tables["torch"] = _torch_table(torch, peer, args.calls)
    for label, rows in tables.items():
        total = sum(rows.values())
        print(f"\n{label}: {total:.2f} ms of op self time per call")
        for (name, shapes), ms in sorted(rows.items(), key=lambda kv: -kv[1])[: args.rows]:
            print(f"  {ms:8.2f} ms  {name:42s} {shapes[:70]}")
    print("\nby family (ms per call)    " + "  ".join(f"{k:>12s}" for k in tables))
    families = sorted({_family(n) for rows in tables.values() for n, _ in rows})
    for family in families:
        cells = [
            sum(ms for (n, _), ms in rows.items() if _family(n) == family)
            for rows in tables.values()
        ]
        print(f"  {family:24s} " + "  ".join(f"{c:12.2f}" for c in cells))


if __name__ == "__main__":
    main()
