"""Convolution and pooling kernels of ember against PyTorch eager, measured in the same run.

Cases (float32, the shapes of the benchmark CNN: batch 64, 1x28x28, conv3x3 32 - ReLU - maxpool2 -
conv3x3 64 - ReLU - maxpool2 - ...):

* conv1: conv2d 1->32 3x3 with bias on 28x28, forward + backward (weight and bias gradients;
  the network input needs none)
* conv2: conv2d 32->64 3x3 with bias on 13x13, forward + backward (input gradient too)
* pool1 / pool2: max_pool2d 2 on 32x26x26 / 64x11x11, forward + backward
* pool3 / pool4: padded max_pool2d 3 (padding 1) as the inception block (8x32x16x16, stride 1)
  and a ResNet stem (16x64x56x56, stride 2) have it, forward + backward
* features: the whole conv - ReLU - pool - conv - ReLU - pool stack, forward + backward
* cnn step: the whole training step of that CNN (fc 1600-128-10, softmax cross-entropy written
  as logsumexp minus the target logit, SGD momentum 0.9 written with in-place ops), composed
  from functional ops the same way in both frameworks

Prints one row per case: ember's median time, PyTorch's, and the ratio ember / PyTorch. Rounds
alternate between the two frameworks so that machine noise hits both alike; each round starts
after a pause and a few untimed calls, so that neither pays for the other's spinning threads.

    python benchmarks/conv_pool.py [--reps 30] [--rounds 4]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import ember
import ember.nn.functional as F

try:
    import torch
    import torch.nn.functional as TF
except ImportError:
    torch = None


def _cases(rng):
    def conv(n, c, size, cout, input_grad):
        x = rng.standard_normal((n, c, size, size), dtype=np.float32)
        w = rng.standard_normal((cout, c, 3, 3), dtype=np.float32) * 0.1
        b = rng.standard_normal(cout, dtype=np.float32)
        g = rng.standard_normal((n, cout, size - 2, size - 2), dtype=np.float32)
        return (x, w, b, g), input_grad

    def pool(n, c, size):
        x = rng.standard_normal((n, c, size, size), dtype=np.float32)
        g = rng.standard_normal((n, c, size // 2, size // 2), dtype=np.float32)
        return (x, g), True

    def padded_pool(n, c, size, stride):
        x = rng.standard_normal((n, c, size, size), dtype=np.float32)
        out = (size + 2 - 3) // stride + 1
        g = rng.standard_normal((n, c, out, out), dtype=np.float32)
        return (x, g, stride), True

    yield "conv1 64x1x28x28 -> 32", "conv", conv(64, 1, 28, 32, False)
    yield "conv2 64x32x13x13 -> 64", "conv", conv(64, 32, 13, 64, True)
    yield "pool1 64x32x26x26", "pool", pool(64, 32, 26)
    yield "pool2 64x64x11x11", "pool", pool(64, 64, 11)
    yield "pool3 8x32x16x16 3x3 pad 1", "padded pool", padded_pool(8, 32, 16, 1)
    yield "pool4 16x64x56x56 3x3/2 pad 1", "padded pool", padded_pool(16, 64, 56, 2)
    x = rng.standard_normal((64, 1, 28, 28), dtype=np.float32)
    w1 = rng.standard_normal((32, 1, 3, 3), dtype=np.float32) * 0.3
    w2 = rng.standard_normal((64, 32, 3, 3), dtype=np.float32) * 0.1
    b1 = rng.standard_normal(32, dtype=np.float32) * 0.1
    b2 = rng.standard_normal(64, dtype=np.float32) * 0.1
    g = rng.standard_normal((64, 64, 5, 5), dtype=np.float32)
    yield "features conv-relu-pool x2", "features", ((x, w1, b1, w2, b2, g), False)
    fc1 = rng.standard_normal((128, 1600), dtype=np.float32) * 0.02
    fc2 = rng.standard_normal((10, 128), dtype=np.float32) * 0.1
    c1 = rng.standard_normal(128, dtype=np.float32) * 0.1
    c2 = rng.standard_normal(10, dtype=np.float32) * 0.1
    target = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 64)]
    params = (w1, b1, w2, b2, fc1, c1, fc2, c2)
    yield "cnn step (fc, loss, SGD)", "step", ((x, target) + params, False)


def _step(lib, kind, arrays, input_grad):
    if lib == "ember":
        conv, pool, relu = F.conv2d, F.max_pool2d, F.relu

        def tensor(a, grad=False):
            return ember.tensor(a, requires_grad=grad)
    else:
        conv, pool, relu = TF.conv2d, TF.max_pool2d, TF.relu

        def tensor(a, grad=False):
            return torch.tensor(a, requires_grad=grad)

    if kind == "conv":
        x, w, b, g = arrays
        x, w, b, g = tensor(x, input_grad), tensor(w, True), tensor(b, True), tensor(g)
        return lambda: conv(x, w, b).backward(g)
    if kind == "pool":
        x, g = arrays
        x, g = tensor(x, True), tensor(g)
        return lambda: pool(x, 2).backward(g)
    if kind == "padded pool":
        x, g, stride = arrays
        x, g = tensor(x, True), tensor(g)
        return lambda: pool(x, 3, stride=stride, padding=1).backward(g)
    if kind == "features":
        x, w1, b1, w2, b2, g = arrays
        x, g = tensor(x), tensor(g)
        w1, b1, w2, b2 = (tensor(a, True) for a in (w1, b1, w2, b2))

        def features():
            h = pool(relu(conv(x, w1, b1)), 2)
            pool(relu(conv(h, w2, b2)), 2).backward(g)

        return features
    return _train_step(lib, arrays, tensor, conv, pool, relu)


def _train_step(lib, arrays, tensor, conv, pool, relu):
    x, target = tensor(arrays[0]), tensor(arrays[1])
    params = [tensor(a.copy(), True) for a in arrays[2:]]
    momenta = [tensor(np.zeros_like(a)) for a in arrays[2:]]
    w1, b1, w2, b2, fc1, c1, fc2, c2 = params
    if lib == "ember":
        linear, logsumexp, no_grad = F.linear, ember.logsumexp, ember.no_grad
    else:
        linear, logsumexp, no_grad = TF.linear, torch.logsumexp, torch.no_grad

    def step():
        for p in params:
            p.grad = None
        h = pool(relu(conv(x, w1, b1)), 2)
        h = pool(relu(conv(h, w2, b2)), 2)
        z = linear(relu(linear(h.reshape(64, 1600), fc1, c1)), fc2, c2)
        loss = (logsumexp(z, 1) - (z * target).sum(1)).mean()
        loss.backward()
        with no_grad():
            for p, m in zip(params, momenta):
                m.mul_(0.9).add_(p.grad)
                p.sub_(m * 0.01)

    return step


def _median(step, reps: int) -> list[float]:
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=30, help="timed calls per round")
    parser.add_argument("--rounds", type=int, default=4, help="alternating rounds per framework")
    args = parser.parse_args()
    if torch is None:
        print("PyTorch is not installed: printing ember's times only")
    rng = np.random.default_rng(0)
    print(f"{'case':32s} {'ember ms':>9s} {'torch ms':>9s} {'ratio':>6s}")
    for name, kind, (arrays, input_grad) in _cases(rng):
        libs = ["ember"] + (["torch"] if torch is not None else [])
        steps = {lib: _step(lib, kind, arrays, input_grad) for lib in libs}
        times = {lib: [] for lib in libs}
        for _ in range(args.rounds):
            for lib in libs:
                # let the other library's worker threads (OpenBLAS, OpenMP) go idle first:
                # while they spin they steal the two cores from this one
                time.sleep(0.2)
                _median(steps[lib], 3)
                times[lib] += _median(steps[lib], args.reps)
        e = statistics.median(times["ember"]) * 1e3
        if torch is None:
            print(f"{name:32s} {e:9.2f}")
            continue
        t = statistics.median(times["torch"]) * 1e3
        print(f"{name:32s} {e:9.2f} {t:9.2f} {e / t:6.2f}")


if __name__ == "__main__":
    main()
