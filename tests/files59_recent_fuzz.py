"""Seeded mutation fuzz of the readers over the recent stops' ops and values (files59): graph
files and ONNX models of as_strided views, add with alpha, linspace, cumulative sums and
maxima, quantization and CSR products, and checkpoints and safetensors files holding
quantized and CSR tensors.

Each seed file is mutated by the existing mutators (tests/io/fuzzing.py for ember's files,
tests/onnx/fuzzing.py for ONNX models, tests/files54_fuzzing.py's bytes for safetensors), then
read, and what loads runs; every outcome must be a normal result or an `EmberError`. Run as a
script (``python -m tests.files59_recent_fuzz OUT SEED CASES``) so a crash is the process's
death and a hang its timeout; the report (counts, escapes) is written to OUT as JSON. Sizes stay
small: the seeds are a few elements, and the readers check what a file declares against memory.
"""

from __future__ import annotations

import json
import os
import random
import sys
import tempfile
import traceback
import warnings

import numpy as np


def _functions():
    """(name, function, example inputs) of the recent ops, each small."""
    import ember

    rng = np.random.default_rng(0)
    x = ember.tensor(rng.standard_normal((4, 5)).astype(np.float32))
    dense = ember.tensor(rng.standard_normal((5, 3)).astype(np.float32))
    csr = x.relu().to_sparse_csr()
    return [
        ("as_strided", lambda x: x.as_strided((3, 2), (2, 1), 1) * 2, [x]),
        ("add_alpha", lambda x: ember.add(x, x * 3, alpha=0.5), [x]),
        ("linspace", lambda x: x + ember.linspace(-1.0, 1.0, 5), [x]),
        ("scans", lambda x: x.cumsum(1) + x.cummax(0).values + x.cumprod(-1), [x]),
        ("fake_quantized", lambda x: ember.fake_quantize_per_tensor_affine(x, 0.1, 3, 0, 255), [x]),
        ("csr", lambda d: (csr @ d) + 1, [dense]),  # (a CSR matrix made outside: its pattern)
    ]


def _onnx_quantized() -> bytes:
    """QuantizeLinear, DequantizeLinear and QLinearMatMul, as onnxruntime.quantization writes."""
    from onnx import TensorProto, helper, numpy_helper

    def const(name, array):
        return numpy_helper.from_array(np.asarray(array), name)

    w = np.random.default_rng(1).integers(0, 255, (5, 3)).astype(np.uint8)
    inits = [const("s", np.float32(0.05)), const("z", np.uint8(3)), const("w", w),
             const("ws", np.float32(0.02)), const("wz", np.uint8(7)),
             const("ys", np.float32(0.1)), const("yz", np.uint8(1))]  # fmt: skip
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
        helper.make_node("QLinearMatMul", ["q", "s", "z", "w", "ws", "wz", "ys", "yz"], ["m"]),
        helper.make_node("DequantizeLinear", ["m", "ys", "yz"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "quantized", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 3])], inits,
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    return model.SerializeToString()


def seed_files(folder: str) -> dict:
    """name -> (kind, bytes): graph files, ONNX models (kind ``onnx``), checkpoints and
    safetensors files (kind ``safetensors``)."""
    import ember
    from ember.io.checkpoint import write_safetensors

    ember.manual_seed(59)  # (this process's own generator: the same seed files each run)
    seeds = {}
    for name, fn, args in _functions():
        for level in (0, 3):
            path = os.path.join(folder, f"{name}{level}.graph")
            try:
                ember.trace(fn, *args, opt_level=level).graph.save(path)
            except ember.errors.EmberError:  # (a program the tracer does not capture)
                continue
            seeds[f"graph_{name}{level}"] = ("graph", open(path, "rb").read())
        path = os.path.join(folder, f"{name}.onnx")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ember.onnx.export(fn, path, *args)
        except ember.errors.EmberError:  # (an op with no ONNX form)
            continue
        seeds[f"onnx_{name}"] = ("onnx", open(path, "rb").read())
    try:
        seeds["onnx_quantized"] = ("onnx", _onnx_quantized())
    except ImportError:  # (no onnx package: the ONNX seeds above are absent too)
        pass
    x = ember.randn(4, 5)
    values = {
        "q": ember.quantize_per_tensor(x, 0.05, 2, ember.quint8),
        "qc": ember.quantize_per_channel(
            x, ember.rand(4) + 0.1, ember.zeros(4, dtype=ember.int64), 0, ember.qint8
        ),  # fmt: skip
        "csr": x.relu().to_sparse_csr(),
        "w": x,
        "step": 7,
    }
    path = os.path.join(folder, "recent.ckpt")
    ember.save(values, path)
    seeds["checkpoint_recent"] = ("checkpoint", open(path, "rb").read())
    path = os.path.join(folder, "recent.safetensors")
    arrays = {"w": x.numpy(), "i": np.arange(6, dtype=np.int64), "b": np.array([True, False])}
    write_safetensors(path, arrays, {"note": "files59"})
    seeds["safetensors_recent"] = ("safetensors", open(path, "rb").read())
    return seeds


def _check_safetensors(path: str) -> str | None:
    from ember.errors import EmberError
    from ember.io.checkpoint import read_safetensors

    try:
        read_safetensors(path, lambda metadata, where: None)
    except EmberError:
        return None
    except Exception as exc:  # noqa: BLE001 - what the fuzzer looks for
        return f"read: {type(exc).__name__}: {exc}\n{traceback.format_exc()[-1500:]}"
    return None


def run(seed: int, cases: int) -> dict:
    from tests import files54_fuzzing as fz
    from tests.io import fuzzing as io_fuzz
    from tests.onnx import fuzzing as onnx_fuzz

    folder = tempfile.mkdtemp(prefix="files59_recent_")
    seeds = seed_files(folder)
    rng = random.Random(seed)
    report = {"seeds": sorted(seeds), "cases": 0, "escapes": []}
    names = sorted(seeds)
    for case in range(cases):
        name = names[case % len(names)]
        kind, data = seeds[name]
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            if kind == "onnx":
                problem = onnx_fuzz.check(onnx_fuzz.mutate(data, rng))
                what = "onnx"
            elif kind == "safetensors":
                path = os.path.join(folder, "mutant.safetensors")
                with open(path, "wb") as f:
                    f.write(fz.mutate_bytes(data, rng))
                problem, what = _check_safetensors(path), "bytes"
            else:
                what, mutated = io_fuzz.mutate(data, kind, rng)
                path = os.path.join(folder, "mutant." + ("graph" if kind == "graph" else "ckpt"))
                with open(path, "wb") as f:
                    f.write(mutated)
                problem = io_fuzz.check_file(path, kind)
        report["cases"] += 1
        if problem:
            report["escapes"].append(f"{name} ({what}): {problem}")
    return report


if __name__ == "__main__":
    out, seed, cases = sys.argv[1:]
    with open(out, "w") as f:
        json.dump(run(int(seed), int(cases)), f)
