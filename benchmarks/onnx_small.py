"""Small ONNX models as PyTorch's exporter writes them, imported by ember against ONNX Runtime:
a BERT-like encoder (2 layers, d 64, 4 heads, 32 tokens, an additive padding mask: MatMul,
Div, Add, Softmax, MatMul around Reshape/Transpose, LayerNormalization, GELU from Erf), an MLP
(Gemm, Relu, GELU) and a small CNN (Conv, BatchNormalization, MaxPool, GlobalAveragePool,
Gemm), exported with ``torch.onnx.export`` (its TorchScript exporter, offline), and any
``--files`` given. One thread each, interleaved, per-thread CPU time (``time.thread_time``):
min and median of ``--rounds``. Ratios are ember's median over ORT's.

    EMBER_NUM_THREADS=1 python benchmarks/onnx_small.py [--rounds 7] [--files a.onnx,b.onnx]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))

from zoo import cpu_header  # noqa: E402

import ember  # noqa: E402


def _torch_models(folder: str) -> dict:
    import torch
    from torch import nn
    from torch.nn import functional as F

    class Bert(nn.Module):
        def __init__(self, d=64, heads=4, ff=256, layers=2):
            super().__init__()
            self.h, self.d = heads, d
            self.layers = nn.ModuleList()
            for _ in range(layers):
                m = nn.Module()
                m.q, m.k, m.v, m.o = (nn.Linear(d, d) for _ in range(4))
                m.ln1, m.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
                m.f1, m.f2 = nn.Linear(d, ff), nn.Linear(ff, d)
                self.layers.append(m)

        def split(self, x):
            b, n, _ = x.shape
            return x.view(b, n, self.h, self.d // self.h).permute(0, 2, 1, 3)

        def forward(self, x, mask):
            ext = (1.0 - mask[:, None, None, :]) * -10000.0
            for m in self.layers:
                q, k, v = self.split(m.q(x)), self.split(m.k(x)), self.split(m.v(x))
                scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.d // self.h)
                c = torch.matmul(torch.softmax(scores + ext, -1), v).permute(0, 2, 1, 3)
                c = c.contiguous().view(c.shape[0], c.shape[1], self.d)
                x = m.ln1(x + m.o(c))
                x = m.ln2(x + m.f2(F.gelu(m.f1(x))))
            return x

    mlp = nn.Sequential(
        nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.GELU(), nn.Linear(128, 10)
    )
    cnn = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(32, 10),
    )  # fmt: skip
    torch.manual_seed(0)
    mask = torch.ones(1, 32)
    mask[0, 28:] = 0
    cases = {
        "bert-like": (Bert(), (torch.randn(1, 32, 64), mask)),
        "mlp": (mlp, (torch.randn(8, 64),)),
        "cnn": (cnn, (torch.randn(1, 3, 32, 32),)),
    }
    paths = {}
    for name, (model, args) in cases.items():
        path = os.path.join(folder, f"{name}.onnx")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(model.eval(), args, path, dynamo=False, opset_version=17)
        paths[name] = (path, [a.numpy() for a in args])
    return paths


def _inputs(model, seed: int = 0) -> list:
    import onnx

    rng = np.random.default_rng(seed)
    inits = {i.name for i in model.graph.initializer}
    arrays = []
    for vi in model.graph.input:
        if vi.name not in inits:
            tt = vi.type.tensor_type
            shape = [d.dim_value for d in tt.shape.dim]
            dtype = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)
            arrays.append(rng.standard_normal(shape).astype(dtype))
    return arrays


def _time(fn, calls: int) -> float:
    start = time.thread_time()
    for _ in range(calls):
        fn()
    return (time.thread_time() - start) / calls


def bench(label: str, path: str, arrays: list | None, rounds: int) -> None:
    import onnx
    import onnxruntime as ort

    data = onnx.load(path).SerializeToString()
    arrays = arrays if arrays is not None else _inputs(onnx.load(path))
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3
    session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
    feeds = dict(zip([i.name for i in session.get_inputs()], arrays))
    function = ember.onnx.load(data)
    tensors = [ember.tensor(a) for a in arrays]
    theirs = session.run(None, feeds)[0]
    ours = function(*tensors)
    ours = (ours[0] if isinstance(ours, tuple) else ours).numpy()
    err = float(np.max(np.abs(ours - theirs))) / (float(np.max(np.abs(theirs))) or 1.0)
    calls = max(3, min(200, int(0.01 / max(_time(lambda: session.run(None, feeds), 3), 1e-6))))
    sides = {"ember": lambda: function(*tensors), "ort": lambda: session.run(None, feeds)}
    times = {k: [] for k in sides}
    for _ in range(rounds):
        for key, run in sides.items():
            times[key].append(_time(run, calls))
    cells = "  ".join(
        f"{k} min {min(v) * 1e6:7.0f} med {statistics.median(v) * 1e6:7.0f} us"
        for k, v in times.items()
    )
    ratio = statistics.median(times["ember"]) / statistics.median(times["ort"])
    print(f"{label:12s} {cells}  ember/ORT {ratio:.2f}  (max rel. diff {err:.1e})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--files", default="", help="more ONNX files, comma-separated")
    args = parser.parse_args()
    for line in cpu_header():
        print(line)
    print(f"ember {ember.get_num_threads()} threads, ONNX Runtime 1 thread; thread_time")
    with tempfile.TemporaryDirectory() as folder:
        try:
            models = _torch_models(folder)
        except Exception as err:  # noqa: BLE001 - reported: no torch, an exporter that fails
            print(f"torch.onnx.export skipped: {type(err).__name__}: {err}")
            models = {}
        for name, (path, arrays) in models.items():
            bench(name, path, arrays, args.rounds)
        for path in filter(None, args.files.split(",")):
            bench(os.path.basename(path), path, None, args.rounds)


if __name__ == "__main__":
    main()
