"""Half-precision kernels: ember's bfloat16 and float16 against its own float32 and against
PyTorch's bfloat16 / float16 on the same shapes, measured interleaved in one process (the
median of several rounds of each case, every variant once per round).
``python benchmarks/precision_kernels.py [--rounds N] [--threads T] [--cases a,b]``.

Columns: the median time of ember float32, bfloat16, float16 and of torch bfloat16, float16,
then ``bf16/f32`` and ``f16/f32`` (ember's half precision against its float32: below 1 is
faster) and ``bf16/torch``, ``f16/torch`` (ember's half precision against PyTorch's).
Cases: GEMM (square 256..1024, a linear layer 64x768 by 3072x768 with a bias), a 3x3
convolution of 64 channels on 56x56, elementwise ops on 4M values, softmax, layer norm, sum,
casts to and from float32, and a fused loop in a captured function. Also prints which bfloat16
GEMM kernel ran (AVX512_BF16's dot products or float32 panels; ``EMBER_BF16_DOT=0`` forces the
latter)."""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time

import numpy as np

import ember
import ember.nn.functional as F
from ember.kernels import chgemm, cpool

DTYPES = ("float32", "bfloat16", "float16")


def _model() -> str:
    text = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    for line in text.splitlines():
        if line.startswith("Model name"):
            return line.split(":", 1)[1].strip()
    return cpool.cpu_model()


def _cases():
    """name -> (ember_fn(dtype) -> call, torch_fn(dtype) -> call)."""
    import torch

    r = np.random.default_rng(0)

    def data(*shape):
        return r.standard_normal(shape).astype(np.float32)

    def pair(make_arrays, ember_call, torch_call):
        arrays = make_arrays()

        def ember_side(dtype):
            ts = [ember.tensor(a).to(getattr(ember, dtype)) for a in arrays]
            return lambda: ember_call(*ts)

        def torch_side(dtype):
            ts = [torch.from_numpy(a).to(getattr(torch, dtype)) for a in arrays]
            return lambda: torch_call(*ts)

        return ember_side, torch_side

    cases = {}
    for n in (256, 512, 1024):
        cases[f"matmul {n}x{n}"] = pair(lambda n=n: (data(n, n), data(n, n)), lambda a, b: a @ b,
                                        lambda a, b: a @ b)  # fmt: skip
    cases["linear 64x768 -> 3072"] = pair(
        lambda: (data(64, 768), data(3072, 768), data(3072)),
        F.linear,
        torch.nn.functional.linear,
    )
    cases["conv2d 3x3 64ch 56x56"] = pair(
        lambda: (data(1, 64, 56, 56), data(64, 64, 3, 3)),
        lambda x, w: F.conv2d(x, w, padding=1),
        lambda x, w: torch.nn.functional.conv2d(x, w, padding=1),
    )
    m = 1 << 22
    cases["add 4M"] = pair(lambda: (data(m), data(m)), lambda a, b: a + b, lambda a, b: a + b)
    cases["mul 4M"] = pair(lambda: (data(m), data(m)), lambda a, b: a * b, lambda a, b: a * b)
    cases["relu 4M"] = pair(lambda: (data(m),), F.relu, torch.relu)
    cases["gelu 4M"] = pair(lambda: (data(m),), F.gelu, torch.nn.functional.gelu)
    cases["exp 4M"] = pair(lambda: (data(m),), lambda a: a.exp(), torch.exp)
    cases["softmax 1024x1024"] = pair(
        lambda: (data(1024, 1024),),
        lambda a: F.softmax(a, -1),
        lambda a: torch.softmax(a, -1),
    )
    cases["layer_norm 4096x768"] = pair(
        lambda: (data(4096, 768), data(768), data(768)),
        lambda x, w, b: F.layer_norm(x, (768,), w, b),
        lambda x, w, b: torch.nn.functional.layer_norm(x, (768,), w, b),
    )
    cases["sum 4M"] = pair(lambda: (data(m),), lambda a: a.sum(), lambda a: a.sum())

    def cast_from_f32():
        # (the float32 column: a copy of the same size, what a cast costs at least)
        def ember_side(dtype):
            x = ember.tensor(data(m))
            if dtype == "float32":
                return lambda: x.clone()
            return lambda: x.to(getattr(ember, dtype))

        def torch_side(dtype):
            x = torch.from_numpy(data(m))
            return lambda: x.to(getattr(torch, dtype))

        return ember_side, torch_side

    cases["cast f32 -> half 4M"] = cast_from_f32()

    def cast_to_f32():
        def ember_side(dtype):
            x = ember.tensor(data(m)).to(getattr(ember, dtype))
            return (lambda: x.clone()) if dtype == "float32" else (lambda: x.to(ember.float32))

        def torch_side(dtype):
            x = torch.from_numpy(data(m)).to(getattr(torch, dtype))
            return lambda: x.to(torch.float32)

        return ember_side, torch_side

    cases["cast half -> f32 4M"] = cast_to_f32()

    def fused():
        a, b = data(1 << 20), data(1 << 20)

        def ember_side(dtype):
            d = getattr(ember, dtype)
            x, y = ember.tensor(a).to(d), ember.tensor(b).to(d)
            f = ember.function(lambda p, q: F.gelu(p * q + p))
            f(x, y)
            return lambda: f(x, y)

        def torch_side(dtype):
            d = getattr(torch, dtype)
            x, y = torch.from_numpy(a).to(d), torch.from_numpy(b).to(d)
            return lambda: torch.nn.functional.gelu(x * y + x)

        return ember_side, torch_side

    cases["function gelu(x*y+x) 1M"] = fused()
    return cases


