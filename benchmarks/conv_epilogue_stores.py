"""A convolution's store of the ReLU mask and of a residual against the separate fused loop it
replaces, over plane sizes from inside L1 to past the last-level cache.

Each case is one compiled function, ``relu(conv2d(x, w, b, padding=1))`` with its ``!= 0``
mask (``--cases mask``) or ``relu(conv2d(x, w, b, padding=1) + r)`` (``--cases residual``),
compiled twice: as ember compiles it (the convolution's C store writes the mask, or adds the
residual, tile by tile: ops/conv_epilogue.py), and with the convolution's epilogue rule
refusing that program, so the convolution stores its plain result and one fused loop reads it
back (what ran before the stores existed). Both must give the same bits. Printed: this
thread's CPU time per call (one thread; wall time on more), the median of ``--rounds``
interleaved timings, the bytes one sample's result and mask take against the L2 and
last-level cache sizes ember reads (kernels/cache_sizes.py), and stored / separate.

    python benchmarks/conv_epilogue_stores.py [--cases mask,residual] [--threads 1] [--rounds 25]
"""

from __future__ import annotations

import argparse
import subprocess
import time

import numpy as np

import ember
import ember.nn.functional as F
from ember.kernels import cache_sizes, timing
from ember.ops import conv_epilogue

# (channels, plane side, batch): one sample's result from 16 KiB to 12 MiB
SIZES = ((64, 8, 64), (64, 16, 16), (64, 32, 8), (64, 56, 4), (32, 112, 2), (64, 112, 2))
SIZES += ((32, 224, 1), (64, 224, 1))


def _program(case: str):
    if case == "mask":

        def f(x, w, b, r):
            y = F.relu(F.conv2d(x, w, b, padding=1))
            return y, y != 0

        return f, "mask"

    def g(x, w, b, r):
        return F.relu(F.conv2d(x, w, b, padding=1) + r)

    return g, "residual"


def _refusing(field: str):
    """The epilogue spec, refusing any program whose store would take ``field``."""
    plain = conv_epilogue.epilogue_spec

    def spec(*args, **kwargs):
        found = plain(*args, **kwargs)
        return None if found is not None and getattr(found, field) is not None else found

    return spec


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", default="mask,residual")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=25)
    args = parser.parse_args()
    ember.set_num_threads(args.threads)
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    print(next((line for line in lscpu.splitlines() if "Model name" in line), "CPU: ?"))
    l2, llc = cache_sizes.l2_bytes(), cache_sizes.last_level_bytes()
    print(f"L2 {l2 >> 10} KiB, last level {llc >> 10} KiB; {args.threads} thread(s)")
    clock = time.thread_time if args.threads == 1 else time.perf_counter
    plain = conv_epilogue.epilogue_spec
    for case in args.cases.split(","):
        f, field = _program(case)
        for c, h, n in SIZES:
            rng = np.random.default_rng(0)
            x, r = (rng.standard_normal((n, c, h, h), np.float32) for _ in range(2))
            w = rng.standard_normal((c, c, 3, 3), np.float32) * 0.1
            b = rng.standard_normal(c, np.float32)
            operands = [ember.tensor(a) for a in (x, w, b, r)]
            stored = ember.function(f)
            stored(*operands)
            conv_epilogue.epilogue_spec = _refusing(field)
            try:
                separate = ember.function(lambda *a, f=f: f(*a))
                separate(*operands)
            finally:
                conv_epilogue.epilogue_spec = plain
            ours, theirs = stored(*operands), separate(*operands)
            for a, b_ in zip(
                ours if isinstance(ours, tuple) else (ours,),
                theirs if isinstance(theirs, tuple) else (theirs,),
            ):
                assert np.array_equal(a.numpy(), b_.numpy()), case
            times = timing.interleaved(
                [lambda: stored(*operands), lambda: separate(*operands)],
                args.rounds,
                clock=clock,
                sample_s=0.03,
            )
            a_ms, b_ms = (timing.median(t) * 1e3 for t in times)
            sample = c * h * h * (5 if field == "mask" else 4)
            print(
                f"{case:8s} C{c:<3d} {h:3d}x{h:<3d} N{n:<3d} sample {sample >> 10:6d} KiB "
                f"({sample / l2:5.2f} L2, {sample / llc:5.2f} LLC)  stored {a_ms:7.3f} ms  "
                f"separate {b_ms:7.3f} ms  stored/separate {a_ms / b_ms:.3f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
