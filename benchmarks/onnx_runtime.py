"""ONNX models imported by ember against ONNX Runtime: inference time at batch 1 and 8.

Models: the networks onnx's wheel ships in their light form (ResNet-50, Inception v1, DenseNet-121
by default; weights are ConstantOfShape nodes, so ember folds them at import like ORT's constant
folding), and a benchmark-zoo model exported by ``ember.onnx.export`` (skipped, saying why, where
export cannot write it). Each side runs the same inputs, interleaved, medians of ``--rounds``;
ember's outputs are checked against ORT's first. ORT runs in its sequential and parallel modes
with as many threads as ember. Also reported: the time ember takes to import ResNet-50 (load,
then the first call's capture and compilation). Ratios are ember's time over ORT's.

    python benchmarks/onnx_runtime.py [--models resnet50,inception_v1] [--rounds 5]

``--cases bert,gpt2,vit,lstm,rnn,mobilenet`` (benchmarks/onnx_torch_cases.py) adds realistic-size
models written in PyTorch, exported by ``torch.onnx.export`` both ways (``--exporters
dynamo,script``: the dynamo exporter at opset 18, TorchScript's at 17) at each batch, timed
against onnxruntime at each of ``--threads`` (ember's ``set_num_threads``, onnxruntime's
intra-op threads; its sequential and parallel modes): process CPU time per call, the best of
``--rounds`` interleaved rounds.

    python benchmarks/onnx_runtime.py --models "" --zoo "" --cases bert,gpt2 --threads 1,2
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))

from zoo import cpu_header  # noqa: E402

import ember  # noqa: E402

LIGHT = ("resnet50", "inception_v1", "densenet121")


def _light_model(name: str):
    import onnx
    from onnx.backend.test.loader import DATA_DIR

    return onnx.load(os.path.join(DATA_DIR, "light", f"light_{name}.onnx"))


def _with_batch(model, batch: int):
    """A copy whose inputs' and outputs' first dimension is ``batch`` (None where the model
    fixes its batch inside, e.g. a Reshape to a constant shape: ORT's shape check finds it)."""
    import onnx

    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    inits = {i.name for i in copy.graph.initializer}
    for vi in list(copy.graph.input) + list(copy.graph.output):
        if vi.name in inits:
            continue
        dims = vi.type.tensor_type.shape.dim
        if dims:
            dims[0].ClearField("dim_param")
            dims[0].dim_value = batch
    return copy


def _inputs(model, seed: int = 0) -> list:
    import onnx

    rng = np.random.default_rng(seed)
    inits = {i.name for i in model.graph.initializer}
    arrays = []
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        shape = [d.dim_value for d in tt.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)
        arrays.append(rng.standard_normal(shape).astype(dtype))
    return arrays


def _zoo_model(name: str):
    """A zoo model's inference exported by ember (None, reason where it cannot be)."""
    import onnx

    from ember import zoo

    ember.manual_seed(0)
    model = zoo.build(name, ember)
    model.eval()
    example = ember.tensor(zoo.inputs(name, 1)[0])
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, f"{name}.onnx")
        try:
            ember.onnx.export(model, path, example)
        except Exception as err:  # noqa: BLE001 - reported, not fatal
            return None, f"export failed: {type(err).__name__}: {str(err).splitlines()[0]}"
        return onnx.load(path), None


