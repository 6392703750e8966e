"""Depthwise convolutions and BatchNorm against PyTorch eager and against the memory roof.

Cases (float32, batch 64):

* dw: depthwise 3x3 (pad 1, stride 1 or 2) at MobileNet-v2's shapes on 32x32 inputs (96-384
  channels, 32x32 down to 4x4): forward, input gradient, weight gradient, each its own op;
* bn: BatchNorm2d at ResNet's and MobileNet's shapes: training forward + backward (through
  ``ember.autograd.grad`` / ``torch.autograd.grad``, so the running statistics update too)
  and evaluation forward.

The stream roof is measured at run time: the bandwidth of a large float32 ``a + b`` (PyTorch,
all threads) over arrays four times the largest case. Each kernel's "bytes" are what it must
move at least (each operand read once, each result written once); ``roof`` is its time over
the time those bytes take at the roof bandwidth (1.0 = at the roof; shapes that fit in the
caches can go below), from the minimum times. Rounds alternate between ember and PyTorch;
medians and minima are printed.

    python benchmarks/depthwise_bn.py [--rounds 7] [--cases dw,bn]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time

import numpy as np

import ember
import ember.nn.functional as F
from ember.ops.conv import CONV, CONV_INPUT_GRAD, CONV_WEIGHT_GRAD

try:
    import torch
    import torch.nn.functional as TF
except ImportError:
    torch = None

DW = [  # (channels, size, stride)
    (96, 32, 1),
    (144, 32, 2),
    (192, 16, 1),
    (192, 16, 2),
    (384, 8, 1),
    (384, 4, 1),
]
BN = [(64, 32), (128, 16), (256, 8), (96, 32), (384, 8)]  # (channels, size)
N = 64


def _times(fn, reps: int) -> list[float]:
    # a pause and untimed calls first: neither framework pays for the other's spinning threads
    time.sleep(0.05)
    for _ in range(2):
        fn()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return times


def _compare(ours, theirs, rounds: int, reps: int) -> tuple[float, float, float, float]:
    """Medians of ember's and PyTorch's times over interleaved rounds, then their minima (on a
    machine shared with other work, a 2-thread call that waits for a descheduled thread takes
    a scheduler quantum longer: the minimum shows the kernel's own time)."""
    a, b = [], []
    for _ in range(rounds):
        a += _times(ours, reps)
        b += _times(theirs, reps)
    return statistics.median(a), statistics.median(b), min(a), min(b)


def _roof(nbytes: int) -> float:
    """Bytes per second of a float32 ``a + b`` over arrays of ``nbytes`` each (3 * nbytes moved)."""
    n = nbytes // 4
    a, b, c = (torch.rand(n) for _ in range(3))
    seconds = min(min(_times(lambda: torch.add(a, b, out=c), 5)) for _ in range(3))
    return 3 * nbytes / seconds


def _row(name, t_ours, t_torch, best_ours, best_torch, nbytes, roof):
    ideal = nbytes / roof
    print(
        f"{name:<32} {t_ours * 1e6:8.0f} {t_torch * 1e6:8.0f} {t_ours / t_torch:6.2f}x "
        f"{best_ours * 1e6:8.0f} {best_torch * 1e6:8.0f} {best_ours / best_torch:6.2f}x "
        f"{nbytes / best_ours / 1e9:6.1f} {best_ours / ideal:6.2f} {best_torch / ideal:6.2f}",
        flush=True,
    )


def _dw_cases(rng, rounds, reps, roof):
    for c, size, stride in DW:
        x = rng.standard_normal((N, c, size, size), dtype=np.float32)
        w = rng.standard_normal((c, 1, 3, 3), dtype=np.float32)
        attrs = dict(stride=(stride,) * 2, padding=((1, 1),) * 2, dilation=(1, 1), groups=c)
        y = CONV.run(x, w, **attrs)
        g = rng.standard_normal(y.shape, dtype=np.float32)
        tx, tw, tg = (torch.from_numpy(a) for a in (x, w, g))
        targs = dict(stride=stride, padding=1, dilation=1, groups=c)

        def t_grad(mask):
            return lambda: torch.ops.aten.convolution_backward(
                tg, tx, tw, None, [stride] * 2, [1, 1], [1, 1], False, [0, 0], c, mask
            )

        io = 4 * (x.size + y.size)
        tag = f"dw c{c} {size}x{size} s{stride}"
        with torch.no_grad():
            t = _compare(
                lambda: CONV.run(x, w, **attrs), lambda: TF.conv2d(tx, tw, **targs), rounds, reps
            )
            _row(f"{tag} forward", *t, io, roof)
            t = _compare(
                lambda: CONV_INPUT_GRAD.run(g, w, in_size=(size, size), **attrs),
                t_grad([True, False, False]),
                rounds,
                reps,
            )
            _row(f"{tag} input grad", *t, io, roof)
            t = _compare(
                lambda: CONV_WEIGHT_GRAD.run(x, g, kernel_size=(3, 3), **attrs),
                t_grad([False, True, False]),
                rounds,
                reps,
            )
            _row(f"{tag} weight grad", *t, io, roof)


def _bn_cases(rng, rounds, reps, roof):
    for c, size in BN:
        x = rng.standard_normal((N, c, size, size), dtype=np.float32)
        g = rng.standard_normal(x.shape, dtype=np.float32)
        ex, eg = ember.tensor(x, requires_grad=True), ember.tensor(g)
        ew, eb = ember.ones(c, requires_grad=True), ember.zeros(c, requires_grad=True)
        erm, erv = ember.zeros(c), ember.ones(c)
        tx, tg = torch.tensor(x, requires_grad=True), torch.tensor(g)
        tw, tb = torch.ones(c, requires_grad=True), torch.zeros(c, requires_grad=True)
        trm, trv = torch.zeros(c), torch.ones(c)

        def ours():
            y = F.batch_norm(ex, erm, erv, ew, eb, True, 0.1, 1e-5)
            return ember.autograd.grad(y, (ex, ew, eb), eg)

        def theirs():
            y = TF.batch_norm(tx, trm, trv, tw, tb, True, 0.1, 1e-5)
            return torch.autograd.grad(y, (tx, tw, tb), tg)

        # forward reads x twice at most (stats, normalize) and writes y; backward reads x, dy
        # and writes dx: counted as the least a two-kernel design moves, x + y + x + dy + dx
        nbytes = 4 * x.size
        tag = f"bn c{c} {size}x{size}"
        _row(f"{tag} train fwd+bwd", *_compare(ours, theirs, rounds, reps), 5 * nbytes, roof)
        with ember.no_grad(), torch.no_grad():
            t = _compare(
                lambda: F.batch_norm(ex, erm, erv, ew, eb, False, 0.1, 1e-5),
                lambda: TF.batch_norm(tx, trm, trv, tw, tb, False, 0.1, 1e-5),
                rounds,
                reps,
            )
        _row(f"{tag} eval fwd", *t, 2 * nbytes, roof)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--cases", default="dw,bn")
    args = parser.parse_args()
    if torch is None:
        raise SystemExit("this benchmark compares against PyTorch, which is not installed")
    torch.set_num_threads(2)
    cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    model = next(
        (line.split(":", 1)[1].strip() for line in cpu.splitlines() if "Model name" in line), "?"
    )
    largest = 4 * N * max(c * s * s for c, s, _ in DW)
    roof = _roof(4 * largest)
    print(f"CPU: {model}; torch {torch.__version__}, 2 threads; stream roof {roof / 1e9:.1f} GB/s")
    print(
        f"{'case':<32} {'median: ember us':>17} {'torch':>8} {'ratio':>7} {'min: ember':>8} "
        f"{'torch':>8} {'ratio':>7} {'GB/s':>6} {'roof':>6} {'t.roof':>6}"
    )
    rng = np.random.default_rng(0)
    cases = args.cases.split(",")
    if "dw" in cases:
        _dw_cases(rng, args.rounds, args.reps, roof)
    if "bn" in cases:
        _bn_cases(rng, args.rounds, args.reps, roof)


if __name__ == "__main__":
    main()
