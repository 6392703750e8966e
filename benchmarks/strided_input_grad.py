"""The input gradients of the zoo's stride-2 convolutions (kernels/cconv_phases.py: phase by
phase) against PyTorch's, one thread each, alternating call by call, in per-thread CPU time
(``time.thread_time``: a shared machine's other processes do not count).

ResNet-18 (base width 16, batch 64): the 3x3 stride-2 convolutions of stages 2-4 and two 1x1
stride-2 shortcuts; U-Net (width 16, batch 8): its two 3x3 stride-2 downsamplings and the 2x2
stride-2 transposed convolution (whose forward is this input gradient). Prints min/median ms
of each side, the ratio of medians ember / torch and the largest difference relative to
PyTorch's largest value.

    EMBER_NUM_THREADS=1 python benchmarks/strided_input_grad.py [--reps 30]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("EMBER_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from ember.ops.conv import CONV_INPUT_GRAD  # noqa: E402

# name (gx -> gy of the forward layer): (cin, size, cout, kernel, stride, padding, batch)
CASES = {
    "resnet18 16x32x32->32x16x16 3x3/2": (16, 32, 32, 3, 2, 1, 64),
    "resnet18 32x16x16->64x8x8 3x3/2": (32, 16, 64, 3, 2, 1, 64),
    "resnet18 64x8x8->128x4x4 3x3/2": (64, 8, 128, 3, 2, 1, 64),
    "resnet18 16x32x32->32x16x16 1x1/2": (16, 32, 32, 1, 2, 0, 64),
    "resnet18 64x8x8->128x4x4 1x1/2": (64, 8, 128, 1, 2, 0, 64),
    "unet 16x64x64->32x32x32 3x3/2": (16, 64, 32, 3, 2, 1, 8),
    "unet 32x32x32->64x16x16 3x3/2": (32, 32, 64, 3, 2, 1, 8),
    "unet transposed 64x16x16->32x32x32 2x2/2": (32, 32, 64, 2, 2, 0, 8),
}


def _time(fn) -> float:
    start = time.thread_time()
    fn()
    return time.thread_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=30)
    args = parser.parse_args()
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    for name, (cin, size, cout, k, s, pad, n) in CASES.items():
        out = (size + 2 * pad - k) // s + 1
        w = (rng.standard_normal((cout, cin, k, k)) * 0.1).astype(np.float32)
        gy = rng.standard_normal((n, cout, out, out)).astype(np.float32)
        attrs = dict(stride=(s, s), padding=((pad, pad),) * 2, dilation=(1, 1), groups=1)
        tw, tg, tx = torch.from_numpy(w), torch.from_numpy(gy), torch.empty(n, cin, size, size)

        def ember_fn():
            return CONV_INPUT_GRAD.run(gy, w, in_size=(size, size), **attrs)

        def torch_fn():
            mask = (True, False, False)
            return torch.ops.aten.convolution_backward(
                tg, tx, tw, None, [s, s], [pad, pad], [1, 1], False, [0, 0], 1, mask
            )[0]

        ref = torch_fn().numpy()
        err = np.abs(ember_fn() - ref).max() / np.abs(ref).max()
        for _ in range(3):
            ember_fn(), torch_fn()
        te, tt = [], []
        for _ in range(args.reps):
            te.append(_time(ember_fn))
            tt.append(_time(torch_fn))
        me, mt = statistics.median(te), statistics.median(tt)
        print(
            f"{name:42s} ember {min(te) * 1e3:6.3f}/{me * 1e3:6.3f} ms  "
            f"torch {min(tt) * 1e3:6.3f}/{mt * 1e3:6.3f} ms  ember/torch {me / mt:.2f}  "
            f"rel. diff {err:.1e}"
        )


if __name__ == "__main__":
    main()