def _time(fn, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def bench(label: str, model, batch: int, rounds: int, calls: int, threads: int) -> None:
    import onnxruntime as ort

    model = _with_batch(model, batch)
    data = model.SerializeToString()
    arrays = _inputs(model)
    try:
        sessions = {}
        for mode in ("ORT_SEQUENTIAL", "ORT_PARALLEL"):
            options = ort.SessionOptions()
            options.execution_mode = getattr(ort.ExecutionMode, mode)
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = threads
            # ORT's idle threads spin after each run: interleaved with ember, they would take
            # the cores ember's next run needs (ember's own pool sleeps between runs instead)
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            options.add_session_config_entry("session.inter_op.allow_spinning", "0")
            options.log_severity_level = 3
            sessions[mode] = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
    except Exception as err:  # noqa: BLE001 - a model whose batch is fixed inside
        print(f"{label:22s} batch {batch}: ONNX Runtime refuses it ({str(err).splitlines()[0]})")
        return
    names = [i.name for i in sessions["ORT_SEQUENTIAL"].get_inputs()]
    feeds = dict(zip(names, arrays))
    function = ember.onnx.load(data)
    tensors = [ember.tensor(a) for a in arrays]
    try:
        theirs = sessions["ORT_SEQUENTIAL"].run(None, feeds)[0]
        ours = function(*tensors)
    except Exception as err:  # noqa: BLE001 - a batch the model fixes inside (a Reshape's)
        print(f"{label:22s} batch {batch}: does not run at this batch ({str(err).splitlines()[0]})")
        return
    ours = ours[0] if isinstance(ours, tuple) else ours
    scale = float(np.max(np.abs(theirs))) or 1.0
    err = float(np.max(np.abs(ours.numpy() - theirs))) / scale
    sides = {
        "ember": lambda: function(*tensors),
        "ort seq": lambda: sessions["ORT_SEQUENTIAL"].run(None, feeds),
        "ort par": lambda: sessions["ORT_PARALLEL"].run(None, feeds),
    }
    times = {k: [] for k in sides}
    for _ in range(rounds):
        for key, run in sides.items():
            run()
            times[key].append(_time(run, calls))
    med = {k: statistics.median(v) for k, v in times.items()}
    cells = "  ".join(f"{k} {v * 1e3:8.2f} ms" for k, v in med.items())
    ratio = med["ember"] / min(med["ort seq"], med["ort par"])
    mode = "eager" if function.eager_reason else "captured"
    print(
        f"{label:22s} batch {batch}: {cells}  ember/best ORT {ratio:.2f}  "
        f"(max rel. diff {err:.1e}; {mode})"
    )


def _ort_sessions(data: bytes, threads: int) -> dict:
    import onnxruntime as ort

    sessions = {}
    for mode in ("ORT_SEQUENTIAL", "ORT_PARALLEL"):
        options = ort.SessionOptions()
        options.execution_mode = getattr(ort.ExecutionMode, mode)
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = threads
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.add_session_config_entry("session.inter_op.allow_spinning", "0")
        options.log_severity_level = 3
        sessions[mode] = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
    return sessions


def _cpu_time(fn, calls: int) -> float:
    start = time.process_time()
    for _ in range(calls):
        fn()
    return (time.process_time() - start) / calls


def bench_cpu(label: str, data: bytes, arrays: list, rounds: int, calls: int, threads: int):
    """One file at ``threads`` threads each side: process CPU time per call, best of the
    interleaved rounds."""
    ember.set_num_threads(threads)
    sessions = _ort_sessions(data, threads)
    names = [i.name for i in sessions["ORT_SEQUENTIAL"].get_inputs()]
    feeds = dict(zip(names, arrays))
    function = ember.onnx.load(data)
    tensors = [ember.tensor(a) for a in arrays]
    theirs = sessions["ORT_SEQUENTIAL"].run(None, feeds)[0]
    ours = function(*tensors)
    ours = ours[0] if isinstance(ours, tuple) else ours
    scale = float(np.max(np.abs(theirs))) or 1.0
    err = float(np.max(np.abs(ours.numpy() - theirs))) / scale
    sides = {
        "ember": lambda: function(*tensors),
        "ort seq": lambda: sessions["ORT_SEQUENTIAL"].run(None, feeds),
        "ort par": lambda: sessions["ORT_PARALLEL"].run(None, feeds),
    }
    best = {k: float("inf") for k in sides}
    for _ in range(rounds):
        for key, run in sides.items():
            run()
            best[key] = min(best[key], _cpu_time(run, calls))
    cells = "  ".join(f"{k} {v * 1e3:8.2f} ms" for k, v in best.items())
    ratio = best["ember"] / min(best["ort seq"], best["ort par"])
    mode = "eager" if function.eager_reason else "captured"
    print(
        f"{label:30s} {threads} thr: {cells}  ember/best ORT {ratio:.2f}  "
        f"(max rel. diff {err:.1e}; {mode})",
        flush=True,
    )


def torch_cases(args) -> None:
    """Each ``--cases`` model exported by PyTorch (each exporter, batch), timed at each thread
    count."""
    import onnx_torch_cases as cases
    import torch

    exporters = {"dynamo": (True, 18), "script": (False, 17)}
    with tempfile.TemporaryDirectory() as folder:
        for name in filter(None, args.cases.split(",")):
            for batch in (int(b) for b in args.batches.split(",")):
                for exporter in filter(None, args.exporters.split(",")):
                    dynamo, opset = exporters[exporter]
                    path = os.path.join(folder, f"{name}_{batch}_{exporter}.onnx")
                    try:
                        cases.export(torch, name, path, batch, dynamo, opset)
                    except Exception as err:  # noqa: BLE001 - reported, not fatal
                        print(f"{name} batch {batch} {exporter}: export failed ({err})")
                        continue
                    _, example = cases.BUILDERS[name](torch, batch=batch)
                    arrays = [t.numpy() for t in example]
                    with open(path, "rb") as f:
                        data = f.read()
                    label = f"{name} b{batch} {exporter} op{opset}"
                    for threads in (int(t) for t in args.threads.split(",")):
                        bench_cpu(label, data, arrays, args.rounds, args.calls, threads)


def import_time(name: str) -> None:
    model = _light_model(name)
    data = model.SerializeToString()
    arrays = _inputs(model)
    start = time.perf_counter()
    function = ember.onnx.load(data)
    loaded = time.perf_counter()
    function(*arrays)
    first = time.perf_counter()
    function(*arrays)
    second = time.perf_counter()
    print(
        f"import of {name}: load {(loaded - start) * 1e3:.0f} ms, first call (capture, passes, "
        f"compilation) {(first - loaded) * 1e3:.0f} ms, second call {(second - first) * 1e3:.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(LIGHT))
    parser.add_argument("--zoo", default="resnet18", help="zoo models to export ('' for none)")
    parser.add_argument("--batches", default="1,8")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--cases", default="", help="PyTorch-exported models (onnx_torch_cases)")
    parser.add_argument("--exporters", default="dynamo,script")
    parser.add_argument("--threads", default="1,2", help="thread counts for --cases")
    args = parser.parse_args()
    threads = ember.get_num_threads()
    for line in cpu_header():
        print(line)
    if args.cases:
        torch_cases(args)
        ember.set_num_threads(threads)
    if not (args.models or args.zoo):
        return
    print(f"ember {threads} threads, ONNX Runtime {threads} threads; medians of interleaved rounds")
    import_time("resnet50")
    for batch in (int(b) for b in args.batches.split(",")):
        for name in filter(None, args.models.split(",")):
            bench(f"light {name}", _light_model(name), batch, args.rounds, args.calls, threads)
        for name in filter(None, args.zoo.split(",")):
            model, why = _zoo_model(name)
            if model is None:
                print(f"zoo {name:18s} batch {batch}: skipped ({why})")
                continue
            bench(f"zoo {name}", model, batch, args.rounds, args.calls, threads)


if __name__ == "__main__":
    main()
