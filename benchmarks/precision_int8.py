"""int8 against float32 on the same shapes, and what quantization costs in accuracy.

``python benchmarks/precision_int8.py [--rounds N] [--threads T] [--no-accuracy]``

Speed (medians of interleaved rounds, one process, the same thread count for every library):

* GEMM (a linear layer's ``x @ W.T``): ember float32 (``F.linear``, the weight a Parameter so
  ember may use its prepacked panels), ember int8 (the ``quantized_linear`` op on uint8 input:
  int32 sums and the float epilogue; and the whole `QuantizedLinear` layer from float input,
  which quantizes its input first), torch float32, and torch's dynamic int8 linear (fbgemm)
  where this torch has it;
* convolution (3x3 and 1x1, NCHW): ember float32 ``F.conv2d``, ember int8 (op and layer),
  torch float32, and torch's static int8 ``Conv2d`` (fbgemm) where available.

Ratios are float32 time over int8 time (above 1: int8 is faster). Accuracy: the Fashion-MNIST
CNN of tests/quantization/fashion.py, float and quantized with each calibration method and
float8 weights (needs the dataset in /usr/share/datasets/fashion-mnist).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ember  # noqa: E402
from ember import nn  # noqa: E402
from ember.kernels import cpool, cq8  # noqa: E402
from ember.quantization import (  # noqa: E402
    QuantizedConv2d,
    QuantizedLinear,
    quantized_conv2d,
    quantized_linear,
)

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None


def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name"):
                return line.split(":", 1)[1].strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    return cpool.cpu_model()


def median_times(fns: dict, rounds: int) -> dict:
    """{name: median seconds}, the functions run interleaved (one each per round)."""
    for fn in fns.values():
        fn()
    times = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return {name: statistics.median(ts) for name, ts in times.items()}


def _torch_dynamic_linear(w, b):
    if torch is None:
        return None
    try:
        lin = torch.nn.Linear(w.shape[1], w.shape[0])
        lin.weight.data = torch.tensor(w)
        lin.bias.data = torch.tensor(b)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return torch.ao.quantization.quantize_dynamic(
                torch.nn.Sequential(lin), {torch.nn.Linear}, dtype=torch.qint8
            )
    except Exception:  # noqa: BLE001 (a torch without quantized engines)
        return None


def gemm_rows(rounds: int):
    r = np.random.default_rng(0)
    rows = []
    for m, k, n in ((256, 1024, 1024), (1024, 256, 768), (128, 512, 512), (64, 4096, 1024)):
        x = r.standard_normal((m, k)).astype(np.float32)
        w = (r.standard_normal((n, k)) * 0.05).astype(np.float32)
        b = r.standard_normal(n).astype(np.float32)
        layer = nn.Linear(k, n)
        layer.weight = nn.Parameter(ember.tensor(w))
        layer.bias = nn.Parameter(ember.tensor(b))
        layer.eval()
        scale = float(np.abs(x).max() * 2 / 255)
        q = QuantizedLinear(layer, scale, 128)
        xe = ember.tensor(x)
        x8 = ember.quantize_per_tensor(xe, scale, 128, ember.uint8)
        fns = {
            "ember f32": lambda: nn.functional.linear(xe, layer.weight, layer.bias),
            "ember int8 op": lambda: quantized_linear(
                x8, q.weight, q.w_scale, q.bias, scale, 128
            ),  # fmt: skip
            "ember int8 layer": lambda: q(xe),
        }
        if torch is not None:
            xt, wt, bt = torch.tensor(x), torch.tensor(w), torch.tensor(b)
            fns["torch f32"] = lambda: torch.nn.functional.linear(xt, wt, bt)
            tq = _torch_dynamic_linear(w, b)
            if tq is not None:
                fns["torch int8 dyn"] = lambda: tq(xt)
        with ember.no_grad():
            rows.append((f"linear {m}x{k} -> {n}", median_times(fns, rounds)))
    return rows


def _torch_qconv(w, b, scale, zp, stride, padding):
    if torch is None:
        return None
    try:
        from torch.ao.nn.quantized import Conv2d as QConv

        o, c, kh, kw = w.shape
        conv = QConv(c, o, (kh, kw), stride=stride, padding=padding)
        wt = torch.tensor(w)
        ws = (wt.abs().amax(dim=(1, 2, 3)) / 127).double()
        wq = torch.quantize_per_channel(wt, ws, torch.zeros(o, dtype=torch.long), 0, torch.qint8)
        conv.set_weight_bias(wq, torch.tensor(b))
        conv.scale, conv.zero_point = 0.05, 0
        return conv
    except Exception:  # noqa: BLE001
        return None


def conv_rows(rounds: int):
    r = np.random.default_rng(1)
    rows = []
    for n, c, h, o, k in (
        (8, 64, 56, 64, 3),
        (32, 32, 28, 64, 3),
        (16, 128, 28, 128, 3),
        (8, 256, 14, 256, 3),
        (8, 64, 56, 256, 1),
    ):
        pad = k // 2
        x = r.random((n, c, h, h)).astype(np.float32)
        w = (r.standard_normal((o, c, k, k)) * 0.05).astype(np.float32)
        b = r.standard_normal(o).astype(np.float32)
        conv = nn.Conv2d(c, o, k, padding=pad).eval()
        conv.weight = nn.Parameter(ember.tensor(w))
        conv.bias = nn.Parameter(ember.tensor(b))
        scale = 1.0 / 255
        q = QuantizedConv2d(conv, scale, 0)
        xe = ember.tensor(x)
        x8 = ember.quantize_per_tensor(xe, scale, 0, ember.uint8)
        fns = {
            "ember f32": lambda: nn.functional.conv2d(xe, conv.weight, conv.bias, 1, pad),
            "ember int8 op": lambda: quantized_conv2d(
                x8, q.weight, q.w_scale, q.bias, scale, 0, padding=pad
            ),  # fmt: skip
            "ember int8 layer": lambda: q(xe),
        }
        if torch is not None:
            xt, wt, bt = torch.tensor(x), torch.tensor(w), torch.tensor(b)
            fns["torch f32"] = lambda: torch.nn.functional.conv2d(xt, wt, bt, 1, pad)
            tq = _torch_qconv(w, b, scale, 0, 1, pad)
            if tq is not None:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    xq = torch.quantize_per_tensor(xt, scale, 0, torch.quint8)
                fns["torch int8 op"] = lambda: tq(xq)
        with ember.no_grad():
            rows.append((f"conv {n}x{c}x{h}x{h} -> {o} {k}x{k}", median_times(fns, rounds)))
    return rows


def print_rows(title, rows):
    print(f"\n{title} (median ms; ratio = float32 time / int8 time)")
    for name, t in rows:
        cells = "  ".join(f"{k} {v * 1e3:8.3f}" for k, v in t.items())
        ratios = f"ember f32/int8 op {t['ember f32'] / t['ember int8 op']:.2f}x"
        ratios += f", ember f32/int8 layer {t['ember f32'] / t['ember int8 layer']:.2f}x"
        if "torch f32" in t:
            ratios += f", torch f32/ember int8 op {t['torch f32'] / t['ember int8 op']:.2f}x"
        for key in ("torch int8 dyn", "torch int8 op"):
            if key in t:
                ratios += f", torch f32/{key} {t['torch f32'] / t[key]:.2f}x"
        print(f"  {name}\n    {cells}\n    {ratios}")


def accuracy():
    from tests.quantization import fashion

    if not fashion.AVAILABLE:
        print(f"\naccuracy: skipped ({fashion.MISSING})")
        return
    model, xt, yt = fashion.trained()
    base = fashion.accuracy(model, xt, yt)
    print("\nFashion-MNIST CNN (400 Adam steps, 10000 test images): accuracy %")
    print(f"  float32            {base:6.2f}")
    calibration = fashion.calibration()
    for method in ("minmax", "percentile", "entropy"):
        q = ember.quantization.quantize(model, calibration, method=method)
        acc = fashion.accuracy(q, xt, yt)
        print(f"  int8 {method:<13} {acc:6.2f}  (loss {base - acc:+.2f} points)")
    for dtype in ("fp8_e4m3", "fp8_e5m2"):
        q = ember.quantization.quantize(model, calibration, weight_dtype=dtype)
        acc = fashion.accuracy(q, xt, yt)
        print(f"  {dtype:<18} {acc:6.2f}  (loss {base - acc:+.2f} points)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--threads", type=int, default=cpool.get_num_threads())
    parser.add_argument("--no-accuracy", action="store_true")
    args = parser.parse_args()
    ember.set_num_threads(args.threads)
    if torch is not None:
        torch.set_num_threads(args.threads)
    print(f"CPU: {cpu_model()}; threads: {args.threads}; ember int8 kernel: "
          f"{'AVX512-VNNI' if cq8.has_vnni() else 'portable loops'}")  # fmt: skip
    if torch is not None:
        print(f"torch {torch.__version__}, quantized engine {torch.backends.quantized.engine}")
    print_rows("GEMM", gemm_rows(args.rounds))
    print_rows("convolution", conv_rows(args.rounds))
    if not args.no_accuracy:
        accuracy()


if __name__ == "__main__":
    main()
