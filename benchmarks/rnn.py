"""LSTM and GRU language models: training step and inference, ember eager / ``ember.function``
against PyTorch eager, interleaved in one process (medians of rounds, ratios to PyTorch).

The model (the same weights on every side): Embedding(vocab, embed) -> LSTM or GRU (hidden,
``--layers`` layers) -> Linear(hidden, vocab), cross-entropy over every position, SGD (lr 0.1).
Inputs are token ids of shape (steps, batch) (time-major, PyTorch's default layout).

    python benchmarks/rnn.py [--cases lstm,gru] [--batch 32] [--steps 32] [--hidden 256]
                             [--rounds 7] [--iters 5] [--profile] [--clock wall|cpu]

``--profile`` prints ember.profiler's per-op table of one eager training step per case.
Before timing, every side's first loss is checked against ember eager's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time

import numpy as np

import ember
from ember import nn


def _cpu() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    except OSError:
        return "unknown CPU"
    for line in out.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


def _model(lib, kind: str, vocab: int, embed: int, hidden: int, layers: int):
    rnn = getattr(lib, kind.upper())

    class LM(lib.Module):
        def __init__(self):
            super().__init__()
            self.embed = lib.Embedding(vocab, embed)
            self.rnn = rnn(embed, hidden, layers)
            self.head = lib.Linear(hidden, vocab)

        def forward(self, tokens):
            out, _ = self.rnn(self.embed(tokens))
            return self.head(out)

    return LM()


def _steps(kind, args, tokens, targets):
    """(name, train step, inference) for each side, all from the same initial weights."""
    import torch

    torch.set_num_threads(int(os.environ.get("EMBER_NUM_THREADS", "2")))
    shape = (args.vocab, args.embed, args.hidden, args.layers)
    ember.manual_seed(0)
    e_model = _model(nn, kind, *shape)
    weights = {k: v.numpy().copy() for k, v in e_model.state_dict().items()}
    f_model = _model(nn, kind, *shape)
    f_model.load_state_dict({k: ember.tensor(v) for k, v in weights.items()})
    t_model = _model(torch.nn, kind, *shape)
    t_model.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in weights.items()})

    def ember_side(model):
        opt = ember.optim.SGD(model.parameters(), lr=0.1)
        x, y = ember.tensor(tokens), ember.tensor(targets)

        def train():
            opt.zero_grad()
            out = model(x)
            loss = nn.functional.cross_entropy(out.reshape(-1, args.vocab), y.reshape(-1))
            loss.backward()
            opt.step()
            return loss

        def infer():
            with ember.no_grad():
                return model(x)

        return train, infer

    def torch_side(model):
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x, y = torch.from_numpy(tokens), torch.from_numpy(targets)

        def train():
            opt.zero_grad()
            out = model(x)
            loss = torch.nn.functional.cross_entropy(out.reshape(-1, args.vocab), y.reshape(-1))
            loss.backward()
            opt.step()
            return loss

        def infer():
            with torch.no_grad():
                return model(x)

        return train, infer

    e_train, e_infer = ember_side(e_model)
    f_train, f_infer = ember_side(f_model)
    t_train, t_infer = torch_side(t_model)
    sides = [("ember", e_train, e_infer), ("torch", t_train, t_infer)]
    try:
        f_train, f_infer = ember.function(f_train), ember.function(f_infer)
        sides.insert(1, ("ember fn", f_train, f_infer))
    except Exception as error:  # noqa: BLE001  (reported, the other sides still run)
        print(f"  ember.function failed: {type(error).__name__}: {error}")
    return sides, e_model


def _time(fn, iters: int, clock) -> float:
    start = clock()
    for _ in range(iters):
        fn()
    return (clock() - start) / iters


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="lstm,gru")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--embed", type=int, default=128)
    parser.add_argument("--vocab", type=int, default=1000)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="cpu: the process's CPU time (robust on a loaded machine with EMBER_NUM_THREADS=1; "
        "with more threads it counts every thread's work, spinning included)",
    )
    args = parser.parse_args()
    clock = time.perf_counter if args.clock == "wall" else time.process_time
    threads = os.environ.get("EMBER_NUM_THREADS", "2")
    print(f"CPU: {_cpu()}; load: {os.getloadavg()[0]:.2f}; threads {threads}; {args.clock} clock")
    print(
        f"batch {args.batch}, steps {args.steps}, embed {args.embed}, hidden {args.hidden}, "
        f"layers {args.layers}, vocab {args.vocab}, float32"
    )
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, args.vocab, (args.steps, args.batch))
    targets = rng.integers(0, args.vocab, (args.steps, args.batch))
    for kind in args.cases.split(","):
        sides, e_model = _steps(kind, args, tokens, targets)
        losses = {name: float(train().item()) for name, train, _ in sides}
        for name, loss in losses.items():
            if abs(loss - losses["ember"]) > 1e-4 * abs(losses["ember"]):
                print(f"  {kind}: {name}'s first loss {loss} differs from ember's")
        for _, train, infer in sides:  # warm up (traces, compiles)
            train(), infer()
        for what, index in (("train", 1), ("infer", 2)):
            times: dict[str, list[float]] = {side[0]: [] for side in sides}
            for _ in range(args.rounds):
                for side in sides:
                    times[side[0]].append(_time(side[index], args.iters, clock))
            med = {name: statistics.median(ts) for name, ts in times.items()}
            cells = "  ".join(f"{name} {med[name] * 1e3:8.2f} ms" for name in med)
            ratios = "  ".join(
                f"{name}/torch {med[name] / med['torch']:.2f}x" for name in med if name != "torch"
            )
            print(f"{kind:4s} {what}: {cells}  |  {ratios}")
        if args.profile:
            train = sides[0][1]
            with ember.profiler.profile() as prof:
                train()
            print(prof.table(row_limit=15))


if __name__ == "__main__":
    main()