def _measure(calls: dict, rounds: int) -> dict:
    """Median seconds per call of each of ``calls``, every call once per round."""
    for call in calls.values():
        call()  # (compiles, allocates, warms the caches)
    times = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--threads", type=int, default=0, help="both sides' (default: ember's)")
    parser.add_argument("--cases", default="", help="comma-separated substrings of case names")
    args = parser.parse_args()
    if args.threads:
        cpool.set_num_threads(args.threads)
    torch.set_num_threads(cpool.get_num_threads())
    pairs = "AVX512_BF16 dot products" if chgemm.uses_pairs(ember.bfloat16.np) else "float32 panels"
    print(f"CPU: {_model()}; ember {cpool.get_num_threads()} threads, torch {torch.__version__}")
    print(f"bfloat16 GEMM: {pairs}; median ms per call over {args.rounds} rounds")
    labels = ("ember f32", "ember bf16", "ember f16", "torch bf16", "torch f16")
    head = "".join(f"{label:>11}" for label in labels)
    print(f"{'case':26}{head}{'bf16/f32':>9}{'f16/f32':>9}{'bf16/tch':>9}{'f16/tch':>9}")
    wanted = [w for w in args.cases.split(",") if w]
    for name, (ember_side, torch_side) in _cases().items():
        if wanted and not any(w in name for w in wanted):
            continue
        # each side's variants interleaved, the sides apart: PyTorch's OpenMP threads spin
        # after each call and would slow the ember call that follows (kernels/cpool.py)
        t = _measure({("ember", d): ember_side(d) for d in DTYPES}, args.rounds)
        time.sleep(0.2)
        t.update(_measure({("torch", d): torch_side(d) for d in DTYPES[1:]}, args.rounds))
        time.sleep(0.2)
        e32, eb, eh = (t[("ember", d)] for d in DTYPES)
        tb, th = t[("torch", "bfloat16")], t[("torch", "float16")]
        cells = "".join(f"{v * 1e3:11.3f}" for v in (e32, eb, eh, tb, th))
        ratios = "".join(f"{v:9.2f}" for v in (eb / e32, eh / e32, eb / tb, eh / th))
        print(f"{name:26}{cells}{ratios}", flush=True)


if __name__ == "__main__":
    main()
