"""Inference latency (the forward pass alone, no gradients) of ember against PyTorch and JAX,
same run, at small batches where per-node overhead decides.

Models: the MLP, the CNN and the GPT block of benchmarks/train_step.py (same weights on every
side), each at batch 1 and 8 (``--batches``).

Columns (microseconds per call over interleaved rounds: with ``--clock process``, the default
with one thread (``--threads 1``), the process's CPU time and the best round, which other
processes on a shared machine do not inflate; with ``--clock wall``, the median round):
* ember fn: ``ember.function(model)``, the default path: the executor runtime/auto.py picks
  (``chosen`` under the row: generated code, the C graph runner on one thread or several, or the
  parallel workers, and why);
* codegen: ``executor="codegen"``, generated code;
* ember par: ``executor="parallel"``: the plan the parallel executor's cost model picks;
* torch: PyTorch eager under ``torch.inference_mode()``; compile: ``torch.compile`` of the
  same (skipped with the reason if it fails);
* jax jit: ``jax.jit`` of the JAX twin (skipped without JAX).

Ratios: ember fn (the default path) / torch, / compile, / jax jit (below 1: ember is faster).
Every side's output is checked against ember eager's before timing.

    pip install -e '.[bench]'      # torch and jax[cpu]
    python benchmarks/inference.py [--cases mlp,cnn,gpt] [--batches 1,8] [--rounds 7]
                                   [--threads 1] [--clock process|wall]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from train_step import _cases, _jax_forward, _reason, _torch_model
from zoo import CLOCKS, cpu_header, default_clock

import ember


def _time(fn, calls: int, clock=time.perf_counter) -> float:
    start = clock()
    for _ in range(calls):
        fn()
    return (clock() - start) / calls


def _sides(case, x: np.ndarray, notes: dict) -> tuple[dict, dict]:
    ember.manual_seed(0)
    model = case.build()
    weights = {k: v.numpy() for k, v in model.state_dict().items()}
    xs = ember.tensor(x)
    with ember.no_grad():
        want = model(xs).numpy()
    default = ember.function(lambda x: model(x))
    codegen = ember.function(lambda x: model(x), executor="codegen")
    chosen = ember.function(lambda x: model(x), executor="parallel")
    with ember.no_grad():
        choice = default.compile(xs).parallel_plan
        codegen.compile(xs)
        chosen.compile(xs)

    def ember_call(fn):
        def call():
            with ember.no_grad():
                return fn(xs).numpy()

        return call

    sides = {
        "ember fn": ember_call(default),
        "codegen": ember_call(codegen),
        "ember par": ember_call(chosen),
    }
    try:
        import torch

        torch.set_num_threads(2)
        tmodel = _torch_model(case, model, weights).eval()
        tx = torch.from_numpy(x)

        def torch_call(fn):
            def call():
                with torch.inference_mode():
                    return fn(tx).numpy()

            return call

        sides["torch"] = torch_call(tmodel)
        try:
            compiled = torch.compile(tmodel)
            sides["compile"] = torch_call(compiled)
            sides["compile"]()
        except Exception as exc:  # noqa: BLE001 - reported, not fatal
            sides.pop("compile", None)
            notes["compile"] = _reason(exc)
    except ImportError:
        notes["torch"] = "not installed (pip install torch==2.13.0 --index-url .../cpu)"
    try:
        import jax
        import jax.numpy as jnp

        forward = jax.jit(_jax_forward(case, model))
        params = {k: jnp.asarray(v) for k, v in weights.items()}
        jx = jnp.asarray(x)
        sides["jax jit"] = lambda: np.asarray(forward(params, jx).block_until_ready())
    except ImportError:
        notes["jax jit"] = "not installed (pip install 'jax[cpu]')"
    for name, call in list(sides.items()):
        got = call()
        if not np.allclose(got, want, rtol=1e-3, atol=1e-4):
            notes[name] = f"wrong result (max error {np.abs(got - want).max():.3g})"
            del sides[name]
    return sides, {"chosen": str(choice).splitlines()[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="mlp,cnn,gpt")
    parser.add_argument("--batches", default="1,8")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=50, help="calls per side per round")
    parser.add_argument("--threads", type=int, help="threads of every side (default: ember's)")
    parser.add_argument(
        "--clock",
        choices=tuple(CLOCKS),
        help="process: CPU time, best round (default with one thread); wall: median round",
    )
    args = parser.parse_args()
    names = args.cases.split(",")
    if args.threads:
        ember.set_num_threads(args.threads)
    threads = ember.get_num_threads()
    try:
        import torch

        torch.set_num_threads(threads)
    except ImportError:
        pass
    clock = args.clock or default_clock(threads)
    read, pick = CLOCKS[clock]
    for line in cpu_header():
        print(line)
    stat = "best process-clock" if clock == "process" else "median wall-clock"
    print(
        f"{stat} us per forward call ({threads} threads, interleaved rounds); ratios: "
        "ember fn (default) / peer"
    )
    header = ["ember fn", "codegen", "ember par", "torch", "compile", "jax jit"]
    print(
        f"{'case':10s}" + "".join(f"{h:>10s}" for h in header) + "    fn/torch fn/compile    fn/jax"
    )
    for batch in (int(b) for b in args.batches.split(",")):
        for case in _cases(names):
            x = np.ascontiguousarray(case.x[:batch])
            if len(x) < batch:  # (the cases' batches are larger than these)
                x = np.concatenate([x] * -(-batch // len(x)))[:batch]
            notes: dict = {}
            sides, info = _sides(case, x, notes)
            times: dict = {k: [] for k in sides}
            for _ in range(args.rounds):
                for name, call in sides.items():
                    call()  # re-warm after the other sides
                    times[name].append(_time(call, args.calls, read) * 1e6)
            med = {k: pick(v) for k, v in times.items()}
            cells = "".join(f"{med[h]:10.0f}" if h in med else f"{'-':>10s}" for h in header)
            ratios = "".join(
                f"{med['ember fn'] / med[p]:>10.2f}" if p in med and "ember fn" in med else " " * 10
                for p in ("torch", "compile", "jax jit")
            )
            print(f"{case.name + ' b' + str(batch):10s}{cells}   {ratios}")
            print(f"{'':10s}chosen: {info['chosen']}")
            for name, note in notes.items():
                print(f"{'':10s}{name}: {note}")


if __name__ == "__main__":
    main()
