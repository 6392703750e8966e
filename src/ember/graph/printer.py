"""The text form of a graph: one line per node, meant for people.

    graph mlp(%x: f32[N, 784], %w: f32[10, 784]) {
      %0: f32[N, 10] = linear(%x, %w)
      %1: f32[N, 10] = relu(%0)
      return (%1)
    }

Types print as a short dtype name and the shape (symbolic sizes by name); attributes follow the
inputs as ``key=value`` (tuples nested over 16 deep as ``(...)``); constants print their value
when small and their shape otherwise. An op held in an attribute (an epilogue's producer) prints
as its name, and a fused node's program (ops/program.py) as its instructions:

    %3: f32[N, 10] = fused_elementwise(%x, %b, program=[t0 = add(in0, in1); t1 = relu(t0)], ...)

A graph held in an attribute (a cond branch, a loop body) is named on the node's line and
printed in full, indented, under it:

    %2: f32[3] = cond(%1, %x, true_branch=<graph true_branch>, false_branch=<graph ...>)
      true_branch(%operand0: f32[3]) {
        ...
      }
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..ops._registry import OpDef
from ..ops.program import Program
from ..types import TensorType
from ._base import GraphBase

_SHORT = {
    "float16": "f16",
    "bfloat16": "bf16",
    "float32": "f32",
    "float64": "f64",
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
    "uint8": "u8",
    "bool": "bool",
}


def format_type(t: TensorType) -> str:
    return f"{_SHORT.get(t.dtype.name, t.dtype.name)}[{', '.join(str(d) for d in t.shape)}]"


_MAX_DEPTH = 16  # nested tuples deeper than this print as "(...)": a line for people


def format_attr(value, depth: int = 0) -> str:
    if isinstance(value, dt.DType):
        return value.name
    if isinstance(value, OpDef):
        return value.name
    if isinstance(value, Program):
        return f"[{value}]"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (tuple, list)):
        if depth >= _MAX_DEPTH:
            return "(...)"
        inner = ", ".join(format_attr(v, depth + 1) for v in value)
        return f"({inner},)" if isinstance(value, tuple) and len(value) == 1 else f"({inner})"
    if isinstance(value, (int, str, bool)) or value is None:
        return repr(value)
    if _is_graph(value):
        return f"<graph {value.name}>"
    return f"<{type(value).__name__}>"


def _constant_text(array: np.ndarray) -> str:
    if array.size <= 4:
        return np.array2string(array, separator=", ").replace("\n", "")
    return "<array>"


def format_node(node) -> str:
    outs = ", ".join(f"%{v.name}: {format_type(v.type)}" for v in node.outputs)
    if node.kind == "constant":
        return f"{outs} = constant {_constant_text(node.graph.constants[node.name])}"
    args = [f"%{v.name}" for v in node.inputs]
    args += [f"{k}={format_attr(v)}" for k, v in node.attrs.items()]
    return f"{outs} = {node.target}({', '.join(args)})"


def _is_graph(value) -> bool:
    return isinstance(value, GraphBase)


def format_graph(graph, indent: str = "", keyword: str = "graph ") -> str:
    params = ", ".join(f"%{v.name}: {format_type(v.type)}" for v in graph.inputs)
    lines = [f"{indent}{keyword}{graph.name}({params}) {{"]
    for node in graph.nodes:
        if node.kind != "input":
            lines.append(f"{indent}  " + format_node(node))
            for value in node.attrs.values():
                if _is_graph(value):
                    lines.append(format_graph(value, indent + "    ", keyword=""))
    lines.append(f"{indent}  return ({', '.join('%' + v.name for v in graph.outputs)})")
    lines.append(f"{indent}}}")
    return "\n".join(lines)
