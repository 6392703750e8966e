"""kernels/cconv_taps.py's forward step forced (the layout skipping the padding's taps, the
blocking its count picks, or each of ``--blockings``) against PyTorch's conv2d: process CPU time
on one thread, the best of ``--reps`` interleaved calls, the sums checked bit for bit between
blockings and within rounding of PyTorch's. ``--constant`` packs the weight once (a graph's
constant), else each call packs it (eager, training).

    python benchmarks/conv_taps_step.py [--cases r3,r4,z2a] [--reps 9] [--blockings 8x3,8x2]
"""

from __future__ import annotations

import argparse
import subprocess
import time

import numpy as np
import torch

from ember.kernels import cconv, cconv_taps, cpool
from ember.kernels.conv_plan import plan
from ember.kernels.cstep import STEP_CALL, function_address

# (in channels, plane, out channels, kernel, stride, padding): benchmarks/conv_kernels.py's
CASES = {
    "r3": (256, 8, 256, 3, 1, 1),
    "r4": (512, 4, 512, 3, 1, 1),
    "z2a": (16, 32, 32, 3, 2, 1),
}


def _cpu() -> str:
    """lscpu's model name, family and model."""
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    fields = dict(ln.split(":", 1) for ln in out.splitlines() if ":" in ln)
    get = lambda key: fields.get(key, "?").strip()  # noqa: E731
    return f"{get('Model name')} (family {get('CPU family')}, model {get('Model')})"


def _step(x, w, p, constant: bool, blocking):
    """(the step's call, its argument block, what keeps it alive, its output)."""
    variant = cconv_taps.variant
    if blocking is not None:
        cconv_taps.variant = lambda n, cout, itemsize: blocking
    try:
        made = cconv.forward_step(
            x.shape, w.shape, p, x.dtype, False, constant, wide=True, split=True
        )
    finally:
        cconv_taps.variant = variant
    step, args, keep = made
    out = np.empty((x.shape[0], w.shape[0]) + p.out_size, x.dtype)
    args[0], args[1], args[3] = x.ctypes.data, w.ctypes.data, out.ctypes.data
    return STEP_CALL(function_address(step)), args, keep, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="r3,r4,z2a")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--reps", type=int, default=9)
    parser.add_argument("--blockings", default="", help="e.g. 8x3,8x2 (default: the count's)")
    parser.add_argument("--constant", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    cpool.set_num_threads(1)
    blockings = [tuple(map(int, b.split("x"))) for b in args.blockings.split(",") if b]
    print(f"CPU: {_cpu()}; float32; batch {args.batch}; one thread; best of {args.reps}")
    rng = np.random.default_rng(0)
    for name in args.cases.split(","):
        cin, size, cout, k, s, pad = CASES[name]
        x = rng.standard_normal((args.batch, cin, size, size), dtype=np.float32)
        w = rng.standard_normal((cout, cin, k, k), dtype=np.float32) * 0.1
        p = plan((size, size), (k, k), (s, s), ((pad, pad),) * 2, (1, 1), cin * k * k, cout)
        steps = [_step(x, w, p, args.constant, b) for b in blockings or [None]]
        tx, tw = torch.from_numpy(x), torch.from_numpy(w)
        ref = torch.nn.functional.conv2d(tx, tw, stride=s, padding=pad).numpy()
        for call, a, _keep, out in steps:
            call(a.ctypes.data)
            np.testing.assert_array_equal(out, steps[0][3])
            np.testing.assert_allclose(out, ref, rtol=1e-3, atol=1e-3)
        fns = [lambda c=c, a=a: c(a.ctypes.data) for c, a, _k, _o in steps]
        fns.append(lambda: torch.nn.functional.conv2d(tx, tw, stride=s, padding=pad))
        best = [float("inf")] * len(fns)
        for _ in range(args.reps):
            for i, fn in enumerate(fns):
                start = time.process_time()
                fn()
                best[i] = min(best[i], time.process_time() - start)
        for b, t in zip(blockings or [cconv_taps.variant(args.batch, cout, 4)], best):
            print(f"{name:4s} {b[0]}x{b[1]}  ember/torch {t / best[-1]:.3f}")


if __name__ == "__main__":
    main()
