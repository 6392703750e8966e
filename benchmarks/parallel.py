"""The parallel executor against sequential execution, and ONNX Runtime's two modes, same run.

Cases (float32, batch 8, 32 channels, 16x16 maps):
* inception: four independent branches over one input, concatenated: 1x1 conv; 1x1 conv ->
  3x3 conv; 1x1 conv -> 5x5 conv; 3x3 max-pool -> 1x1 conv (ReLU after each conv);
* chain: four 3x3 convs 32 -> 32 with ReLU, one after another (nothing to run at once);
* tiny: the inception block on a 1x4x4x4 input (thread hand-offs cost more than the ops).

Columns (medians of interleaved rounds; each round re-warms every side):
* seq: ``ember.function(..., executor="codegen")``, the generated code;
* seq 1t: the same with the calling thread's BLAS single-threaded, as the parallel workers run
  it (kernels/blas_threads.py): forced / seq 1t is the gain of running branches at once alone,
  apart from what BLAS's own threads gain or lose (on a busy machine OpenBLAS's threads can
  make a call many times slower than one thread does);
* parallel: ``executor="parallel"``: what the cost model chose (``plan`` says which, and the
  speedup it predicted);
* forced: the same graph on the parallel schedule even where the model said no (what a
  parallel mode without a cost model would cost), run by the C graph runner where every node
  has a C step (runtime/cgraph.py: no Python between nodes);
* forced py: the same forced schedule run by the Python workers (runtime/parallel.py), as
  graphs with a node lacking a C step run;
* ort seq / ort par: ONNX Runtime with ``ORT_SEQUENTIAL`` and ``ORT_PARALLEL`` (inter-op threads
  = the cores) on the same block built with the ``onnx`` helper API; skipped, saying so, without
  ``pip install onnx onnxruntime``.

Ratios: parallel / seq and forced / seq for ember, ort par / ort seq (below 1: parallel faster).
The machine's calibration is printed first; ``--recalibrate`` measures it again.

    python benchmarks/parallel.py [--rounds 7] [--calls 20] [--recalibrate]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import time

import numpy as np

import ember
from ember import models
from ember.kernels import blas_threads
from ember.runtime import parallel, parallel_cost

CASES = {
    "inception": (models.inception_block, models.inception_shapes(8, 32, 16)),
    "chain": (models.conv_chain, models.CONV_CHAIN_SHAPES),
    "tiny": (models.inception_block, models.inception_shapes(1, 4, 4)),
}


# --------------------------------------------------------------------------- ONNX Runtime
def _onnx_model(name: str, arrays: list):
    """The case as an ONNX graph (the inputs are its inputs, weights included)."""
    from onnx import TensorProto, helper

    names = [f"in{i}" for i in range(len(arrays))]
    nodes, counter = [], iter(range(1000))

    def op(kind, inputs, **attrs):
        out = f"t{next(counter)}"
        nodes.append(helper.make_node(kind, inputs, [out], **attrs))
        return out

    def conv(x, w, pad):
        return op("Relu", [op("Conv", [x, w], pads=[pad] * 4)])

    if name == "chain":
        out = names[0]
        for w in names[1:]:
            out = conv(out, w, 1)
    else:
        x, w1, w2a, w2b, w3a, w3b, w4 = names
        pooled = op("MaxPool", [x], kernel_shape=[3, 3], pads=[1] * 4, strides=[1, 1])
        branches = [
            conv(x, w1, 0),
            conv(conv(x, w2a, 0), w2b, 1),
            conv(conv(x, w3a, 0), w3b, 2),
            conv(pooled, w4, 0),
        ]
        out = op("Concat", branches, axis=1)
    inputs = [
        helper.make_tensor_value_info(n, TensorProto.FLOAT, a.shape) for n, a in zip(names, arrays)
    ]
    output = helper.make_tensor_value_info(out, TensorProto.FLOAT, None)
    graph = helper.make_graph(nodes, name, inputs, [output])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), names


def _ort_sessions(name: str, arrays: list, cores: int):
    """{'ort seq': run, 'ort par': run}, or the reason they are missing."""
    try:
        import onnxruntime as ort
    except ImportError:
        return "onnxruntime is not installed (pip install onnx onnxruntime)"
    model, names = _onnx_model(name, arrays)
    feeds = dict(zip(names, arrays))
    runs = {}
    for label, mode in (("ort seq", "ORT_SEQUENTIAL"), ("ort par", "ORT_PARALLEL")):
        options = ort.SessionOptions()
        options.execution_mode = getattr(ort.ExecutionMode, mode)
        options.inter_op_num_threads = cores
        options.intra_op_num_threads = cores
        session = ort.InferenceSession(
            model.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
        runs[label] = lambda s=session: s.run(None, feeds)
    return runs


# ----------------------------------------------------------------------------------- timing
def _single_threaded(fn, tensors):
    with blas_threads.single_threaded():
        return fn(*tensors)


def _time(fn, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def bench(name: str, rounds: int, calls: int, calibration) -> None:
    fn, shapes = CASES[name]
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    arrays[1:] = [w / np.float32(np.sqrt(np.prod(w.shape[1:]))) for w in arrays[1:]]  # He-like
    tensors = [ember.tensor(a) for a in arrays]
    sequential = ember.function(fn, executor="codegen")
    chosen = ember.function(fn, executor="parallel")
    program = chosen.compile(*tensors)
    forced = parallel.ParallelProgram(program.graph, calibration=calibration, force=True)
    # the Python workers' runner on the same graph (a calibration without the C runner's costs)
    python_only = dataclasses.replace(calibration, c_conv=[], c_copy=[])
    forced_py = parallel.ParallelProgram(program.graph, calibration=python_only, force=True)
    reference = sequential(*tensors).numpy()
    np.testing.assert_allclose(chosen(*tensors).numpy(), reference, rtol=1e-4, atol=1e-4)
    sides = {
        "seq": lambda: sequential(*tensors),
        "seq 1t": lambda: _single_threaded(sequential, tensors),
        "parallel": lambda: chosen(*tensors),
        "forced": lambda: forced(*arrays),
        "forced py": lambda: forced_py(*arrays),
    }
    ort_runs = _ort_sessions(name, arrays, calibration.cores) if name != "tiny" else {}
    if isinstance(ort_runs, dict):
        for run in ort_runs.values():
            np.testing.assert_allclose(run()[0], reference, rtol=1e-3, atol=1e-3)
        sides.update(ort_runs)
    times: dict = {k: [] for k in sides}
    for _ in range(rounds):
        for label, run in sides.items():
            run()  # re-warm after the other sides
            times[label].append(_time(run, calls))
    med = {k: statistics.median(v) for k, v in times.items()}
    cells = "  ".join(f"{k} {v * 1e6:.0f} us" for k, v in med.items())
    ratios = f"parallel/seq {med['parallel'] / med['seq']:.2f}  "
    ratios += f"forced/seq {med['forced'] / med['seq']:.2f}  "
    ratios += f"forced/seq 1t {med['forced'] / med['seq 1t']:.2f}  "
    ratios += f"forced py/seq {med['forced py'] / med['seq']:.2f}"
    if "ort par" in med:
        ratios += f"  ort par/ort seq {med['ort par'] / med['ort seq']:.2f}"
    plan = program.parallel_plan
    print(f"{name:10s} {cells}\n{'':10s} {ratios}")
    print(
        f"{'':10s} plan: {'parallel' if plan.parallel else 'sequential'} ({plan.reason}), "
        f"predicted x{plan.predicted_speedup:.2f} (sequential {plan.sequential_s * 1e6:.0f} us, "
        f"parallel {plan.parallel_s * 1e6:.0f} us; runner: {forced.plan.runner}); forced plan "
        f"predicted x{forced.plan.predicted_speedup:.2f}"
    )
    if isinstance(ort_runs, str):
        print(f"{'':10s} ONNX Runtime skipped: {ort_runs}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--recalibrate", action="store_true")
    parser.add_argument("--show-plan", action="store_true", help="print the inception plan")
    args = parser.parse_args()
    calibration = parallel_cost.calibrate(force=args.recalibrate)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"load average {load} on {os.cpu_count()} CPUs (other processes take cores too)")
    print(calibration)
    print(f"(cached at {parallel_cost.calibration_path()})")
    for name in args.cases.split(","):
        bench(name, args.rounds, args.calls, calibration)
    if args.show_plan:
        fn, shapes = CASES["inception"]
        tensors = [ember.randn(*s) for s in shapes]
        print(ember.function(fn, executor="parallel").compile(*tensors).parallel_plan)


if __name__ == "__main__":
    main()
