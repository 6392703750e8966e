"""Depthwise convolutions on small planes against PyTorch, one thread each: ConvNeXt's 7x7
(7x7, 14x14 and 28x28 planes), EfficientNet's and MobileNetV3's 5x5 stride 2 on 16x16,
MobileNetV2's last 3x3 stages (960 channels on 7x7, 144 channels stride 2 on 56x56), and a
large plane (32 channels 3x3 on 112x112) that the row-wide kernels keep.

Each case times ember's three ops (``CONV``, ``CONV_INPUT_GRAD``, ``CONV_WEIGHT_GRAD``: the
ops' ``run``, C where it applies) and PyTorch's (``F.conv2d``, ``torch.nn.grad.conv2d_input``
/ ``conv2d_weight``), alternating ember and torch in every round, in process CPU time
(``time.process_time``: other processes' load on a shared machine does not count), and prints
each side's best of the rounds in microseconds and the ratio ember / torch. ``--row-wide``
keeps ember on kernels/cdepthwise.py's row-wide kernels (the channels-wide ones of
kernels/cdepthwise_wide.py never chosen), for a before and after.

    python benchmarks/depthwise_small.py [--rounds 5] [--cases c384,c960] [--dtype float32]
                                         [--row-wide]
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("EMBER_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import ember  # noqa: E402
from ember.ops.conv import CONV, CONV_INPUT_GRAD, CONV_WEIGHT_GRAD  # noqa: E402

try:
    import torch
except ImportError:  # pragma: no cover - the benchmark's peer
    torch = None

# name: (batch, channels, size, kernel, stride, padding)
CASES = {
    "c384 7x7 on 7x7 b32": (32, 384, 7, 7, 1, 3),
    "c384 7x7 on 14x14 b8": (8, 384, 14, 7, 1, 3),
    "c192 7x7 on 28x28 b8": (8, 192, 28, 7, 1, 3),
    "c240 5x5/2 on 16x16 b16": (16, 240, 16, 5, 2, 2),
    "c960 3x3 on 7x7 b16": (16, 960, 7, 3, 1, 1),
    "c144 3x3/2 on 56x56 b8": (8, 144, 56, 3, 2, 1),
    "c32 3x3 on 112x112 b8": (8, 32, 112, 3, 1, 1),
}


def _best(fn, calls: int, rounds_of: list) -> None:
    start = time.process_time()
    for _ in range(calls):
        fn()
    rounds_of.append((time.process_time() - start) / calls * 1e6)


def _functions(n, c, size, k, stride, pad, dtype):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, c, size, size)).astype(dtype)
    w = rng.standard_normal((c, 1, k, k)).astype(dtype)
    out = (size + 2 * pad - k) // stride + 1
    gy = rng.standard_normal((n, c, out, out)).astype(dtype)
    attrs = dict(stride=(stride,) * 2, padding=((pad, pad),) * 2, dilation=(1, 1), groups=c)
    mine = {
        "fwd": lambda: CONV.run(x, w, **attrs),
        "dx": lambda: CONV_INPUT_GRAD.run(gy, w, in_size=(size, size), **attrs),
        "dw": lambda: CONV_WEIGHT_GRAD.run(x, gy, kernel_size=(k, k), **attrs),
    }
    theirs = {}
    if torch is not None:
        tx, tw, tg = torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(gy)
        kw = dict(stride=stride, padding=pad, groups=c)
        theirs = {
            "fwd": lambda: torch.nn.functional.conv2d(tx, tw, **kw),
            "dx": lambda: torch.nn.grad.conv2d_input(tx.shape, tw, tg, **kw),
            "dw": lambda: torch.nn.grad.conv2d_weight(tx, tw.shape, tg, **kw),
        }
    work = n * c * out * out * k * k
    return mine, theirs, max(3, int(2e7 / work))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds")
    parser.add_argument("--cases", default="", help="comma-separated substrings of case names")
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    parser.add_argument("--row-wide", action="store_true", help="ember's row-wide kernels only")
    args = parser.parse_args()
    if args.row_wide:
        from ember.kernels import cdepthwise_wide

        cdepthwise_wide.wins = lambda *a: False
    ember.set_num_threads(1)
    if torch is not None:
        torch.set_num_threads(1)
    wanted = [c for c in args.cases.split(",") if c]
    print(f"{'case':26s} {'op':4s} {'ember us':>10s} {'torch us':>10s}  e/t")
    for name, case in CASES.items():
        if wanted and not any(w in name for w in wanted):
            continue
        mine, theirs, calls = _functions(*case, np.dtype(args.dtype))
        for op in mine:
            mine[op]()  # (a first call: compiles, measures, caches)
            e, t = [], []
            for _ in range(args.rounds):
                _best(mine[op], calls, e)
                if op in theirs:
                    _best(theirs[op], calls, t)
            tb = f"{min(t):10.1f}" if t else f"{'-':>10s}"
            ratio = f"{min(e) / min(t):5.2f}" if t else ""
            print(f"{name:26s} {op:4s} {min(e):10.1f} {tb}  {ratio}", flush=True)


if __name__ == "__main__":
    main()
