"""The model zoo (ember.zoo) timed against PyTorch: every model's training step and its
inference at batch 1 and 8, ember and PyTorch side by side in one process.

Models and sizes: ember/zoo.py's docstring (mlp, cnn, resnet18, mobilenet_v2, unet, lstm, gru,
gpt, transformer, vit); each is built once from one source over ember and over torch, and the
PyTorch twin gets ember's initial weights (``zoo.copy_weights``).

Cases per model:
* ``train``: zero_grad, forward, cross-entropy, backward, optimizer step (the spec's SGD with
  momentum or AdamW) on the spec's training batch, in train mode;
* ``infer1``, ``infer8``: the forward pass without gradients at batch 1 and 8, in eval mode.

Variants (columns):
* ember: eager; ember fn: the same step (or forward) in ``ember.function`` with its default
  options (no executor named); torch: PyTorch eager (inference under ``torch.inference_mode``);
  compile: ``torch.compile`` (the training step compiled as benchmarks/train_step.py does it:
  the forward + loss, and ``opt.step`` separately; skipped with ``--no-compile``; a failure is
  reported in the case's notes and the case goes on); jax: the model's JAX twin
  (benchmarks/zoo_jax.py: the forward pass, loss, gradients and optimizer update in one
  ``jax.jit`` function; inference jitted; skipped with ``--no-jax`` or without JAX). Compiling
  and tracing happen outside the timed calls; their first-call times are printed under the row.

Before timing, every variant's first result is checked against ember eager's (the first
step's loss from the same weights, or the inference output); ``ember fn`` must also match
eager's second training step. A variant that fails or disagrees is not timed, and the note
under the row says why (the exception's type and first line).

Timing: ``--rounds`` interleaved rounds; each round runs every variant once (a warm-up call,
then as many timed calls as fit ``--target`` seconds), in an order rotated by one each round,
with a ``--settle`` pause before each variant (the previous variant's BLAS or OpenMP threads
spin for a while after its last call). ``--clock wall``: medians of all timed calls;
``--clock process`` (the default with ``--threads 1``): the process's CPU time, each round's
calls timed together, the best round (what other processes on a shared machine do not
inflate). Ratios to torch eager, to torch.compile and to JAX (below 1: ember is faster).

``--profile``: after a case's row, where the ember variants' time goes by op family (the op's
``flop_family`` or kind, as the FLOP counter groups ops; fused kernels by their fusion): self
time per call,
from ``ember.profiler``, with the time outside any op (Python, the tape, dispatch; for
``ember.function``, the generated code between kernels and the capture wrapper).

    python benchmarks/zoo.py [--cases resnet18,lstm,train,infer1] [--rounds 5] [--no-compile]
                             [--no-jax] [--profile] [--json results.json] [--threads 1]
                             [--clock process|wall]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import time
from collections import defaultdict

import numpy as np
from train_step import _blas_core, _reason, torch_step

import ember
from ember import zoo

CASES = ("train", "infer1", "infer8")
# how a side is timed: ``process`` the process's CPU time (what other processes on a shared
# machine do not inflate; one thread each) and the best round's mean; ``wall`` wall-clock
# time and the median call (what a multi-threaded call takes, its pool's wake-ups included)
CLOCKS = {"process": (time.process_time, min), "wall": (time.perf_counter, statistics.median)}


def default_clock(threads: int) -> str:
    """The clock a run uses unless told: the process's CPU time where each side runs one
    thread, else wall-clock time (CPU time would add up the threads)."""
    return "process" if threads == 1 else "wall"


VARIANTS = ("ember", "ember fn", "torch", "compile", "jax")
ISA_FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile")


# ----------------------------------------------------------------------------- the machine


def cpu_header() -> list[str]:
    """The CPU model, the ISA flags that decide kernels, the cores, the load."""
    model = platform.processor() or "unknown CPU"
    fields: dict[str, str] = {}
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        fields = {
            k.strip(): v.strip() for k, _, v in (ln.partition(":") for ln in out.splitlines())
        }
        model = fields.get("Model name", model)
    except (OSError, subprocess.SubprocessError):
        pass
    # a vendor's generic name ("AMD EPYC") says little: family and model number identify the core
    ident = ", ".join(
        f"{k.lower()} {fields[k]}" for k in ("CPU family", "Model", "L2 cache", "L3 cache")
        if fields.get(k)
    )  # fmt: skip
    flags: set[str] = set()
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                elif line.startswith("model name") and model in ("", "unknown CPU"):
                    model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    isa = " ".join(f for f in ISA_FLAGS if f in flags) or "(no /proc/cpuinfo flags)"
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    return [
        f"CPU: {model} ({ident}); ISA: {isa}",
        f"{os.cpu_count()} cores ({usable} usable); load average {load}",
    ]


# ----------------------------------------------------------------------------- the variants


def _close(got: float, want: float, rtol: float = 1e-4) -> bool:
    return abs(got - want) <= rtol * max(1.0, abs(want))


class Case:
    """One model and case: its variants' callables, built from the same initial weights."""

    def __init__(self, name: str, case: str, torch, compile_torch: bool, jax_twins=None):
        self.name, self.case = name, case
        self.spec = zoo.SPECS[name]
        self.notes: dict[str, str] = {}
        self.first_call: dict[str, float] = {}
        self.fns: dict[str, object] = {}
        self.torch = torch
        self.jax_twins = jax_twins  # benchmarks/zoo_jax.py, or None: no JAX column
        if torch is not None and compile_torch:
            # compile this case from scratch: code compiled for another batch size would be
            # recompiled for dynamic shapes inside the timed calls
            torch._dynamo.reset()
        batch = self.spec.train_batch if case == "train" else int(case[len("infer") :])
        self.x, self.y = zoo.inputs(name, batch, seed=0)
        ember.manual_seed(0)
        self.model = zoo.build(name, ember)  # the weights every variant starts from
        if case == "train":
            self._train_variants(compile_torch)
        else:
            self._infer_variants(compile_torch)

    # ---- building (every variant gets its own copy of the initial weights, self.model)
    def _ember_copy(self):
        model = zoo.build(self.name, ember)
        zoo.copy_weights(self.model, model)
        return model

    def _torch_copy(self):
        model = zoo.build(self.name, self.torch)
        zoo.copy_weights(self.model, model)
        return model

    def _add(self, variant: str, make, check) -> None:
        """Build ``variant`` and make its first call (timed: trace or compile included), then
        check it; on a failure or a disagreement note why and leave it out."""
        try:
            start = time.perf_counter()
            fn = make()
            first = fn()
            self.first_call[variant] = time.perf_counter() - start
            problem = check(fn, first)
        except Exception as exc:  # noqa: BLE001 - reported per variant, the run goes on
            self.notes[variant] = f"fails: {_why(exc)}"
            return
        if problem:
            self.notes[variant] = f"WRONG, not timed: {problem}"
            return
        self.fns[variant] = fn

    def _ember_train_step(self, model):
        opt = zoo.optimizer(self.name, ember, model.parameters())
        x, y = ember.tensor(self.x), ember.tensor(self.y)

        def step():
            opt.zero_grad()
            loss = zoo.loss(ember, model(x), y)
            loss.backward()
            opt.step()
            return loss

        return step

    def _torch_train_step(self, model, compiled: bool):
        torch = self.torch
        opt = zoo.optimizer(self.name, torch, model.parameters())
        x, y = torch.from_numpy(self.x), torch.from_numpy(self.y)

        def forward_loss():
            return zoo.loss(torch, model(x), y)

        return torch_step(forward_loss, opt, compiled)

    def _train_variants(self, compile_torch: bool) -> None:
        reference = self._ember_train_step(self._ember_copy())
        want = [float(reference().item()), float(reference().item())]  # eager's first two steps

        def same_first(fn, first):
            got = float(first.item())
            return None if _close(got, want[0]) else f"first loss {got} != eager's {want[0]}"

        def same_two(fn, first):
            problem = same_first(fn, first)
            if problem:
                return problem
            got = float(fn().item())
            return None if _close(got, want[1]) else f"second loss {got} != eager's {want[1]}"

        self._add("ember", lambda: self._ember_train_step(self._ember_copy()), same_first)
        self._add(
            "ember fn", lambda: ember.function(self._ember_train_step(self._ember_copy())), same_two
        )
        if self.torch is not None:
            self._add(
                "torch", lambda: self._torch_train_step(self._torch_copy(), False), same_first
            )
            if compile_torch:
                self._add(
                    "compile", lambda: self._torch_train_step(self._torch_copy(), True), same_first
                )
        if self._has_jax_twin():
            self._add("jax", lambda: self._jax_twin().train_step(self.x, self.y), same_two)

    def _has_jax_twin(self) -> bool:
        return self.jax_twins is not None and self.name in self.jax_twins.SUPPORTED

    def _jax_twin(self):
        return self.jax_twins.JaxTwin(self.name, self.model)

    def _infer_variants(self, compile_torch: bool) -> None:
        self.model.eval()  # no variant changes weights here: all share eval-mode copies
        x = ember.tensor(self.x)
        with ember.no_grad():
            want = self.model(x).numpy().copy()
        scale = float(np.abs(want).max())

        def same(fn, first):
            got = np.asarray(first)
            if got.shape != want.shape:
                return f"output shape {got.shape} != eager's {want.shape}"
            err = float(np.abs(got - want).max())
            return None if err <= 1e-4 * max(scale, 1.0) else f"output differs by {err:.3g}"

        def ember_call(fn):
            def call():
                with ember.no_grad():
                    return fn(x).numpy()

            return call

        self._add("ember", lambda: ember_call(self.model), same)
        self._add("ember fn", lambda: ember_call(ember.function(lambda x: self.model(x))), same)
        if self.torch is None:
            if self._has_jax_twin():
                self._add("jax", lambda: self._jax_twin().infer(self.x), same)
            return
        torch = self.torch
        tx = torch.from_numpy(self.x)

        def torch_call(fn):
            def call():
                with torch.inference_mode():
                    return fn(tx).numpy()

            return call

        self._add("torch", lambda: torch_call(self._torch_copy().eval()), same)
        if compile_torch:
            self._add("compile", lambda: torch_call(torch.compile(self._torch_copy().eval())), same)
        if self._has_jax_twin():
            self._add("jax", lambda: self._jax_twin().infer(self.x), same)

    # ---- timing
    def time(self, rounds: int, target: float, settle: float, clock: str = "wall") -> dict:
        """Seconds per call of each variant over ``rounds`` interleaved rounds: with the wall
        clock, the median call; with the process clock, the best round's mean (`CLOCKS`)."""
        read, pick = CLOCKS[clock]
        times: dict[str, list[float]] = {v: [] for v in self.fns}
        order = list(self.fns)
        for r in range(rounds):
            shift = r % len(order) if order else 0
            for variant in order[shift:] + order[:shift]:
                if variant not in self.fns:
                    continue
                fn = self.fns[variant]
                time.sleep(settle)
                try:
                    start = time.perf_counter()
                    fn()  # warm-up: caches, threads, the previous variant's leftovers
                    once = time.perf_counter() - start
                    calls = max(1, min(50, int(target / max(once, 1e-6))))
                    if clock == "process":  # (one reading per round: the round's mean)
                        start = read()
                        for _ in range(calls):
                            fn()
                        times[variant].append((read() - start) / calls)
                        continue
                    for _ in range(calls):
                        start = read()
                        fn()
                        times[variant].append(read() - start)
                except Exception as exc:  # noqa: BLE001 - reported, the others go on
                    self.notes[variant] = f"fails while timing: {_reason(exc)}"
                    del self.fns[variant]
                    times.pop(variant, None)
        return {v: pick(t) for v, t in times.items() if t}


