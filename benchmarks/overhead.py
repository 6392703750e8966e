"""Per-op dispatch overhead: a chain of 100 elementwise ops on a 64-element float32 tensor.

The chain repeats ``x + 0.5``, ``x * 0.9``, ``x - 0.25``, ``sin(x)`` (values stay bounded), no
gradients. With 64 elements the arithmetic is negligible, so the time per op is what each library
spends deciding what to run: Python dispatch, allocation, tape checks.

Sides, measured interleaved in the same run (medians over repetitions):
* numpy: the same chain on ndarrays, the floor any NumPy-backed eager op pays.
* ember: eager ops.
* ember fn: ``ember.function`` of the chain (shows ``-`` with the reason while it is missing or
  fails).
* torch: PyTorch eager.
* compile: ``torch.compile`` of the chain (skipped with the reason if compiling fails).
* jax: JAX op by op (each ``jnp`` call dispatched eagerly).
* jax jit: ``jax.jit`` of the chain (skipped with install instructions without JAX).

Prints microseconds per op (chain time / 100) and the ratio to PyTorch eager. Every side's result
is checked against NumPy's before timing.

    pip install -e '.[bench]'      # torch and jax[cpu]
    python benchmarks/overhead.py [--ops 100] [--calls 20] [--reps 15]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import ember


def chain(x, sin, ops: int):
    """``ops`` elementwise ops on ``x``; ``sin`` is the library's sine."""
    for i in range(ops):
        kind = i % 4
        if kind == 0:
            x = x + 0.5
        elif kind == 1:
            x = x * 0.9
        elif kind == 2:
            x = x - 0.25
        else:
            x = sin(x)
    return x


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:160]


def _sides(x: np.ndarray, ops: int, notes: dict) -> dict:
    """name -> (run, to_numpy): ``run()`` computes the chain once, ``to_numpy`` reads a result."""
    sides = {"numpy": (lambda: chain(x, np.sin, ops), np.asarray)}
    ex = ember.tensor(x)
    sides["ember"] = (lambda: chain(ex, ember.sin, ops), lambda r: r.numpy())
    try:
        fn = ember.function(lambda t: chain(t, ember.sin, ops))
        sides["ember fn"] = (lambda: fn(ex), lambda r: r.numpy())
    except Exception as exc:
        notes["ember fn"] = f"unavailable ({_reason(exc)})"
    try:
        import torch

        tx = torch.from_numpy(x)
        sides["torch"] = (lambda: chain(tx, torch.sin, ops), lambda r: r.numpy())
        compiled = torch.compile(lambda t: chain(t, torch.sin, ops))
        sides["compile"] = (lambda: compiled(tx), lambda r: r.numpy())
    except ImportError:
        print("PyTorch is not installed: no torch rows (pip install torch==2.13.0)")
    try:
        import jax
        import jax.numpy as jnp

        jx = jnp.asarray(x)
        sides["jax"] = (
            lambda: chain(jx, jnp.sin, ops).block_until_ready(),
            np.asarray,
        )
        jitted = jax.jit(lambda t: chain(t, jnp.sin, ops))
        sides["jax jit"] = (lambda: jitted(jx).block_until_ready(), np.asarray)
    except ImportError:
        print("JAX is not installed: no jax rows (pip install 'jax[cpu]', or -e '.[bench]')")
    return sides


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ops", type=int, default=100, help="ops in the chain")
    parser.add_argument("--calls", type=int, default=20, help="chain calls per timed repetition")
    parser.add_argument("--reps", type=int, default=15, help="timed repetitions per side")
    args = parser.parse_args()

    x = np.random.default_rng(0).standard_normal(64).astype(np.float32)
    notes: dict[str, str] = {}
    sides = _sides(x, args.ops, notes)
    want = chain(x, np.sin, args.ops)
    first_call = {}
    for name, (run, to_numpy) in list(sides.items()):
        try:
            start = time.perf_counter()
            got = to_numpy(run())
            first_call[name] = time.perf_counter() - start
        except Exception as exc:
            notes[name] = f"unavailable ({_reason(exc)})"
            del sides[name]
            continue
        if got.dtype != np.float32 or not np.allclose(got, want, rtol=1e-5, atol=1e-5):
            raise SystemExit(f"{name}: the chain's result differs from NumPy's ({got.dtype})")

    times: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(args.reps):
        for name, (run, _) in list(sides.items()):
            run()  # re-warm after the other sides ran
            start = time.perf_counter()
            for _ in range(args.calls):
                run()
            times[name].append((time.perf_counter() - start) / (args.calls * args.ops))

    medians = {name: statistics.median(t) for name, t in times.items()}
    print(f"{args.ops}-op elementwise chain on {x.size} float32; median us per op")
    print(f"{'side':9}{'us/op':>9}{'/ torch':>9}{'first call s':>14}")
    for name in ("numpy", "ember", "ember fn", "torch", "compile", "jax", "jax jit"):
        if name in notes:
            print(f"{name:9}{'-':>9}{'-':>9}{'-':>14}   {notes[name]}")
        if name not in medians:
            continue
        ratio = f"{medians[name] / medians['torch']:.2f}" if "torch" in medians else "-"
        print(f"{name:9}{medians[name] * 1e6:9.2f}{ratio:>9}{first_call[name]:14.3f}")


if __name__ == "__main__":
    main()
