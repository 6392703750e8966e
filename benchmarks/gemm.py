"""Matrix products of the zoo's transformer models: ember's `kernels/cgemm.gemm` against
``torch.matmul`` and ``np.matmul``, interleaved in one process (medians of many rounds), at 1
and 2 threads. ``python benchmarks/gemm.py [--threads 1,2] [--rounds N] [--clock auto]
[--sets transformer,square,conv]``: ``square`` adds square products from 256 to 2048, ``conv``
the products of convolution layers as im2col GEMMs (M = batch x output positions, K = 9 x
input channels, N = output channels: ResNet's 3x3 stages at batch 64).

The header gives the CPU's float32 multiply-add peak per core, measured (`fma_peak`: twelve
independent chains of 64-byte vector multiply-adds, which the compiler emits as AVX-512 FMAs
where the CPU has them, two 256-bit ones each elsewhere), and each row its share of that peak
times the thread count.

``--clock``: ``thread`` times the calling thread's CPU time (`time.thread_time`: what other
processes on a loaded machine take is not counted; one thread only, as it misses a pool's
other threads), ``wall`` the elapsed time; ``auto`` (the default) is ``thread`` at one thread
and ``wall`` at more.

The ``linear`` rows are a layer's product at inference, x @ W^T: their weight is watched as a
module's parameter's is (kernels/cprepack.py, where it exists), so ember may run it on panels
packed once (``EMBER_PREPACK=0`` measures it without)."""

from __future__ import annotations

import argparse
import subprocess
import time

import numpy as np


def shapes(sets=("transformer",)):
    """(name, a, b) operands: the transformer blocks' products and their gradients, and the
    square and convolution-shaped products of ``sets``."""
    r = np.random.default_rng(0)

    def f(*s):
        return r.standard_normal(s).astype(np.float32)

    out = []
    if "square" in sets:
        out += [(f"square {s}", f(s, s), f(s, s)) for s in (256, 512, 1024, 2048)]
    if "conv" in sets:
        for m, k, n in ((4096, 1152, 128), (1024, 2304, 256), (256, 4608, 512), (4096, 576, 64)):
            out.append((f"conv {m}x{k}@{k}x{n}", f(m, k), f(k, n)))
            out.append((f"conv dW {k}x{m}^T@{m}x{n}", f(m, k).T, f(m, n)))  # x^T dy
    if "transformer" not in sets:
        return out
    for m, k, n in ((1024, 256, 768), (1024, 256, 1024), (1024, 1024, 256), (1024, 256, 256)):
        out.append((f"{m}x{k}@{k}x{n}", f(m, k), f(k, n)))
        out.append((f"AT {k}x{m}^T@{k}x{n}", f(k, m).T, f(k, n)))  # weight gradient x^T dy
        out.append((f"BT {m}x{n}@({k}x{n})^T", f(m, n), f(k, n).T))  # input gradient dy W^T
    for heads in (4, 8):
        out.append(
            (f"attn {8 * heads}x128x64@64x128", f(8 * heads, 128, 64), f(8 * heads, 64, 128))
        )
        out.append(
            (f"attn {8 * heads}x128x128@128x64", f(8 * heads, 128, 128), f(8 * heads, 128, 64))
        )
    for batch in (1, 8):
        out.append((f"linear b{batch} 256->768 W^T", f(batch, 256), f(768, 256).T))
        out.append((f"linear b{batch} 1024->256 W^T", f(batch, 1024), f(256, 1024).T))
    # the zoo's products at inference: ViT at batch 1 (65 tokens of width 128, MLP 256),
    # GPT / TransformerEncoderLayer at batch 1 (128 tokens of width 256, MLP 1024), and rows
    # between (an MLP at batch 48, 96)
    for m, k, n in (
        (65, 128, 384),
        (65, 128, 128),
        (65, 128, 256),
        (65, 256, 128),
        (128, 256, 768),
        (128, 256, 256),
        (128, 256, 1024),
        (128, 1024, 256),
        (48, 512, 512),
        (96, 512, 512),
    ):
        out.append((f"linear {m} {k}->{n} W^T", f(m, k), f(n, k).T))
    return out


def _watch_weights(cases) -> None:
    """Watch each linear row's weight as nn.Parameter watches its data (if this ember packs
    weights)."""
    try:
        from ember.kernels import cprepack
    except ImportError:
        return
    for name, _, b in cases:
        if name.startswith("linear"):
            cprepack.watch(b.base, [0])


