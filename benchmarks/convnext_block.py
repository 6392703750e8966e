"""A ConvNeXt block's training step, ember eager against PyTorch eager, one thread each.

The block (ConvNeXt's: a 7x7 depthwise convolution, LayerNorm over the channels in
channels-last order, Linear to 4x the channels, GELU, Linear back, a layer scale, the
residual) is built once from one source over ember and over torch, with the same weights.
A step: forward, a mean-square loss, backward (the input's gradient too), SGD. Stages of
ConvNeXt-T: 192 channels on 28x28, 384 on 14x14, 768 on 7x7. Times are process CPU time
(``time.process_time``), best of ``--rounds`` interleaved rounds. The column "rows" is
ember with its depthwise convolutions kept on kernels/cdepthwise.py's row-wide kernels (the
channels-wide ones of kernels/cdepthwise_wide.py never chosen), timed in the same rounds: a
before and after.

    python benchmarks/convnext_block.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("EMBER_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

import ember  # noqa: E402

# name: (batch, channels, size)
STAGES = {"c192 28x28 b8": (8, 192, 28), "c384 14x14 b8": (8, 384, 14), "c768 7x7 b8": (8, 768, 7)}


def block(lib, channels: int):
    """The block's modules over ``lib`` (ember or torch) and its forward."""
    nn = lib.nn
    dw = nn.Conv2d(channels, channels, 7, padding=3, groups=channels)
    norm = nn.LayerNorm(channels, eps=1e-6)
    up, down = nn.Linear(channels, 4 * channels), nn.Linear(4 * channels, channels)
    scale = nn.Parameter(lib.full((channels,), 1e-6 * 1e5))
    modules = [dw, norm, up, down]

    def forward(x):
        y = dw(x).permute(0, 2, 3, 1)
        y = down(nn.functional.gelu(up(norm(y)))) * scale
        return x + y.permute(0, 3, 1, 2)

    params = [p for m in modules for p in m.parameters()] + [scale]
    return forward, params


def _twins(channels: int):
    ef, ep = block(ember, channels)
    tf, tp = block(torch, channels)
    with torch.no_grad():
        for e, t in zip(ep, tp):
            t.copy_(torch.from_numpy(e.detach().numpy().copy()))
    return (ef, ep), (tf, tp)


def _step(lib, forward, params, opt, x, target):
    opt.zero_grad()
    loss = ((forward(x) - target) ** 2).mean()
    loss.backward()
    opt.step()
    return loss


def main() -> None:
    from ember.kernels import cdepthwise_wide

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    ember.set_num_threads(1)
    torch.set_num_threads(1)
    counted = cdepthwise_wide.wins

    def rows_only(*_):
        return False

    rng = np.random.default_rng(0)
    print(f"{'stage':16s} {'ember ms':>9s} {'rows ms':>9s} {'torch ms':>9s}  e/t  rows/t")
    for name, (n, c, size) in STAGES.items():
        (ef, ep), (tf, tp) = _twins(c)
        x = rng.standard_normal((n, c, size, size)).astype(np.float32)
        target = rng.standard_normal(x.shape).astype(np.float32)
        eopt = ember.optim.SGD(ep, lr=1e-3)
        topt = torch.optim.SGD(tp, lr=1e-3)
        # (the input's gradient too, as a block inside a network needs it)
        ex, et = ember.tensor(x, requires_grad=True), ember.tensor(target)
        tx, tt = torch.tensor(x, requires_grad=True), torch.from_numpy(target)
        el = _step(ember, ef, ep, eopt, ex, et).item()
        tl = _step(torch, tf, tp, topt, tx, tt).item()
        assert abs(el - tl) <= 1e-3 * abs(tl), (el, tl)
        variants = {
            "ember": (counted, lambda: _step(ember, ef, ep, eopt, ex, et)),
            "rows": (rows_only, lambda: _step(ember, ef, ep, eopt, ex, et)),
            "torch": (counted, lambda: _step(torch, tf, tp, topt, tx, tt)),
        }
        times = {side: [] for side in variants}
        for _ in range(args.rounds):
            for side, (choice, call) in variants.items():
                cdepthwise_wide.wins = choice
                call()  # (a warm-up call: this choice's kernels loaded)
                start = time.process_time()
                for _ in range(3):
                    call()
                times[side].append((time.process_time() - start) / 3 * 1e3)
        cdepthwise_wide.wins = counted
        e, r, t = (min(times[side]) for side in variants)
        print(f"{name:16s} {e:9.2f} {r:9.2f} {t:9.2f}  {e / t:4.2f} {r / t:6.2f}", flush=True)


if __name__ == "__main__":
    main()
