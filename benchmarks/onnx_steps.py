"""Where an imported model's time goes: each node of ember's captured graph timed as the C graph
runner runs it (runtime/cgraph.py `measure_nodes`: the node's step alone, one thread, on random
inputs of its types, medians of ``--reps``), summed by op and listed costliest first, beside
onnxruntime's own per-node profile of the same file (its kernels' times, medians over
``--runs`` runs, summed by ONNX op type). The two columns name different nodes (ember's fused
ones, onnxruntime's own fusions and NCHWc reorders), so compare the sums and the costliest
layers, not row by row.

    EMBER_NUM_THREADS=1 python benchmarks/onnx_steps.py --case efficientnet --batch 1
    EMBER_NUM_THREADS=1 python benchmarks/onnx_steps.py --file model.onnx
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))

from zoo import cpu_header  # noqa: E402

import ember  # noqa: E402


def _label(node) -> str:
    """The op's name, and what a fused convolution or a depthwise one is."""
    name = node.op.name
    if name == "fused_epilogue":
        attrs = dict(node.attrs["producer_attrs"] or ())
        name += f"({node.attrs['producer'].name}{'/dw' if attrs.get('groups', 1) > 1 else ''})"
    elif name == "conv" and node.attrs.get("groups", 1) > 1:
        name += "/dw"
    return name


def ember_steps(data: bytes, arrays: list, reps: int, top: int) -> None:
    from ember.runtime import cgraph

    function = ember.onnx.load(data)
    function(*arrays)
    graph = function.graph
    steps = cgraph.c_steps(graph)
    if steps is None:
        print("ember: the graph has nodes without C steps (generated code runs it)")
        return
    measured = cgraph.measure_nodes(graph, steps, reps=reps, budget_s=float("inf"))
    by_op: collections.Counter = collections.Counter()
    rows = []
    for position, times in measured.items():
        node = graph.nodes[position]
        label, us = _label(node), times[2] * 1e6
        by_op[label] += us
        shapes = f"{tuple(node.inputs[0].type.shape)} -> {tuple(node.outputs[0].type.shape)}"
        rows.append((us, label, shapes))
    print(f"ember, C graph runner steps (sum {sum(by_op.values()):.1f} us):")
    for label, us in by_op.most_common():
        print(f"  {label:40s} {us:9.1f} us")
    for us, label, shapes in sorted(rows, reverse=True)[:top]:
        print(f"    {us:8.1f} us  {label:34s} {shapes}")


def ort_profile(data: bytes, arrays: list, runs: int) -> None:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.enable_profiling = True
    with tempfile.TemporaryDirectory() as folder:
        options.profile_file_prefix = os.path.join(folder, "ort")
        session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
        feeds = dict(zip([i.name for i in session.get_inputs()], arrays))
        for _ in range(runs):
            session.run(None, feeds)
        with open(session.end_profiling()) as f:
            events = json.load(f)
    per_node: dict = collections.defaultdict(list)
    kinds = {}
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            per_node[e["name"]].append(e["dur"])
            kinds[e["name"]] = e["args"]["op_name"]
    by_op: collections.Counter = collections.Counter()
    for name, durations in per_node.items():
        by_op[kinds[name]] += statistics.median(durations)
    print(f"onnxruntime, its profile's kernels (sum {sum(by_op.values()):.1f} us):")
    for op, us in by_op.most_common():
        print(f"  {op:40s} {us:9.1f} us")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", default="efficientnet", help="benchmarks/onnx_torch_cases.py")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--file", default="", help="an ONNX file instead of --case")
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    for line in cpu_header():
        print(line)
    ember.set_num_threads(1)
    if args.file:
        import onnx
        from onnx_runtime import _inputs

        with open(args.file, "rb") as f:
            data = f.read()
        arrays = _inputs(onnx.load_from_string(data))
    else:
        import onnx_torch_cases as cases
        import torch

        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "model.onnx")
            cases.export(torch, args.case, path, args.batch, False, 17)
            with open(path, "rb") as f:
                data = f.read()
        _, example = cases.BUILDERS[args.case](torch, batch=args.batch)
        arrays = [np.ascontiguousarray(t.numpy()) for t in example]
    ember_steps(data, arrays, args.reps, args.top)
    ort_profile(data, arrays, args.runs)


if __name__ == "__main__":
    main()