_PEAK = r"""
typedef float vec __attribute__((vector_size(64)));
/* twelve independent chains (more than an FMA unit's latency times its throughput), distinct
   starting values so that no two chains are the same computation */
void ember_fma_peak(long steps, float *sink) {
  vec x = {0}, y = {0}, c[12];
  for (int v = 0; v < 16; v++) x[v] = 0.999999f, y[v] = 1e-6f;
  for (int i = 0; i < 12; i++)
    for (int v = 0; v < 16; v++) c[i][v] = (float)(i * 16 + v);
  for (long s = 0; s < steps; s++)
#pragma GCC unroll 12
    for (int i = 0; i < 12; i++) c[i] = c[i] * x + y;
  vec t = {0};
  for (int i = 0; i < 12; i++) t += c[i];
  *sink = t[0];
}
"""


def fma_peak() -> float:
    """float32 FLOP/s of one core's multiply-adds (this thread's CPU time: the best of five)."""
    import ctypes

    from ember.kernels import ccompile

    fn = ccompile.load(_PEAK, "ember_fma_peak", [ctypes.c_long, ctypes.c_void_p])
    sink = ctypes.c_float()
    steps = 2_000_000
    best = float("inf")
    for _ in range(5):
        t = time.thread_time()
        fn(steps, ctypes.addressof(sink))
        best = min(best, time.thread_time() - t)
    return steps * 12 * 16 * 2 / best


def median_time(fn, reps, clock=time.perf_counter):
    t = clock()
    for _ in range(reps):
        fn()
    return (clock() - t) / reps


def main():
    import torch

    from ember.kernels import cgemm, cpool

    p = argparse.ArgumentParser()
    p.add_argument("--threads", default="1,2")
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--filter", default="")
    p.add_argument("--stat", default="min", choices=("min", "median"))
    p.add_argument("--clock", default="auto", choices=("auto", "thread", "wall"))
    p.add_argument("--sets", default="transformer", help="transformer,square,conv")
    args = p.parse_args()
    model = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    model = next(
        (ln.split(":", 1)[1].strip() for ln in model.splitlines() if "Model name" in ln), "?"
    )
    peak = fma_peak()
    print(f"CPU: {model}; float32 FMA peak {peak / 1e9:.0f} GFLOP/s per core (measured)")
    for threads in [int(t) for t in args.threads.split(",")]:
        cpool.set_num_threads(threads)
        torch.set_num_threads(threads)
        thread = args.clock == "thread" or (args.clock == "auto" and threads == 1)
        clock = time.thread_time if thread else time.perf_counter
        print(
            f"\n threads={threads} ({'thread' if thread else 'wall'} time)"
            f"\n{'':11s} {'product':34s} {'ember us':>9s} {'torch us':>9s}"
            f" {'numpy us':>9s} {'e/torch':>8s}"
        )
        cases = shapes(tuple(args.sets.split(",")))
        _watch_weights(cases)
        for name, a, b in cases:
            if args.filter and args.filter not in name:
                continue
            ta, tb = torch.from_numpy(a) if a.flags.c_contiguous else torch.from_numpy(a.T).T, None
            tb = torch.from_numpy(b) if b.flags.c_contiguous else torch.from_numpy(b.T).T
            ref = a.astype(np.float64) @ b.astype(np.float64)
            got = cgemm.gemm(a, b)
            err = np.abs(got - ref).max() / max(1.0, np.abs(ref).max())
            flops = (
                2
                * a.shape[-2]
                * a.shape[-1]
                * b.shape[-1]
                * (a.size // (a.shape[-2] * a.shape[-1]))
            )
            reps = max(1, int(2e-3 / max(flops / 5e10, 1e-7)))
            fns = {
                "e": lambda: cgemm.gemm(a, b),
                "t": lambda: torch.matmul(ta, tb),
                "n": lambda: np.matmul(a, b),
            }
            times = {key: [] for key in fns}
            for fn in fns.values():
                fn()
            for _ in range(args.rounds):
                for key, fn in fns.items():
                    times[key].append(median_time(fn, reps, clock))
            stat = np.min if args.stat == "min" else np.median
            e, t, n = (float(stat(times[key])) * 1e6 for key in "etn")
            share = 100 * flops / e * 1e6 / (peak * threads)
            print(
                f" {'':10s} {name:34s} {e:9.1f} {t:9.1f} {n:9.1f} {e / t:8.2f}"
                f"  {flops / e / 1e3:6.0f}GF/s {share:4.0f}% of peak"
                f" err {err:.1e}"
            )


if __name__ == "__main__":
    main()
