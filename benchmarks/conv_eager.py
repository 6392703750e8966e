"""Eager convolution layers at inference, end to end (``nn.Conv2d`` in eval mode under
``no_grad``: the Python front end, the eager dispatch and the kernel) against PyTorch's
(``inference_mode``), one thread each, alternating, in per-thread CPU time
(``time.thread_time``: a shared machine's other processes do not count). The shapes are the
zoo's layers at batch 1 and 8 (ResNet-18's 3x3 and strided 3x3, MobileNetV2's 1x1 expansions
and projections, a small layer with a bias where the per-call overhead dominates). Prints the
min and median microseconds of each side and the ratio of minima ember / torch.

    EMBER_NUM_THREADS=1 python benchmarks/conv_eager.py [--rounds 5] [--cases 1x1,b8]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("EMBER_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

import ember  # noqa: E402

# name: (cin, size, cout, kernel, stride, bias, batch)
CASES = {
    "3x3 64x8x8 bias b1": (64, 8, 64, 3, 1, True, 1),
    "3x3 128x4x4 b1": (128, 4, 128, 3, 1, False, 1),
    "3x3/2 64x8x8->128 b1": (64, 8, 128, 3, 2, False, 1),
    "3x3 16x32x32 b1": (16, 32, 16, 3, 1, False, 1),
    "3x3 32x16x16 bias b1": (32, 16, 32, 3, 1, True, 1),
    "1x1 32->192 16x16 b1": (32, 16, 192, 1, 1, False, 1),
    "1x1 192->32 16x16 b1": (192, 16, 32, 1, 1, False, 1),
    "1x1 64->384 4x4 b1": (64, 4, 384, 1, 1, False, 1),
    "3x3 8x4x4 bias b1 (overhead)": (8, 4, 8, 3, 1, True, 1),
    "3x3 64x8x8 b8": (64, 8, 64, 3, 1, False, 8),
    "1x1 32->192 16x16 b8": (32, 16, 192, 1, 1, False, 8),
}


def _times(fn, calls: int, reps: int) -> list[float]:
    fn()
    fn()
    out = []
    for _ in range(reps):
        start = time.thread_time()
        for _ in range(calls):
            fn()
        out.append((time.thread_time() - start) / calls * 1e6)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds")
    parser.add_argument("--cases", default="", help="comma-separated substrings of case names")
    args = parser.parse_args()
    torch.set_num_threads(1)
    wanted = [c for c in args.cases.split(",") if c]
    rng = np.random.default_rng(0)
    print(f"{'case':30s} {'ember us min/med':>18s} {'torch us min/med':>18s}   e/t")
    for name, (cin, size, cout, k, stride, bias, batch) in CASES.items():
        if wanted and not any(w in name for w in wanted):
            continue
        layer = ember.nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2, bias=bias).eval()
        twin = torch.nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2, bias=bias).eval()
        with ember.no_grad():  # (twins: ember.tensor copies, the parameter stays unexposed)
            layer.weight.copy_(ember.tensor(twin.weight.detach().numpy()))
            if bias:
                layer.bias.copy_(ember.tensor(twin.bias.detach().numpy()))
        x = rng.standard_normal((batch, cin, size, size), dtype=np.float32)
        ex, tx = ember.tensor(x), torch.tensor(x)
        calls = max(10, int(3e7 / (cin * cout * k * k * size * size * batch / stride**2 + 3e5)))
        mine, theirs = [], []
        with ember.no_grad(), torch.inference_mode():
            for _ in range(args.rounds):
                mine += _times(lambda: layer(ex), calls, 3)
                theirs += _times(lambda: twin(tx), calls, 3)
        e, t = min(mine), min(theirs)
        print(
            f"{name:30s} {e:8.1f} {statistics.median(mine):8.1f}  "
            f"{t:8.1f} {statistics.median(theirs):8.1f}  {e / t:5.2f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
