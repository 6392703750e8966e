"""The fused elementwise chain of issue 5: ``(x * sigmoid(1.702 * x)) * w + b`` on 4M float32.

Sides, measured interleaved in the same run (medians over repetitions):
* numpy: the chain op by op (five passes over memory, four temporaries).
* ember fn: ``ember.function`` at O3: the chain is one ``fused_elementwise`` node run as one C
  loop (ember's thread pool, SIMD with glibc's vector exp, non-temporal stores).
* torch: PyTorch eager; compile: ``torch.compile`` (skipped with the reason if it fails).
* jax jit: ``jax.jit`` (skipped without JAX).

Prints milliseconds per call (median and fastest) and each side's ratio to JAX jit (the
issue's bar: ember at most 0.8x JAX jit), and the memory bandwidth each side achieves against
this machine's measured peak (``ember.profiler.machine_peaks``, re-measured in this run). Every
side's result is checked against NumPy's (float64) before timing.

The bound. The chain reads x, w and b and writes the result: 16 bytes per element, 64 MB for
4M values, far past the caches. A loop that writes with ordinary stores also reads each output
cache line before overwriting it (20 bytes per element on the bus); ember's loop writes with
non-temporal stores (kernels/cfuse.py), which skip that read. So if both ember and JAX ran at
the memory roof, ember's time would be 16/20 = 0.8x JAX's: the issue's bar is the whole of the
non-temporal stores' advantage, and is met only where JAX also falls short of its own roof.
The printed times "at the peak" use the stream peak of ``ember.profiler`` (NumPy's add, one
thread): an estimate, not a hard floor, since two threads can draw somewhat more bandwidth.

    pip install -e '.[bench]'      # torch and jax[cpu]
    python benchmarks/fused_chain.py [--n 4194304] [--reps 30]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import ember
from ember.profiler import measure_peaks


def _chain(x, w, b, sigmoid):
    return (x * sigmoid(1.702 * x)) * w + b


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:160]


def _sides(x, w, b, notes: dict) -> dict:
    sides = {
        "numpy": (
            lambda: _chain(x, w, b, lambda v: 1 / (1 + np.exp(-v))),
            np.asarray,
        )
    }
    ex, ew, eb = ember.tensor(x), ember.tensor(w), ember.tensor(b)
    fn = ember.function(lambda x, w, b: _chain(x, w, b, ember.sigmoid))
    sides["ember fn"] = (lambda: fn(ex, ew, eb), lambda r: r.numpy())
    try:
        import torch

        torch.set_num_threads(2)
        tx, tw, tb = (torch.from_numpy(a) for a in (x, w, b))
        sides["torch"] = (lambda: _chain(tx, tw, tb, torch.sigmoid), lambda r: r.numpy())
        try:
            compiled = torch.compile(lambda x, w, b: _chain(x, w, b, torch.sigmoid))
            compiled(tx, tw, tb)
            sides["compile"] = (lambda: compiled(tx, tw, tb), lambda r: r.numpy())
        except Exception as exc:  # noqa: BLE001 - reported, not fatal
            notes["compile"] = _reason(exc)
    except ImportError:
        notes["torch"] = "not installed (pip install torch==2.13.0 --index-url .../cpu)"
    try:
        import jax
        import jax.numpy as jnp

        jx, jw, jb = (jnp.asarray(a) for a in (x, w, b))
        jitted = jax.jit(lambda x, w, b: _chain(x, w, b, jax.nn.sigmoid))
        sides["jax jit"] = (
            lambda: jitted(jx, jw, jb).block_until_ready(),
            lambda r: np.asarray(r),
        )
    except ImportError:
        notes["jax jit"] = "not installed (pip install 'jax[cpu]')"
    return sides


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=4 * 1024 * 1024)
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--block", type=int, default=10, help="calls per side in a row")
    parser.add_argument("--settle", type=float, default=0.0, help="seconds of pause per block")
    parser.add_argument("--warmup", type=int, default=5, help="untimed calls per block")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(args.n).astype(np.float32) for _ in range(3))
    want = _chain(*(a.astype(np.float64) for a in (x, w, b)), lambda v: 1 / (1 + np.exp(-v)))
    notes: dict = {}
    sides = _sides(x, w, b, notes)
    for name, (run, read) in list(sides.items()):
        got = read(run())
        if not np.allclose(got, want, rtol=1e-5, atol=1e-5):
            notes[name] = f"wrong result (max error {np.abs(got - want).max():.3g})"
            del sides[name]
    times: dict[str, list] = {name: [] for name in sides}
    # interleaved in blocks, so machine noise hits every side alike; each block starts with
    # warm-up calls, so the previous side's spinning threads (OpenMP's, Eigen's) have gone
    # quiet. An optional pause before a block (--settle) lets the cores idle down: sides whose
    # threads sleep between calls (ember's) then start slower than sides whose threads spin
    # (torch.compile's OpenMP), so by default there is none (no BLAS runs here)
    for _ in range(max(1, args.reps // args.block)):
        for name, (run, _) in sides.items():
            time.sleep(args.settle)
            for _ in range(args.warmup):
                run()
            for _ in range(args.block):
                start = time.perf_counter()
                run()
                times[name].append(time.perf_counter() - start)
    medians = {name: statistics.median(t) * 1e3 for name, t in times.items()}
    fastest = {name: min(t) * 1e3 for name, t in times.items()}
    ref, ref_min = medians.get("jax jit"), fastest.get("jax jit")
    reps = len(next(iter(times.values()))) if times else 0
    peak = measure_peaks().gbps  # now, on this machine as loaded as the sides were
    moved = 16 * args.n  # x, w, b read, the result written (bytes; see the docstring)
    # the peak counts np.add's 12 bytes per element, but its stores also read each output line
    # first: 16 on the bus. At that peak: 16 bytes per element on the bus with non-temporal
    # stores (ember), 20 with ordinary ones
    bus = peak * 4 / 3
    floor_nt, floor = moved / bus * 1e3 / 1e9, moved * 20 / 16 / bus * 1e3 / 1e9
    print(f"fused chain, {args.n} float32 values, median of {reps} (blocks of {args.block})")
    print(
        f"  {moved / 1e6:.0f} MB moved per call; stream peak now {peak:.1f} GB/s counted "
        f"({bus:.1f} on the bus): at that peak {floor_nt:.2f} ms with non-temporal stores, "
        f"{floor:.2f} ms without"
    )
    head = f"{'median':>8} {'fastest':>8}  {'median/jax':>10} {'fastest/jax':>11}"
    print(f"  {'side':<9} {head}  GB/s")
    for name, ms in medians.items():
        ratio = f"{ms / ref:9.2f}x {fastest[name] / ref_min:10.2f}x" if ref else " " * 22
        gbps = moved / (ms * 1e-3) / 1e9
        print(
            f"  {name:<9} {ms:8.2f} {fastest[name]:8.2f}  {ratio}  "
            f"{gbps:5.1f} ({gbps / peak:.0%} of the counted peak)"
        )
    for name, note in notes.items():
        print(f"  {name:<9}        -   ({note})")


if __name__ == "__main__":
    main()
