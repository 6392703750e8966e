"""Survey of single layers and functions, ember eager against PyTorch eager: forward and
backward (``out.sum().backward()``) of convolutions of every kind CNNs use (grouped, dilated,
1-D, 3-D, transposed, padding modes), norms, poolings, activations, attention, recurrent
layers, indexing and scans, at the sizes a small model's activations have, one thread each,
interleaved in one process (minimum over repeats, the least disturbed by other load). It
finds the eager kernels that fall behind (a ratio over 2 is flagged): where an op runs a slow
NumPy path (masked ufuncs, ``np.add.at`` over a whole axis, a transposed gather) or a
composite of many small ops.

    python benchmarks/op_survey.py [--cases conv,norm] [--threads 1]

Prints the CPU model in the header and, per case, PyTorch's and ember's milliseconds and the
ratio ember / torch (below 1: ember is faster).
"""

from __future__ import annotations

import argparse
import timeit

import numpy as np

import ember
from ember.kernels import cpool

try:
    import torch
except ImportError:  # pragma: no cover - the benchmark's peer
    torch = None

rng = np.random.default_rng(0)


def arr(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def fn(name, *extra, **kw):
    return lambda L: lambda *a: getattr(L.nn.functional, name)(*a, *extra, **kw)


CASES = {
    "conv2d_grouped g=4 64ch 16x16": (
        lambda L: L.nn.Conv2d(64, 64, 3, padding=1, groups=4),
        [arr(8, 64, 16, 16)],
    ),
    "conv2d_dilated d=2": (
        lambda L: L.nn.Conv2d(32, 32, 3, padding=2, dilation=2),
        [arr(8, 32, 16, 16)],
    ),
    "conv1d k=3 d=4 (wavenet)": (
        lambda L: L.nn.Conv1d(32, 32, 3, padding=4, dilation=4),
        [arr(8, 32, 256)],
    ),
    "conv1d k=7 (tcn)": (lambda L: L.nn.Conv1d(64, 64, 7, padding=3), [arr(8, 64, 128)]),
    "conv3d k=3": (lambda L: L.nn.Conv3d(8, 16, 3, padding=1), [arr(2, 8, 8, 16, 16)]),
    "convT2d g=2": (
        lambda L: L.nn.ConvTranspose2d(32, 32, 4, stride=2, padding=1, groups=2),
        [arr(4, 32, 16, 16)],
    ),
    "conv2d reflect pad": (
        lambda L: L.nn.Conv2d(16, 16, 3, padding=1, padding_mode="reflect"),
        [arr(8, 16, 32, 32)],
    ),
    "conv2d 7x7/2 stem": (
        lambda L: L.nn.Conv2d(3, 32, 7, stride=2, padding=3),
        [arr(8, 3, 64, 64)],
    ),
    "depthwise 7x7 (convnext)": (
        lambda L: L.nn.Conv2d(64, 64, 7, padding=3, groups=64),
        [arr(8, 64, 16, 16)],
    ),
    "groupnorm": (lambda L: L.nn.GroupNorm(8, 64), [arr(8, 64, 16, 16)]),
    "instancenorm": (lambda L: L.nn.InstanceNorm2d(64, affine=True), [arr(8, 64, 16, 16)]),
    "layernorm 2d": (lambda L: L.nn.LayerNorm([16, 16]), [arr(8, 64, 16, 16)]),
    "avgpool nopad-count": (
        lambda L: L.nn.AvgPool2d(3, 2, 1, count_include_pad=False),
        [arr(8, 64, 32, 32)],
    ),
    "adaptive avg 7": (lambda L: L.nn.AdaptiveAvgPool2d(7), [arr(8, 64, 30, 30)]),
    "adaptive max 5": (lambda L: L.nn.AdaptiveMaxPool2d(5), [arr(8, 64, 23, 23)]),
    "upsample bicubic": (
        lambda L: L.nn.Upsample(scale_factor=2, mode="bicubic"),
        [arr(4, 32, 32, 32)],
    ),
    "upsample nearest": (
        lambda L: L.nn.Upsample(scale_factor=2, mode="nearest"),
        [arr(4, 32, 32, 32)],
    ),
    "pixelshuffle": (lambda L: L.nn.PixelShuffle(2), [arr(4, 64, 32, 32)]),
    "embedding 10k x 256": (lambda L: L.nn.Embedding(10000, 256), ["ids"]),
    "embbag mean": (lambda L: L.nn.EmbeddingBag(10000, 128, mode="mean"), ["bags"]),
    "mha 8 heads": (
        lambda L: L.nn.MultiheadAttention(256, 8, batch_first=True),
        [arr(8, 64, 256)] * 3,
    ),
    "gru cell loop": (lambda L: L.nn.GRUCell(128, 128), [arr(32, 128)]),
    "lstm 1 layer": (lambda L: L.nn.LSTM(64, 128, batch_first=True), [arr(16, 32, 64)]),
    "transformer enc layer": (
        lambda L: L.nn.TransformerEncoderLayer(128, 4, 256, dropout=0.0, batch_first=True),
        [arr(8, 32, 128)],
    ),
    "bilinear": (lambda L: L.nn.Bilinear(64, 64, 32), [arr(64, 64), arr(64, 64)]),
    "prelu": (lambda L: L.nn.PReLU(64), [arr(8, 64, 32, 32)]),
    "silu": (lambda L: L.nn.SiLU(), [arr(8, 64, 32, 32)]),
    "gelu tanh": (lambda L: L.nn.GELU(approximate="tanh"), [arr(8, 64, 32, 32)]),
    "softmax dim1": (lambda L: L.nn.Softmax(dim=1), [arr(8, 64, 32, 32)]),
    "logsoftmax": (lambda L: L.nn.LogSoftmax(dim=-1), [arr(256, 1000)]),
    "maxpool 3/2": (lambda L: L.nn.MaxPool2d(3, 2, 1), [arr(8, 64, 32, 32)]),
    "lppool": (lambda L: L.nn.LPPool2d(2, 2), [arr(8, 64, 32, 32)]),
    "unfold": (lambda L: L.nn.Unfold(3, padding=1), [arr(8, 32, 16, 16)]),
    "linear big": (lambda L: L.nn.Linear(512, 512), [arr(256, 512)]),
    "interp bilinear ac": (
        fn("interpolate", scale_factor=2, mode="bilinear", align_corners=True),
        [arr(4, 32, 32, 32)],
    ),
    "grid_sample": (
        lambda L: lambda x, g: L.nn.functional.grid_sample(x, g.tanh(), align_corners=False),
        [arr(4, 16, 32, 32), arr(4, 32, 32, 2)],
    ),
    "grid_sample 8x32 64x64 bilinear": (
        lambda L: lambda x, g: L.nn.functional.grid_sample(x, g.tanh(), align_corners=False),
        [arr(8, 32, 64, 64), arr(8, 64, 64, 2)],
    ),
    "grid_sample bicubic reflection": (
        lambda L: (
            lambda x, g: L.nn.functional.grid_sample(
                x, g, "bicubic", "reflection", align_corners=True
            )
        ),
        [arr(4, 16, 32, 32), arr(4, 32, 32, 2)],
    ),
    "grid_sample 5-d trilinear": (
        lambda L: lambda x, g: L.nn.functional.grid_sample(x, g.tanh(), align_corners=False),
        [arr(2, 16, 16, 32, 32), arr(2, 16, 32, 32, 3)],
    ),
    "affine_grid + grid_sample (stn)": (
        lambda L: (
            lambda x, t: L.nn.functional.grid_sample(
                x,
                L.nn.functional.affine_grid(t, (8, 32, 64, 64), align_corners=False),
                align_corners=False,
            )
        ),
        [arr(8, 32, 64, 64), arr(8, 2, 3)],
    ),
    "ce label smooth": (
        lambda L: (
            lambda x: L.nn.functional.cross_entropy(
                x, L.tensor(np.arange(256) % 100), label_smoothing=0.1
            )
        ),
        [arr(256, 100)],
    ),
    "softplus": (fn("softplus"), [arr(8, 64, 32, 32)]),
    "mish": (fn("mish"), [arr(8, 64, 32, 32)]),
    "hardswish": (fn("hardswish"), [arr(8, 64, 32, 32)]),
    "elu": (fn("elu"), [arr(8, 64, 32, 32)]),
    "leaky_relu": (fn("leaky_relu", 0.2), [arr(8, 64, 32, 32)]),
    "relu": (fn("relu"), [arr(8, 64, 32, 32)]),
    "gelu": (fn("gelu"), [arr(8, 64, 32, 32)]),
    "tanh": (lambda L: L.tanh, [arr(8, 64, 32, 32)]),
    "dropout train": (fn("dropout", 0.1, True), [arr(8, 64, 32, 32)]),
    "cos sim": (
        lambda L: lambda a, b: L.nn.functional.cosine_similarity(a, b, dim=-1),
        [arr(4096, 128), arr(4096, 128)],
    ),
    "cdist": (lambda L: lambda a, b: L.cdist(a, b), [arr(512, 64), arr(512, 64)]),
    "bmm attention": (
        lambda L: lambda q, k: L.softmax(q @ k.transpose(-1, -2) / 8, -1) @ k,
        [arr(32, 128, 64), arr(32, 128, 64)],
    ),
    "sdpa causal": (
        lambda L: (
            lambda q, k, v: L.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        ),
        [arr(4, 8, 128, 64)] * 3,
    ),
    "rmsnorm": (lambda L: lambda x: L.nn.functional.rms_norm(x, (512,)), [arr(64, 128, 512)]),
    "layernorm": (lambda L: lambda x: L.nn.functional.layer_norm(x, (512,)), [arr(64, 128, 512)]),
    "max_pool1d": (fn("max_pool1d", 3, 2, 1), [arr(16, 64, 512)]),
    "avg_pool1d": (fn("avg_pool1d", 4), [arr(16, 64, 512)]),
    "cumsum": (lambda L: lambda x: x.cumsum(-1), [arr(256, 1024)]),
    "topk": (lambda L: lambda x: x.topk(10, -1).values, [arr(256, 1024)]),
    "sort": (lambda L: lambda x: x.sort(-1).values, [arr(256, 1024)]),
    "gather": (
        lambda L: lambda x: x.gather(1, L.tensor(rng.integers(0, 1024, (256, 300)))),
        [arr(256, 1024)],
    ),
    "index_select": (
        lambda L: lambda x: x.index_select(0, L.tensor(rng.integers(0, 4096, 2000))),
        [arr(4096, 128)],
    ),
    "masked_fill": (
        lambda L: (
            lambda x: x.masked_fill(
                L.tensor(np.triu(np.ones((128, 128), bool), 1)), float("-inf")
            ).softmax(-1)
        ),
        [arr(64, 128, 128)],
    ),
    "scatter_add": (
        lambda L: (
            lambda x: L.zeros(1000, 64).scatter_add(
                0, L.tensor(rng.integers(0, 1000, (5000, 1))).expand(5000, 64), x
            )
        ),
        [arr(5000, 64)],
    ),
    "conv1d depthwise": (
        lambda L: L.nn.Conv1d(64, 64, 5, padding=2, groups=64),
        [arr(16, 64, 256)],
    ),
    "lstm bidir": (
        lambda L: L.nn.LSTM(64, 128, batch_first=True, bidirectional=True),
        [arr(16, 32, 64)],
    ),
    "rnn tanh": (lambda L: L.nn.RNN(64, 128, batch_first=True), [arr(16, 50, 64)]),
    "batchnorm1d": (lambda L: L.nn.BatchNorm1d(256), [arr(256, 256)]),
    "pow 3": (lambda L: lambda x: x**3, [arr(256, 512)]),
    "logsumexp": (lambda L: lambda x: L.logsumexp(x, 1), [arr(256, 512)]),
    "vector_norm": (lambda L: lambda x: L.linalg.vector_norm(x, dim=1), [arr(256, 512)]),
    "smooth_l1": (
        lambda L: lambda a, b: L.nn.functional.smooth_l1_loss(a, b),
        [arr(256, 512), arr(256, 512)],
    ),
    "depthwise 7x7 8x8 planes": (
        lambda L: L.nn.Conv2d(32, 32, 7, padding=3, groups=32),
        [arr(32, 32, 8, 8)],
    ),
}


def _input(lib, spec):
    if isinstance(spec, str):  # token ids: a batch of sequences, or of bags
        shape = (32, 64) if spec == "ids" else (64, 20)
        return lib.tensor(rng.integers(0, 10000, shape))
    return lib.tensor(spec, requires_grad=True)


def _first(out):
    while isinstance(out, (tuple, list)):
        out = out[0]
    if hasattr(out, "values") and not hasattr(out, "sum"):
        out = out.values
    return out


def _measure(name, make, specs) -> str:
    t_mod, e_mod = make(torch), make(ember)
    if hasattr(t_mod, "state_dict"):
        weights = {k: ember.tensor(v.detach().numpy()) for k, v in t_mod.state_dict().items()}
        e_mod.load_state_dict(weights)
    t_in = [_input(torch, s) for s in specs]
    e_in = [_input(ember, s) for s in specs]

    def t_call():
        _first(t_mod(*t_in)).sum().backward()

    def e_call():
        _first(e_mod(*e_in)).sum().backward()

    for call in (t_call, e_call, t_call, e_call):  # (warm: kernels built, calibrated)
        call()
    one = min(timeit.repeat(t_call, number=1, repeat=2))
    n = max(1, min(20, int(0.05 / max(one, 1e-6))))
    best = None
    for _ in range(3):  # interleaved rounds; the least disturbed ratio
        t = min(timeit.repeat(t_call, number=n, repeat=3)) / n
        e = min(timeit.repeat(e_call, number=n, repeat=3)) / n
        if best is None or e / t < best[0]:
            best = (e / t, t, e)
    ratio, t, e = best
    flag = "  <<<" if ratio > 2 else ""
    return f"{name:32s} torch {t * 1e3:8.3f} ms  ember {e * 1e3:8.3f} ms  {ratio:5.2f}{flag}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", default="", help="comma-separated substrings of case names")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    if torch is None:
        raise SystemExit("PyTorch (the peer) is not installed: pip install -e '.[bench]'")
    torch.set_num_threads(args.threads)
    ember.set_num_threads(args.threads)
    print(f"CPU: {cpool.cpu_model()}; {args.threads} thread(s) each; torch {torch.__version__}")
    wanted = [c for c in args.cases.split(",") if c]
    for name, (make, specs) in CASES.items():
        if wanted and not any(w in name for w in wanted):
            continue
        try:
            print(_measure(name, make, specs), flush=True)
        except Exception as error:  # (a case one side refuses: reported, the survey goes on)
            print(f"{name:32s} failed: {type(error).__name__}: {str(error)[:100]}", flush=True)


if __name__ == "__main__":
    main()
