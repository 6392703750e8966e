"""Convolution kernels of ember against PyTorch and against the measured matmul peak.

For the layer shapes CNNs use (CIFAR ResNet-18's stages at batch 64 or 128, 3x3 at stride 1
and 2, the 1x1 stride-2 shortcuts; the zoo's ResNet-18 of base width 16, ``z*``: every
distinct layer, its stem, stride-2 convolutions and shortcuts included; ResNet-50's, ``R``
(every distinct layer of onnx's light model: for ``--batch 1`` or ``8``); MobileNet's 1x1
pointwise convolutions; U-Net's 3x3 and 2x2 stride-2 transposed convolutions), times ember's
three convolution kernels (the forward, the input gradient and the weight gradient: the ops'
``run``, C where it applies, else NumPy) and PyTorch's (``F.conv2d``,
``torch.nn.grad.conv2d_input`` / ``conv2d_weight``), alternating between the two in each
round, and prints GFLOP/s (of each side's fastest call by default: on a shared machine the
least disturbed one; ``--stat median`` for medians), the ratio ember / torch of times, and
ember's GFLOP/s as a percentage of ember's own GEMM on a 512-wide float32
square product (the "matmul peak": its best rate over the run, timed in every round on the
same thread count).

    python benchmarks/conv_kernels.py [--batch 64] [--threads 1,2] [--cases s1,sc2] [--rounds 5]

Each side's timed calls follow a ``--settle`` pause and a warm-up call: the other side's
threads spin for a while after its last call (PyTorch's libgomp longer than ember's pool) and
would otherwise take a core from the calls timed next.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time

import numpy as np

from ember.kernels import cgemm, cpool
from ember.ops.conv import CONV, CONV_INPUT_GRAD, CONV_WEIGHT_GRAD

try:
    import torch
    import torch.nn.functional as TF
except ImportError:  # pragma: no cover - the benchmark's peer
    torch = None

# name: (cin, size, cout, kernel, stride, padding, batch scale)
SHAPES = {
    "r1 64x32x32 3x3": (64, 32, 64, 3, 1, 1, 1),
    "r2a 64x32x32 3x3/2": (64, 32, 128, 3, 2, 1, 1),
    "r2sc 64x32x32 1x1/2": (64, 32, 128, 1, 2, 0, 1),
    "r2 128x16x16 3x3": (128, 16, 128, 3, 1, 1, 1),
    "r3a 128x16x16 3x3/2": (128, 16, 256, 3, 2, 1, 1),
    "r3sc 128x16x16 1x1/2": (128, 16, 256, 1, 2, 0, 1),
    "r3 256x8x8 3x3": (256, 8, 256, 3, 1, 1, 1),
    "r4a 256x8x8 3x3/2": (256, 8, 512, 3, 2, 1, 1),
    "r4sc 256x8x8 1x1/2": (256, 8, 512, 1, 2, 0, 1),
    "r4 512x4x4 3x3": (512, 4, 512, 3, 1, 1, 1),
    "mb 32->192 1x1 16x16": (32, 16, 192, 1, 1, 0, 1),
    "mb 192->32 1x1 16x16": (192, 16, 32, 1, 1, 0, 1),
    "unet 32x64x64 3x3 b/8": (32, 64, 32, 3, 1, 1, 8),
    "unet 64x32x32 3x3 b/8": (64, 32, 64, 3, 1, 1, 8),
    "unet 128x16x16 2x2/2 b/8": (128, 16, 64, 2, 2, 0, 8),
    # the zoo's ResNet-18 (base width 16): few channels
    "z0 stem 3x32x32 3x3": (3, 32, 16, 3, 1, 1, 1),
    "z1 16x32x32 3x3": (16, 32, 16, 3, 1, 1, 1),
    "z2a 16x32x32 3x3/2": (16, 32, 32, 3, 2, 1, 1),
    "z2sc 16x32x32 1x1/2": (16, 32, 32, 1, 2, 0, 1),
    "z2 32x16x16 3x3": (32, 16, 32, 3, 1, 1, 1),
    "z3a 32x16x16 3x3/2": (32, 16, 64, 3, 2, 1, 1),
    "z3sc 32x16x16 1x1/2": (32, 16, 64, 1, 2, 0, 1),
    "z3 64x8x8 3x3": (64, 8, 64, 3, 1, 1, 1),
    "z4a 64x8x8 3x3/2": (64, 8, 128, 3, 2, 1, 1),
    "z4sc 64x8x8 1x1/2": (64, 8, 128, 1, 2, 0, 1),
    "z4 128x4x4 3x3": (128, 4, 128, 3, 1, 1, 1),
    # ResNet-50 (onnx's light model; run with --batch 1 or 8): every distinct layer
    "R stem 3x224 7x7/2": (3, 224, 64, 7, 2, 3, 1),
    "R1a 64x56 1x1": (64, 56, 64, 1, 1, 0, 1),
    "R1 64x56 3x3": (64, 56, 64, 3, 1, 1, 1),
    "R1b 64>256x56 1x1": (64, 56, 256, 1, 1, 0, 1),
    "R1c 256>64x56 1x1": (256, 56, 64, 1, 1, 0, 1),
    "R2a 256>128x56 1x1": (256, 56, 128, 1, 1, 0, 1),
    "R2s 128x56 3x3/2": (128, 56, 128, 3, 2, 1, 1),
    "R2sc 256>512x56 1x1/2": (256, 56, 512, 1, 2, 0, 1),
    "R2 128x28 3x3": (128, 28, 128, 3, 1, 1, 1),
    "R2b 128>512x28 1x1": (128, 28, 512, 1, 1, 0, 1),
    "R2c 512>128x28 1x1": (512, 28, 128, 1, 1, 0, 1),
    "R3a 512>256x28 1x1": (512, 28, 256, 1, 1, 0, 1),
    "R3s 256x28 3x3/2": (256, 28, 256, 3, 2, 1, 1),
    "R3sc 512>1024x28 1x1/2": (512, 28, 1024, 1, 2, 0, 1),
    "R3 256x14 3x3": (256, 14, 256, 3, 1, 1, 1),
    "R3b 256>1024x14 1x1": (256, 14, 1024, 1, 1, 0, 1),
    "R3c 1024>256x14 1x1": (1024, 14, 256, 1, 1, 0, 1),
    "R4a 1024>512x14 1x1": (1024, 14, 512, 1, 1, 0, 1),
    "R4s 512x14 3x3/2": (512, 14, 512, 3, 2, 1, 1),
    "R4sc 1024>2048x14 1x1/2": (1024, 14, 2048, 1, 2, 0, 1),
    "R4 512x7 3x3": (512, 7, 512, 3, 1, 1, 1),
    "R4b 512>2048x7 1x1": (512, 7, 2048, 1, 1, 0, 1),
    "R4c 2048>512x7 1x1": (2048, 7, 512, 1, 1, 0, 1),
}


def _lscpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    except OSError:
        return cpool.cpu_model()
    for line in out.splitlines():
        if line.startswith("Model name"):
            return line.split(":", 1)[1].strip()
    return cpool.cpu_model()


_CLOCK = [time.perf_counter]


def _time(fn, reps: int) -> list[float]:
    fn()
    times = []
    clock = _CLOCK[0]
    for _ in range(reps):
        start = clock()
        fn()
        times.append(clock() - start)
    return times


def _case(shape, batch, rng):
    cin, size, cout, k, stride, pad, scale = shape
    n = max(1, batch // scale)
    out = (size + 2 * pad - k) // stride + 1
    x = rng.standard_normal((n, cin, size, size), dtype=np.float32)
    w = rng.standard_normal((cout, cin, k, k), dtype=np.float32) * 0.1
    gy = rng.standard_normal((n, cout, out, out), dtype=np.float32)
    flops = 2 * n * cout * out * out * cin * k * k
    attrs = dict(stride=(stride,) * 2, padding=((pad, pad),) * 2, dilation=(1, 1), groups=1)
    ember_fns = {
        "fwd": lambda: CONV.run(x, w, **attrs),
        "dx": lambda: CONV_INPUT_GRAD.run(gy, w, in_size=(size, size), **attrs),
        "dw": lambda: CONV_WEIGHT_GRAD.run(x, gy, kernel_size=(k, k), **attrs),
    }
    torch_fns = {}
    if torch is not None:
        tx, tw, tg = torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(gy)
        torch_fns = {
            "fwd": lambda: TF.conv2d(tx, tw, stride=stride, padding=pad),
            "dx": lambda: torch.nn.grad.conv2d_input(tx.shape, tw, tg, stride=stride, padding=pad),
            "dw": lambda: torch.nn.grad.conv2d_weight(tx, tw.shape, tg, stride=stride, padding=pad),
        }
    return n, flops, ember_fns, torch_fns


def _set_threads(t: int) -> None:
    cpool.set_num_threads(t)
    if torch is not None:
        torch.set_num_threads(t)


class _Peak:
    """ember's GEMM on a square float32 product (512 wide), timed once in every round beside the
    convolutions; the peak is its best rate over the whole run (the load of a shared machine
    makes any single measurement an underestimate)."""

    def __init__(self, size: int = 512):
        rng = np.random.default_rng(1)
        self.a = rng.standard_normal((size, size), dtype=np.float32)
        self.b = rng.standard_normal((size, size), dtype=np.float32)
        self.out = np.empty((size, size), np.float32)
        self.flops = 2 * size**3
        self.best = float("inf")

    def sample(self, reps: int = 2) -> None:
        self.best = min(self.best, *_time(lambda: cgemm.gemm(self.a, self.b, self.out), reps))

    @property
    def gflops(self) -> float:
        return self.flops / self.best / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--cases", default="", help="comma-separated substrings of case names")
    parser.add_argument("--kernels", default="fwd,dx,dw")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--reps", type=int, default=2, help="timed calls per round")
    parser.add_argument(
        "--stat", default="min", choices=("min", "median"), help="of each side's timed calls"
    )
    parser.add_argument("--settle", type=float, default=0.1, help="pause before each side")
    parser.add_argument(
        "--clock",
        default="auto",
        choices=("auto", "wall", "cpu"),
        help="wall time, or the process's CPU time (auto: CPU time on one thread, where other "
        "processes' load inflates it less)",
    )
    args = parser.parse_args()
    wanted = [c for c in args.cases.split(",") if c]
    kernels = args.kernels.split(",")
    stat = min if args.stat == "min" else statistics.median
    print(
        f"CPU: {_lscpu_model()}; float32; batch {args.batch}; {args.stat} of interleaved rounds; "
        f"clock {args.clock} (auto: process CPU time on one thread, else wall)"
    )
    rng = np.random.default_rng(0)
    for threads in (int(t) for t in args.threads.split(",")):
        _set_threads(threads)
        cpu = args.clock == "cpu" or (args.clock == "auto" and threads == 1)
        _CLOCK[0] = time.process_time if cpu else time.perf_counter
        peak = _Peak()
        peak.sample(5)
        rows = []
        for name, shape in SHAPES.items():
            if wanted and not any(w in name for w in wanted):
                continue
            n, flops, efns, tfns = _case(shape, args.batch, rng)
            for kind in kernels:
                times = {"ember": [], "torch": []}
                for _ in range(args.rounds):
                    peak.sample()
                    # (a settle first: the other side's threads spin for a while after its
                    # calls, PyTorch's libgomp longer than ember's pool, and would take a core)
                    time.sleep(args.settle)
                    times["ember"] += _time(efns[kind], args.reps)
                    if tfns:
                        time.sleep(args.settle)
                        times["torch"] += _time(tfns[kind], args.reps)
                e = stat(times["ember"])
                t = stat(times["torch"]) if tfns else float("nan")
                rows.append((name, kind, e, t, flops))
        # (printed at the end: the peak is the best GEMM rate of all rounds)
        clock = "process CPU time" if cpu else "wall time"
        print(
            f"\n{threads} thread(s), {clock}: ember GEMM peak (512^3 float32) "
            f"{peak.gflops:.0f} GFLOP/s"
        )
        print(f"{'case':28s} {'op':3s} {'ember ms':>9s} {'torch ms':>9s} {'e/t':>5s} "
              f"{'ember GF/s':>10s} {'torch GF/s':>10s} {'% peak':>6s}")  # fmt: skip
        for name, kind, e, t, flops in rows:
            print(
                f"{name:28s} {kind:3s} {e * 1e3:9.2f} {t * 1e3:9.2f} {e / t:5.2f} "
                f"{flops / e / 1e9:10.1f} {flops / t / 1e9:10.1f} "
                f"{100 * flops / e / 1e9 / peak.gflops:5.0f}%",
                flush=True,
            )


if __name__ == "__main__":
    main()
