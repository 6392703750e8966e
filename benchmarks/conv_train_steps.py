"""Convolutional training steps, ember (``ember.function``) against PyTorch eager: process CPU
time of one step, the best of ``--rounds`` interleaved rounds, on one thread (``--threads``).

Cases: the zoo's models (benchmarks/zoo.py's ``train`` case, e.g. ``resnet18``: batch 64, width
16, SGD with momentum; ``unet``, ``mobilenet_v2``), and ResNet-50-like bottleneck blocks without
batch norm (biases instead, as a network whose batch norms are folded trains): a downsampling
block (1x1 - 3x3 stride 2 - 1x1, the strided 1x1 shortcut with its bias, the sum and ReLU) and an
identity block, 64 -> 256 channels on 16x16 planes, batch 16, then global average pooling and a
linear layer.
The first call of each variant (tracing, compiling, calibrating) is not timed; the two
frameworks' first losses are compared before timing.

    python benchmarks/conv_train_steps.py [--cases resnet18,bottleneck] [--rounds 5]
"""

from __future__ import annotations

import argparse
import subprocess
import time

import numpy as np

import ember
from ember import zoo


def _bottleneck_net(lib, width=64, out=256):
    nn, F = lib.nn, lib.nn.functional

    class Bottleneck(nn.Module):
        def __init__(self, cin, mid, cout, stride):
            super().__init__()
            self.a = nn.Conv2d(cin, mid, 1)
            self.b = nn.Conv2d(mid, mid, 3, stride=stride, padding=1)
            self.c = nn.Conv2d(mid, cout, 1)
            self.short = nn.Conv2d(cin, cout, 1, stride=stride) if stride > 1 else None

        def forward(self, x):
            y = self.c(F.relu(self.b(F.relu(self.a(x)))))
            return F.relu(y + (self.short(x) if self.short is not None else x))

    return nn.Sequential(
        Bottleneck(width, width // 2, out, 2),
        Bottleneck(out, width // 2, out, 1),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(out, 10),
    )


def _case(name: str, torch):
    """(ember model, torch model, input array, labels, optimizer factory args)."""
    if name in zoo.SPECS:
        spec = zoo.SPECS[name]
        x, y = zoo.inputs(name, spec.train_batch, seed=0)
        ember.manual_seed(0)
        mine = zoo.build(name, ember)
        theirs = zoo.build(name, torch)
        zoo.copy_weights(mine, theirs)
        return mine, theirs, x, y, lambda lib, m: zoo.optimizer(name, lib, m.parameters())
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 64, 32, 32)).astype(np.float32)
    y = rng.integers(0, 10, 16)
    ember.manual_seed(0)
    mine, theirs = _bottleneck_net(ember), _bottleneck_net(torch)
    with torch.no_grad():
        for a, b in zip(mine.parameters(), theirs.parameters()):
            b.copy_(torch.from_numpy(a.detach().numpy()))
    return mine, theirs, x, y, lambda lib, m: lib.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)


def _step(lib, model, opt, x, y):
    def step():
        opt.zero_grad()
        loss = zoo.loss(lib, model(x), y)
        loss.backward()
        opt.step()
        return loss

    return step


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", default="resnet18,bottleneck")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    ember.set_num_threads(args.threads)
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    print(next((line for line in lscpu.splitlines() if "Model name" in line), "CPU: ?"))
    print(f"{args.threads} thread(s); process CPU time per step, best of {args.rounds} rounds")
    for name in args.cases.split(","):
        mine, theirs, x, y, make_opt = _case(name, torch)
        ours = ember.function(
            _step(ember, mine, make_opt(ember, mine), ember.tensor(x), ember.tensor(y))
        )
        peer = _step(torch, theirs, make_opt(torch, theirs), torch.from_numpy(x), torch.tensor(y))
        first = float(ours().item()), float(peer().item())
        assert abs(first[0] - first[1]) <= 1e-3 * max(1.0, abs(first[1])), first
        best = {"ember fn": float("inf"), "torch": float("inf")}
        for r in range(args.rounds):
            order = [("ember fn", ours), ("torch", peer)]
            for label, fn in order if r % 2 == 0 else order[::-1]:
                start = time.process_time()
                fn()
                best[label] = min(best[label], time.process_time() - start)
        ratio = best["ember fn"] / best["torch"]
        print(
            f"{name:12s} ember fn {best['ember fn'] * 1e3:8.1f} ms   torch "
            f"{best['torch'] * 1e3:8.1f} ms   ember/torch {ratio:.2f}"
        )


if __name__ == "__main__":
    main()