# ----------------------------------------------------------------------------- profile


def _why(exc: BaseException) -> str:
    """The exception's type, first line and, when it has more, its last line (torch.compile's
    errors put the backend's reason at the end)."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    last = f" ... {lines[-1][:200]}" if len(lines) > 1 else ""
    return _reason(exc) + last


def _family(event) -> str:
    """An event's op family: the row the FLOP counter reports its op under (the op's
    ``flop_family``, else its kind: ``conv``, ``linalg``, ``elementwise``, ``reduce``, ``nn``,
    ``shape``...), or a fused kernel's fusion (``fused_elementwise``, ``fused_epilogue``)."""
    if "(" in event.name:
        return event.name.split("(", 1)[0]
    op = event.op
    return event.name if op is None else op.flop_family or op.kind


def profile_case(case: Case, calls: int = 3) -> str:
    """Per op family, the ember variants' self time per call (ms) and its share of the call."""
    lines = []
    for variant in ("ember", "ember fn"):
        fn = case.fns.get(variant)
        if fn is None:
            continue
        fn()
        with ember.profiler.profile() as prof:
            start = time.perf_counter_ns()
            for _ in range(calls):
                fn()
            total = (time.perf_counter_ns() - start) / calls
        by_family: dict[str, float] = defaultdict(float)
        ops: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        graph_ns = 0.0
        for e in prof.events():
            if e.cat == "graph":
                graph_ns += e.duration_ns / calls
            if e.cat not in ("op", "backward", "kernel") or (e.op is None and "(" not in e.name):
                continue
            self_ns = (e.duration_ns - e.children_ns) / calls
            family = _family(e)
            if e.cat == "backward":
                family += " (bw)"
            by_family[family] += self_ns
            ops[family][e.name] += self_ns
        in_ops = sum(by_family.values())
        if variant == "ember fn":
            by_family["(generated code between kernels)"] = max(0.0, graph_ns - in_ops)
            by_family["(outside the graph: capture wrapper)"] = max(0.0, total - graph_ns)
        else:
            by_family["(outside ops: Python, tape, dispatch)"] = max(0.0, total - in_ops)
        lines.append(f"      profile of {variant}: {total / 1e6:.2f} ms per call")
        for family, ns in sorted(by_family.items(), key=lambda kv: -kv[1])[:14]:
            top = sorted(ops.get(family, {}).items(), key=lambda kv: -kv[1])[:3]
            names = ", ".join(f"{n} {t / 1e6:.2f}" for n, t in top)
            lines.append(
                f"        {family:38} {ns / 1e6:8.2f} ms {100 * ns / total:5.1f}%  {names}"
            )
    return "\n".join(lines)


