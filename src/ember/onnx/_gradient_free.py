"""Initializers no gradient reaches, which a trainable import keeps as buffers.

A file without PyTorch's signature (TorchScript's exporter, other tools) does not say which
initializers were parameters. Some it tells by their types: a floating initializer whose every
path to the graph's outputs passes through a value that is not floating (a comparison, a
``Shape``, a ``Cast`` to an integer, an ``ArgMax``, a bool mask) can never receive a gradient,
so it is no weight: a mask built by comparing a float buffer, a threshold, a float table
only indexed by its shape. Training it would move it only by weight decay or momentum, which
PyTorch never applies to a buffer. Such initializers become buffers (``named_buffers()``,
``state_dict()``), as BatchNormalization's statistics.

Value types come from ONNX's shape inference, run on a copy of the graph whose initializers
are declared inputs (no weights copied). Where a type is unknown (inference failed or could
not tell), the value is taken as floating: the rule only ever keeps a parameter. A value a
subgraph (If, Loop, Scan) reads is taken as reaching an output too. Floating operators with a
zero gradient (Floor, Round, Sign) are not recognised: their inputs stay parameters.
"""

from __future__ import annotations

import numpy as np

__all__ = ["gradient_free"]


def _value_types(graph, initializers: dict[str, np.ndarray], opsets: dict) -> dict[str, int]:
    """{value name: ONNX element type} from shape inference; empty where it fails."""
    from ._model import require_onnx

    onnx = require_onnx()
    from onnx import helper

    light = onnx.GraphProto(name=graph.name or "graph")
    light.node.extend(graph.node)
    light.input.extend(graph.input)
    declared = {vi.name for vi in graph.input}
    for name, array in initializers.items():
        if name in declared:
            continue
        try:
            elem = helper.np_dtype_to_tensor_dtype(array.dtype)
        except (KeyError, TypeError, ValueError):
            continue
        light.input.append(helper.make_tensor_value_info(name, elem, list(array.shape)))
    light.output.extend(graph.output)
    model = helper.make_model(
        light, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets.items()]
    )
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
    except Exception:  # noqa: BLE001 - a file inference cannot read: no types known
        return {}
    types = {}
    for vi in (*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output):
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
            types[vi.name] = vi.type.tensor_type.elem_type
    return types


def _floating(elem: int | None) -> bool:
    """Whether an ONNX element type may carry a gradient (unknown: it may)."""
    from onnx import TensorProto as T

    return elem is None or elem in (
        T.FLOAT,
        T.DOUBLE,
        T.FLOAT16,
        T.BFLOAT16,
        T.COMPLEX64,
        T.COMPLEX128,
    )


def _subgraph_reads(graph) -> set[str]:
    """Every name the graph's subgraphs read (their own values included: a superset)."""
    names: set[str] = set()
    for node in graph.node:
        for attr in node.attribute:
            for sub in (*([attr.g] if attr.HasField("g") else []), *attr.graphs):
                for inner in sub.node:
                    names.update(inner.input)
                names.update(vi.name for vi in sub.output)
                names |= _subgraph_reads(sub)
    return names


def gradient_free(graph, initializers: dict[str, np.ndarray], opsets: dict) -> set[str]:
    """The floating initializers of ``graph`` from which no floating value reaches an output
    (see the module's docstring)."""
    candidates = [n for n, a in initializers.items() if a.dtype.kind == "f"]
    if not candidates:
        return set()
    types = _value_types(graph, initializers, opsets)
    readers: dict[str, list] = {}
    for node in graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    outputs = {vi.name for vi in graph.output}
    inner = _subgraph_reads(graph)
    found = set()
    for start in candidates:
        if start not in readers:  # (read by no node: left as it was)
            continue
        stack, seen, reaches = [start], {start}, False
        while stack and not reaches:
            name = stack.pop()
            if name in outputs or name in inner:
                reaches = True
                break
            for node in readers.get(name, ()):
                for out in node.output:
                    if out and out not in seen and _floating(types.get(out)):
                        seen.add(out)
                        stack.append(out)
        if not reaches:
            found.add(start)
    return found
