"""Eager training steps of the zoo models against PyTorch eager, in process CPU time.

Each case builds a zoo model (ember.zoo) over ember and over torch with the same initial
weights (``zoo.copy_weights``) and times its training step: zero_grad, forward, cross-entropy,
backward, optimizer step. The two sides alternate round by round, each timed by
``time.process_time`` (CPU time of the whole process, so a busy machine's other processes do
not count), one thread each; medians over rounds. ``--parts`` also splits the step into its
five phases, which shows where a small model's per-op overhead goes.

A name ``small_<model>`` uses the zoo spec's test sizes and batch: a model whose kernels take
almost no time, so the step is dispatch, tape and engine.

    python benchmarks/eager_steps.py [--cases mlp,unet,resnet18,vit,small_mlp] [--rounds 5]
                                     [--target 0.5] [--parts]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

import ember  # noqa: E402
from ember import zoo  # noqa: E402
from ember.kernels.cpool import cpu_model  # noqa: E402

PHASES = ("zero_grad", "forward", "loss", "backward", "step")


def _build(case: str, lib):
    name, small = (case[6:], True) if case.startswith("small_") else (case, False)
    spec = zoo.SPECS[name]
    sizes = spec.test_sizes if small else {}
    x, y = zoo.inputs(name, spec.test_batch if small else spec.train_batch, **sizes)
    model = zoo.build(name, lib, **sizes)
    return name, model, lib.tensor(x), lib.tensor(y)


def _step(lib, name, model, x, y, phases: dict | None):
    opt = zoo.optimizer(name, lib, model.parameters())
    clock = time.process_time

    def plain():
        opt.zero_grad()
        loss = zoo.loss(lib, model(x), y)
        loss.backward()
        opt.step()
        return loss

    def step():  # (the phases timed: five clock reads more per step)
        t0 = clock()
        opt.zero_grad()
        t1 = clock()
        out = model(x)
        t2 = clock()
        loss = zoo.loss(lib, out, y)
        t3 = clock()
        loss.backward()
        t4 = clock()
        opt.step()
        for phase, took in zip(PHASES, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, clock() - t4)):
            phases[phase].append(took)
        return loss

    return plain if phases is None else step


def run_case(case: str, rounds: int, target: float, parts: bool) -> None:
    name, em, ex, ey = _build(case, ember)
    _, tm, tx, ty = _build(case, torch)
    zoo.copy_weights(em, tm)
    phases = {side: {p: [] for p in PHASES} for side in ("ember", "torch")}
    steps = {
        "ember": _step(ember, name, em, ex, ey, phases["ember"] if parts else None),
        "torch": _step(torch, name, tm, tx, ty, phases["torch"] if parts else None),
    }
    first = [float(steps[side]().item()) for side in ("ember", "torch")]
    if abs(first[0] - first[1]) > 1e-3 * max(1.0, abs(first[1])):
        print(f"{case:16s} first losses differ: ember {first[0]}, torch {first[1]}")
        return
    per_step = {"ember": [], "torch": []}
    for r in range(rounds):
        order = ("ember", "torch") if r % 2 == 0 else ("torch", "ember")
        for side in order:
            steps[side]()  # (warm)
            calls, start = 0, time.process_time()
            while True:
                steps[side]()
                calls += 1
                spent = time.process_time() - start
                if spent >= target:
                    break
            per_step[side].append(spent / calls)
    e, t = (statistics.median(per_step[s]) * 1e3 for s in ("ember", "torch"))
    print(f"{case:16s} ember {e:9.3f} ms  torch {t:9.3f} ms  ember/torch {e / t:5.2f}")
    if parts:
        for phase in PHASES:
            pe, pt = (statistics.median(phases[s][phase]) * 1e6 for s in ("ember", "torch"))
            print(
                f"  {phase:10s} ember {pe:9.1f} us  torch {pt:9.1f} us  {pe / max(pt, 1e-9):5.2f}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="mlp,unet,resnet18,vit,small_mlp,small_vit")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--target", type=float, default=0.5, help="CPU seconds per side a round")
    parser.add_argument("--parts", action="store_true", help="time the step's five phases")
    args = parser.parse_args()
    torch.set_num_threads(1)
    ember.set_num_threads(1)
    print(f"CPU: {cpu_model()}; one thread each; process CPU time")
    for case in args.cases.split(","):
        run_case(case.strip(), args.rounds, args.target, args.parts)


if __name__ == "__main__":
    main()
