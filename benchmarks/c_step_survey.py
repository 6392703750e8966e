"""Which nodes of typical inference models keep the C graph runner off (runtime/cgraph.py).

Each model is written in PyTorch, exported by TorchScript's exporter (opset 17), imported by
``ember.onnx.load``, called once, and its captured graph's call nodes asked for their C steps
the way ``cgraph.c_steps`` asks; a node without one leaves the whole graph on generated Python.

    python benchmarks/c_step_survey.py [--cases tcn,avgcnn,...]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections import Counter

sys.path.insert(0, os.path.dirname(__file__))

import onnx_torch_cases as cases  # noqa: E402

import ember  # noqa: E402
from ember.ops._registry import native_code  # noqa: E402
from ember.ops._view_step import view_c_step  # noqa: E402
from ember.ops.fused import lone_c_step  # noqa: E402


def missing_steps(graph) -> Counter:
    """The call nodes' ops (with a reason) that have no C step, counted."""
    missing = Counter()
    for node in graph.nodes:
        if node.kind != "call":
            continue
        if not native_code(node):
            missing[f"{node.op.name} (no native code)"] += 1
            continue
        hook = node.op.c_step
        if hook is None and node.op.c is not None:
            hook = lone_c_step
        step = None if hook is None else hook(node)
        if step is None and node.op.view:
            step = view_c_step(node)
        if step is None:
            why = "no c_step rule" if hook is None else "rule declined"
            missing[f"{node.op.name} ({why})"] += 1
    return missing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(cases.SURVEY))
    parser.add_argument("--batch", type=int, default=1)
    args = parser.parse_args()
    import torch

    with tempfile.TemporaryDirectory() as folder:
        for name in filter(None, args.cases.split(",")):
            path = os.path.join(folder, f"{name}.onnx")
            cases.export(torch, name, path, args.batch, False, 17)
            _, example = cases.BUILDERS[name](torch, batch=args.batch)
            function = ember.onnx.load(path)
            function(*[ember.tensor(t.numpy()) for t in example])
            if function.eager_reason:
                print(f"{name:12s} eager: {function.eager_reason}")
                continue
            missing = missing_steps(function.graph)
            found = ", ".join(f"{k} x{n}" for k, n in sorted(missing.items())) or "none"
            print(f"{name:12s} nodes without a C step: {found}")


if __name__ == "__main__":
    main()