# ----------------------------------------------------------------------------- main


def _selection(text: str, parser) -> tuple[list[str], list[str]]:
    words = [w.strip() for w in text.split(",") if w.strip()]
    unknown = sorted(set(words) - set(zoo.ZOO) - set(CASES))
    if unknown:
        parser.error(
            f"unknown case(s) {', '.join(unknown)}; choose models from {', '.join(zoo.ZOO)} "
            f"and/or cases from {', '.join(CASES)}"
        )
    models = [m for m in zoo.ZOO if m in words] or list(zoo.ZOO)
    cases = [c for c in CASES if c in words] or list(CASES)
    return models, cases


def _ratio(medians: dict, num: str, den: str) -> str:
    if num in medians and den in medians:
        return f"{medians[num] / medians[den]:.2f}"
    return "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--cases", default="", help="comma-separated model names and/or train,infer1,infer8"
    )
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    parser.add_argument(
        "--target", type=float, default=0.2, help="seconds of timed calls per variant per round"
    )
    parser.add_argument("--settle", type=float, default=0.1, help="pause before each variant")
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    parser.add_argument("--no-jax", action="store_true", help="skip the JAX twins")
    parser.add_argument("--profile", action="store_true", help="per-op-family profile of ember")
    parser.add_argument("--json", metavar="PATH", help="write the results as JSON")
    parser.add_argument(
        "--threads", type=int, help="threads for ember and torch (default: ember's own count)"
    )
    parser.add_argument(
        "--clock",
        choices=tuple(CLOCKS),
        help="process: CPU time, best round (default with one thread); wall: median call",
    )
    args = parser.parse_args()
    models, cases = _selection(args.cases, parser)

    if args.threads:
        ember.set_num_threads(args.threads)
    threads = ember.get_num_threads()
    versions = [f"ember {ember.__version__} ({threads} threads)"]
    versions.append(f"numpy {np.__version__} ({_blas_core()})")
    try:
        import torch

        torch.set_num_threads(threads)
        versions.append(f"torch {torch.__version__} ({torch.get_num_threads()} threads)")
    except ImportError:
        torch = None
        print("PyTorch is not installed: no torch columns (pip install torch==2.13.0)")
    jax_twins = None
    if not args.no_jax:
        if threads == 1:  # (XLA's CPU client reads its flags once, when JAX starts)
            flags = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
            os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {flags}".strip()
        try:
            import jax
            import zoo_jax as jax_twins

            versions.append(f"jax {jax.__version__} ({jax.devices()[0].platform})")
        except ImportError:
            print("JAX is not installed: no jax column (pip install -e '.[bench]')")
    header = cpu_header() + [", ".join(versions)]
    for line in header:
        print(line)
    clock = args.clock or default_clock(threads)
    stat = "best round's mean process-clock" if clock == "process" else "median wall-clock"
    print(f"{stat} ms per call; rounds {args.rounds}, ~{args.target} s per variant per round")
    ms_cols = "".join(f"{v:>10}" for v in VARIANTS)
    ratio_names = ("ember/torch", "fn/torch", "ember/comp", "fn/comp", "fn/jax")
    print(f"{'model':13}{'case':7}{ms_cols} |" + "".join(f"{r:>12}" for r in ratio_names))
    results = []
    for name in models:
        for which in cases:
            case = Case(name, which, torch, torch is not None and not args.no_compile, jax_twins)
            for flag, variant in ((args.no_compile, "compile"), (args.no_jax, "jax")):
                if flag:
                    case.notes.setdefault(variant, f"skipped (--no-{variant})")
            medians = case.time(args.rounds, args.target, args.settle, clock)
            ms = "".join(
                f"{medians[v] * 1e3:10.3f}" if v in medians else f"{'-':>10}" for v in VARIANTS
            )
            pairs = (
                ("ember", "torch"),
                ("ember fn", "torch"),
                ("ember", "compile"),
                ("ember fn", "compile"),
                ("ember fn", "jax"),
            )
            ratios = "".join(f"{_ratio(medians, a, b):>12}" for a, b in pairs)
            print(f"{name:13}{which:7}{ms} |{ratios}", flush=True)
            for variant in VARIANTS:
                if variant in case.notes and not case.notes[variant].startswith("skipped (--no-"):
                    print(f"{'':20}{variant}: {case.notes[variant]}")
            if case.first_call:
                calls = ", ".join(f"{k} {v:.2f} s" for k, v in case.first_call.items())
                print(f"{'':20}first call (trace/compile + 1 call): {calls}", flush=True)
            if args.profile:
                print(profile_case(case), flush=True)
            results.append(
                {
                    "model": name,
                    "case": which,
                    "batch": case.x.shape[0],
                    "seconds": medians,
                    "ratios": {f"{a}/{b}": medians[a] / medians[b] for a, b in pairs
                               if a in medians and b in medians},
                    "first_call_seconds": case.first_call,
                    "notes": case.notes,
                }
            )  # fmt: skip
    if args.json:
        with open(args.json, "w") as f:
            record = {"header": header, "clock": clock, "rounds": args.rounds}
            json.dump({**record, "results": results}, f, indent=1)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
