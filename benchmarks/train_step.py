"""Eager training-step time of ember against PyTorch eager, measured in the same run.

Cases (float32):
* mlp: batch 128, 784-512-512-10, ReLU, cross-entropy, SGD
* cnn: batch 64, 1x28x28, conv3x3 32 - ReLU - maxpool2 - conv3x3 64 - ReLU - maxpool2 - fc 128 -
  ReLU - fc 10, cross-entropy, SGD momentum 0.9

Prints one row per case: ember's median step time, PyTorch's, and the ratio ember / PyTorch
(target: at most 1.3). Both frameworks start from the same weights and data; the script checks
that their first-step losses agree, so the two sides do the same work.

    python benchmarks/train_step.py [--steps 50] [--warmup 3] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import ember
from ember import models, nn


def _time_interleaved(steps_by_name: dict, steps: int, warmup: int, rounds: int) -> dict:
    """Median step time of each framework, alternating between them in ``rounds`` rounds.

    Alternating (each round warms up again) spreads the shared machine's noise over both sides
    and lets each library's thread pool settle after the other one ran.
    """
    times = {name: [] for name in steps_by_name}
    per_round = max(1, steps // rounds)
    for _ in range(rounds):
        for name, step in steps_by_name.items():
            for _ in range(warmup):
                step()
            for _ in range(per_round):
                start = time.perf_counter()
                step()
                times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def _cases():
    rng = np.random.default_rng(0)
    yield (
        "mlp",
        lambda: models.mlp(784, 512, 10),
        rng.standard_normal((128, 784)),
        rng.integers(0, 10, 128),
        0.0,
    )
    yield (
        "cnn",
        lambda: models.cnn(1, 28, 10),
        rng.standard_normal((64, 1, 28, 28)),
        rng.integers(0, 10, 64),
        0.9,
    )


def _ember_step(model, x, y, momentum):
    opt = ember.optim.SGD(model.parameters(), lr=0.01, momentum=momentum)
    xs, ys = ember.tensor(x, dtype=ember.float32), ember.tensor(y)

    def step():
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(xs), ys)
        loss.backward()
        opt.step()
        return loss

    return step


def _torch_model(name, ember_model):
    import torch

    layers = []
    for layer in ember_model:
        kind = type(layer).__name__
        if kind == "Linear":
            layers.append(torch.nn.Linear(layer.in_features, layer.out_features))
        elif kind == "Conv2d":
            layers.append(
                torch.nn.Conv2d(
                    layer.in_channels, layer.out_channels, layer.kernel_size, padding=layer.padding
                )
            )
        elif kind == "MaxPool2d":
            layers.append(torch.nn.MaxPool2d(layer.kernel_size))
        elif kind == "ReLU":
            layers.append(torch.nn.ReLU())
        elif kind == "Flatten":
            layers.append(torch.nn.Flatten())
        else:
            raise TypeError(f"{name}: no PyTorch twin for {kind}")
    model = torch.nn.Sequential(*layers)
    model.load_state_dict(
        {k: torch.from_numpy(v.numpy().copy()) for k, v in ember_model.state_dict().items()}
    )
    return model


def _torch_step(model, x, y, momentum):
    import torch

    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=momentum)
    xs = torch.tensor(x, dtype=torch.float32)
    ys = torch.tensor(y)

    def step():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(xs), ys)
        loss.backward()
        opt.step()
        return loss

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps before each round")
    parser.add_argument("--rounds", type=int, default=5, help="alternations between the sides")
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        torch = None
        print(
            "PyTorch is not installed: printing ember's times only "
            "(pip install torch==2.13.0 for the comparison)"
        )
    if torch is not None:
        print(
            f"torch {torch.__version__}, {torch.get_num_threads()} threads; numpy {np.__version__}"
        )
    print(f"{'case':6} {'ember ms':>10} {'torch ms':>10} {'ratio':>7}")
    for name, build, x, y, momentum in _cases():
        ember.manual_seed(0)
        model = build()
        ember_step = _ember_step(model, x, y, momentum)
        torch_step = None
        if torch is not None:
            torch_step = _torch_step(_torch_model(name, model), x, y, momentum)
            first = float(ember_step().item()), float(torch_step().item())
            if abs(first[0] - first[1]) > 1e-4 * max(1.0, abs(first[1])):
                raise SystemExit(f"{name}: first-step losses differ {first}; not the same work")
        sides = {"ember": ember_step} | ({} if torch_step is None else {"torch": torch_step})
        medians = _time_interleaved(sides, args.steps, args.warmup, args.rounds)
        ours = medians["ember"]
        if torch_step is None:
            print(f"{name:6} {ours * 1e3:10.2f} {'-':>10} {'-':>7}")
            continue
        theirs = medians["torch"]
        print(f"{name:6} {ours * 1e3:10.2f} {theirs * 1e3:10.2f} {ours / theirs:7.2f}")


if __name__ == "__main__":
    main()
